"""Published configs as transformers reads them: the decoder's fields (nested under `text_config`
or `llm_config` for multimodal wrappers), `dtype` and `torch_dtype` as one field, and the config
class's defaults where the file omits a field (registry config_defaults.yaml, with provenance).
A wrapper's encoder configs (`vision_config`, ...) stay nested under their own key, for the
graph's tower builders (pricing/graph/vision.py); their fields never mix with the decoder's."""

from __future__ import annotations

from pricing.registry import Registry, shipped

DECODER_KEYS = ("text_config", "llm_config", "language_config")
TOWER_KEYS = ("vision_config", "audio_config", "vision_tower_config")


def class_defaults(model_type: str, registry: Registry | None = None) -> dict:
    """The defaults of `model_type`'s config class, as the registry states them ({} when none;
    registry None: the shipped one)."""
    name = f"config_defaults.{model_type}"
    reg = registry or shipped()
    return dict(reg.value(name)) if name in reg else {}


def decoder_config(raw: dict, registry: Registry | None = None) -> dict:
    """The decoder's fields: a nested decoder config merged over the wrapper's top level, the
    wrapper's model_type kept as `wrapper_model_type`, the wrapper's encoder configs kept nested,
    the class defaults filled in (the decoder's and each encoder's, as `registry` states them)."""
    merged = dict(raw)
    for key in DECODER_KEYS:
        if isinstance(raw.get(key), dict):
            merged = {k: v for k, v in raw.items() if k not in DECODER_KEYS + TOWER_KEYS}
            merged.update({k: v for k, v in raw[key].items() if k not in TOWER_KEYS})
            merged.update({k: raw[k] for k in TOWER_KEYS if isinstance(raw.get(k), dict)})
            merged["wrapper_model_type"] = raw.get("model_type")
            if "quantization_config" in raw:
                merged["quantization_config"] = raw["quantization_config"]
            break
    if "torch_dtype" not in merged and "dtype" in merged:  # transformers >= 4.56 writes `dtype`
        merged["torch_dtype"] = merged["dtype"]
    for field, value in class_defaults(str(merged.get("model_type", "")), registry).items():
        if merged.get(field) is None:
            merged[field] = value
    for key in TOWER_KEYS:  # each encoder config with its own class's defaults, where it omits a field
        if isinstance(merged.get(key), dict):
            tower = merged[key] = dict(merged[key])
            for field, value in class_defaults(str(tower.get("model_type", "")), registry).items():
                tower.setdefault(field, value)
    return merged
