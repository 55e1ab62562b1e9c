"""What a step is priced at: the chip's peak rates (the `rates` of registry/chips/<id>.yaml, from
vendors' data sheets) and the achieved fractions of them with the per-step overheads
(registry/step_model.yaml, fitted on measured points). Both are read whole, with their provenance."""

from __future__ import annotations

from dataclasses import dataclass, replace

from pricing.chips import Chip
from pricing.errors import InputError
from pricing.registry import Registry, Sourced, shipped

RATE_FIELDS = ("bf16_flops", "fp8_flops", "fp4_flops", "memory_bandwidth", "scale_up_bandwidth")
FP4_FORMATS = ("mxfp4", "nvfp4")


@dataclass(frozen=True)
class ChipRates:
    """Peak dense tensor FLOP/s by operand width, memory and scale-up bandwidth (bytes/s per
    direction) of one chip."""

    chip: str
    bf16_flops: float
    fp8_flops: float
    fp4_flops: float
    memory_bandwidth: float
    scale_up_bandwidth: float
    provenance: tuple[Sourced, ...] = ()

    def flops_for(self, fmt: str) -> float:
        """The tensor rate a matrix multiply with weights served as `fmt` runs at: fp4 and fp8
        formats at their own rate where the chip has it natively, else at the bf16 rate (the
        weights dequantized on the fly, as vLLM's weight-only Marlin/Triton kernels do)."""
        if fmt in FP4_FORMATS:
            return self.fp4_flops or self.bf16_flops  # weight-only fp4 (W4A16) without native fp4
        if fmt.startswith("fp8") and self.fp8_flops:
            return self.fp8_flops
        return self.bf16_flops


def has_rates(chip: Chip, registry: Registry | None = None) -> bool:
    reg = registry or shipped()
    return f"chip_rates.chip_rates.{chip.id}.bf16_flops" in reg


def missing_rates(chip: Chip, registry: Registry | None = None) -> str:
    """Why `chip` has no step-time figures: the figures its chip file's `unsourced` entry lists as
    missing and why (a figure no vendor source gives is left out, never guessed)."""
    reg = registry or shipped()
    name = f"chip_rates.unsourced.{chip.id}"
    if name not in reg:
        return f"{chip.id} has no peak rates in pricing/registry/chips/{chip.id}.yaml"
    entry = reg[name]
    return f"{chip.id}: no vendor-sourced {', '.join(entry.value)}; {entry.how}"


def chip_rates(chip: Chip, registry: Registry | None = None) -> ChipRates:
    """The peak rates of `chip`; a clear error when the registry has none for it."""
    reg = registry or shipped()
    return reg.derived(("step.chip_rates", chip), lambda: _chip_rates(chip, reg))  # a sweep prices many


def _chip_rates(chip: Chip, reg: Registry) -> ChipRates:
    base = f"chip_rates.chip_rates.{chip.id}"
    if f"{base}.bf16_flops" not in reg:
        raise InputError("chip", f"{missing_rates(chip, reg)}, so its step time cannot be priced",
                         f"add the chip's data-sheet rates under `rates` in pricing/registry/chips/{chip.id}.yaml, "
                         "or drop the latency targets")
    prov = tuple(reg[f"{base}.{f}"] for f in RATE_FIELDS)
    return ChipRates(chip.id, *(float(p.value) for p in prov), provenance=prov)


@dataclass(frozen=True)
class MoeKernel:
    """vLLM's fused-MoE kernel for routed experts served as `fmt` on chips of `generation` (vLLM picks
    it by the checkpoint's quantization and the device's compute capability: Marlin for W4A16, OpenAI's
    Triton kernels or FlashInfer's for MXFP4, grouped GEMMs for FP8 and BF16;
    vllm/model_executor/layers/fused_moe/): the fraction of peak bandwidth its expert reads achieve.
    step_model.yaml `engines.<engine>.moe_kernels.<generation>.<fmt>`."""

    generation: str
    fmt: str
    expert_bandwidth: float
    provenance: tuple[Sourced, ...] = ()

    FIELDS = ("expert_bandwidth",)
    TABLE = "moe_kernels"

    @property
    def key(self) -> tuple[str, str]:
        return self.generation, self.fmt


@dataclass(frozen=True)
class GemmKernel:
    """vLLM's matrix-multiply kernel for weights served as `fmt` on chips of `generation` (CUTLASS
    scaled_mm for FP8 per tensor or channel, block-scaled FP8 GEMMs, BF16 cuBLAS, the fused-MoE kernels'
    GEMMs for routed experts; vllm/model_executor/layers/quantization/): the fraction of the chip's peak
    tensor FLOP/s for that format it achieves. step_model.yaml `engines.<engine>.gemm_kernels.<generation>.<fmt>`."""

    generation: str
    fmt: str
    tensor_compute: float
    provenance: tuple[Sourced, ...] = ()

    FIELDS = ("tensor_compute",)
    TABLE = "gemm_kernels"

    @property
    def key(self) -> tuple[str, str]:
        return self.generation, self.fmt


@dataclass(frozen=True)
class AttentionKernel:
    """vLLM's attention backend `backend` (the model graph's: mla, sparse_mla, ...) on chips of
    `generation`: its fixed seconds per decoder layer per step beyond the per-layer floor every model
    pays (MLA's latent projections, the absorbed up-projection matmuls and its decode kernel, each a
    launch: vllm/model_executor/layers/attention/mla_attention.py). step_model.yaml
    `engines.<engine>.attention_kernels.<generation>.<backend>`."""

    generation: str
    backend: str
    layer_seconds: float
    provenance: tuple[Sourced, ...] = ()

    FIELDS = ("layer_seconds",)
    TABLE = "attention_kernels"

    @property
    def key(self) -> tuple[str, str]:
        return self.generation, self.backend


@dataclass(frozen=True)
class Efficiency:
    """Achieved fractions of the peak rates and the per-step overheads (step_model.yaml).

    memory_bandwidth   fraction of peak bandwidth a step's reads achieve
    expert_bandwidth   the same for routed experts' weights (grouped MoE kernels, many small matrices)
    tensor_compute     fraction of peak tensor FLOP/s a step's matrix multiplies achieve
    interconnect       fraction of the scale-up bandwidth a collective achieves
    step_seconds       per step: launch, scheduling, sampling set-up
    layer_seconds      per decoder layer per step: the floor of its small kernels and syncs
    per_request_seconds  per request in the step: sampling, detokenizing, bookkeeping
    per_token_seconds  per token in the step: input preparation that grows with the batch's tokens
    collective_latency_seconds  per collective call (all-reduce, all-to-all, hand-off) over NVLink or xGMI
    pcie_collective_latency_seconds  the same between cards that reach each other over PCIe only
    first_token_seconds  per request, the API server's time outside the engine's steps before its first
                       token reaches the client (HTTP, tokenizing, hand-off, detokenizing, streaming)
    activation_bytes   bytes per activation element (16-bit)
    moe_kernels        the fused-MoE kernels fitted apart (`MoeKernel`); experts of another format or
                       chip generation are read at `expert_bandwidth`
    attention_kernels  the attention backends whose layers cost more than the floor (`AttentionKernel`);
                       any other pays `layer_seconds` alone
    gemm_kernels       the matrix multiplies fitted apart by weight format (`GemmKernel`); any other
                       runs at `tensor_compute`
    """

    memory_bandwidth: float
    expert_bandwidth: float
    tensor_compute: float
    interconnect: float
    step_seconds: float
    layer_seconds: float
    per_request_seconds: float
    per_token_seconds: float
    collective_latency_seconds: float
    pcie_collective_latency_seconds: float
    first_token_seconds: float
    activation_bytes: int
    provenance: tuple[Sourced, ...] = ()
    moe_kernels: tuple[MoeKernel, ...] = ()
    attention_kernels: tuple[AttentionKernel, ...] = ()
    gemm_kernels: tuple[GemmKernel, ...] = ()

    NAMES = {"memory_bandwidth": "efficiency.memory_bandwidth", "expert_bandwidth": "efficiency.expert_bandwidth",
             "tensor_compute": "efficiency.tensor_compute",
             "interconnect": "efficiency.interconnect", "step_seconds": "overhead.step_seconds",
             "layer_seconds": "overhead.layer_seconds",
             "per_request_seconds": "overhead.per_request_seconds",
             "per_token_seconds": "overhead.per_token_seconds",
             "collective_latency_seconds": "overhead.collective_latency_seconds",
             "pcie_collective_latency_seconds": "overhead.pcie_collective_latency_seconds",
             "first_token_seconds": "overhead.first_token_seconds",
             "activation_bytes": "activation_bytes"}

    @classmethod
    def from_registry(cls, registry: Registry | None = None, engine: str | None = None) -> Efficiency:
        """The factors of `engine` (step_model.yaml `engines.<engine>`, where it has its own; the
        shared ones for the rest), or the shared ones."""
        reg = registry or shipped()
        return reg.derived(("step.efficiency", engine), lambda: cls._read(reg, engine))

    @classmethod
    def _read(cls, reg: Registry, engine: str | None = None) -> Efficiency:
        def entry(name: str):
            own = f"step_model.engines.{engine}.{name}"
            return reg[own] if engine and own in reg else reg[f"step_model.{name}"]

        prov = {field: entry(name) for field, name in cls.NAMES.items()}
        values = {field: float(p.value) for field, p in prov.items()}
        values["activation_bytes"] = int(values["activation_bytes"])
        return cls(**values, provenance=tuple(prov.values()), moe_kernels=cls._kernels(reg, engine, MoeKernel),
                   attention_kernels=cls._kernels(reg, engine, AttentionKernel),
                   gemm_kernels=cls._kernels(reg, engine, GemmKernel))

    @staticmethod
    def _kernels(reg: Registry, engine: str | None, kind: type) -> tuple:
        """The `kind.TABLE` entries of `engines.<engine>`, each keyed by (chip generation, name)."""
        if not engine:
            return ()
        prefix = f"step_model.engines.{engine}.{kind.TABLE}."
        keys = sorted({tuple(n[len(prefix):].split(".")[:2]) for n in reg.names(prefix)})
        out = []
        for generation, name in keys:
            prov = tuple(reg[f"{prefix}{generation}.{name}.{f}"] for f in kind.FIELDS)
            out.append(kind(generation, name, *(float(p.value) for p in prov), provenance=prov))
        return tuple(out)

    def moe_kernel(self, generation: str, fmt: str) -> MoeKernel:
        """The fused-MoE kernel experts of `fmt` run on a chip of `generation`: its own fitted entry,
        or the engine's `expert_bandwidth` where it has none."""
        return _entry(self.moe_kernels, MoeKernel(generation, kernel_format(fmt), self.expert_bandwidth))

    def gemm_kernel(self, generation: str, fmt: str) -> GemmKernel:
        """The matrix-multiply kernel weights of `fmt` run on a chip of `generation`: its own fitted
        entry, or the engine's `tensor_compute` where it has none."""
        return _entry(self.gemm_kernels, GemmKernel(generation, kernel_format(fmt), self.tensor_compute))

    def attention_kernel(self, generation: str, backend: str) -> AttentionKernel:
        """The attention backend's extra fixed cost per layer on a chip of `generation` (0 where none is fitted)."""
        return _entry(self.attention_kernels, AttentionKernel(generation, backend, 0.0))

    def replaced(self, **values) -> Efficiency:
        """A copy with some factors replaced (the fit tries these); provenance says so."""
        prov = tuple(Sourced(p.name, values.get(_field_of(p.name), p.value),
                             "fit in progress" if _field_of(p.name) in values else p.source, p.how)
                     for p in self.provenance)
        return replace(self, **values, provenance=prov)

    def stamped(self, fields, source: str, how: str) -> Efficiency:
        """A copy whose `fields` carry `source` and `how` (what a fit writes beside its values)."""
        prov = tuple(Sourced(p.name, p.value, source, how) if _field_of(p.name) in fields else p
                     for p in self.provenance)
        return replace(self, provenance=prov)

    def with_kernels(self, moe: tuple[MoeKernel, ...] | None = None,
                     attention: tuple[AttentionKernel, ...] | None = None,
                     gemm: tuple[GemmKernel, ...] | None = None) -> Efficiency:
        """A copy with these fused-MoE kernels, attention backends and GEMM kernels (each given) in place of its own."""
        return replace(self, moe_kernels=self.moe_kernels if moe is None else moe,
                       attention_kernels=self.attention_kernels if attention is None else attention,
                       gemm_kernels=self.gemm_kernels if gemm is None else gemm)

    def with_kernel(self, kernel: MoeKernel | AttentionKernel | GemmKernel) -> Efficiency:
        """A copy with `kernel` in the place of its own entry of that kind and key (a fit's trial); each
        kind's TABLE names its field here as in step_model.yaml."""
        return replace(self, **{kernel.TABLE: _put(getattr(self, kernel.TABLE), kernel)})


def _put(entries: tuple, kernel) -> tuple:
    """`entries` with `kernel` in the place of the entry of its key (chip generation, format or backend)."""
    return tuple(kernel if k.key == kernel.key else k for k in entries)


# weight formats that run another format's kernels: block-FP8 with UE8M0 (power-of-two) scales, DeepSeek-V3.1/V3.2's
# scale_fmt, is served by the block-FP8 linear and fused-MoE kernels whatever the checkpoint's scale format
# (vLLM 0.33 model_executor/kernels/linear/scaled_mm/BlockScaledMMLinearKernel.py picks by the layer's block shape)
KERNEL_FORMAT = {"fp8_block_ue8m0": "fp8_block"}


def kernel_format(fmt: str) -> str:
    """The format whose kernel entries (moe_kernels, gemm_kernels) weights served as `fmt` run."""
    return KERNEL_FORMAT.get(fmt, fmt)


def _entry(entries: tuple, default):
    """The entry of `entries` with `default`'s key (chip generation, format or backend), else `default`."""
    return next((k for k in entries if k.key == default.key), default)


def _field_of(registry_name: str) -> str:
    """The field a registry entry fills: `step_model.<name>` or an engine's own `step_model.engines.<e>.<name>`."""
    short = registry_name.removeprefix("step_model.")
    if short.startswith("engines."):
        short = short.split(".", 2)[2]
    return next(f for f, n in Efficiency.NAMES.items() if n == short)
