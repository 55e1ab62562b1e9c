"""Small helpers for the tests: a kernel from flags in one call."""

from pricing.chips import get_chip
from pricing.graph import load_model
from pricing.kernel import Deployment, Kernel


def kernel(model: str, chip: str = "h200", quantization: str | None = None, memory_bytes: int | None = None,
           registry=None, **flags) -> Kernel:
    target = get_chip(chip).with_overrides(memory_bytes=memory_bytes)
    return Kernel.of(load_model(model, quantization), Deployment(**flags), target, registry)
