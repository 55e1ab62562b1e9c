"""The time of one engine step on one rank: a roofline per group of layers at the chip's
peak rates, plus the collectives and a per-step overhead.

    layer kind   max(Σ FLOPs / (peak FLOP/s of their served format × tensor efficiency),
                     Σ bytes / (memory bandwidth × memory efficiency)
                     + routed-expert bytes / (memory bandwidth × expert efficiency))
                 the expert efficiency is the fused-MoE kernel's own for the experts' format on
                 the chip's generation where step_model.yaml fits it apart (`Efficiency.moe_kernel`)
    attention    the same roofline over the context: FLOPs of every (query, context) pair, the
                 cache bytes every request reads (and a prefill chunk writes)
    all-reduce   latency + 2 (g − 1) / g × bytes / (scale-up bandwidth × interconnect efficiency)
    all-to-all   2 × (latency + (g − 1) / g × bytes / (scale-up bandwidth × interconnect efficiency))
    pipeline     each stage's step for a micro-batch of 1/pp of the requests, summed, plus (pp − 1)
                 hand-offs of the micro-batch's hidden states (latency + bytes / scale-up bandwidth)
    overhead     per step + per decoder layer + per request in the step; an attention backend with
                 more kernels a layer than GQA's (MLA) adds its own per layer (`Efficiency.attention_kernel`)

The latency of a collective is NCCL's small-message one over the chip's link: NVLink's (or
xGMI's), or PCIe's where the cards have no other (`collective_latency`, step_model.yaml).

A step schedules `decode` requests at context `context`, `queries` tokens each (1, or 1 + k
when the target verifies k draft tokens), and a prefill chunk of `chunk` tokens of one prompt
already `chunk_offset` tokens in (vLLM's chunked prefill: decodes first, then the token budget's
remainder to prefill). Speculating, the drafter's passes (pricing/step/speculative.py) run beside
the target's forward, each priced by the same rooflines over the drafter's own layers and the
shared LM head, and added as one part. Its parts sum to its time.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pricing.kernel import Kernel
from pricing.registry import Sourced
from pricing.step.composed import COMPOSITION, FITTED, OPERATOR_ENGINE, OPERATORS, OperatorStep, composition
from pricing.step.operators import OperatorTables
from pricing.step.rates import ChipRates, Efficiency, MoeKernel, chip_rates
from pricing.step.speculative import Acceptance, acceptance, drafter_for
from pricing.step.work import (
    Collectives,
    ContextWork,
    LinearGroup,
    collectives,
    context_work,
    linear_groups,
)
from pricing.units import cdiv

ELEMENTWISE_PART = "elementwise kernels"
PART_NAMES = {"attention": "attention projections", "mlp": "dense MLP", "moe": "MoE layers", "lm_head": "LM head",
              "embedding": "embedding", "norm": "norms", "mixer": "recurrent mixers", "projection": "projections"}


@dataclass(frozen=True)
class Step:
    """What one step schedules on one rank."""

    decode: int = 0  # decoding requests
    context: int = 0  # their context length
    chunk: int = 0  # prefill tokens in the step
    chunk_offset: int = 0  # tokens of that prompt already in the cache
    queries: int = 1  # tokens each decoding request runs: 1, or 1 + k verifying k drafts

    @property
    def tokens(self) -> int:
        return self.decode * self.queries + self.chunk

    @property
    def requests(self) -> int:
        return self.decode + (1 if self.chunk else 0)

    @property
    def logits(self) -> int:
        """Positions the LM head runs at: every verified token of a decoding request (the rejection
        sampler compares the target's logits at each draft), the chunk's last."""
        return self.decode * self.queries + (1 if self.chunk else 0)


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

    def fold(self, other: StepTime, part: str | None = None) -> None:
        """Add `other` to this step: part by part, or whole as the one part `part`."""
        if part is None:
            for name, seconds in other.parts.items():
                self.add(name, seconds)
        else:
            self.add(part, other.seconds)
        self.flops += other.flops
        self.bytes += other.bytes
        self.memory_seconds += other.memory_seconds
        self.compute_seconds += other.compute_seconds
        self.comm_seconds += other.comm_seconds
        self.overhead_seconds += other.overhead_seconds

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


DRAFTER_PART = "drafter passes"


@dataclass(frozen=True)
class Work:
    """The layers one forward runs on this rank: linear groups, collectives, attention."""

    groups: list[LinearGroup]
    comm: Collectives
    context: ContextWork

    @classmethod
    def of(cls, kernel: Kernel, drafter: str | None = None) -> Work:
        return cls(linear_groups(kernel, drafter), collectives(kernel, drafter), context_work(kernel, drafter))


@dataclass(frozen=True)
class Drafting:
    """A deployment's speculative decoding: its drafter's layers, how it drafts, its acceptance."""

    method: str
    drafts: int  # num_speculative_tokens
    work: Work
    acceptance: Acceptance

    def passes(self, step: Step):
        return drafter_for(self.method).passes(step.decode, step.queries, step.chunk, step.chunk_offset, self.drafts)

    @property
    def tokens_per_step(self) -> float:
        return self.acceptance.tokens_per_step(self.drafts)


ENGINE = "vllm"  # the deployments the kernel sizes are vLLM's: its own factors (step_model.yaml engines.vllm)
ROCM_ENGINE = "vllm-rocm"  # vLLM built for ROCm runs its own kernels (AITER, Triton): its own factors


def factor_set(kernel: Kernel, engine: str = ENGINE) -> str:
    """The factors `engine`'s step is priced at on the kernel's chip (step_model.yaml `engines.<set>`):
    vLLM's on an AMD chip are its ROCm build's (`vllm-rocm`), fitted on AMD points; CUDA's elsewhere."""
    return ROCM_ENGINE if engine == ENGINE and kernel.chip.vendor == "amd" else engine


class StepModel:
    """The step time of one rank of the deployment the memory kernel `kernel` describes: same
    model graph, same resolved engine, same chip, at vLLM's own fitted factors unless `efficiency`
    is given. `rates_accepted`: the drafter's conditional acceptance by draft position when the
    user gives it (default: the registry's).

    The registry's `step_model.composition` picks the step: `fitted` (the rooflines at fitted
    efficiencies, above) or `operators` (pricing/step/composed.py: each operator from the chip's
    measured tables, the CPU-side constants of `engines.vllm-operators`); a chip without operator
    tables (AMD) keeps the fitted step, and `composition` says so."""

    def __init__(self, kernel: Kernel, rates: ChipRates | None = None, efficiency: Efficiency | None = None,
                 _stage: bool = False, rates_accepted: tuple[float, ...] | None = None):
        self.kernel = kernel
        self.engine = kernel.engine
        self.rates = rates or chip_rates(kernel.chip, kernel.reg)
        tables = OperatorTables.of(kernel.chip, kernel.reg) if composition(kernel.reg) == OPERATORS else None
        self.composition = OPERATORS if tables else FITTED
        engine_set = OPERATOR_ENGINE if tables else factor_set(kernel)
        self._eff = efficiency or Efficiency.from_registry(kernel.reg, engine_set)
        self._tables = tables
        e = kernel.engine
        self.operators = (OperatorStep(tables, self.rates, self._eff, e.tensor_parallel_size, e.kv_cache_dtype)
                          if tables else None)
        self.target = Work.of(kernel)
        self.groups, self.comm, self.context = self.target.groups, self.target.comm, self.target.context
        e = kernel.engine
        self.drafting = None
        if e.speculative_method and e.num_speculative_tokens:
            given = Acceptance(e.speculative_method, tuple(rates_accepted)) if rates_accepted else None
            self.drafting = Drafting(e.speculative_method, e.num_speculative_tokens,
                                     Work.of(kernel, e.speculative_method),
                                     given or acceptance(kernel.reg, e.speculative_method))
        self.stages = None
        if kernel.engine.pipeline_parallel_size > 1 and not _stage:
            self.stages = [StepModel(k, self.rates, self._eff, _stage=True) for k in kernel.instance.ranks]

    @property
    def composition_words(self) -> str:
        """What the step is composed of, as the speed line says it."""
        if self.composition == OPERATORS:
            t = self._tables
            estimate = f"; {t.source}'s tables over this chip's peaks, an estimate" if t.estimate else ""
            return f"measured operators{estimate}"
        if composition(self.kernel.reg) == OPERATORS:
            return "fitted efficiencies: no operator tables for this chip, the ROCm build's fit"
        return "fitted efficiencies"

    @property
    def eff(self) -> Efficiency:
        return self._eff

    @property
    def provenance(self) -> tuple:
        """Every registry value the step is priced with: the chip's peak rates (chips/<id>.yaml `rates`)
        and the efficiency factors and overheads (step_model.yaml), with the fused-MoE kernels', GEMM
        kernels' and the attention backend's own where they are fitted apart, each with its source."""
        generation = self.kernel.chip.generation
        kernels = [self.eff.moe_kernel(generation, fmt) for fmt in dict.fromkeys(g.fmt for g in self.groups
                                                                               if g.moe_layers)]
        kernels += [self.eff.gemm_kernel(generation, fmt) for fmt in dict.fromkeys(g.fmt for g in self.groups)]
        kernels.append(self.eff.attention_kernel(generation, self.kernel.graph.attention_backend))
        switch = (self.kernel.reg[COMPOSITION],) if COMPOSITION in self.kernel.reg else ()
        if self.operators:
            parts = tuple(Sourced(f"step.operators.{p.part}.{p.operator}", "measured" if p.measured else "estimate",
                                  p.table, p.describe())
                          for p in self.operators.parts(self.groups, bool(self.comm.all_to_all_layers),
                                                                  generation, self.kernel.graph.attention_backend))
            return switch + self.rates.provenance + self.eff.provenance + parts
        return switch + self.rates.provenance + self.eff.provenance + tuple(p for k in kernels for p in k.provenance)

    def expert_kernel(self) -> MoeKernel | None:
        """The fused-MoE kernel the routed experts are read at (those of the group holding most of their
        bytes: gpt-oss's MXFP4 matrices, not their bias vectors); None for a model that routes none."""
        routed = [g for g in self.groups if g.moe_layers and g.expert_bytes]
        if not routed:
            return None
        return self.eff.moe_kernel(self.kernel.chip.generation, max(routed, key=lambda g: g.expert_bytes).fmt)

    def prompt_flops_by_format(self) -> dict[str, float]:
        """A prompt token's matrix-multiply FLOPs by weight format (routed experts' in their format's
        group): which GEMM kernels (Efficiency.gemm_kernel) price the prefill, and in what share."""
        flops: dict[str, float] = {}
        for g in self.groups:
            work = g.flops_per_token + (g.routed_work(1)[0] if g.moe_layers else 0.0)
            flops[g.fmt] = flops.get(g.fmt, 0.0) + work
        return flops

    @property
    def layer_floor(self) -> float:
        """Fixed seconds per decoder layer per step: the floor every model pays (`layer_seconds`) and its
        attention backend's own where one is fitted (Efficiency.attention_kernel; the operator step has none)."""
        backend = self.kernel.graph.attention_backend
        if self.operators:  # no table measures MLA's extra kernels yet: vLLM's fitted floor for its backend
            return self.eff.layer_seconds + self.operators.backend_floor(self.kernel.chip.generation, backend)
        backend = self.kernel.graph.attention_backend
        return self.eff.layer_seconds + self.eff.attention_kernel(self.kernel.chip.generation, backend).layer_seconds

    @property
    def queries(self) -> int:
        """Tokens each decoding request runs through the target per step: 1 + num_speculative_tokens."""
        return 1 + (self.drafting.drafts if self.drafting else 0)

    @property
    def tokens_per_step(self) -> float:
        """Output tokens a decoding request gets per step: 1, or 1 + E[accepted drafts]."""
        return self.drafting.tokens_per_step if self.drafting else 1.0

    def decode_step(self, decode: int, context: int, chunk: int = 0, chunk_offset: int = 0) -> Step:
        """The step vLLM schedules for `decode` running requests: each verifies its drafts."""
        return Step(decode=decode, context=context, chunk=chunk, chunk_offset=chunk_offset, queries=self.queries)

    @eff.setter
    def eff(self, value: Efficiency) -> None:
        self._eff = value
        if self.operators:
            e = self.kernel.engine
            self.operators = OperatorStep(self._tables, self.rates, value, e.tensor_parallel_size, e.kv_cache_dtype)
        for stage in self.stages or ():
            stage.eff = value

    # -- pipeline parallelism -----------------------------------------------------------------
    def _micro(self, step: Step) -> Step:
        """One micro-batch: vLLM keeps pp batches in flight, each of 1/pp of the decoding requests."""
        return replace(step, decode=cdiv(step.decode, len(self.stages)))

    def _pipeline_time(self, step: Step) -> StepTime:
        """A request's step under pipeline parallelism: its micro-batch through every stage, and
        the hidden states handed from each stage to the next at the scale-up bandwidth. Every
        request gets one token per such step (the pp micro-batches overlap)."""
        micro = self._micro(step)
        out = StepTime()
        for stage in self.stages:
            out.fold(stage.time(micro))
        eff = self.eff
        size = micro.tokens * self.comm.hidden * eff.activation_bytes
        hand_off = (len(self.stages) - 1) * (self.collective_latency
                                              + size / (self.rates.scale_up_bandwidth * eff.interconnect))
        out.comm_seconds += hand_off
        out.add("pipeline hand-off", hand_off)
        return out

    # -- one step -----------------------------------------------------------------------------
    def time(self, step: Step) -> StepTime:
        """The time of one step on this rank, by part."""
        if self.stages:
            return self._pipeline_time(step)
        eff = self.eff
        out = StepTime()
        self._forward(out, self.target, step, step.logits)
        if self.drafting:
            drafter = StepTime()
            for p in self.drafting.passes(step):
                one = replace(step, decode=p.decode, chunk=p.chunk, chunk_offset=p.chunk_offset, queries=p.queries)
                self._forward(drafter, self.drafting.work, one, p.logits, head=self.target.groups)
                # per pass, the per-layer floor: vLLM replays the drafter in PIECEWISE CUDA graphs
                # only, attention eager between the pieces (llm_base_proposer.py
                # initialize_cudagraph_keys); a fixed host cost per pass is not modelled (README)
                seconds = self.layer_floor * self.drafting.work.comm.layers
                drafter.overhead_seconds += seconds
                drafter.add("overhead", seconds)
            out.fold(drafter, DRAFTER_PART)
        overhead = (eff.step_seconds + self.layer_floor * self.comm.layers + eff.per_request_seconds * step.requests
                    + eff.per_token_seconds * step.tokens)
        out.overhead_seconds += overhead
        out.add("step overhead", overhead)
        return out

    def _forward(self, out: StepTime, work: Work, step: Step, logits: int,
                 head: list[LinearGroup] | None = None) -> None:
        """One forward of `work`'s layers over `step`'s tokens (the LM head at `logits` positions;
        `head`: the groups whose LM head a drafter shares, priced there alone)."""
        if self.operators:
            self._forward_operators(out, work, step, logits, head)
            return
        e, r, eff = self.engine, self.rates, self.eff
        byte_rate = r.memory_bandwidth * eff.memory_bandwidth
        generation = self.kernel.chip.generation
        n = step.tokens
        # MoE layers see every data-parallel rank's tokens
        moe_tokens = n * e.data_parallel_size if e.data_parallel_size > 1 else n
        kinds: dict[str, list[float]] = {}  # kind -> [FLOPs, bytes, FLOP seconds, byte seconds]
        groups = work.groups + [g for g in head or () if g.logits_only]
        for g in groups:
            tokens = logits if g.logits_only else n
            flops = g.flops_per_token * tokens
            nbytes = g.weight_bytes + g.act_bytes_per_token * tokens
            t_bytes = nbytes / byte_rate
            if g.moe_layers:
                expert_flops, expert_bytes = g.routed_work(moe_tokens)
                flops += expert_flops
                nbytes += expert_bytes
                expert_rate = r.memory_bandwidth * eff.moe_kernel(generation, g.fmt).expert_bandwidth
                t_bytes += expert_bytes / expert_rate
            acc = kinds.setdefault(g.kind, [0.0, 0.0, 0.0, 0.0])
            acc[0] += flops
            acc[1] += nbytes
            acc[2] += flops / (r.flops_for(g.fmt) * eff.gemm_kernel(generation, g.fmt).tensor_compute)
            acc[3] += t_bytes
        for kind, (flops, nbytes, t_flops, t_bytes) in kinds.items():  # one roofline per kind of layer
            out.roofline_seconds(PART_NAMES.get(kind, kind), flops, nbytes, t_flops, t_bytes)
        flops, nbytes = self._attention_work(work.context, step)
        out.roofline("attention over the context", flops, nbytes, r.bf16_flops * eff.tensor_compute, byte_rate)
        self._collectives(work.comm, step, out)

    def _forward_operators(self, out: StepTime, work: Work, step: Step, logits: int,
                           head: list[LinearGroup] | None) -> None:
        """`_forward` with each operator from the measured tables (pricing/step/composed.py)."""
        ops, e, r, eff = self.operators, self.engine, self.rates, self.eff
        n = step.tokens
        moe_tokens = n * e.data_parallel_size if e.data_parallel_size > 1 else n
        groups = work.groups + [g for g in head or () if g.logits_only]

        def put(part: str, priced) -> None:
            if priced.compute:
                out.compute_seconds += priced.seconds
            else:
                out.memory_seconds += priced.seconds
            out.add(part, priced.seconds)

        for g in groups:
            tokens = logits if g.logits_only else n
            part = PART_NAMES.get(g.kind, g.kind)
            out.flops += g.flops_per_token * tokens
            out.bytes += g.weight_bytes + g.act_bytes_per_token * tokens
            if g.gemms:
                put(part, ops.gemms(g, tokens))
            else:  # vectors, the embedding's gathered rows
                put(part, ops.vectors(g.weight_bytes + g.act_bytes_per_token * tokens))
            if g.moe_layers:
                expert_flops, expert_bytes = g.routed_work(moe_tokens)
                out.flops += expert_flops
                out.bytes += expert_bytes
                priced = ops.experts(g, moe_tokens, work.comm.hidden, expert_bytes)
                if priced is None:  # no fused-MoE table on this chip: the fitted expert law (parts() says so)
                    t_flops = expert_flops / r.flops_for(g.fmt)
                    t_bytes = expert_bytes / (r.memory_bandwidth * eff.moe_kernel(self.kernel.chip.generation,
                                                                                  g.fmt).expert_bandwidth)
                    out.roofline_seconds(part, 0.0, 0.0, t_flops, t_bytes)
                else:
                    put(part, priced)
        put(ELEMENTWISE_PART, ops.elementwise(n, work.comm.layers, work.comm.hidden))
        flops, nbytes = self._attention_work(work.context, step)
        out.roofline("attention over the context", flops, nbytes, *self.attention_rates)
        self._collectives(work.comm, step, out)

    def attention_work(self, step: Step) -> tuple[float, float]:
        """FLOPs and bytes of the target's attention over the context in `step` (decode queries
        at `context`, a prefill chunk attending causally from `chunk_offset`)."""
        return self._attention_work(self.context, step)

    @staticmethod
    def _attention_work(c: ContextWork, step: Step) -> tuple[float, float]:
        """`attention_work` of the layers `c` describes: every query of a decoding request sees
        its context; each request's cache is read once however many queries it runs."""
        return StepModel._chunk_work(c, step.chunk, step.chunk_offset, *StepModel._decode_work(c, step))

    @staticmethod
    def _decode_work(c: ContextWork, step: Step) -> tuple[float, float]:
        """The decoding requests' part of `_attention_work` (what a prefill chunk beside them adds
        is `_chunk_work`)."""
        flops = 0.0
        nbytes = 0.0
        if step.decode:
            dcp = max(1, c.dcp)
            full_pairs = c.flops_per_pair - c.window_flops_per_pair
            window_context = min(step.context, c.window)
            queries = step.decode * step.queries
            flops += queries * (full_pairs * step.context + c.window_flops_per_pair * window_context) / dcp
            flops += sum(layers.flops(queries, step.context) for layers in c.sparse)
            nbytes += step.decode * (c.cache_bytes_per_token * step.context / dcp + c.bounded_bytes_per_request)
        return flops, nbytes

    @staticmethod
    def _chunk_work(c: ContextWork, chunk: int, offset: int, flops: float, nbytes: float) -> tuple[float, float]:
        """`flops` and `nbytes` (the decoding requests' work) with a prefill chunk's added: `chunk`
        tokens of a prompt, `offset` tokens of it already in the cache."""
        if chunk:
            dcp = max(1, c.dcp)
            prefill_full = c.prefill_flops_per_pair - c.prefill_window_flops_per_pair
            t, l0 = chunk, offset
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
        return self._attention_roofline(*self.attention_work(step))

    def chunk_attention_seconds(self, step: Step, offsets: list[int]) -> list[float]:
        """`attention_seconds` of `step` with its prefill chunk at each of `offsets` tokens into
        its prompt, the decoding requests beside it priced once (a prompt's chunks in TTFT)."""
        if self.stages:
            totals = [0] * len(offsets)
            for stage in self.stages:
                for i, seconds in enumerate(stage.chunk_attention_seconds(self._micro(step), offsets)):
                    totals[i] += seconds
            return totals
        decode = self._decode_work(self.context, step)
        return [self._attention_roofline(*self._chunk_work(self.context, step.chunk, offset, *decode))
                for offset in offsets]

    def _attention_roofline(self, flops: float, nbytes: float) -> float:
        flop_rate, byte_rate = self.attention_rates
        return max(flops / flop_rate, nbytes / byte_rate)

    @property
    def attention_rates(self) -> tuple[float, float]:
        """(FLOP/s, bytes/s) of the attention over the context: the measured attention tables' fractions
        in the operator step, the fitted tensor and memory efficiencies in the fitted one."""
        measured = self.operators.attention_rates() if self.operators else None
        return measured or (self.rates.bf16_flops * self.eff.tensor_compute,
                            self.rates.memory_bandwidth * self.eff.memory_bandwidth)

    @property
    def collective_latency(self) -> float:
        """Seconds of one collective call on this chip's link: NCCL's small-message latency over
        NVLink (or xGMI), or over PCIe where the cards have no other link (chips/<id>.yaml
        `interconnect: pcie`; step_model.yaml)."""
        pcie = self.kernel.chip.interconnect == "pcie"
        return self.eff.pcie_collective_latency_seconds if pcie else self.eff.collective_latency_seconds

    def _collectives(self, comm: Collectives, step: Step, out: StepTime) -> None:
        e, eff = self.engine, self.eff
        link = self.rates.scale_up_bandwidth * eff.interconnect
        per_token = comm.hidden * eff.activation_bytes
        if comm.all_reduces and e.tensor_parallel_size > 1:
            size = per_token * step.tokens
            measured = self.operators.all_reduce(size) if self.operators else None
            g = e.tensor_parallel_size
            one = measured if measured is not None else self.collective_latency + 2 * (g - 1) / g * size / link
            out.comm_seconds += one * comm.all_reduces
            out.add("tensor-parallel all-reduce", one * comm.all_reduces)
        if comm.all_to_all_layers:
            g = e.ep_size
            size = per_token * step.tokens * max(1, comm.top_k)
            one = 2 * (self.collective_latency + (g - 1) / g * size / link)
            out.comm_seconds += one * comm.all_to_all_layers
            out.add("expert all-to-all", one * comm.all_to_all_layers)

    # -- conveniences ---------------------------------------------------------------------------
    def decode(self, batch: int, context: int) -> StepTime:
        """A decode step of `batch` requests at context `context` (each verifying its drafts)."""
        return self.time(self.decode_step(batch, context))

    def prefill(self, tokens: int, offset: int = 0) -> StepTime:
        """A prefill chunk of `tokens` tokens of one prompt, `offset` tokens in."""
        return self.time(Step(chunk=tokens, chunk_offset=offset))
