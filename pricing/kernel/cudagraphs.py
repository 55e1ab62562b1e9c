"""CUDA graph memory (spec: CUDA graphs).

vLLM 0.33 subtracts its own estimate of the captured graphs from the KV budget; the estimate
grows with the largest graph of each family: the capture ceiling of the mixed (PIECEWISE)
graphs, and for the uniform-decode (FULL) graphs the largest size that max_num_seqs requests of
1 + K tokens fill. Capture sizes as config/vllm.py:2398-2640 computes them (vllm-0.33-memory.md
§9.3). Where the registry states a law for the family, each graph family costs
floor + per_token × ceiling + per_layer_token × decoder layers × ceiling (a piecewise capture
keeps one static output per split, and vLLM splits at every layer's attention); otherwise the
mode's flat figure applies. Zero when eager.
"""

from __future__ import annotations

from pricing.kernel.pipeline import backbone_layers
from pricing.registry import Reads, Registry, shipped
from pricing.rules import get as get_release
from pricing.rules.shared import Ceilings

__all__ = ["Ceilings", "capture_ceilings", "cuda_graph_bytes"]


def capture_ceilings(max_num_seqs: int, max_num_batched_tokens: int, spec_tokens: int, default_max: int,
                     release=None, reg: Registry | Reads | None = None) -> Ceilings:
    """The capture ceilings under `release`'s capture-size grid (the default release's by default)."""
    release = get_release(release)
    grid = release.capture_size_grid(reg or shipped())
    return release.rules.capture_ceilings(max_num_seqs, max_num_batched_tokens, spec_tokens, default_max, grid)


def _family_bytes(term: dict, ceiling: int, layers: int) -> float:
    return term.get("floor", 0) + (term.get("per_token", 0) + term.get("per_layer_token", 0) * layers) * ceiling


def cuda_graph_bytes(model, engine, chip, reg: Reads) -> tuple[int, Ceilings | None]:
    if engine.cudagraph_mode == "NONE":
        return 0, None
    cap = engine.release.fact(reg, "capture_size_max")
    default_max = cap.get(chip.generation, cap["default"])
    ceilings = capture_ceilings(engine.max_num_seqs, engine.max_num_batched_tokens, engine.num_speculative_tokens,
                                default_max, engine.release, reg)
    law_name = f"cost_model_memory.cuda_graph_laws.{model.activation_family}"
    if law_name in reg:
        law = reg[law_name]
        layers = backbone_layers(model)  # the piecewise capture splits at each decoder layer
        total = 0.0
        if engine.cudagraph_mode in ("PIECEWISE", "FULL_AND_PIECEWISE", "FULL"):
            total += _family_bytes(law.value["mixed"], ceilings.mixed, layers)
        if engine.cudagraph_mode in ("FULL_DECODE_ONLY", "FULL_AND_PIECEWISE", "FULL"):
            total += _family_bytes(law.value["decode"], ceilings.decode, layers)
        return int(total), ceilings
    flat = reg[f"cost_model_memory.cuda_graph_flat.{engine.cudagraph_mode}"]
    return int(flat.value), ceilings
