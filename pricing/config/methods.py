"""The `--quantization` choices, the one list in registry/quantization.yaml `methods` (read without
the layouts of pricing/config/quantization.py, so that help text costs no sizing code)."""

from __future__ import annotations


def _registry_file() -> dict:
    """registry/quantization.yaml as the shipped registry parsed it (the file is parsed once per
    process, by whichever reads it first)."""
    from pricing.registry import shipped

    return shipped().raw["quantization"]


def methods() -> dict[str, dict]:
    """`--quantization` choices (the one list): name -> {vllm, reads}."""
    return {name: entry["value"] for name, entry in _registry_file()["methods"].items()}


def methods_help() -> str:
    return "override the checkpoint's method or served width: " + ", ".join(methods())
