"""Small helpers for the tests: a kernel from flags in one call; a script of scripts/ as a module."""

import importlib.util
from pathlib import Path

from pricing.chips import get_chip
from pricing.graph import load_model
from pricing.kernel import Deployment, Kernel


def kernel(model: str, chip: str = "h200", quantization: str | None = None, memory_bytes: int | None = None,
           registry=None, **flags) -> Kernel:
    target = get_chip(chip).with_overrides(memory_bytes=memory_bytes)
    return Kernel.of(load_model(model, quantization), Deployment(**flags), target, registry)


def script(name: str):
    """scripts/<name>.py, imported as a module (its functions and constants, nothing run)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
