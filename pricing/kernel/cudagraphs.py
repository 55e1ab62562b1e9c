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

from dataclasses import dataclass
from functools import lru_cache

from pricing.units import round_up


@dataclass(frozen=True)
class Ceilings:
    mixed: int  # largest PIECEWISE capture size (tokens)
    decode: int  # largest uniform-decode FULL capture size (tokens)
    sizes: tuple[int, ...]


@lru_cache(maxsize=4096)
def capture_ceilings(max_num_seqs: int, max_num_batched_tokens: int, spec_tokens: int, default_max: int) -> Ceilings:
    q = 1 + spec_tokens
    ceiling = min(max_num_seqs * q * 2, default_max, max_num_batched_tokens)
    base = [1, 2, 4] + list(range(8, min(ceiling + 1, 256), 8)) + list(range(256, ceiling + 1, 16))
    sizes = {s for s in base if s <= ceiling}
    if max_num_batched_tokens <= ceiling:
        sizes.add(max_num_batched_tokens)
    # uniform decode sizes
    if q > 1:
        grid = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, min(max_num_seqs, default_max) + 1, 16))
        grid.append(max_num_seqs)
        decode_sizes = {n * q for n in grid if n <= min(max_num_seqs, default_max) and n * q <= ceiling}
    else:
        decode_sizes = {max_num_seqs} if max_num_seqs <= ceiling else set()
    sizes |= {s for s in decode_sizes if s <= max_num_batched_tokens}
    ordered = tuple(sorted(sizes))
    mixed = ordered[-1] if ordered else 0
    full = [round_up(s, q) for s in ordered if round_up(s, q) <= min(max_num_seqs * q, mixed)]
    decode = max(full) if full else 0
    return Ceilings(mixed, decode, ordered)


def decoder_layers(model) -> int:
    """The decoder layers of the model graph (the piecewise capture splits at each one)."""
    if "decoder_layers" not in model.extras:
        model.extras["decoder_layers"] = len({d["layer"] for _, d in model.nodes() if d["layer"] is not None})
    return model.extras["decoder_layers"]


def _family_bytes(term: dict, ceiling: int, layers: int) -> float:
    return term.get("floor", 0) + (term.get("per_token", 0) + term.get("per_layer_token", 0) * layers) * ceiling


def cuda_graph_bytes(model, engine, chip, reg, used: dict) -> tuple[int, Ceilings | None]:
    if engine.cudagraph_mode == "NONE":
        return 0, None
    cap = reg[engine.release.key("capture_size_max")]
    used[cap.name] = cap
    default_max = cap.value.get(chip.generation, cap.value["default"])
    ceilings = capture_ceilings(engine.max_num_seqs, engine.max_num_batched_tokens, engine.spec_tokens, default_max)
    law_name = f"cost_model_memory.cuda_graph_laws.{model.activation_family}"
    if law_name in reg:
        law = reg[law_name]
        used[law.name] = law
        layers = decoder_layers(model)
        total = 0.0
        if engine.cudagraph_mode in ("PIECEWISE", "FULL_AND_PIECEWISE", "FULL"):
            total += _family_bytes(law.value["mixed"], ceilings.mixed, layers)
        if engine.cudagraph_mode in ("FULL_DECODE_ONLY", "FULL_AND_PIECEWISE", "FULL"):
            total += _family_bytes(law.value["decode"], ceilings.decode, layers)
        return int(total), ceilings
    flat = reg[f"cost_model_memory.cuda_graph_flat.{engine.cudagraph_mode}"]
    used[flat.name] = flat
    return int(flat.value), ceilings
