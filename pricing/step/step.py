"""The time of one engine step on one rank (issue 14): a roofline per group of layers at the chip's
peak rates, plus the collectives and a per-step overhead.

    layer kind   max(Σ FLOPs / (peak FLOP/s of their served format × tensor efficiency),
                     Σ bytes / (memory bandwidth × memory efficiency)
                     + routed-expert bytes / (memory bandwidth × expert efficiency))
    attention    the same roofline over the context: FLOPs of every (query, context) pair, the
                 cache bytes every request reads (and a prefill chunk writes)
    all-reduce   latency + 2 (g − 1) / g × bytes / (scale-up bandwidth × interconnect efficiency)
    all-to-all   2 × (latency + (g − 1) / g × bytes / (scale-up bandwidth × interconnect efficiency))
    pipeline     each stage's step for a micro-batch of 1/pp of the requests, summed, plus (pp − 1)
                 hand-offs of the micro-batch's hidden states (latency + bytes / scale-up bandwidth)
    overhead     per step + per decoder layer + per request in the step

A step schedules `decode` requests one token each at context `context`, and a prefill chunk of
`chunk` tokens of one prompt already `chunk_offset` tokens in (vLLM's chunked prefill: decodes
first, then the token budget's remainder to prefill). Its parts sum to its time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pricing.kernel import Kernel
from pricing.step.rates import ChipRates, Efficiency, chip_rates
from pricing.step.work import collectives, context_work, expected_experts, linear_groups

PART_NAMES = {"attention": "attention projections", "mlp": "dense MLP", "moe": "MoE layers", "lm_head": "LM head",
              "embedding": "embedding", "norm": "norms", "mixer": "recurrent mixers", "projection": "projections"}


@dataclass(frozen=True)
class Step:
    """What one step schedules on one rank."""

    decode: int = 0  # requests decoding one token
    context: int = 0  # their context length
    chunk: int = 0  # prefill tokens in the step
    chunk_offset: int = 0  # tokens of that prompt already in the cache

    @property
    def tokens(self) -> int:
        return self.decode + self.chunk

    @property
    def requests(self) -> int:
        return self.decode + (1 if self.chunk else 0)


@dataclass
class StepTime:
    """One step's time in seconds, by part (the parts sum to `seconds`), with its totals."""

    seconds: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)
    flops: float = 0.0
    bytes: float = 0.0
    memory_seconds: float = 0.0  # time of the parts whose roofline is set by bytes
    compute_seconds: float = 0.0  # time of the parts whose roofline is set by FLOPs
    comm_seconds: float = 0.0
    overhead_seconds: float = 0.0

    def add(self, part: str, seconds: float) -> None:
        self.parts[part] = self.parts.get(part, 0.0) + seconds
        self.seconds += seconds

    def roofline(self, part: str, flops: float, nbytes: float, flop_rate: float, byte_rate: float) -> None:
        """max(FLOPs at flop_rate, bytes at byte_rate)."""
        self.roofline_seconds(part, flops, nbytes, flops / flop_rate if flops else 0.0,
                              nbytes / byte_rate if nbytes else 0.0)

    def roofline_seconds(self, part: str, flops: float, nbytes: float, t_flops: float, t_bytes: float) -> None:
        """max(t_flops, t_bytes) for a part whose FLOPs and bytes were priced at their own rates."""
        self.flops += flops
        self.bytes += nbytes
        if t_bytes >= t_flops:
            self.memory_seconds += t_bytes
        else:
            self.compute_seconds += t_flops
        self.add(part, max(t_flops, t_bytes))

    @classmethod
    def mix(cls, weighted: list[tuple[float, StepTime]]) -> StepTime:
        """The weighted mean of several steps (weights summing to 1), part by part."""
        out = cls()
        for w, t in weighted:
            for part, seconds in t.parts.items():
                out.add(part, w * seconds)
            out.flops += w * t.flops
            out.bytes += w * t.bytes
            out.memory_seconds += w * t.memory_seconds
            out.compute_seconds += w * t.compute_seconds
            out.comm_seconds += w * t.comm_seconds
            out.overhead_seconds += w * t.overhead_seconds
        return out

    @property
    def bound(self) -> str:
        """What sets the step's time: memory, compute, communication or overhead (the largest)."""
        shares = {"memory": self.memory_seconds, "compute": self.compute_seconds,
                  "communication": self.comm_seconds, "overhead": self.overhead_seconds}
        return max(shares, key=lambda k: shares[k])


class StepModel:
    """The step time of one rank of the deployment the memory kernel `kernel` describes: same
    model graph, same resolved engine, same chip."""

    def __init__(self, kernel: Kernel, rates: ChipRates | None = None, efficiency: Efficiency | None = None,
                 _stage: bool = False):
        self.kernel = kernel
        self.engine = kernel.engine
        self.rates = rates or chip_rates(kernel.chip, kernel.reg)
        self._eff = efficiency or Efficiency.from_registry(kernel.reg)
        self.groups = linear_groups(kernel)
        self.comm = collectives(kernel)
        self.context = context_work(kernel)
        self.top_k = int(kernel.model.extras.get("experts_per_token") or 0)
        self.stages = None
        if kernel.engine.pp > 1 and not _stage:
            self.stages = [StepModel(k, self.rates, self._eff, _stage=True) for k in kernel.stages()]

    @property
    def eff(self) -> Efficiency:
        return self._eff

    @eff.setter
    def eff(self, value: Efficiency) -> None:
        self._eff = value
        for stage in self.stages or ():
            stage.eff = value

    # -- pipeline parallelism -----------------------------------------------------------------
    def _micro(self, step: Step) -> Step:
        """One micro-batch: vLLM keeps pp batches in flight, each of 1/pp of the decoding requests."""
        return Step(decode=-(-step.decode // len(self.stages)), context=step.context, chunk=step.chunk,
                    chunk_offset=step.chunk_offset)

    def _pipeline_time(self, step: Step) -> StepTime:
        """A request's step under pipeline parallelism: its micro-batch through every stage, and
        the hidden states handed from each stage to the next at the scale-up bandwidth. Every
        request gets one token per such step (the pp micro-batches overlap)."""
        micro = self._micro(step)
        out = StepTime()
        for stage in self.stages:
            t = stage.time(micro)
            for part, seconds in t.parts.items():
                out.add(part, seconds)
            out.flops += t.flops
            out.bytes += t.bytes
            out.memory_seconds += t.memory_seconds
            out.compute_seconds += t.compute_seconds
            out.comm_seconds += t.comm_seconds
            out.overhead_seconds += t.overhead_seconds
        eff = self.eff
        size = micro.tokens * self.comm.hidden * eff.activation_bytes
        hand_off = (len(self.stages) - 1) * (eff.collective_latency_seconds
                                              + size / (self.rates.scale_up_bandwidth * eff.interconnect))
        out.comm_seconds += hand_off
        out.add("pipeline hand-off", hand_off)
        return out

    # -- one step -----------------------------------------------------------------------------
    def time(self, step: Step) -> StepTime:
        """The time of one step on this rank, by part."""
        if self.stages:
            return self._pipeline_time(step)
        e, r, eff = self.engine, self.rates, self.eff
        out = StepTime()
        byte_rate = r.memory_bandwidth * eff.memory_bandwidth
        expert_rate = r.memory_bandwidth * eff.expert_bandwidth
        n = step.tokens
        moe_tokens = n * e.dp if e.dp > 1 else n  # MoE layers see every data-parallel rank's tokens
        kinds: dict[str, list[float]] = {}  # kind -> [FLOPs, bytes, FLOP seconds, byte seconds]
        for g in self.groups:
            tokens = step.requests if g.logits_only else n
            flops = g.flops_per_token * tokens
            nbytes = g.weight_bytes + g.act_bytes_per_token * tokens
            t_bytes = nbytes / byte_rate
            if g.moe_layers:
                experts = self.kernel.model.routed_experts
                touched = g.local_experts * expected_experts(experts, self.top_k, moe_tokens) / max(1, experts)
                routed = moe_tokens * min(self.top_k, experts) * g.local_experts / max(1, experts)
                flops += g.moe_layers * g.expert_flops_per_token * routed
                expert_bytes = g.moe_layers * g.expert_bytes * touched
                nbytes += expert_bytes
                t_bytes += expert_bytes / expert_rate
            acc = kinds.setdefault(g.kind, [0.0, 0.0, 0.0, 0.0])
            acc[0] += flops
            acc[1] += nbytes
            acc[2] += flops / (r.flops_for(g.fmt) * eff.tensor_compute)
            acc[3] += t_bytes
        for kind, (flops, nbytes, t_flops, t_bytes) in kinds.items():  # one roofline per kind of layer
            out.roofline_seconds(PART_NAMES.get(kind, kind), flops, nbytes, t_flops, t_bytes)
        self._attention(step, out, byte_rate)
        self._collectives(step, out)
        overhead = eff.step_seconds + eff.layer_seconds * self.comm.layers + eff.per_request_seconds * step.requests
        out.overhead_seconds += overhead
        out.add("step overhead", overhead)
        return out

    def _attention(self, step: Step, out: StepTime, byte_rate: float) -> None:
        flops, nbytes = self.attention_work(step)
        out.roofline("attention over the context", flops, nbytes,
                     self.rates.bf16_flops * self.eff.tensor_compute, byte_rate)

    def attention_work(self, step: Step) -> tuple[float, float]:
        """FLOPs and bytes of the attention over the context in `step` (decode queries at
        `context`, a prefill chunk attending causally from `chunk_offset`)."""
        c = self.context
        dcp = max(1, c.dcp)
        full_pairs = c.flops_per_pair - c.window_flops_per_pair
        prefill_full = c.prefill_flops_per_pair - c.prefill_window_flops_per_pair
        flops = 0.0
        nbytes = 0.0
        if step.decode:
            window_context = min(step.context, c.window)
            flops += step.decode * (full_pairs * step.context + c.window_flops_per_pair * window_context) / dcp
            flops += sum(layers.flops(step.decode, step.context) for layers in c.sparse)
            nbytes += step.decode * (c.cache_bytes_per_token * step.context / dcp + c.bounded_bytes_per_request)
        if step.chunk:
            t, l0 = step.chunk, step.chunk_offset
            pairs = t * l0 + t * (t + 1) / 2  # causal: token i of the chunk sees l0 + i + 1 tokens
            window_pairs = t * min(l0 + t, c.window) if c.window else 0
            flops += (prefill_full * pairs + c.prefill_window_flops_per_pair * window_pairs) / dcp
            flops += sum(layers.flops(t, l0 + t / 2) for layers in c.sparse)
            nbytes += c.cache_bytes_per_token * (l0 + 2 * t) / dcp + c.bounded_bytes_per_request
        return flops, nbytes

    def attention_seconds(self, step: Step) -> float:
        """The attention part of `step` alone (its roofline; summed over the pipeline's stages)."""
        if self.stages:
            return sum(stage.attention_seconds(self._micro(step)) for stage in self.stages)
        flops, nbytes = self.attention_work(step)
        return max(flops / (self.rates.bf16_flops * self.eff.tensor_compute),
                   nbytes / (self.rates.memory_bandwidth * self.eff.memory_bandwidth))

    def _collectives(self, step: Step, out: StepTime) -> None:
        e, eff = self.engine, self.eff
        link = self.rates.scale_up_bandwidth * eff.interconnect
        per_token = self.comm.hidden * eff.activation_bytes
        if self.comm.all_reduces and e.tp > 1:
            size = per_token * step.tokens
            one = eff.collective_latency_seconds + 2 * (e.tp - 1) / e.tp * size / link
            out.comm_seconds += one * self.comm.all_reduces
            out.add("tensor-parallel all-reduce", one * self.comm.all_reduces)
        if self.comm.all_to_all_layers:
            g = e.ep_size
            size = per_token * step.tokens * max(1, self.top_k)
            one = 2 * (eff.collective_latency_seconds + (g - 1) / g * size / link)
            out.comm_seconds += one * self.comm.all_to_all_layers
            out.add("expert all-to-all", one * self.comm.all_to_all_layers)

    # -- conveniences ---------------------------------------------------------------------------
    def decode(self, batch: int, context: int) -> StepTime:
        """A decode step of `batch` requests at context `context`."""
        return self.time(Step(decode=batch, context=context))

    def prefill(self, tokens: int, offset: int = 0) -> StepTime:
        """A prefill chunk of `tokens` tokens of one prompt, `offset` tokens in."""
        return self.time(Step(chunk=tokens, chunk_offset=offset))
