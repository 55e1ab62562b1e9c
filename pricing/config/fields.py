"""A config.json's values checked before any arithmetic on them: each size the graph reads is a
whole number (not a bool, a float such as 4096.5, nor a string such as "4096") within the range the
registry states for it (input_limits.yaml config_fields and config_layer_counts: zero heads, a
negative width or a billion layers are refused); words, flags, the rope configuration and the
layer types typed as transformers writes them; the model's dtype one transformers knows. pydantic
checks the types; the ranges are the registry's, stated in the message."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError

from pricing.config.dtypes import DTYPES
from pricing.errors import InputError
from pricing.registry import Registry, shipped

Count = Annotated[int, Strict()]  # a whole number: no bool, float or string
Flag = Annotated[bool, Strict()]  # true or false: no 0/1 or "true"
Word = Annotated[str, Strict()]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]  # a finite number above 0 (an int too)
Finite = Annotated[float, Field(allow_inf_nan=False)]
Fraction = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
Length = Annotated[int, Strict(), Field(ge=1)]


class RopeScaling(BaseModel):
    """A rope configuration (`rope_scaling`, `rope_parameters`): what get_rope sizes its cos/sin cache by,
    typed; other entries plain values (a word, a finite number, a flag, or a list of them)."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, Finite | Word | Flag | None | list[Finite | Word]]

    rope_type: Word | None = None
    type: Word | None = None
    factor: Positive | None = None
    alpha: Positive | None = None
    original_max_position_embeddings: Length | None = None
    partial_rotary_factor: Fraction | None = None
    mrope_section: list[Length] | None = None


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
    max_window_layers: Count | None = None
    mtp_num_hidden_layers: Count | None = None
    num_nextn_predict_layers: Count | None = None
    sliding_window_pattern: Count | None = None
    full_attention_interval: Count | None = None
    linear_num_key_heads: Count | None = None
    linear_num_value_heads: Count | None = None
    linear_key_head_dim: Count | None = None
    linear_value_head_dim: Count | None = None
    linear_conv_kernel_dim: Count | None = None
    torch_dtype: Word | None = None
    model_type: Word | None = None
    architectures: list[Word] | None = None
    layer_types: list[Word] | None = None
    tie_word_embeddings: Flag | None = None
    use_sliding_window: Flag | None = None
    rope_theta: Positive | None = None
    rms_norm_eps: Positive | None = None
    rope_scaling: RopeScaling | None = None
    rope_parameters: RopeScaling | dict[str, RopeScaling] | None = None
    partial_rotary_factor: Fraction | None = None
    quantization_config: dict[str, Any] | None = None


def check_config(cfg: dict, where: str, registry: Registry | None = None) -> None:
    """Refuse the first bad value of `cfg` (a decoder config as pricing/config/defaults.py merges
    it) as one line naming `where` (the file) and the key, with the range or the values allowed."""
    try:
        ConfigFields.model_validate(cfg)
    except ValidationError as err:
        first = err.errors()[0]
        key = str(first["loc"][0]) if first["loc"] else "(top level)"
        if key in ("rope_scaling", "rope_parameters"):
            path = _data_path(cfg, first["loc"])
            raise InputError("model", f"{where}: {path}: {first['msg'][:1].lower() + first['msg'][1:]}",
                             "give the rope configuration as transformers writes it") from None
        kind = EXPECTED.get(ConfigFields.model_fields[key].annotation, "valid") if key in ConfigFields.model_fields \
            else "valid"
        raise InputError("model", f"{where}: {key}: {_shown(cfg.get(key))} is not {kind}",
                         f"give {key} as {kind}" + _range_words(key, registry)) from None
    for key, (low, high) in ranges(registry).items():
        value = cfg.get(key)
        if value is not None and not low <= value <= high:
            raise InputError("model", f"{where}: {key}: {value:,} is outside {low:,} … {high:,} (the range a config "
                             "may take, pricing/registry/input_limits.yaml)",
                             f"give {key} in {low:,} … {high:,}")
    layers, types = cfg.get("num_hidden_layers"), cfg.get("layer_types")
    if types and layers is not None and len(types) < layers:
        raise InputError("model", f"{where}: layer_types: {len(types)} entries for {layers} layers",
                         "give one type per layer (num_hidden_layers of them), as transformers checks")
    if types and "sliding_attention" in types and cfg.get("sliding_window") is None:
        raise InputError("model", f"{where}: layer_types: sliding_attention layers without a sliding_window",
                         "give sliding_window (tokens)")
    dtype = cfg.get("torch_dtype")
    if dtype is not None and str(dtype) not in DTYPES:
        raise InputError("model", f"{where}: torch_dtype: unknown dtype {dtype!r}",
                         f"give one of {', '.join(DTYPES)}")


EXPECTED = {Count | None: "a whole number", Flag | None: "true or false", Word | None: "a string",
            list[Word] | None: "a list of strings", Positive | None: "a finite number above 0",
            dict[str, Any] | None: "an object", Fraction | None: "a number in (0, 1]"}


def _table(value: Any) -> dict:
    if not isinstance(value, dict):
        raise InputError("registry", "input_limits.config_layer_counts is not a table of ranges", "give it as "
                         "{field: [lowest, highest]}")
    return value


def _data_path(data: Any, loc: tuple) -> str:
    """The path of a pydantic error's location through `data` (the union members it names left out)."""
    parts = []
    for part in loc:
        if isinstance(data, dict) and part in data:
            data = data[part]
            parts.append(str(part))
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
            parts.append(f"[{part}]")
    return ".".join(parts).replace(".[", "[")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def ranges(registry: Registry | None = None) -> dict[str, tuple[int, int]]:
    """Each config field's (lowest, highest) value, as `registry` states them (an overlay's that is
    no such pair is refused, naming the registry value; None: the shipped registry), kept on it."""
    reg = registry or shipped()
    return reg.derived(("config.field_ranges",), lambda: _ranges(reg))


def _ranges(reg) -> dict[str, tuple[int, int]]:
    prefix = "input_limits.config_fields."
    out = {}
    named = {name: reg.value(name) for name in reg.names(prefix)}
    named.update({f"input_limits.config_layer_counts.{k}": v
                  for k, v in _table(reg.value("input_limits.config_layer_counts")).items()})
    for name, pair in named.items():
        if not (isinstance(pair, list) and len(pair) == 2 and all(type(v) is int for v in pair) and pair[0] <= pair[1]):
            raise InputError("registry", f"{name}: {pair!r} is not a range [lowest, highest] of whole numbers",
                             "give it as [1, 1024]")
        out[name.rsplit(".", 1)[-1]] = tuple(pair)
    return out


def _range_words(key: str, registry: Registry | None = None) -> str:
    low, high = ranges(registry).get(key, (None, None))
    return f" in {low:,} … {high:,}" if low is not None else ""
