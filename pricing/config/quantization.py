"""How a checkpoint's linear layers and experts are served: each quantization method vLLM 0.33
loads, read from the checkpoint's `quantization_config` (or ModelOpt's hf_quant_config.json) or
from `--quantization`, as one *scheme* per module.

A scheme is one class per kind of layout (as vLLM has one LinearMethod / CompressedTensorsScheme
per kind). `Scheme.params(placement, mags)` lists the tensors the method leaves on one GPU after
`create_weights` and `process_weights_after_loading` (packed weights, scales, zero points, group
indices, Marlin repacking and tile padding, NVFP4 scale swizzling), or with `stored=True` the
tensors the checkpoint itself stores (the safetensors cross-check). Magnitudes come from the
registry (registry/quantization.yaml); the layouts cite the vLLM file they follow.
"""

from __future__ import annotations

import fnmatch
import math
import re
from dataclasses import dataclass, field
from functools import cached_property

from pricing.config.methods import _registry_file, methods, methods_help  # noqa: F401  (read here too)
from pricing.errors import InputError, mention
from pricing.units import cdiv, round_up


def _marlin_group_sizes() -> tuple[int, ...]:
    """The group sizes vLLM's Marlin kernels serve (registry quantization.marlin_group_sizes)."""
    return tuple(_registry_file()["marlin_group_sizes"]["value"])


def vllm_flag(override: str | None) -> str | None:
    """The `vllm serve --quantization` value of a `--quantization` choice (None: no flag)."""
    return methods().get(override or "none", {}).get("vllm")


# -- what one rank holds ----------------------------------------------------------------------
@dataclass(frozen=True)
class Param:
    """One tensor a layer allocates on one rank: name suffix, dtype key (registry dtype_bytes), shape."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    def nbytes(self, dtype_bytes: dict) -> int:
        return math.prod(self.shape) * dtype_bytes[self.dtype]


@dataclass(frozen=True)
class Placement:
    """Where a linear layer (or one expert's) sits on one rank.

    rows, cols   this rank's output rows N and input columns K
    full_cols    the layer's whole K (before tensor parallelism): act order repeats scales
    parts        output partitions fused in the tensor (gate and up: 2), each with its own scales
    act_dtype    the model dtype ("bf16" / "fp16") that scales and activations are kept in
    generation   the chip's GPU generation ("sm90", "gfx942", ...)
    stored       as the checkpoint stores it (whole, unpadded), not as vLLM serves it
    """

    rows: int
    cols: int
    full_cols: int
    parts: int = 1
    act_dtype: str = "bf16"
    generation: str = "sm90"
    expert: bool = False
    stored: bool = False

    @property
    def row_parallel(self) -> bool:
        return self.cols != self.full_cols

    @property
    def cuda(self) -> bool:
        return self.generation.startswith("sm")

    @property
    def sm(self) -> int:
        return sm_of(self.generation)


def sm_of(generation: str) -> int:
    """The CUDA compute capability of a generation id ("sm90" -> 90, "sm103" -> 103); 0 off CUDA."""
    if not generation.startswith("sm"):
        return 0
    digits = re.match(r"\d+", generation[2:])
    return int(digits.group()) if digits else 0


class Mags:
    """Registry magnitudes for layouts (`reg` a recording view when the reads are provenance)."""

    def __init__(self, reg):
        self.reg = reg

    def __call__(self, name: str):
        return self.reg.value(f"quantization.{name}")

    @property
    def dtype_bytes(self) -> dict:
        return self("dtype_bytes")


def marlin_padded(n: int, k: int, group: int, mags: Mags) -> tuple[int, int]:
    """vLLM marlin_utils.marlin_padded_nk: the cheaper of the two Marlin tile families."""
    t = mags("layouts.marlin")
    g = group if group > 0 else 1
    a = (round_up(n, t["tile_n_a"]), round_up(k, math.lcm(t["tile_k_a"], g)))
    b = (round_up(n, t["tile_n_b"]), round_up(k, math.lcm(t["tile_k_b"], g)))
    return min((a, b), key=lambda nk: (nk[0] * nk[1], nk[0] + nk[1]))


class Scheme:
    """How one module is served. Subclasses: one per layout kind."""

    key = "scheme"
    actorder: str | None = None  # a compressed-tensors weight scheme's activation ordering, as the checkpoint
    # states it (`_ct_actorder`: "group", "dynamic", "weight", "static"), on the schemes whose strategy allows it

    def params(self, p: Placement, mags: Mags) -> list[Param]:
        raise NotImplementedError

    def rule(self) -> str:
        """One line: the rule that sized it (shown in provenance)."""
        raise NotImplementedError

    def serving(self, generation: str, mags: Mags) -> tuple[str | None, str | None]:
        """(a note on the kernel vLLM uses on this chip, vLLM's refusal) — both None by default."""
        return None, None

    def refuse(self, p: Placement) -> str | None:
        """vLLM's refusal of this shard's shape (e.g. a group straddling tensor-parallel ranks)."""
        return None

    def __str__(self) -> str:
        return self.key


@dataclass(frozen=True)
class Unquantized(Scheme):
    """UnquantizedLinearMethod: weight [N, K] at the model dtype (or a stated one, e.g. fp32)."""

    dtype: str = "bf16"

    @property
    def key(self) -> str:  # type: ignore[override]
        return self.dtype

    def params(self, p, mags):
        return [Param("weight", self.dtype, (p.rows, p.cols))]

    def rule(self):
        return f"unquantized: weight [N, K] {self.dtype}"


@dataclass(frozen=True)
class Fp8(Scheme):
    """FP8 E4M3 weights (fp8.py Fp8LinearMethod, compressed_tensors_w8a8_fp8.py, fbgemm_fp8.py,
    modelopt.py ModelOptFp8LinearMethod, quark_w8a8_fp8.py): weight fp8 [N, K] and
      tensor   one fp32 scale per fused partition (requantized to one after loading)
      channel  fp32 [N, 1]
      block    fp32 (or UE8M0 byte) [cdiv(N, bn), cdiv(K, bk)]
    plus a static input scale per partition, fbgemm's input_scale_ub. Below SM89 vLLM serves
    them weight-only through FP8 Marlin (marlin_utils_fp8.prepare_fp8_layer_for_marlin): the
    weight repacked at the same bytes (Marlin tile padding), scales in the model dtype per output
    channel ([groups, N] for block scales). `online`: a 16-bit checkpoint quantized at load."""

    strategy: str = "tensor"  # tensor | channel | block
    block: tuple[int, int] | None = None
    static_input: bool = False
    ue8m0: bool = False
    input_ub: bool = False
    online: bool = False
    source: str = "fp8"

    @property
    def key(self) -> str:  # type: ignore[override]
        if self.strategy == "block":
            return "fp8_block_ue8m0" if self.ue8m0 else "fp8_block"
        return f"fp8_{self.strategy}"

    def params(self, p, mags):
        if p.stored and self.online:
            return [Param("weight", p.act_dtype, (p.rows, p.cols))]
        n, k = p.rows, p.cols
        if not p.stored and p.cuda and p.sm < mags("native.fp8_min_sm"):
            bk = self.block[1] if self.block else -1
            pn, pk = marlin_padded(n, k, bk, mags)
            groups = cdiv(pk, bk) if self.block else 1
            return [Param("weight", "int32", (pk // 16, pn * 16 // 4)),
                    Param("weight_scale", p.act_dtype, (groups, pn))]
        out = [Param("weight", "fp8", (n, k))]
        scales = 1 if not p.stored else p.parts
        if self.strategy == "channel":
            out.append(Param("weight_scale", "fp32", (n, 1)))
        elif self.strategy == "block":
            bn, bk = self.block or tuple(mags("layouts.fp8_block")["block"])
            out.append(Param("weight_scale_inv", "uint8" if self.ue8m0 else "fp32", (cdiv(n, bn), cdiv(k, bk))))
        else:
            out.append(Param("weight_scale", "fp32", (scales,)))
        if self.static_input:
            out.append(Param("input_scale", "fp32", (scales,)))
        if self.input_ub:
            out.append(Param("input_scale_ub", "fp32", (1,)))
        return out

    def rule(self):
        scale = {"tensor": "one fp32 scale per tensor", "channel": "fp32 scale per output channel [N, 1]",
                 "block": f"{'UE8M0 byte' if self.ue8m0 else 'fp32'} scale per {self.block or 'block'} tile"}
        scale = scale[self.strategy]
        extra = ", static fp32 input scale" if self.static_input else ""
        online = " (quantized online from the 16-bit checkpoint)" if self.online else ""
        return f"{self.source} FP8 E4M3: weight [N, K] 1 byte, {scale}{extra}{online}"

    def serving(self, generation, mags):
        if generation.startswith("sm") and sm_of(generation) < mags("native.fp8_min_sm"):
            return (f"{generation} has no FP8 tensor cores: vLLM serves FP8 weights weight-only through FP8 Marlin "
                    "(weights repacked at the same bytes, scales in the model dtype per output channel)"), None
        return None, None


@dataclass(frozen=True)
class Int8(Scheme):
    """W8A8 INT8 (compressed_tensors_w8a8_int8.py, quark_w8a8_int8.py): weight int8 [N, K],
    fp32 scale [N, 1] (channel) or per partition (tensor); static input scale (and zero point
    when asymmetric) per partition; asymmetric inputs keep azp_adj int32 [N]."""

    strategy: str = "channel"
    static_input: bool = False
    input_symmetric: bool = True
    source: str = "compressed-tensors"

    key = "int8_w8a8"

    def params(self, p, mags):
        out = [Param("weight", "int8", (p.rows, p.cols))]
        out.append(Param("weight_scale", "fp32", (p.rows, 1) if self.strategy == "channel" else (p.parts,)))
        if self.static_input:
            out.append(Param("input_scale", "fp32", (p.parts if p.stored else 1,)))
            if not self.input_symmetric:
                out.append(Param("input_zero_point", "int32", (p.parts if p.stored else 1,)))
        if not self.input_symmetric and not p.stored:
            out.append(Param("azp_adj", "int32", (p.rows,)))
        return out

    def rule(self):
        return (f"{self.source} W8A8 INT8: weight int8 [N, K], fp32 {self.strategy} scales"
                + (", static input scale" if self.static_input else ", dynamic per-token input"))


@dataclass(frozen=True)
class PackedInt(Scheme):
    """Weight-only INTn packed into int32, with per-group scales in the model dtype.

    layout  "marlin"  Marlin (kernels/linear/mixed_precision/marlin.py, from CT WNA16, gptq_marlin,
                      awq_marlin): qweight repacked to [pk/16, pn*16/pack] after marlin_padded_nk
                      tile padding (none with act order), scales [groups, pn], zero points
                      [groups, pn/pack] int32 when asymmetric (AWQ), act order keeps g_idx and
                      g_idx_sort_indices int32 [K]; otherwise both are emptied
            "gptq"    GPTQLinearMethod (gptq.py): qweight int32 [K*bits/32, N], g_idx int32 [K],
                      qzeros int32 [groups, N*bits/32], scales [groups, N]
            "awq"     AWQLinearMethod (awq.py): qweight int32 [K, N*bits/32], qzeros, scales
    groups = K/group (1 per channel); with act order on a row-parallel layer every rank keeps the
    whole layer's K/group (marlin_repeat_scales_on_all_ranks; gptq.py the same for desc_act).
    `source` is the checkpoint's own layout ("ct" pack-quantized, "gptq", "awq") for `stored`."""

    bits: int = 4
    group: int = 128
    symmetric: bool = True
    act_order: bool = False
    layout: str = "marlin"
    source: str = "gptq"
    actorder: str | None = None

    @property
    def key(self) -> str:  # type: ignore[override]
        g = "ch" if self.group == -1 else f"g{self.group}"
        return f"int{self.bits}_{g}_{self.layout}"

    def _groups(self, p: Placement, k: int) -> int:
        if self.group == -1:
            return 1
        repeat = self.act_order and p.row_parallel
        return (p.full_cols if repeat else k) // self.group

    def params(self, p, mags):
        n, k, b = p.rows, p.cols, self.bits
        if p.stored:
            return self._stored(p)
        layout = self.layout
        if layout == "marlin" and not p.cuda:
            layout = "awq" if self.source == "awq" else "gptq"
        if layout == "gptq":
            g = self._groups(p, k)
            return [Param("qweight", "int32", (k * b // 32, n)), Param("g_idx", "int32", (k,)),
                    Param("qzeros", "int32", (g, n * b // 32)), Param("scales", p.act_dtype, (g, n))]
        if layout == "awq":
            g = self._groups(p, k)
            return [Param("qweight", "int32", (k, n * b // 32)), Param("qzeros", "int32", (g, n * b // 32)),
                    Param("scales", p.act_dtype, (g, n))]
        pn, pk = (n, k) if self.act_order else marlin_padded(n, k, self.group, mags)
        groups = self._groups(p, pk)
        out = [Param("qweight", "int32", (pk // 16, pn * 16 * b // 32)), Param("scales", p.act_dtype, (groups, pn))]
        if not self.symmetric:
            out.append(Param("qzeros", "int32", (groups, pn * b // 32)))
        if self.act_order:
            out += [Param("g_idx", "int32", (k,)), Param("g_idx_sort_indices", "int32", (k,))]
        if self.source == "ct":
            out.append(Param("weight_shape", "int64", (2,)))
        return out

    def refuse(self, p):
        # a group cut by the split is a load check of the release (pricing/rules/load_checks.py Wna16GroupsSplit)
        if self.bits == 3 and p.cols % 32:
            return f"GPTQ 3-bit needs input shards in multiples of 32, got {p.cols} (gptq.py)"
        return None

    def _stored(self, p):
        n, k, b = p.rows, p.cols, self.bits
        g = 1 if self.group == -1 else k // self.group
        if self.source == "gptq":  # each fused checkpoint module has its own g_idx [K]
            return [Param("qweight", "int32", (k * b // 32, n)), Param("qzeros", "int32", (g, n * b // 32)),
                    Param("scales", "fp16", (g, n)), Param("g_idx", "int32", (p.parts * k,))]
        if self.source == "awq":
            return [Param("qweight", "int32", (k, n * b // 32)), Param("qzeros", "int32", (g, n * b // 32)),
                    Param("scales", "fp16", (g, n))]
        out = [Param("weight_packed", "int32", (n, k * b // 32)), Param("weight_scale", p.act_dtype, (n, g)),
               Param("weight_shape", "int64", (2 * p.parts,))]
        if not self.symmetric:
            out.append(Param("weight_zero_point", "int32", (n * b // 32, g)))
        if self.act_order:
            out.append(Param("weight_g_idx", "int32", (p.parts * k,)))
        return out

    def rule(self):
        g = "per channel" if self.group == -1 else f"group {self.group}"
        zp = "symmetric" if self.symmetric else "zero points int32 packed"
        order = ", act order (g_idx + sort indices int32 [K])" if self.act_order else ""
        kernel = {"marlin": "repacked to Marlin (tile-padded)", "gptq": "GPTQ kernels (g_idx int32 [K] kept)",
                  "awq": "AWQ kernels"}[self.layout]
        return f"{self.source} INT{self.bits} {g}, {zp}{order}: packed into int32, scales in the model dtype; {kernel}"

    def serving(self, generation, mags):
        if self.layout == "marlin" and not generation.startswith("sm"):
            return f"Marlin is CUDA only: on {generation} vLLM serves the plain {self.source} layout", None
        return None, None


@dataclass(frozen=True)
class Marlin24(Scheme):
    """2:4 sparse INT4 (compressed_tensors_w4a16_24.py, format marlin-24): weight_packed int32
    [K/16/2, N*16/pack], meta int16 [K/32, 2N], scales [groups, N], weight_shape int64 [2],
    workspace int32 [N/128*64]."""

    bits: int = 4
    group: int = 128
    actorder: str | None = None

    key = "int4_marlin24"

    def params(self, p, mags):
        m = mags("layouts.marlin_24")
        n, k = p.rows, p.cols
        pack = 32 // self.bits
        groups = 1 if self.group in (-1, None) else k // self.group
        out = [Param("weight_packed", "int32", (k // m["tile"] // 2, n * m["tile"] // pack)),
               Param("meta", "int16", (k // m["meta_rows_per_k"], 2 * n)),
               Param("scale_packed", p.act_dtype, (groups, n)), Param("weight_shape", "int64", (2,))]
        if not p.stored:
            out.append(Param("workspace", "int32", (n // m["workspace_min_thread_n"] * m["workspace_max_parallel"],)))
        return out

    def rule(self):
        return "compressed-tensors marlin-24: 2:4 sparse INT4 (half the weights) + int16 2:4 metadata + scales"

    def serving(self, generation, mags):
        if not generation.startswith("sm"):
            return None, f"compressed-tensors marlin-24 needs CUDA Marlin kernels; vLLM has none on {generation}"
        return None, None


@dataclass(frozen=True)
class Nvfp4(Scheme):
    """NVFP4 (compressed_tensors_w4a4_nvfp4.py, modelopt.py ModelOptNvFp4LinearMethod / FusedMoE):
    weight uint8 [N, K/2], weight_scale float8_e4m3fn [N, K/16], fp32 weight and input global
    scales per fused partition. On SM100+ (CUTLASS/FlashInfer FP4) the scales are swizzled and
    padded to [round_up(N, 128), round_up(K/16, 4)] and dense weights padded to 32 in N and K;
    below, vLLM serves weight-only FP4 Marlin (marlin_utils_fp4.py): weights repacked at the same
    bytes (tile padding), scales [K/16, N] FP8, one global scale."""

    weight_only: bool = False  # W4A16 (no input global scale)
    source: str = "modelopt"
    actorder: str | None = None

    key = "nvfp4"

    def params(self, p, mags):
        m = mags("layouts.nvfp4")
        n, k, g = p.rows, p.cols, m["group"]
        if p.stored:
            out = [Param("weight", "uint8", (n, k // 2)), Param("weight_scale", "fp8", (n, cdiv(k, g))),
                   Param("weight_global_scale", "fp32", (p.parts,))]
            return out if self.weight_only else out + [Param("input_global_scale", "fp32", (p.parts,))]
        if p.cuda and p.sm < mags("native.fp4_min_sm"):
            pn, pk = marlin_padded(n, k, g, mags)
            return [Param("weight", "int32", (pk // 16, pn * 16 // 8)), Param("weight_scale", "fp8", (pk // g, pn)),
                    Param("weight_global_scale", p.act_dtype, (1,))]
        rows = n if p.expert else round_up(n, m["cutlass_align"])
        cols = k if p.expert else round_up(k, m["cutlass_align"])
        out = [Param("weight", "uint8", (rows, cols // 2)),
               Param("weight_scale", "fp8", (round_up(n, m["swizzle_rows"]), round_up(cdiv(k, g), m["swizzle_cols"]))),
               Param("weight_global_scale", "fp32", (p.parts,))]
        if not self.weight_only:
            out += [Param("input_global_scale", "fp32", (p.parts,)), Param("alpha", "fp32", (1,))]
        return out

    def rule(self):
        return (f"{self.source} NVFP4: E2M1 weight 0.5 byte, FP8 scale per 16 (swizzled, padded to 128 rows x 4 "
                "on SM100+), fp32 global scales")

    def serving(self, generation, mags):
        if generation.startswith("sm") and sm_of(generation) < mags("native.fp4_min_sm"):
            return (f"{generation} has no FP4 tensor cores: vLLM serves NVFP4 weight-only through FP4 Marlin "
                    "(same weight bytes, unswizzled scales)"), None
        if not generation.startswith("sm"):
            return f"NVFP4 on {generation}: sized as the emulation path (unswizzled FP8 scales)", None
        return None, None


@dataclass(frozen=True)
class Mxfp4(Scheme):
    """MXFP4 (mxfp4.py Mxfp4MoEMethod, quark_ocp_mx.py, DeepSeek-V4 expert_dtype fp4): uint8
    [N, K/2] E2M1 pairs and one uint8 E8M0 scale per 32 elements [N, K/32]; routed experts padded
    as the chip's MoE backend requires (Marlin: intermediate to 128, hidden to 256; FlashInfer on
    SM100: both to 256)."""

    source: str = "mxfp4"
    actorder: str | None = None

    key = "mxfp4"

    def params(self, p, mags):
        g = mags("layouts.mxfp4")["group"]
        rows, cols = p.rows, p.cols
        if p.expert and not p.stored and p.cuda:
            pads = mags("layouts.mxfp4_moe_padding")
            pad = pads["flashinfer_sm100"] if 100 <= p.sm < 110 else pads["marlin"]
            if p.parts == 2:  # w13: rows are gate and up of the intermediate size, cols the hidden size
                rows, cols = 2 * round_up(rows // 2, pad["inter"]), round_up(cols, pad["hidden"])
            else:  # w2: rows the hidden size, cols the intermediate size
                rows, cols = round_up(rows, pad["hidden"]), round_up(cols, pad["inter"])
        return [Param("weight", "uint8", (rows, cols // 2)), Param("weight_scale", "uint8", (rows, cdiv(cols, g)))]

    def rule(self):
        return f"{self.source} MXFP4: E2M1 weight 0.5 byte plus one E8M0 byte per 32"


@dataclass(frozen=True)
class Bnb4(Scheme):
    """bitsandbytes 4-bit (bitsandbytes.py create_weights uint8 [numel/2, 1]; the quant state per
    fused shard as bitsandbytes_loader.py loads it): absmax fp32 per 64 elements, or with double
    quantization uint8 per 64 plus a nested fp32 absmax per 256 blocks, a 256-entry fp32 code and an
    offset; the 16-entry nf4/fp4 code."""

    quant_type: str = "nf4"
    double_quant: bool = False
    online: bool = False

    @property
    def key(self) -> str:  # type: ignore[override]
        return f"bnb_{self.quant_type}" + ("_dq" if self.double_quant else "")

    def params(self, p, mags):
        if p.stored and self.online:
            return [Param("weight", p.act_dtype, (p.rows, p.cols))]
        m = mags("layouts.bitsandbytes")
        numel = p.rows * p.cols
        out = [Param("weight", "uint8", (numel // 2, 1))]
        shard = numel // p.parts
        blocks = cdiv(shard, m["blocksize"])
        for i in range(p.parts):
            if self.double_quant:
                out += [Param(f"absmax.{i}", "uint8", (blocks,)),
                        Param(f"nested_absmax.{i}", "fp32", (cdiv(blocks, m["nested_blocksize"]),)),
                        Param(f"nested_quant_map.{i}", "fp32", (m["code_nested"],)), Param(f"offset.{i}", "fp32", (1,))]
            else:
                out.append(Param(f"absmax.{i}", "fp32", (blocks,)))
            out.append(Param(f"quant_map.{i}", "fp32", (m["code_4bit"],)))
        return out

    def rule(self):
        dq = ("double-quantized absmax (uint8 per 64, fp32 per 256 blocks)" if self.double_quant
              else "fp32 absmax per 64")
        return f"bitsandbytes 4-bit {self.quant_type}: 0.5 byte per element, {dq}, per fused shard"


@dataclass(frozen=True)
class Bnb8(Scheme):
    """bitsandbytes LLM.int8() (bitsandbytes.py create_qweight_for_8bit): int8 [N, K], fp32 SCB [N]."""

    key = "bnb_int8"

    def params(self, p, mags):
        return [Param("weight", "int8", (p.rows, p.cols)), Param("SCB", "fp32", (p.rows,))]

    def rule(self):
        return "bitsandbytes 8-bit: int8 [N, K] and one fp32 row scale (SCB)"


# -- which module gets which scheme -----------------------------------------------------------
# graph tensor name suffix -> the checkpoint module names it fuses (vLLM packed_modules_mapping)
FUSED = (
    ("shared_experts.w13", ("shared_experts.gate_proj", "shared_experts.up_proj")),
    ("shared_experts.w2", ("shared_experts.down_proj",)),
    ("experts.w13", ("experts.0.gate_proj", "experts.0.up_proj")),
    ("experts.w2", ("experts.0.down_proj",)),
    ("gate_up_proj", ("gate_proj", "up_proj")),
    ("attn.wq_a", ("attn.fused_wqa_wkv", "attn.wq_a")),
    ("attn.wkv", ("attn.fused_wqa_wkv", "attn.wkv")),
    # gated DeltaNet: Qwen3-Next checkpoints hold in_proj_qkvz whole, Qwen3.5's as in_proj_qkv and
    # in_proj_z (vLLM qwen3_5.py stacked_params_mapping): each shard under either name
    ("linear_attn.in_proj_qkvz", ("linear_attn.in_proj_qkvz|linear_attn.in_proj_qkv",
                                  "linear_attn.in_proj_qkvz|linear_attn.in_proj_z")),
    # Kimi delta attention: the checkpoint's q, k, v, b and f_a projections (vLLM kimi_linear's
    # packed_modules_mapping in_proj_qkvgfab)
    ("self_attn.in_proj_qkvgfab", ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.b_proj",
                                   "self_attn.f_a_proj")),
)


def checkpoint_names(module: str) -> list[list[str]]:
    """For a graph tensor: its shards, each with the names a checkpoint may give it."""
    shards = [module]
    for suffix, parts in FUSED:
        if module.endswith(suffix):
            base = module[: -len(suffix)]
            shards = [",".join(base + name for name in part.split("|")) for part in parts]  # a|b: either name
            if suffix.startswith("attn.w"):  # one module under two names
                shards = [",".join(base + part for part in parts)]
            break
    out = []
    for shard in shards:
        names = []
        for name in shard.split(","):
            names.append(name)
            if name.startswith(("layers.", "mtp.")):
                names += ["model." + name, "model.language_model." + name, "language_model.model." + name]
        out.append(names)
    return out


@dataclass(frozen=True)
class Rule:
    """`scheme` for the modules any of `patterns` names (class name "Linear": every linear layer):
    a name or a module prefix of it, `re:` regular expressions (re.match, as vLLM's
    compressed-tensors and Quark), `*` wildcards (ModelOpt), or for bitsandbytes a dotted component.
    A fused tensor matches when every shard does (vLLM's should_ignore_layer / is_layer_skipped)."""

    patterns: tuple[str, ...]
    scheme: Scheme | None  # None: served unquantized
    style: str = "name"

    @cached_property
    def _compiled(self):
        exact = frozenset(p for p in self.patterns if not p.startswith("re:") and "*" not in p and "?" not in p)
        regexes = tuple(re.compile(p[3:]) for p in self.patterns if p.startswith("re:"))
        globs = tuple(p for p in self.patterns if not p.startswith("re:") and ("*" in p or "?" in p))
        return "Linear" in exact, exact, regexes, globs

    def _hit(self, name: str) -> bool:
        every, exact, regexes, globs = self._compiled
        if every:
            return True
        parts = name.split(".")
        if any(".".join(parts[: i + 1]) in exact for i in range(len(parts))):
            return True
        if self.style == "component" and any(part in exact for part in parts):
            return True
        return any(r.match(name) for r in regexes) or any(fnmatch.fnmatchcase(name, g) for g in globs)

    def matches(self, module: str) -> bool:
        return all(any(self._hit(n) for n in shard) for shard in checkpoint_names(module))


@dataclass(frozen=True)
class QuantConfig:
    """The checkpoint's quantization as vLLM serves it: first matching rule wins; `ignore`
    rules (scheme None) are checked first; otherwise `default` (linear) / `experts`."""

    method: str  # the vLLM method that loads it ("none" for an unquantized checkpoint)
    default: Scheme | None = None
    experts: Scheme | None = None
    rules: tuple[Rule, ...] = ()
    lm_head: Scheme | None = None
    notes: tuple[str, ...] = field(default=(), compare=False)
    kv_cache: str | None = None  # the checkpoint's KV-cache scheme, when it states one

    def scheme(self, module: str, expert: bool = False) -> Scheme | None:
        for rule in self.rules:
            if rule.matches(module):
                return rule.scheme
        return self.experts if expert else self.default

    @property
    def label(self) -> str:
        """Short served format for tables: 'bf16', 'fp8_block', 'int4_g128_marlin + bf16 experts' ..."""
        if self.method == "none":
            return "unquantized"
        kinds = []
        for s in (self.default, self.experts, *(r.scheme for r in self.rules)):
            if s is not None and str(s) not in kinds:
                kinds.append(str(s))
        return f"{self.method}: " + ", ".join(kinds) if kinds else self.method


UNQUANTIZED = QuantConfig("none")


def served_format(cfg: dict, hf_quant: dict | None, dtype: str, where: str) -> str:
    """A checkpoint's served format in a few words, for `plan models`: 'bf16' or
    'method: scheme, scheme' (the first the linear layers', then the experts' and the rules')."""
    quant = read(cfg, hf_quant, dtype, None, where)
    return dtype if quant.method == "none" else quant.label


def _bad(method: str, where: str, problem: str) -> InputError:
    return InputError(f"{where}: quantization_config", f"{method}: {problem}",
                      "the project cannot size this scheme; serve another checkpoint or set "
                      f"{mention('quantization')} to bf16 to price it unquantized")


# -- readers, one per method -----------------------------------------------------------------
def _fp8(qc: dict, cfg: dict, where: str) -> QuantConfig:
    """fp8.py Fp8Config: weight_block_size (block, DeepSeek's scale_fmt ue8m0), activation_scheme
    static, ignored_layers / modules_to_not_convert; DeepSeek-V4 expert_dtype fp4 -> MXFP4 experts."""
    block = qc.get("weight_block_size")
    static = str(qc.get("activation_scheme", "dynamic")).lower() == "static"
    if block:
        linear = Fp8("block", (int(block[0]), int(block[1])), static, str(qc.get("scale_fmt", "")).lower() == "ue8m0")
    else:
        linear = Fp8("tensor", None, static)
    expert_dtype = str(qc.get("expert_dtype", cfg.get("expert_dtype", ""))).lower()
    experts = Mxfp4("DeepSeek-V4 expert_dtype fp4") if expert_dtype == "fp4" else linear
    skip = tuple(qc.get("ignored_layers") or qc.get("modules_to_not_convert") or ())
    rules = (Rule(skip, None),) if skip else ()
    kv = "fp8 (static scales)" if qc.get("kv_cache_scheme") else None
    return QuantConfig("fp8", linear, experts, rules, kv_cache=kv)


def _ct_actorder(w: dict) -> str | None:
    """A compressed-tensors weight scheme's `actorder` as its QuantizationArgs reads it
    (quantization/quant_args.py validate_actorder: true is "group", false none, a name in lower case;
    "dynamic" and "static" are aliases of "group" and "weight", kept as written, as vLLM quotes them)."""
    value = w.get("actorder")
    if isinstance(value, bool):
        return "group" if value else None
    return None if value is None else str(value).lower()


def _ct_weights(w: dict, inp: dict | None, fmt: str, method: str, where: str) -> Scheme:
    """compressed_tensors.py _get_scheme_from_parts, as sizes."""
    bits, kind = int(w.get("num_bits", 8)), str(w.get("type", "int"))
    strategy = str(w.get("strategy", "tensor"))
    group = w.get("group_size")
    symmetric = bool(w.get("symmetric", True))
    order = _ct_actorder(w)
    actorder = order in ("group", "dynamic")
    if fmt == "marlin-24":
        return Marlin24(bits, int(group) if group else -1, order)
    if kind == "float" and bits == 4 and strategy in ("tensor_group", "group") and int(group or 16) == 16:
        return Nvfp4(weight_only=inp is None, source="compressed-tensors", actorder=order)
    if kind == "float" and bits == 4 and int(group or 0) == 32:
        return Mxfp4("compressed-tensors", order)
    if kind == "float" and bits == 8:
        block = w.get("block_structure")
        if strategy == "block":
            if not block:
                raise _bad(method, where, "block strategy without block_structure")
            return Fp8("block", (int(block[0]), int(block[1])), bool(inp and not inp.get("dynamic")),
                       source="compressed-tensors")
        if strategy not in ("tensor", "channel"):
            raise _bad(method, where, f"FP8 weights with strategy {strategy!r}")
        return Fp8(strategy, None, bool(inp and not inp.get("dynamic")), source="compressed-tensors")
    if kind == "int" and inp is None:
        if fmt not in ("pack-quantized", "naive-quantized", "int-quantized") or bits not in (4, 8):
            raise _bad(method, where, f"weight-only INT{bits} in format {fmt!r} (vLLM: pack-quantized 4/8-bit)")
        if strategy not in ("group", "channel"):
            raise _bad(method, where, f"weight-only INT{bits} with strategy {strategy!r}")
        g = -1 if strategy == "channel" or group is None else int(group)
        return PackedInt(bits, g, symmetric, actorder and g != -1, "marlin", "ct", order)
    if kind == "int" and bits == 8:
        return Int8("channel" if strategy == "channel" else "tensor", not inp.get("dynamic", True),
                    bool(inp.get("symmetric", True)))
    raise _bad(method, where, f"weights {kind}{bits} strategy {strategy} with input activations {inp}")


def _compressed_tensors(qc: dict, where: str) -> QuantConfig:
    groups = qc.get("config_groups") or {}
    if not groups:
        raise _bad("compressed-tensors", where, "no config_groups (sparsity-only checkpoints are not sized)")
    fmt = str(qc.get("format", "dense"))
    rules = [Rule(tuple(qc.get("ignore") or ()), None)] if qc.get("ignore") else []
    for name, group in groups.items():
        if not group.get("weights"):
            raise _bad("compressed-tensors", where, f"config group {name} has no weights scheme")
        targets = tuple(group.get("targets") or ())
        for t in targets:
            if not (t == "Linear" or t.startswith("re:") or "." in t or "_" in t):
                raise _bad("compressed-tensors", where, f"target class {t!r} (only Linear and names/re: patterns)")
        scheme = _ct_weights(group["weights"], group.get("input_activations"), group.get("format") or fmt,
                             "compressed-tensors", where)
        rules.append(Rule(targets, scheme))
    kv = qc.get("kv_cache_scheme")
    kv_note = None
    if kv:
        if kv.get("type") != "float" or int(kv.get("num_bits", 0)) != 8:
            raise _bad("compressed-tensors", where, f"kv_cache_scheme {kv} (vLLM: num_bits 8, type float only)")
        kv_note = f"fp8 ({kv.get('strategy', 'tensor')} scales)"
    return QuantConfig("compressed-tensors", None, None, tuple(rules), kv_cache=kv_note)


def _gptq(qc: dict, where: str, override: str | None) -> QuantConfig:
    bits, group = int(qc.get("bits", 4)), int(qc.get("group_size", 128))
    desc_act = bool(qc.get("desc_act", False)) and group != -1
    sym = bool(qc.get("sym", True))
    if bits not in (2, 3, 4, 8):
        raise _bad("gptq", where, f"bits {bits} (vLLM gptq.py: 2, 3, 4 or 8)")
    if qc.get("dynamic"):
        raise _bad("gptq", where, "per-module `dynamic` overrides")
    marlin_ok = bits in (4, 8) and sym and group in _marlin_group_sizes()
    marlin = marlin_ok and override != "gptq"
    if override == "gptq_marlin" and not marlin_ok:
        raise InputError("quantization", f"gptq_marlin cannot serve {where}: bits {bits}, sym {sym}, group {group}",
                         f"vLLM's Marlin needs 4/8-bit symmetric, group {'/'.join(map(str, _marlin_group_sizes()))}; "
                         "use gptq")
    scheme = PackedInt(bits, group, sym, desc_act, "marlin" if marlin else "gptq", "gptq")
    head = scheme if qc.get("lm_head") else None
    return QuantConfig("gptq_marlin" if marlin else "gptq", scheme, scheme, lm_head=head)


def _awq(qc: dict, where: str, override: str | None) -> QuantConfig:
    bits, group = int(qc.get("bits", qc.get("w_bit", 4))), int(qc.get("group_size", qc.get("q_group_size", 128)))
    zero = bool(qc.get("zero_point", True))
    if bits != 4:
        raise _bad("awq", where, f"bits {bits} (vLLM awq.py: 4 only)")
    marlin = group in _marlin_group_sizes() and override != "awq"
    scheme = PackedInt(bits, group, not zero, False, "marlin" if marlin else "awq", "awq")
    skip = tuple(qc.get("modules_to_not_convert") or ())
    rules = (Rule(skip, None, "component"),) if skip else ()
    return QuantConfig("awq_marlin" if marlin else "awq", scheme, scheme, rules)


def _bitsandbytes(qc: dict, where: str, online: bool = False) -> QuantConfig:
    skip = tuple(qc.get("llm_int8_skip_modules") or ())
    rules = (Rule(skip, None, "component"),) if skip else ()
    if qc.get("load_in_8bit"):
        return QuantConfig("bitsandbytes", Bnb8(), Bnb8(), rules)
    scheme = Bnb4(str(qc.get("bnb_4bit_quant_type", "fp4")), bool(qc.get("bnb_4bit_use_double_quant", False)), online)
    return QuantConfig("bitsandbytes", scheme, scheme, rules)


def _fbgemm(qc: dict, where: str) -> QuantConfig:
    scheme = Fp8("channel", input_ub=True, source="fbgemm_fp8")
    skip = tuple(qc.get("modules_to_not_convert") or ())
    return QuantConfig("fbgemm_fp8", scheme, scheme, (Rule(skip, None),) if skip else ())


def _modelopt_algo(algo: str, group: int | None, where: str) -> Scheme:
    algo = algo.upper()
    if algo == "FP8":
        return Fp8("tensor", None, True, source="modelopt")
    if algo == "FP8_PER_CHANNEL_PER_TOKEN":
        return Fp8("channel", None, False, source="modelopt")
    if algo == "FP8_PB_WO":
        return Fp8("block", tuple(_registry_file()["layouts"]["modelopt_fp8_pb_wo"]["value"]["block"]), False,
                   source="modelopt")
    if algo == "NVFP4":
        return Nvfp4(source="modelopt")
    if algo == "W4A16_NVFP4":
        return Nvfp4(weight_only=True, source="modelopt")
    raise _bad("modelopt", where, f"quant_algo {algo!r}")


def _modelopt(hq: dict, base: QuantConfig | None, where: str) -> QuantConfig:
    """modelopt.py: ModelOptFp8Config / ModelOptNvFp4Config / ModelOptMixedPrecisionConfig, from
    hf_quant_config.json's `quantization` (exclude_modules; quantized_layers per layer)."""
    q = hq.get("quantization", hq)
    algo = str(q.get("quant_algo", "")).upper()
    kv = q.get("kv_cache_quant_algo")
    exclude = tuple(q.get("exclude_modules") or q.get("ignore") or ())
    rules = [Rule(exclude, None)] if exclude else []
    if algo == "MIXED_PRECISION":
        layers = q.get("quantized_layers") or {}
        if not layers:
            raise _bad("modelopt", where, "MIXED_PRECISION without quantized_layers")
        by_scheme: dict[Scheme, list[str]] = {}
        for name, spec in layers.items():
            by_scheme.setdefault(_modelopt_algo(str(spec.get("quant_algo", "")), spec.get("group_size"), where),
                                 []).append(name)
        rules += [Rule(tuple(names), scheme) for scheme, names in by_scheme.items()]
        # layers it does not list keep the config.json quantization (DeepSeek-V4: its own FP8)
        default = base.default if base else None
        return QuantConfig("modelopt_mixed", default, None, tuple(rules),
                           kv_cache=f"{kv} (ModelOpt)" if kv else None)
    scheme = _modelopt_algo(algo, q.get("group_size"), where)
    method = "modelopt_fp4" if isinstance(scheme, Nvfp4) else "modelopt"
    return QuantConfig(method, scheme, scheme, tuple(rules), kv_cache=f"{kv} (ModelOpt)" if kv else None)


def _quark_scheme(spec: dict, where: str) -> Scheme | None:
    if not spec:
        return None
    w = spec.get("weight") or {}
    inp = spec.get("input_tensors")
    dtype = str(w.get("dtype", "")).lower()
    qscheme = str(w.get("qscheme", "per_tensor"))
    if dtype.startswith("fp8"):
        strategy = {"per_tensor": "tensor", "per_channel": "channel"}.get(qscheme)
        if strategy is None:
            raise _bad("quark", where, f"FP8 weights with qscheme {qscheme!r}")
        return Fp8(strategy, None, bool(inp and not inp.get("is_dynamic", False)), source="quark")
    if dtype in ("fp4", "mxfp4") or (dtype == "fp4_e2m1"):
        return Mxfp4("quark OCP MX")
    if dtype == "int8":
        return Int8("channel" if qscheme == "per_channel" else "tensor", bool(inp and not inp.get("is_dynamic", False)),
                    bool((inp or {}).get("symmetric", True)), source="quark")
    raise _bad("quark", where, f"weight dtype {dtype!r}")


def _quark(qc: dict, where: str) -> QuantConfig:
    default = _quark_scheme(qc.get("global_quant_config") or {}, where)
    rules = [Rule(tuple(qc.get("exclude") or ()), None)] if qc.get("exclude") else []
    for pattern, spec in (qc.get("layer_quant_config") or {}).items():
        rules.append(Rule((pattern,), _quark_scheme(spec, where)))
    if qc.get("layer_type_quant_config"):
        raise _bad("quark", where, "layer_type_quant_config")
    kv = "fp8 (Quark kv_cache_group)" if qc.get("kv_cache_group") else None
    return QuantConfig("quark", default, default, tuple(rules), kv_cache=kv)


def _mxfp4(qc: dict) -> QuantConfig:
    return QuantConfig("mxfp4", None, Mxfp4("mxfp4 (gpt-oss)"))


READERS = ("fp8", "compressed-tensors", "gptq", "awq", "bitsandbytes", "fbgemm_fp8", "mxfp4", "quark",
           "modelopt", "modelopt_fp4")


def read(cfg: dict, hf_quant: dict | None, dtype: str, override: str | None, where: str) -> QuantConfig:
    """The quantization a checkpoint is served with (`where` names its config file for errors)."""
    choices = methods()
    if override is not None and override not in choices:
        raise InputError("quantization", f"unknown method {override!r}", f"use one of {', '.join(choices)}")
    qc = cfg.get("quantization_config") or {}
    method = str(qc.get("quant_method", "")).lower().replace("_", "-") if qc else ""
    method = {"compressed-tensors": "compressed-tensors"}.get(method, method.replace("-", "_"))
    if override in ("bf16",):
        return UNQUANTIZED
    if override == "fp8_block":  # the modules published block-FP8 checkpoints keep at the model dtype stay so
        scheme = Fp8("block", tuple(_registry_file()["layouts"]["fp8_block"]["value"]["block"]))
        keep = Rule(tuple(_registry_file()["fp8_block_what_if_unconverted"]["value"]), None)
        return QuantConfig("fp8", scheme, scheme, (keep,), notes=("what-if: FP8 block-scaled checkpoint",))
    if override == "nvfp4":
        scheme = Nvfp4(source="modelopt (what-if)")
        return QuantConfig("modelopt_fp4", scheme, scheme, notes=("what-if: NVFP4 checkpoint",))
    if override == "mxfp4" and method != "mxfp4":
        return QuantConfig("mxfp4", None, Mxfp4("what-if"), notes=("what-if: MXFP4 experts",))
    if not qc and not hf_quant:
        if override == "fp8":
            return QuantConfig("fp8", Fp8("tensor", online=True, source="online"),
                               Fp8("tensor", online=True, source="online"))
        if override == "bitsandbytes":
            return _bitsandbytes({}, where, online=True)
        if override not in (None, "none"):
            raise InputError("quantization", f"{override} needs a checkpoint quantized with it, and {where} is "
                             "unquantized", "vLLM quantizes online only with "
                             + " or ".join(_registry_file()["online"]["value"]))
        return UNQUANTIZED
    if hf_quant and (method in ("", "modelopt", "modelopt_fp4", "modelopt_mixed") or
                     str((hf_quant.get("quantization") or {}).get("quant_algo", "")).upper() == "MIXED_PRECISION"):
        base = _fp8(qc, cfg, where) if method == "fp8" else None
        found = _modelopt(hf_quant, base, where)
    elif method in ("modelopt", "modelopt_fp4", "modelopt_mixed"):
        found = _modelopt(qc, None, where)
    elif method == "fp8" and str(qc.get("quant_algo", "")).upper() == "MIXED_PRECISION":
        found = _modelopt(qc, _fp8(qc, cfg, where), where)
    elif method == "fp8":
        found = _fp8(qc, cfg, where)
    elif method == "compressed-tensors":
        found = _compressed_tensors(qc, where)
    elif method == "gptq":
        found = _gptq(qc, where, override)
    elif method == "awq":
        found = _awq(qc, where, override)
    elif method == "bitsandbytes":
        found = _bitsandbytes(qc, where)
    elif method == "fbgemm_fp8":
        found = _fbgemm(qc, where)
    elif method == "mxfp4":
        found = _mxfp4(qc)
    elif method == "quark":
        found = _quark(qc, where)
    else:
        raise InputError(f"{where}: quantization_config.quant_method", f"{method or '(missing)'!r} is not a method "
                         "vLLM 0.33 loads or the project can size", f"known: {', '.join(READERS)}")
    if override not in (None, "none") and not _compatible(override, found.method):
        raise InputError("quantization", f"{override} does not match the checkpoint's {found.method} ({where}); "
                         "vLLM refuses a method that differs from the checkpoint's",
                         f"drop {mention('quantization')} or give the checkpoint's method")
    return found


def launch_method(cfg: dict, hf_quant: dict | None, dtype: str, override: str | None, where: str) -> str | None:
    """The `vllm serve --quantization` of a plan: the method vLLM 0.33 is given for this checkpoint.
    A what-if of a format the checkpoint does not carry (fp8_block, nvfp4, mxfp4 experts) has no
    launch: vLLM quantizes online only with the registry's `online` methods (fp8: Fp8Config on a
    16-bit checkpoint; bitsandbytes: bitsandbytes_loader.py), and every other method loads weights
    already in its format. A what-if the checkpoint does carry needs no flag (vLLM reads the
    checkpoint's quantization_config)."""
    if override in (None, "none", "bf16"):
        return None
    served = read(cfg, hf_quant, dtype, override, where)
    if not any(n.startswith("what-if") for n in served.notes):
        return vllm_flag(override)
    own = read(cfg, hf_quant, dtype, None, where)
    wanted, have = _kinds(served), _kinds(own)
    if wanted <= have:
        return None
    online = ", ".join(_registry_file()["online"]["value"])
    raise InputError("quantization", f"{override} plans the weights as {', '.join(sorted(wanted))}, and {where} is "
                     f"{own.label}: vLLM 0.33 loads that format only from a checkpoint quantized in it (it "
                     f"quantizes online only with {online})",
                     f"give {mention('model')} a checkpoint in that format, or drop {mention('quantization')} "
                     "(`plan memory` sizes the what-if)")


def _kinds(q: QuantConfig) -> set[str]:
    return {str(s) for s in (q.default, q.experts, *(r.scheme for r in q.rules)) if s is not None}


def _compatible(override: str, method: str) -> bool:
    families = {"gptq": {"gptq", "gptq_marlin"}, "gptq_marlin": {"gptq_marlin"}, "awq": {"awq", "awq_marlin"},
                "awq_marlin": {"awq_marlin"}, "modelopt": {"modelopt", "modelopt_mixed"},
                "modelopt_fp4": {"modelopt_fp4"}, "modelopt_mixed": {"modelopt_mixed"}}
    return method in families.get(override, {override})
