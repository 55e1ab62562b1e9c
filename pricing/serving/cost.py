"""The step model's time of any step the scheduler forms, in a few table look-ups.

A step of D decoding requests (each verifying 1 + k tokens), prefill chunks c_1..c_n at offsets
o_1..o_n into their prompts and the decodes' summed context S costs

    t = G_chunk(T) + G_decode(D) + n_extra · per-request overhead + attention(D, S, chunks)

    T            D (1 + k) + Σ c_i, the step's tokens
    G_chunk(T)   the step model's time of a step of T prefill tokens of one request, less its
                 attention (pricing/step/step.py: linear layers, collectives, per-step and per-layer
                 overhead, the drafter's passes), tabulated over T and interpolated linearly
    G_decode(D)  what D decoding requests add beyond their tokens: their logits at the LM head,
                 their per-request overhead, the drafter's decode passes; tabulated over D
    attention    one roofline, max(FLOPs / tensor rate, bytes / memory bandwidth), over the decodes'
                 work at their mean context S / D (a per-request table over the context) plus each
                 chunk's own causal work (the step model's `_chunk_work`)

Exact at the tables' points for a pure decode or a single chunk; a mixed step pays one roofline
per layer kind for decode and chunk tokens together (the step model's own law), which the sum
above approximates by splitting the decode logits off (tests compare it with the step model).
Pipeline parallelism: a step is a micro-batch of ceil(D / pp) decoding requests and the chunks
through every stage.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from pricing.step.step import Step, StepModel
from pricing.units import cdiv

EXACT_UP_TO = 16  # the tables hold every count up to this (small batches, where each request matters most)
GROWTH = 1.08  # then points 8 % apart: linear interpolation between them stays within the tests' 3 %


def _grid(top: int) -> list[int]:
    """0, 1, ..., EXACT_UP_TO, then points GROWTH apart up to `top` (the tables' points)."""
    points = list(range(min(top, EXACT_UP_TO) + 1))
    x = EXACT_UP_TO
    while x < top:
        x = min(top, max(x + 1, round(x * GROWTH)))
        points.append(x)
    return points


@dataclass(frozen=True)
class Table:
    """A function sampled at increasing integer points, interpolated linearly (extrapolated
    linearly past the last point)."""

    xs: tuple[int, ...]
    ys: tuple[float, ...]

    def __call__(self, x: float) -> float:
        xs, ys = self.xs, self.ys
        i = bisect.bisect_right(xs, x) - 1
        if i < 0:
            return ys[0]
        if i >= len(xs) - 1:
            i = len(xs) - 2
        x0, x1 = xs[i], xs[i + 1]
        return ys[i] + (ys[i + 1] - ys[i]) * (x - x0) / (x1 - x0)


class StepCost:
    """Seconds of a step the scheduler forms, from one rank's step model (see the module)."""

    @classmethod
    def of(cls, model: StepModel, instance) -> StepCost:
        """The costs of every step `instance` (pricing.serving.Instance) schedules: up to max_num_seqs
        decodes, up to max_num_batched_tokens + max_num_seqs tokens, contexts up to max_model_len."""
        return cls(model, instance.max_num_seqs, instance.max_num_batched_tokens + instance.max_num_seqs,
                   instance.max_model_len)

    def __init__(self, model: StepModel, max_decode: int, max_tokens: int, max_context: int):
        self.model = model
        q = model.queries
        self.queries = q
        self.tokens_per_step = model.tokens_per_step

        def no_attention(step: Step) -> float:
            return model.time(step).seconds - model.attention_seconds(step)

        chunk_xs = _grid(max(2, max_tokens))
        chunk = [0.0] + [no_attention(Step(chunk=t)) for t in chunk_xs[1:]]
        self.chunk = Table(tuple(chunk_xs), tuple(chunk))
        decode_xs = _grid(max(2, max_decode))
        self.pp = len(model.stages) if model.stages else 1
        decode = [0.0] + [no_attention(model.decode_step(d, 0)) - self.chunk(self.micro(d) * q) for d in decode_xs[1:]]
        self.decode = Table(tuple(decode_xs), tuple(decode))
        self.per_request = model.eff.per_request_seconds
        self.stages = [s.context for s in model.stages] if model.stages else [model.context]
        context_xs = _grid(max(2, max_context))
        self.flop_rate, self.byte_rate = model.attention_rates
        per_request = [[StepModel._decode_work(c, Step(decode=1, context=x, queries=q)) for x in context_xs]
                       for c in self.stages]
        self.decode_flops = [Table(tuple(context_xs), tuple(w[0] for w in rows)) for rows in per_request]
        self.decode_bytes = [Table(tuple(context_xs), tuple(w[1] for w in rows)) for rows in per_request]
        self._fixed: dict[int, float] = {}
        self._chunk: dict[int, float] = {}  # chunk(tokens) by token count (steps repeat their counts)
        self._decode: dict[int, float] = {}
        # the decodes' attention in closed form when one stage's is affine in the context (no
        # window, no bounded selection): FLOPs f0 + f1 c and bytes b0 + b1 c per request, at rates
        lines = [_affine(self.decode_flops[0]), _affine(self.decode_bytes[0])] if self.pp == 1 else [None]
        self.affine = None
        self.linear = lines if all(lines) else None
        c = self.stages[0]
        # a chunk's causal work in closed form when no layer has a window or a bounded selection
        # (StepModel._chunk_work): FLOPs f · pairs, bytes b (offset + 2 tokens) + bounded
        self.chunk_line = None
        if self.pp == 1 and not c.window and not c.sparse:
            dcp = max(1, c.dcp)
            self.chunk_line = (c.prefill_flops_per_pair / dcp, c.cache_bytes_per_token / dcp,
                               c.bounded_bytes_per_request)
        if all(lines):
            (f0, f1), (b0, b1) = lines
            self.affine = (f0 / self.flop_rate, f1 / self.flop_rate, b0 / self.byte_rate, b1 / self.byte_rate)

    def micro(self, decode: int) -> int:
        """Decoding requests in one pipeline micro-batch (all of them without pipeline parallelism)."""
        return cdiv(decode, self.pp)

    def attention(self, decode: int, context_sum: float, chunks: list[tuple[int, int]]) -> float:
        """The attention roofline of `decode` requests of summed context `context_sum` and the
        prefill `chunks` (tokens, offset), summed over the pipeline's stages."""
        total = 0.0
        micro = self.micro(decode)
        mean = context_sum / decode if decode else 0.0
        for i, c in enumerate(self.stages):
            if not decode:
                flops = nbytes = 0.0
            elif self.linear:
                (f0, f1), (b0, b1) = self.linear
                flops, nbytes = decode * f0 + f1 * context_sum, decode * b0 + b1 * context_sum
            else:
                flops, nbytes = micro * self.decode_flops[i](mean), micro * self.decode_bytes[i](mean)
            if self.chunk_line is not None:
                f, b, bounded = self.chunk_line
                for t, offset in chunks:
                    flops += f * (t * offset + t * (t + 1) / 2)
                    nbytes += b * (offset + 2 * t) + bounded
            else:
                for tokens, offset in chunks:
                    flops, nbytes = StepModel._chunk_work(c, tokens, offset, flops, nbytes)
            total += max(flops / self.flop_rate, nbytes / self.byte_rate)
        return total

    def fixed(self, decode: int) -> float:
        """All but the attention of a pure decode step of `decode` requests."""
        seconds = self._fixed.get(decode)
        if seconds is None:
            seconds = self._fixed[decode] = self.chunk(self.micro(decode) * self.queries) + self.decode(decode)
        return seconds

    def decode_seconds(self, decode: int, context_sum: float) -> float:
        """A pure decode step of `decode` requests of summed context `context_sum`."""
        if self.affine is None:
            return self.fixed(decode) + self.attention(decode, context_sum, [])
        f0, f1, b0, b1 = self.affine
        fixed = self._fixed.get(decode)
        if fixed is None:
            fixed = self.fixed(decode)
        return fixed + max(decode * f0 + f1 * context_sum, decode * b0 + b1 * context_sum)

    def seconds(self, decode: int, context_sum: float, chunks: list[tuple[int, int]]) -> float:
        """One step: `decode` decoding requests (summed context `context_sum`) and the prefill
        `chunks` as (tokens, offset into the prompt)."""
        if not chunks:
            return self.decode_seconds(decode, context_sum) if decode else 0.0
        tokens = self.micro(decode) * self.queries
        for t, _ in chunks:
            tokens += t
        linear = self._chunk.get(tokens)
        if linear is None:
            linear = self._chunk[tokens] = self.chunk(tokens)
        if decode:
            extra = self._decode.get(decode)
            if extra is None:
                extra = self._decode[decode] = self.decode(decode)
            linear += extra
        linear += (len(chunks) - 1) * self.per_request
        if self.affine is None or self.chunk_line is None:
            return linear + self.attention(decode, context_sum, chunks)
        # one stage, decodes' attention affine in the context, chunks' in closed form (as `attention`)
        (f0, f1), (b0, b1) = self.linear
        f, b, bounded = self.chunk_line
        flops, nbytes = decode * f0 + f1 * context_sum, decode * b0 + b1 * context_sum
        for t, offset in chunks:
            flops += f * (t * offset + t * (t + 1) / 2)
            nbytes += b * (offset + 2 * t) + bounded
        return linear + max(flops / self.flop_rate, nbytes / self.byte_rate)


def _affine(table: Table) -> tuple[float, float] | None:
    """(a, b) when the table is a + b x at every point (to rounding), else None."""
    xs, ys = table.xs, table.ys
    b = (ys[-1] - ys[0]) / (xs[-1] - xs[0])
    a = ys[0] - b * xs[0]
    if all(abs(a + b * x - y) <= 1e-9 * max(1.0, abs(y)) for x, y in zip(xs, ys, strict=True)):
        return a, b
    return None
