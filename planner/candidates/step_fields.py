"""One instance's step figures, rounded as the planner prints them: `plan`'s StepFigures (a
reported pool's `step`) and `plan memory --json`'s step both start from `step_fields`."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from planner.candidates.speed_band import SpeedBand


def part_key(name: str) -> str:
    """A step part's name (pricing/step: 'tensor-parallel all-reduce', 'LM head') as a JSON key:
    lower case, every run of other characters one underscore ('tensor_parallel_all_reduce', 'lm_head')."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def step_fields(s, batch_per_rank: int, context_tokens: int, prompt_tokens: int) -> dict:
    """One instance's step figures from a priced `pricing.step.serving.Serving`, rounded as printed
    (`plan`'s StepFigures and `plan memory --json`'s step both start from these)."""
    return {"batch_per_rank": batch_per_rank, "context_tokens": context_tokens, "prompt_tokens": prompt_tokens,
            "tpot_ms": round(s.tpot_seconds * 1000, 3), "ttft_ms": round(s.ttft_seconds * 1000, 1),
            "output_tokens_per_second": round(s.output_tokens_per_second, 1),
            "output_tokens_per_second_per_gpu": round(s.output_tokens_per_second_per_gpu, 1),
            "step_bound": s.bound, "parts_ms": {part_key(k): round(v * 1000, 3) for k, v in s.step.parts.items()},
            "step_ms": round(s.step.seconds * 1000, 3), "tokens_per_step": round(s.tokens_per_step, 4),
            "acceptance": list(s.acceptance), "speculative": s.speculation, "step_composition": s.composition}


class StepFigures(BaseModel):
    """How fast one instance of the pool serves at the planned concurrency (the step model,
    pricing/step): the target spread over the replicas and data-parallel ranks."""

    batch_per_rank: int = Field(description="requests each data-parallel rank decodes at once")
    context_tokens: int = Field(description="the decoding requests' context (the workload's mean, or max_model_len)")
    prompt_tokens: int = Field(description="the prompt the time to first token is priced for")
    tpot_ms: float = Field(description="time per output token: one steady step over the tokens it yields a request")
    ttft_ms: float = Field(description="time to first token: the prompt's chunked prefill beside the decodes")
    output_tokens_per_second: float = Field(description="per instance")
    output_tokens_per_second_per_gpu: float
    pool_output_tokens_per_second: float
    pool_requests_per_second: float | None = Field(None, description="with a workload (isl/osl)")
    step_bound: str = Field(description="what sets the step: memory, compute, communication, overhead or prefill")
    binds: str = Field(description="what sets the instance's concurrency: memory, tpot, ttft or requests per second")
    parts_ms: dict[str, float] = Field(default_factory=dict, description="the steady step by part (keys: the part's "
                                       "name as an identifier, `part_key`); sums to step_ms")
    step_ms: float = Field(0.0, description="the steady step (tpot_ms × tokens_per_step)")
    tokens_per_step: float = Field(1.0, description="output tokens a decoding request gets per step: 1, or 1 + the "
                                                    "expected accepted draft tokens when speculating")
    acceptance: list[float] = Field(default_factory=list, description="speculating: the conditional acceptance "
                                                                      "assumed at each draft position")
    speculative: str | None = Field(None, description="speculating: the acceptance assumed, in words, with its source")
    step_composition: str | None = Field(None, description="the step asked for by registry "
                                         "step_model.composition: operators, in words: measured operators, or the "
                                         "fitted step a chip without operator tables keeps; null: the default, "
                                         "fitted step")
    tpot_band: SpeedBand | None = Field(None, description="tpot_ms's measured error in its regime, on rows the step "
                                        "model was not fitted on (pricing/registry/speed_bands.yaml); null: none "
                                        "measures it")
    ttft_band: SpeedBand | None = Field(None, description="ttft_ms's, likewise (measured at most 4 requests)")
