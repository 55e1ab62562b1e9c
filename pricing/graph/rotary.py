"""config → the rotary cache a layer builds (vLLM rotary_embedding/__init__.py get_rope and the
scaled classes beside it): one `RotaryCache` of rows × rotary_dim per distinct rope configuration.

Rows per rope type, as each class sizes `_compute_cos_sin_cache`:
  default, llama3, mrope  max_position                         (base.py; llama3_rope.py scales inv_freq only)
  linear                  max_position × factor                (linear_scaling_rope.py)
  dynamic (factor)        max_position × factor                (dynamic_ntk_scaling_rope.py)
  dynamic (alpha)         max_position                         (dynamic_ntk_alpha_rope.py)
  yarn, deepseek_yarn     original_max_position × factor       (yarn_scaling_rope.py, deepseek_scaling_rope.py:
                                                                get_rope passes the original length)
rotary_dim = int(head size × partial_rotary_factor). The graph states the rope configuration only: the
kernel sizes the buffer at its own registry's rotary.cache_dtype (kernel/weights.py rotary_cache_bytes).
A rope type outside this list is said in the graph's conventions and its cache is not counted.
"""

from __future__ import annotations

import math
from fractions import Fraction

from pricing.graph.nodes import RotaryCache

ROWS_AT_MAX_POSITION = ("default", "llama3", "mllama4")
ROWS_SCALED = ("linear",)
ROWS_SCALED_ORIGINAL = ("yarn", "deepseek_yarn", "deepseek_llama_scaling")


def rope_parameters(cfg: dict, layer_type: str = "full_attention") -> dict:
    """The rope configuration as get_rope receives it: the config's rope_parameters (flat, or per
    layer type as transformers 5 writes them: {"full_attention": {...}, "sliding_attention": {...}})
    with its rope_scaling laid over, `type` read as `rope_type`."""
    params = dict(cfg.get("rope_parameters") or {})
    if any(isinstance(v, dict) for v in params.values()):
        params = dict(params.get(layer_type) or {})
    params.update(cfg.get("rope_scaling") or {})
    if "type" in params and "rope_type" not in params:
        params["rope_type"] = params.pop("type")
    return params


def _frozen(value):
    return tuple(value) if isinstance(value, list) else value


def rotary_cache(m, head_size: int, max_position: int, params: dict, *, base=None, rotary_dim: int | None = None,
                 partial_rotary_factor=None, is_neox_style: bool = True) -> RotaryCache | None:
    """The cache get_rope builds for these arguments, or None (said in `m.conventions`) for a
    rope type whose rows the project does not know."""
    rope_type = params.get("rope_type") or "default"
    factor = Fraction(str(params.get("factor", 1)))
    if rope_type in ROWS_AT_MAX_POSITION or (rope_type == "dynamic" and "alpha" in params):
        rows = max_position
    elif rope_type in ROWS_SCALED or (rope_type == "dynamic" and "factor" in params):
        rows = math.ceil(max_position * factor)
    elif rope_type in ROWS_SCALED_ORIGINAL and "mrope_section" not in params:
        rows = math.ceil(int(params["original_max_position_embeddings"]) * factor)
    else:
        note = f"rotary cache of rope type {rope_type!r} not sized: its cos/sin buffer is not counted in the weights"
        if note not in m.conventions:
            m.conventions.append(note)
        return None
    if rotary_dim is None:
        prf = partial_rotary_factor if partial_rotary_factor is not None else params.get("partial_rotary_factor", 1.0)
        rotary_dim = int(head_size * float(prf))
    note = ("rotary cos/sin caches (get_rope): one per distinct rope configuration, rows × rotary_dim, whole on "
            "every rank and on each pipeline stage that builds a layer using it, counted with the weights")
    if note not in m.conventions:
        m.conventions.append(note)
    identity = ((("base", base), ("is_neox_style", is_neox_style))
                + tuple(sorted((k, _frozen(v)) for k, v in params.items())))
    return RotaryCache(rope_type, rows, rotary_dim, identity)
