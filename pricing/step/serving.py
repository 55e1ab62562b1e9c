"""What a deployment serves, priced by the step model: time per output token at a
concurrency, time to first token of a prompt, output tokens per second and requests per second.

vLLM's scheduler (chunked prefill, V1) fills each step with the running requests' decode
tokens first and gives the rest of the token budget, K = max_num_batched_tokens − B, to the
next prompt's prefill. In steady state with a workload of `isl` input and `osl` output tokens
per request, B decoding requests produce B tokens a step and, over the osl steps of a request's
life, B new prompts of isl tokens must be prefilled: B · isl / K mixed steps (decode + a chunk
of K) among every osl steps, the rest pure decodes. A mixed step reads every expert its many
tokens route to, a pure decode only the few its B tokens reach, so the two are priced apart and
averaged. When B · isl / K exceeds osl the engine is prefill-bound: every step is mixed and
only osl · K / isl requests' tokens come out of each. Decoding requests sit at the workload's
mean context, isl + osl / 2. Without a workload a step is a pure decode at the given context.

The time to first token of a prompt of P tokens is the API server's time to it outside the engine
(`first_token_seconds`, step_model.yaml) and the steps its chunks take: each step prefills
(budget − B + 1) of its tokens beside the other decodes, the chunk attending to the prompt's
tokens before it. Queueing before admission is not modelled (the simulator, pricing/serving/, does).

Speculating with k draft tokens (pricing/step/speculative.py), every decoding request takes
1 + k tokens of the budget (vLLM's scheduler schedules its drafts with it), so the prefill's
share is budget − B (1 + k); a step yields 1 + E[accepted] tokens per request, so the time per
output token is the step over that, and a request finishes in osl / (1 + E[accepted]) steps.
"""

from __future__ import annotations

from dataclasses import dataclass

from pricing.step.composed import OPERATORS, composition
from pricing.step.step import StepModel, StepTime
from pricing.units import largest_such

TTFT_EXACT_CHUNKS = 64  # prompts of more chunks sum their attention over 64 samples (trapezoids)


@dataclass(frozen=True)
class Workload:
    """Mean input and output tokens of a request."""

    isl: int
    osl: int

    @property
    def mean_context(self) -> int:
        return self.isl + self.osl // 2


@dataclass(frozen=True)
class Serving:
    """One instance (dp ranks of tp GPUs) at `batch` requests per rank."""

    batch: int  # decoding requests per data-parallel rank
    tpot_seconds: float  # one step over the tokens it yields each decoding request (1 + E[accepted])
    ttft_seconds: float  # the prompt's chunked prefill beside the decodes
    output_tokens_per_second: float  # per instance
    output_tokens_per_second_per_gpu: float
    requests_per_second: float | None  # per instance, with a workload
    prefill_bound: bool  # the token budget cannot prefill the workload's prompts as fast as they finish
    step: StepTime  # the steady-state step, by part
    tokens_per_step: float = 1.0  # output tokens per decoding request per step (1 + E[accepted drafts])
    acceptance: tuple[float, ...] = ()  # the conditional acceptance assumed at each draft position
    speculation: str | None = None  # the phrase saying so, with where the rates come from
    composition: str | None = None  # the step --step-model operators asked for, in words, what a chip without tables
    # falls back to said (None: the default fitted step)

    @property
    def bound(self) -> str:
        return "prefill" if self.prefill_bound else self.step.bound


def steady_step(model: StepModel, batch: int, context: int, workload: Workload | None) -> tuple[StepTime, float]:
    """The mean steady-state step at `batch` decoding requests per rank, by part, and the
    output tokens it yields per rank."""
    per_request = model.tokens_per_step
    if workload is None:
        return model.time(model.decode_step(batch, context)), batch * per_request
    room = max(1, model.engine.max_num_batched_tokens - batch * model.queries)
    decode = model.time(model.decode_step(batch, workload.mean_context))
    mixed = model.time(model.decode_step(batch, workload.mean_context, chunk=room,
                                         chunk_offset=max(0, workload.isl - room) // 2))
    share = batch * workload.isl * per_request / (room * workload.osl)  # mixed steps per step
    if share >= 1.0:
        return mixed, batch * per_request / share
    return StepTime.mix([(1.0 - share, decode), (share, mixed)]), batch * per_request


def step_seconds_per_token(model: StepModel, batch: int, context: int, workload: Workload | None) -> float:
    """Time per output token: the steady step over the tokens it yields each decoding request."""
    return steady_step(model, batch, context, workload)[0].seconds / model.tokens_per_step


def ttft(model: StepModel, batch: int, context: int, prompt: int) -> float:
    """Seconds from a `prompt`-token prompt's sending to its first token: the API server's own time
    (`first_token_seconds`, step_model.yaml) and its prefill in chunks beside `batch` − 1 other decodes.
    Every full chunk is the same step but for its attention (it attends further into the
    prompt), so one step is priced whole and the attention re-priced per chunk."""
    budget = model.engine.max_num_batched_tokens
    others = max(0, batch - 1)
    per_step = max(1, budget - others * model.queries)
    full, rest = divmod(prompt, per_step)
    total = model.eff.first_token_seconds
    if full:
        first = model.decode_step(others, context, chunk=per_step)
        fixed = model.time(first).seconds - model.attention_seconds(first)
        total += full * fixed

        def attention(chunks: list[int]) -> list[float]:  # of the chunks at these indices into the prompt
            return model.chunk_attention_seconds(first, [i * per_step for i in chunks])

        if full <= TTFT_EXACT_CHUNKS:
            total += sum(attention(list(range(full))))
        else:  # the attention grows piecewise linearly with the offset: trapezoids over samples
            marks = sorted({round(j * (full - 1) / (TTFT_EXACT_CHUNKS - 1)) for j in range(TTFT_EXACT_CHUNKS)})
            values = attention(marks)
            total += (values[0] + values[-1]) / 2 + sum((a + b) / 2 * (j - i) for i, j, a, b in
                                                        zip(marks, marks[1:], values, values[1:], strict=False))
    if rest:
        total += model.time(model.decode_step(others, context, chunk=rest, chunk_offset=full * per_step)).seconds
    return total


def serving(model: StepModel, batch: int, context: int, workload: Workload | None = None,
            prompt: int | None = None) -> Serving:
    """TPOT, TTFT and throughput of one instance at `batch` requests per data-parallel rank."""
    e = model.engine
    t, out_per_rank = steady_step(model, batch, context, workload)
    prompt_tokens = prompt if prompt is not None else (workload.isl if workload else context)
    decode_context = workload.mean_context if workload else context
    first = ttft(model, batch, decode_context, prompt_tokens)
    per_instance = e.data_parallel_size * out_per_rank / t.seconds
    gpus = e.gpus  # tp × pp × dp × pcp: a pipeline's stages run one after another, each on its own GPUs
    rps = per_instance / workload.osl if workload else None
    per_request = model.tokens_per_step
    d = model.drafting
    rates = tuple(d.acceptance.rate(j) for j in range(1, d.drafts + 1)) if d else ()
    phrase = d.acceptance.describe(d.drafts) if d else None
    return Serving(batch, t.seconds / per_request, first, per_instance, per_instance / gpus, rps,
                   workload is not None and out_per_rank < batch * per_request, t, per_request, rates, phrase,
                   model.composition_words if OPERATORS in (model.composition, composition(model.kernel.reg)) else None)


def largest_batch(model: StepModel, limit: int, context: int, workload: Workload | None, *,
                  tpot_seconds: float | None = None, ttft_seconds: float | None = None,
                  prompt: int | None = None) -> int:
    """The most requests per rank (up to `limit`) whose step meets the targets; 0 when even one
    request misses them. Step time and TTFT never fall as the batch grows (property-tested), so
    the largest batch is found by bisection."""

    def meets(b: int) -> bool:
        if tpot_seconds is not None and step_seconds_per_token(model, b, context, workload) > tpot_seconds:
            return False
        if ttft_seconds is not None:
            p = prompt if prompt is not None else (workload.isl if workload else context)
            if ttft(model, b, workload.mean_context if workload else context, p) > ttft_seconds:
                return False
        return True

    return max(0, largest_such(meets, 1, limit))
