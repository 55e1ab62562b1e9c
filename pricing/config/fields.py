"""A config.json's values checked before any arithmetic on them: each size the graph reads is a
whole number (not a bool, a float such as 4096.5, nor a string such as "4096") within the range the
registry states for it (input_limits.yaml config_fields: zero heads, a negative width or a billion
layers are refused), and the model's dtype is one transformers writes. pydantic checks the types;
the ranges are the registry's, stated in the message."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Strict, ValidationError

from pricing.config.dtypes import DTYPES
from pricing.errors import InputError
from pricing.registry import load

Count = Annotated[int, Strict()]  # a whole number: no bool, float or string


class ConfigFields(BaseModel):
    """The fields of a decoder config the graph sizes a model by (others pass unchecked)."""

    model_config = ConfigDict(extra="allow")

    num_hidden_layers: Count | None = None
    hidden_size: Count | None = None
    num_attention_heads: Count | None = None
    num_key_value_heads: Count | None = None
    head_dim: Count | None = None
    vocab_size: Count | None = None
    intermediate_size: Count | None = None
    moe_intermediate_size: Count | None = None
    shared_expert_intermediate_size: Count | None = None
    num_experts: Count | None = None
    n_routed_experts: Count | None = None
    num_local_experts: Count | None = None
    num_experts_per_tok: Count | None = None
    n_shared_experts: Count | None = None
    max_position_embeddings: Count | None = None
    kv_lora_rank: Count | None = None
    q_lora_rank: Count | None = None
    qk_rope_head_dim: Count | None = None
    qk_nope_head_dim: Count | None = None
    v_head_dim: Count | None = None
    sliding_window: Count | None = None
    first_k_dense_replace: Count | None = None
    torch_dtype: str | None = None


def check_config(cfg: dict, where: str) -> None:
    """Refuse the first bad value of `cfg` (a decoder config as pricing/config/defaults.py merges
    it) as one line naming `where` (the file) and the key, with the range or the values allowed."""
    try:
        ConfigFields.model_validate(cfg)
    except ValidationError as err:
        first = err.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        value = cfg.get(first["loc"][0]) if first["loc"] else None
        kind = "a string" if key == "torch_dtype" else "a whole number"
        raise InputError("model", f"{where}: {key}: {value!r} is not {kind}",
                         f"give {key} as {kind}" + _range_words(key)) from None
    for key, (low, high) in ranges().items():
        value = cfg.get(key)
        if value is not None and not low <= value <= high:
            raise InputError("model", f"{where}: {key}: {value:,} is outside {low:,} … {high:,} (the range a config "
                             "may take, pricing/registry/input_limits.yaml)",
                             f"give {key} in {low:,} … {high:,}")
    dtype = cfg.get("torch_dtype")
    if dtype is not None and str(dtype) not in DTYPES:
        raise InputError("model", f"{where}: torch_dtype: unknown dtype {dtype!r}",
                         f"give one of {', '.join(DTYPES)}")


def ranges() -> dict[str, tuple[int, int]]:
    """Each config field's (lowest, highest) value, as the registry in use states them."""
    reg = load()
    prefix = "input_limits.config_fields."
    return {name.removeprefix(prefix): tuple(reg.value(name)) for name in reg.names(prefix)}


def _range_words(key: str) -> str:
    low, high = ranges().get(key, (None, None))
    return f" in {low:,} … {high:,}" if low is not None else ""
