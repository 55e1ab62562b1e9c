"""The model's own dtype as its config.json states it (`torch_dtype`, or `dtype` in newer
transformers), in the short names the registry uses; bf16 when unstated, as vLLM's "auto" does for
a checkpoint that names none."""

from __future__ import annotations

DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "bf16": "bf16", "fp16": "fp16", "half": "fp16"}


def model_dtype(cfg: dict) -> str:
    raw = cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"
    return DTYPES.get(str(raw), "bf16")
