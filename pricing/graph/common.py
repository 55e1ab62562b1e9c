"""Shared pieces of the family builders: reading config fields, the served width of each
tensor (the checkpoint's quantization), and the layers every decoder has."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from pricing.errors import InputError
from pricing.graph.nodes import Tensor

DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "bf16": "bf16", "fp16": "fp16", "half": "fp16"}


def need(cfg: dict, field: str, family: str):
    """A config field the family cannot do without; a clear error naming it when absent."""
    if field not in cfg or cfg[field] is None:
        raise InputError(f"config.json: {field}", f"missing, and the {family} family needs it",
                         "add the field to the model's config.json")
    return cfg[field]


def model_dtype(cfg: dict) -> str:
    raw = cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"
    return DTYPES.get(str(raw), "bf16")


@dataclass(frozen=True)
class Quant:
    """How the checkpoint's linear layers and experts are served.

    linear / experts are weight-format keys of the registry (formats.yaml); `block` is the
    tile of block-scaled formats; `unquantized` lists module patterns served at model dtype.
    """

    method: str
    linear: str
    experts: str
    block: tuple[int, int] | None
    unquantized: tuple[str, ...] = ()

    def fmt(self, module: str, dtype: str, expert: bool = False) -> str:
        if any(fnmatch.fnmatch(module, pattern) for pattern in self.unquantized):
            return dtype
        return self.experts if expert else self.linear


OVERRIDES = ("fp8", "fp8_block", "mxfp4", "nvfp4", "bf16", "none")


def quantization(cfg: dict, hf_quant: dict | None, dtype: str, override: str | None) -> Quant:
    """The served widths: the checkpoint's quantization_config (or hf_quant_config.json), or
    `--quantization`."""
    if override is not None:
        if override not in OVERRIDES:
            raise InputError("--quantization", f"unknown method {override!r}", f"use one of {', '.join(OVERRIDES)}")
        if override in ("bf16", "none"):
            return Quant("none", dtype, dtype, None)
        if override in ("mxfp4", "nvfp4"):
            return Quant(override, dtype, override, None)
        if override == "fp8_block":
            return Quant("fp8", "fp8_block", "fp8_block", (128, 128))
        return Quant("fp8", "fp8", "fp8", None)
    qc = cfg.get("quantization_config") or {}
    method = str(qc.get("quant_method", "")).lower()
    if hf_quant:
        algo = str((hf_quant.get("quantization") or {}).get("quant_algo", "")).upper()
        if "FP4" in algo or "MIXED" in algo:
            return Quant("modelopt", qc_linear(qc, dtype), "nvfp4", qc_block(qc))
    if method == "fp8":
        block = qc_block(qc)
        linear = qc_linear(qc, dtype)
        expert_dtype = str(qc.get("expert_dtype", cfg.get("expert_dtype", ""))).lower()
        experts = "mxfp4" if expert_dtype == "fp4" else linear
        skip = tuple(qc.get("modules_to_not_convert") or qc.get("ignored_layers") or ())
        return Quant("fp8", linear, experts, block, skip)
    if method == "mxfp4":
        return Quant("mxfp4", dtype, "mxfp4", None)  # only the routed experts are MXFP4
    if method in ("modelopt", "modelopt_fp4", "nvfp4"):
        return Quant("nvfp4", dtype, "nvfp4", None)
    return Quant("none", dtype, dtype, None)


def qc_block(qc: dict) -> tuple[int, int] | None:
    block = qc.get("weight_block_size")
    return (int(block[0]), int(block[1])) if block else None


def qc_linear(qc: dict, dtype: str) -> str:
    if str(qc.get("quant_method", "")).lower() != "fp8":
        return dtype
    if qc.get("weight_block_size"):
        return "fp8_block_ue8m0" if str(qc.get("scale_fmt", "")).lower() == "ue8m0" else "fp8_block"
    return "fp8"


class TensorMaker:
    """Makes tensors at the width the quantization serves them in."""

    def __init__(self, quant: Quant, dtype: str):
        self.quant = quant
        self.dtype = dtype

    def linear(self, module: str, rows: int, cols: int, split: str, *, expert_count: int = 0,
               heads: int = 0, quantized: bool = True) -> Tensor:
        expert = expert_count > 0
        fmt = self.quant.fmt(module, self.dtype, expert) if quantized else self.dtype
        block = self.quant.block if fmt.startswith("fp8_block") else None
        return Tensor(module, rows, cols, fmt, split, count=max(1, expert_count), block=block, heads=heads)

    def plain(self, module: str, rows: int, cols: int = 1, split: str = "replicated", fmt: str | None = None,
              count: int = 1, heads: int = 0) -> Tensor:
        """Norms, biases, embeddings: served at the checkpoint's width, never quantized."""
        return Tensor(module, rows, cols, fmt or self.dtype, split, count=count, heads=heads)


def dense_mlp(make: TensorMaker, p: str, hidden: int, inter: int) -> list[Tensor]:
    """A gated MLP: gate and up fused column-parallel, down row-parallel (MergedColumnParallelLinear)."""
    return [make.linear(f"{p}.gate_up_proj", 2 * inter, hidden, "column"),
            make.linear(f"{p}.down_proj", hidden, inter, "row")]


def routed_moe(make: TensorMaker, p: str, hidden: int, inter: int, experts: int, shared: int = 0,
               score_bias: bool = True, shared_name: str = "shared_experts") -> list[Tensor]:
    """DeepSeek-style routed experts: an unquantized replicated gate (with its fp32 score bias),
    fused w13 and w2 per expert, and `shared` intermediate width of always-on shared experts."""
    t = [make.plain(f"{p}.gate", experts, hidden)]
    if score_bias:
        t.append(make.plain(f"{p}.gate.e_score_correction_bias", experts, fmt="fp32"))
    t += [make.linear(f"{p}.experts.w13", 2 * inter, hidden, "expert_column", expert_count=experts),
          make.linear(f"{p}.experts.w2", hidden, inter, "expert_row", expert_count=experts)]
    if shared:
        t += dense_mlp(make, f"{p}.{shared_name}", hidden, shared)
    return t


def add_final_norm_and_head(m, make: TensorMaker, cfg: dict, prev: str, final_name: str = "norm") -> str:
    """The final norm and, unless tied to the embedding, the LM head (ParallelLMHead at the
    checkpoint width, divided like the embedding). Returns the final norm's node."""
    final = m.add(final_name, "norm", tensors=[make.plain(final_name, m.hidden_size)])
    m.flow(prev, final)
    if not cfg.get("tie_word_embeddings", False):
        head = m.add("lm_head", "lm_head", tensors=[make.plain("lm_head", m.vocab_size, m.hidden_size, "vocab")])
        m.flow(final, head)
    else:
        m.conventions.append("LM head tied to the embedding: held once")
    return final
