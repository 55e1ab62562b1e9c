"""The step composed of measured operators (`step_model.composition: operators`): each part of a
forward is the operator vLLM runs for it, priced from the chip's measured operator tables
(pricing/step/operators.py, `OperatorTables`) at the shape the step gives it.

    linear layers  each GEMM as vLLM runs it (a layer's matrices that share their input fused:
                   pricing/step/work.py FUSED_SPLITS) at m = the step's tokens (the LM head at its
                   logit positions): the GEMM table of the served format
    routed experts each MoE layer's fused-MoE kernel at the step's tokens (every data-parallel
                   rank's): the fused-MoE table of the experts' format
    attention      one roofline over the step's attention work (each decoding request over its own
                   context, the chunk causally): FLOPs at the bf16 peak × the context-attention
                   table's achieved fraction, cache bytes at the bandwidth × the generation table's
    all-reduce     the measured custom all-reduce of the tensor-parallel group at the message's bytes
    elementwise    the small kernels between GEMMs (two fused add-RMSNorms per decoder layer: each reads
                   and writes the hidden state and the residual, 4 × hidden elements), their bytes at the
                   peak bandwidth × the memory fraction: an estimate, not measured
    vectors        norm weights and other vectors, their bytes at the same rate (an estimate)

What the tables do not hold keeps the fitted step's law, and `parts` says so (estimate): experts of a
chip with no fused-MoE table, an all-reduce over a group size the table has not measured, the expert
all-to-all (no table yet) and the pipeline hand-off. Chips of a generation without tables of their own
take the nearest measured chip's ratios over their own peaks (an estimate). AMD chips have no tables:
`OperatorTables.of` is None and their step stays the fitted one (`StepModel.composition`).

The only end-to-end constants are the CPU-side times (per step, per decoder layer, per request, per
token, and the API server's time to a first token): step_model.yaml `engines.vllm-operators`, fitted
by scripts/fits/fit_step.py --operators on the training split of validation/vllm_silicon_points.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass

from pricing.step.operators import OperatorTables, Part
from pricing.step.rates import ChipRates, Efficiency
from pricing.step.roofline import ACT_BYTES, gemm_roofline, moe_roofline
from pricing.step.work import LinearGroup

COMPOSITION = "step_model.composition"  # fitted | operators: which step the tool prices with
OPERATOR_ENGINE = "vllm-operators"  # step_model.yaml engines.<this>: the operator step's CPU-side constants
FITTED_ENGINE = "vllm"  # the fitted step's CUDA set: the MLA floors the operator step borrows
FITTED, OPERATORS = "fitted", "operators"
ELEMENTWISE_ELEMENTS_PER_LAYER = 8  # per token per decoder layer, × hidden: two fused add-RMSNorms (see above)


def composition(reg) -> str:
    """The step the registry in use prices with (`step_model.composition`)."""
    return str(reg[COMPOSITION].value) if COMPOSITION in reg else FITTED


def with_composition(reg, value: str, source: str):
    """`reg` with `step_model.composition` set to `value` (fitted or operators)."""
    from pricing.registry import Sourced

    if value not in (FITTED, OPERATORS):
        raise ValueError(f"unknown step composition {value!r}")
    return reg.overlay({COMPOSITION: Sourced(COMPOSITION, value, source, f"the {value} step, chosen for this command")})


@dataclass(frozen=True)
class Priced:
    """One operator's seconds, and whether its roofline is set by its FLOPs (else its bytes)."""

    seconds: float
    compute: bool


class OperatorStep:
    """The operators of one rank's forward priced from `tables` at the chip's `rates`; `eff` holds the laws
    the tables do not replace (the bandwidth fraction of small reads, the collective law)."""

    def __init__(self, tables: OperatorTables, rates: ChipRates, eff: Efficiency, tp: int, kv_cache_dtype: str):
        self.tables, self.rates, self.eff, self.tp = tables, rates, eff, tp
        self.fractions = tables.attention_fractions(kv_cache_dtype)
        self.reduce = tables.all_reduce(tp) if tp > 1 else None

    # -- linear layers --------------------------------------------------------------------------------
    def gemms(self, g: LinearGroup, tokens: float) -> Priced:
        """The group's GEMMs at m = `tokens`, from the GEMM table of its format."""
        curve = self.tables.gemm_table(g.fmt)[0]
        r = self.rates
        peak, bpe, m = r.flops_for(g.fmt), g.gemm_weight_bytes, max(tokens, 1.0)
        seconds = flop_seconds = 0.0
        for n, k, count in g.gemms:
            one = gemm_roofline(m, n, k, bpe, peak, r.memory_bandwidth) * curve.ratio(m, n, k)
            seconds += count * one
            flop_seconds += count * 2.0 * m * n * k / peak
        byte_seconds = sum(count * (n * k * bpe + ACT_BYTES * m * (n + k)) for n, k, count in g.gemms) \
            / r.memory_bandwidth
        return Priced(seconds, flop_seconds > byte_seconds)

    def vectors(self, nbytes: float) -> Priced:
        """Bytes read by small kernels (vectors, the elementwise kernels' activations): an estimate."""
        return Priced(nbytes / (self.rates.memory_bandwidth * self.eff.memory_bandwidth), False)

    def elementwise(self, tokens: float, layers: int, hidden: int) -> Priced:
        return self.vectors(ELEMENTWISE_ELEMENTS_PER_LAYER * hidden * ACT_BYTES * tokens * layers)

    # -- routed experts -------------------------------------------------------------------------------
    def experts(self, g: LinearGroup, tokens: float, hidden: int, routed_bytes: float) -> Priced | None:
        """The group's MoE layers' routed experts at `tokens` tokens from the fused-MoE table of their
        format (`routed_bytes`: what they read; experts' vectors alone, gpt-oss's biases, are read as
        vectors); None where the chip has no fused-MoE table (the fitted law prices them)."""
        if not g.moe_layers or tokens <= 0:
            return Priced(0.0, False)
        if not g.expert_flops_per_token:
            return self.vectors(routed_bytes)
        elements = g.expert_flops_per_token / 2  # one expert's three h × i matrices on this rank
        inter = elements / (3 * hidden)
        ep = g.experts / g.local_experts
        r = self.rates
        peak, bpe = r.flops_for(g.fmt), g.expert_bytes / elements
        one = self.tables.moe_seconds(tokens, hidden, inter, g.top_k, g.experts, ep, g.fmt, bpe, peak,
                                      r.memory_bandwidth)
        if one is None:
            return None
        flop_seconds = 2.0 * elements * tokens * g.top_k / ep / peak
        roof = moe_roofline(tokens, hidden, inter, g.top_k, g.experts, ep, bpe, peak, r.memory_bandwidth)
        return Priced(one * g.moe_layers, flop_seconds >= roof * 0.999)

    # -- attention, all-reduce -------------------------------------------------------------------------
    def attention_rates(self) -> tuple[float, float] | None:
        """(FLOP/s, bytes/s) the attention runs at: the context table's fraction of the bf16 peak, the
        generation table's of the bandwidth; None without attention tables."""
        if self.fractions is None:
            return None
        context, generation = self.fractions
        return (self.rates.bf16_flops * float(context.value),
                self.rates.memory_bandwidth * float(generation.value))

    def all_reduce(self, nbytes: float) -> float | None:
        """One tensor-parallel all-reduce of `nbytes`, as measured; None where the table has not this group."""
        if self.reduce is None:
            return None
        return OperatorTables.all_reduce_seconds(self.reduce, nbytes)

    def backend_floor(self, generation: str, backend: str) -> float:
        """The fixed seconds per decoder layer an attention backend other than GQA's adds (MLA's latent
        projections and absorbed matmuls): no operator table holds them, so vLLM's fitted step's own
        (step_model.yaml engines.vllm.attention_kernels), an estimate `parts` names."""
        return self._floor(generation, backend).layer_seconds

    def _floor(self, generation: str, backend: str):
        return Efficiency.from_registry(self.tables.reg, FITTED_ENGINE).attention_kernel(generation, backend)

    # -- provenance --------------------------------------------------------------------------------------
    def parts(self, groups: list[LinearGroup], all_to_all: bool, generation: str, backend: str) -> list[Part]:
        """Where each part of the step comes from: operator, table, measured or estimated."""
        t = self.tables
        out = []
        floor = self._floor(generation, backend)
        if floor.layer_seconds:
            out.append(Part("step overhead", f"{backend} attention's kernels beyond GQA's",
                            floor.provenance[0].name, False,
                            "no table measures them: the fitted step's floor per layer"))
        for fmt in dict.fromkeys(g.fmt for g in groups if g.gemms):
            _, entry, measured = t.gemm_table(fmt)
            out.append(Part("linear layers", f"GEMM {fmt}", entry.name, measured,
                            _note(t, measured, f"{fmt} weights")))
        for fmt in dict.fromkeys(g.fmt for g in groups if g.moe_layers and g.expert_bytes):
            table = t.moe_table(fmt)
            if table is None:
                out.append(Part("MoE layers", f"fused MoE {fmt}", "step_model.yaml expert_bandwidth", False,
                                "no fused-MoE table on this chip: the fitted expert read law"))
            else:
                out.append(Part("MoE layers", f"fused MoE {fmt}", table[1].name, table[2],
                                _note(t, table[2], f"{fmt} experts")))
        if self.fractions is None:
            out.append(Part("attention over the context", "attention", "step_model.yaml efficiency", False,
                            "no attention table: the fitted roofline"))
        else:
            for entry in self.fractions:
                out.append(Part("attention over the context", entry.name.split(".")[-2] + " attention", entry.name,
                                not t.estimate, _note(t, not t.estimate, "attention")))
        if self.tp > 1:
            if self.reduce is None:
                out.append(Part("tensor-parallel all-reduce", f"all-reduce over {self.tp} GPUs",
                                "step_model.yaml collective law", False, "no table for this group size"))
            else:
                out.append(Part("tensor-parallel all-reduce", f"custom all-reduce over {self.tp} GPUs",
                                self.reduce.name, not t.estimate, _note(t, not t.estimate, "all-reduce")))
        if all_to_all:
            out.append(Part("expert all-to-all", "all-to-all", "step_model.yaml collective law", False,
                            "no all-to-all table yet: latency + bytes / (scale-up bandwidth × interconnect)"))
        out.append(Part("elementwise kernels", "fused add-RMSNorm × 2 per layer", "the peak bandwidth", False,
                        "bytes at the bandwidth × memory fraction, not measured"))
        return out


def _note(tables: OperatorTables, measured: bool, what: str) -> str:
    if measured:
        return ""
    if tables.estimate:
        return f"{tables.source}'s table for {what}, over this chip's own peak rates"
    return f"no table of its own for {what}: a stand-in format's curve at its own bytes and rate"
