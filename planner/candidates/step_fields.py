"""One instance's step figures, rounded as the planner prints them: `plan`'s StepFigures
(planner/report/result.py) and `plan memory --json`'s step both start from these. A module of its own so
that `plan memory` reads them without importing the plan's pydantic models."""

from __future__ import annotations


def step_fields(s, batch_per_rank: int, context_tokens: int, prompt_tokens: int) -> dict:
    """One instance's step figures from a priced `pricing.step.serving.Serving`, rounded as printed
    (`plan`'s StepFigures and `plan memory --json`'s step both start from these)."""
    return {"batch_per_rank": batch_per_rank, "context_tokens": context_tokens, "prompt_tokens": prompt_tokens,
            "tpot_ms": round(s.tpot_seconds * 1000, 3), "ttft_ms": round(s.ttft_seconds * 1000, 1),
            "output_tokens_per_second": round(s.output_tokens_per_second, 1),
            "output_tokens_per_second_per_gpu": round(s.output_tokens_per_second_per_gpu, 1),
            "step_bound": s.bound, "parts_ms": {k: round(v * 1000, 3) for k, v in s.step.parts.items()},
            "step_ms": round(s.step.seconds * 1000, 3), "tokens_per_step": round(s.tokens_per_step, 4),
            "acceptance": list(s.acceptance), "speculative": s.speculation}
