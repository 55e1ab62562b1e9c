"""The measured operators for pricing a step: vLLM's GEMMs, fused-MoE kernels, attention and custom
all-reduce as NVIDIA's aiconfigurator-core measured them on real GPUs, reduced by
scripts/operators/reduce.py into registry/operators_<chip>.yaml (each value with its package, file,
rows, reduction and held-out error).

    GEMM        roofline(m, n, k) × ratio(m, n, k)        (pricing/step/roofline.py, `Curve`)
    fused MoE   a measured shape (hidden, width on the rank, top-k, experts, EP): its own seconds,
                interpolated log-log in tokens (`moe_measured`); any other shape:
                roofline(tokens, expert) × ratio(token-expert assignments, expert elements, local experts);
                the tables route `balanced` (every assignment its own expert), a served step's router
                about uniformly: the measured time over the balanced roofline, times the uniform one
    attention   a measured head shape (heads, KV heads, head size on the rank): its own seconds on the
                batch × tokens grid (`attention_seconds`); coarser: FLOPs / (bf16 peak × context
                fraction), cache bytes / (bandwidth × generation fraction) (`attention_fractions`)
    all-reduce  the measured seconds at the message's bytes, for the tensor-parallel group's GPU count
    all-to-all  MoE dispatch / combine (DeepEP) as measured per shape, in tokens (`all_to_all_seconds`)
    MLA, DSA    DeepSeek-style attention modules as measured per model, cache and GEMM format, by heads
                on batch × tokens (`module_seconds`)

A chip without its own tables takes those of the nearest generation's measured chip, each ratio
applied to its own peak rates' roofline: an estimate, and provenance says so (`OperatorTables.estimate`).
A format without a table of its own runs the nearest one's curve (FP8 variants the per-tensor FP8
GEMM's, any other the BF16 GEMM's) at its own bytes and rate, said as such. AMD chips have no tables:
their steps keep the ROCm build's fitted efficiencies (step_model.yaml engines.vllm-rocm).

The operator step (composed.py, `--step-model operators`) reads the GEMM, fused-MoE, attention-fraction
and all-reduce tables; the measured attention shapes, MLA/DSA modules and all-to-all are read by the
tests alone so far. Judged on the held-back silicon rows and the public runs (scripts/operators/
validate.py) it is less accurate than the fitted step, so the fitted step stays the default.
"""

from __future__ import annotations

from dataclasses import dataclass

from pricing.chips import Chip
from pricing.registry import Registry, Sourced
from pricing.step.rates import kernel_format
from pricing.step.roofline import Curve, ShapeTable, gemm_roofline, loglog, moe_roofline

TABLES = "step_model.operator_tables"  # which chip's tables each generation without its own takes
GEMM_STAND_IN = {"fp8_block_ue8m0": "fp8_block", "fp8_channel": "fp8_tensor", "fp16": "bf16"}


def _stand_in(fmt: str) -> str:
    """The table format weights served as `fmt` are priced by when the chip has no table of `fmt` itself."""
    if fmt in GEMM_STAND_IN:
        return GEMM_STAND_IN[fmt]
    return "fp8_tensor" if fmt.startswith("fp8") else "bf16"


@dataclass(frozen=True)
class Part:
    """Where one priced operator's time comes from: the step part it is in, the operator, the registry
    value (table) it was read from, and whether that table was measured on this chip and format."""

    part: str
    operator: str
    table: str
    measured: bool
    note: str = ""

    def describe(self) -> str:
        kind = "measured" if self.measured else "estimate"
        return f"{self.part}: {self.operator} from {self.table} ({kind}{'; ' + self.note if self.note else ''})"


@dataclass(frozen=True)
class OperatorTables:
    """The operator data one chip's steps are priced from: `source` chip's tables (the chip's own, or
    the nearest generation's when `estimate`), read from `reg`."""

    chip: str
    source: str  # the chip whose tables these are
    estimate: bool
    reg: Registry

    @classmethod
    def of(cls, chip: Chip, reg: Registry) -> OperatorTables | None:
        """The tables `chip` is priced from: its own, the nearest measured chip of its generation (an
        estimate), or None (AMD chips: the ROCm build's fitted efficiencies price them)."""
        if f"operators_{chip.id}.gemm.bf16" in reg:
            return cls(chip.id, chip.id, False, reg)
        if TABLES + ".by_generation" not in reg:
            return None
        stand_in = reg[TABLES + ".by_generation"].value.get(chip.generation)
        if stand_in is None:
            return None
        return cls(chip.id, stand_in, True, reg)

    def _entry(self, name: str) -> Sourced | None:
        full = f"operators_{self.source}.{name}"
        return self.reg[full] if full in self.reg else None

    def _curve(self, name: str) -> tuple[Curve, Sourced] | None:
        entry = self._entry(name)
        if entry is None:
            return None
        curve = self.reg.derived(("step.operators.curve", entry.name), lambda: Curve.of(entry.value))
        return curve, entry

    # -- GEMM -------------------------------------------------------------------------------------
    def gemm_table(self, fmt: str) -> tuple[Curve, Sourced, bool]:
        """The GEMM curve weights served as `fmt` run at, its registry entry, and whether it is measured
        for this format on this chip (False: a stand-in format's or another chip's)."""
        own = self._curve(f"gemm.{kernel_format(fmt)}")
        if own is not None:
            return own[0], own[1], not self.estimate
        other = self._curve(f"gemm.{_stand_in(fmt)}") or self._curve("gemm.bf16")
        return other[0], other[1], False

    def gemm_seconds(self, m: float, n: int, k: int, fmt: str, weight_bytes: float, peak: float,
                     bandwidth: float) -> float:
        """One m × k by k × n multiply with weights of `weight_bytes` per element at the chip's rates."""
        curve = self.gemm_table(fmt)[0]
        return gemm_roofline(m, n, k, weight_bytes, peak, bandwidth) * curve.ratio(max(m, 1), n, k)

    # -- fused MoE ---------------------------------------------------------------------------------
    def moe_table(self, fmt: str) -> tuple[Curve, Sourced, bool] | None:
        """The fused-MoE curve of experts served as `fmt` (a stand-in format's where the chip has none;
        None when the chip has no MoE table at all)."""
        own = self._curve(f"moe.{kernel_format(fmt)}")
        if own is not None:
            return own[0], own[1], not self.estimate
        # FP8 experts without a table of their own run the block-FP8 fused MoE's kernel family (Triton on
        # Hopper, TRT-LLM's on Blackwell): its table, else BF16's
        stand_in = ("fp8_block", "fp8_tensor") if fmt.startswith("fp8") else (_stand_in(fmt),)
        other = next((c for name in (*stand_in, "bf16") if (c := self._curve(f"moe.{name}"))), None)
        return None if other is None else (other[0], other[1], False)

    def _shapes(self, name: str) -> tuple[ShapeTable, Sourced] | None:
        entry = self._entry(name)
        if entry is None:
            return None
        table = self.reg.derived(("step.operators.shapes", entry.name), lambda: ShapeTable.of(entry.value))
        return table, entry

    def moe_measured_seconds(self, tokens: float, hidden: int, inter: float, top_k: int, experts: int, ep: float,
                             fmt: str) -> tuple[float, Sourced] | None:
        """One fused-MoE layer on one rank as measured for this very shape (`inter`: the expert's width
        on the rank) and its table, or None where the chip's table of `fmt` does not hold the shape."""
        table = self._shapes(f"moe_measured.{kernel_format(fmt)}")
        if table is None or tokens <= 0:
            return None
        seconds = table[0].seconds((hidden, round(inter), top_k, experts, round(ep)), tokens)
        return None if seconds is None else (seconds, table[1])

    def moe_seconds(self, tokens: float, hidden: int, inter: float, top_k: int, experts: int, ep: float,
                    fmt: str, weight_bytes: float, peak: float, bandwidth: float) -> float | None:
        """One fused-MoE layer on one rank (pricing/step/roofline.py moe_roofline's arguments) under a
        router choosing uniformly: as measured where the table holds the shape, else the roofline times
        the format's curve; either way the table's time over its own routing's roofline (`balanced`:
        every assignment its own expert) times the roofline of the experts a served step touches."""
        table = self.moe_table(fmt)
        if table is None or tokens <= 0:
            return None if table is None else 0.0
        roof = moe_roofline(tokens, hidden, inter, top_k, experts, ep, weight_bytes, peak, bandwidth)
        measured = self.moe_measured_seconds(tokens, hidden, inter, top_k, experts, ep, fmt)
        if measured is not None:
            balanced = moe_roofline(tokens, hidden, inter, top_k, experts, ep, weight_bytes, peak, bandwidth, True)
            return measured[0] * roof / balanced
        return roof * table[0].ratio(tokens * top_k / ep, 3 * hidden * inter, experts / ep)

    # -- attention and all-reduce ---------------------------------------------------------------------
    def attention_fractions(self, kv_cache_dtype: str) -> tuple[Sourced, Sourced] | None:
        """The achieved fractions (context of the bf16 FLOP/s, generation of the memory bandwidth) for a
        cache of `kv_cache_dtype` (an FP8 cache's where it is FP8, BF16's otherwise)."""
        kv = "fp8" if kv_cache_dtype.startswith("fp8") else "bfloat16"
        context = self._entry(f"attention.context.{kv}") or self._entry("attention.context.bfloat16")
        generation = self._entry(f"attention.generation.{kv}") or self._entry("attention.generation.bfloat16")
        return (context, generation) if context and generation else None

    def attention_seconds(self, phase: str, batch: int, tokens: float, heads: int, kv_heads: int, head_dim: int,
                          kv_cache_dtype: str) -> tuple[float, Sourced] | None:
        """One attention layer on one rank as measured for this head shape: `phase` "context" (`batch`
        prompts of `tokens` each) or "generation" (`batch` requests, each `tokens` of context), with a
        cache of `kv_cache_dtype` (an FP8 cache's table where it is FP8, BF16's otherwise); and its
        table. None where the table does not hold the head shape."""
        kv = "fp8" if kv_cache_dtype.startswith("fp8") else "bfloat16"
        table = self._shapes(f"attention_measured.{phase}.{kv}")
        if table is None or batch <= 0 or tokens <= 0:
            return None
        seconds = table[0].seconds((heads, kv_heads, head_dim), batch, tokens)
        return None if seconds is None else (seconds, table[1])

    def module_seconds(self, op: str, phase: str, label: str, batch: int, tokens: float,
                       heads: int) -> tuple[float, Sourced] | None:
        """A DeepSeek-style attention module as measured (`op` "mla", or "dsa": DeepSeek sparse attention)
        for `phase` ("context" or "generation"), `label` "<model>_<kv cache dtype>_<GEMM format>" (for
        example "deepseek-v3_fp8_fp8_block"), `heads` on the rank; and its table. None where not measured."""
        table = self._shapes(f"{op}.{phase}.{label}")
        if table is None or batch <= 0 or tokens <= 0:
            return None
        seconds = table[0].seconds((heads,), batch, tokens)
        return None if seconds is None else (seconds, table[1])

    def all_to_all_seconds(self, label: str, tokens: float, ep: int, hidden: int, top_k: int,
                           experts: int) -> tuple[float, Sourced] | None:
        """One MoE all-to-all as measured, `label` "<DeepEP backend>_<phase>" (for example
        "deepep_ll_dispatch"), `tokens` on the rank; and its table. None where not measured."""
        table = self._shapes(f"all_to_all.{label}")
        if table is None or tokens <= 0:
            return None
        seconds = table[0].seconds((ep, hidden, top_k, experts), tokens)
        return None if seconds is None else (seconds, table[1])

    def all_reduce(self, gpus: int) -> Sourced | None:
        """The measured custom all-reduce over `gpus` GPUs ([bytes, seconds] points), if the table has it."""
        return self._entry(f"all_reduce.gpus_{gpus}")

    @staticmethod
    def all_reduce_seconds(entry: Sourced, nbytes: float) -> float:
        return loglog([(float(b), float(s)) for b, s in entry.value], max(nbytes, 1.0))
