"""Recurrent state of hybrid models on one rank (spec: What each request holds regardless of
length; vllm-0.33-memory.md §4).

One page of a recurrent layer holds one request's state (vLLM MambaSpec.page_size_bytes):
  page = conv_dim(tp) / tp × (conv_kernel - 1 + K) × conv bytes + heads / tp × head_dim × state_dim × ssm bytes
with K the speculative tokens (mamba_utils.py MambaStateShapeCalculator). How many pages a
request holds is the recurrent cache mode's (pricing.specs MambaSpec.blocks); the page is padded to
the attention page by the rules pack's `align_hybrid_block_size`, which needs the facts below.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pricing.chips import Chip
from pricing.graph.model import ModelGraph
from pricing.graph.nodes import RecurrentState
from pricing.kernel.caches import DTYPE_BYTES, default_block_size
from pricing.kernel.deployment import Engine
from pricing.registry import Reads
from pricing.specs import FullAttentionSpec, HybridAlignment, KVCacheSpec, MambaSpec, SlidingWindowSpec


def groups_per_rank(state: RecurrentState, tp: int) -> int:
    """Mamba-2 groups after replication: n_groups + (tp - n_groups if n_groups % tp else 0)
    (mamba_utils.extra_groups_for_head_shards)."""
    if not state.groups or state.groups % tp == 0:
        return state.groups
    return state.groups + tp - state.groups


def state_shapes(state: RecurrentState, tp: int, spec_tokens: int) -> tuple[tuple[int, int], tuple[int, int, int]]:
    """(conv, temporal) shapes one rank holds for one request."""
    conv_dim = state.conv_channels + groups_per_rank(state, tp) * state.group_channels
    conv = (conv_dim // tp, state.conv_kernel - 1 + spec_tokens)
    temporal = (state.heads // tp, state.head_dim, state.state_dim)
    return conv, temporal


def _bytes(key: str, model: ModelGraph) -> int:
    return DTYPE_BYTES[model.dtype if key == "model" else key]


def state_page_bytes(state: RecurrentState, model: ModelGraph, tp: int, spec_tokens: int) -> int:
    """MambaSpec.page_size_bytes before padding: Σ prod(shape) × dtype size over conv and temporal."""
    (c1, c2), (h, d, n) = state_shapes(state, tp, spec_tokens)
    return c1 * c2 * _bytes(state.conv_dtype, model) + h * d * n * _bytes(state.ssm_dtype, model)


def kernel_alignment(model: ModelGraph, engine: Engine, chip: Chip, reg: Reads) -> int:
    """max(the attention backend's smallest kernel block, block_size), raised for MLA to the
    release's floor (hybrid_mla_alignment: 128 in vLLM 0.33)."""
    backend = "mla" if model.attention_backend == "mla" else "gqa"
    smallest = default_block_size(backend, chip, engine, reg)
    align = max(smallest, engine.block_size or smallest)
    if backend == "mla":
        align = max(align, int(engine.release.fact(reg, "hybrid_mla_alignment")))
    return align


def state_specs(model: ModelGraph, engine: Engine, chip: Chip, reg: Reads) -> list[KVCacheSpec]:
    """One MambaSpec per recurrent layer this deployment holds, at its unpadded page."""
    align = kernel_alignment(model, engine, chip, reg)
    specs: list[KVCacheSpec] = []
    for name, data in model.nodes(engine.speculative_method):
        state: RecurrentState | None = data["state"]
        if state is None:
            continue
        checkpoint = reg.value(f"recurrent.prefill_checkpoint.{state.kind}")
        chunk = state.chunk_size
        if not chunk and engine.mamba_cache_mode == "all":
            chunk = int(reg.value("recurrent.default_chunk_size"))
        hybrid = HybridAlignment(align, align, int(checkpoint["alignment"]), chunk)
        if not engine.release.fact(reg, "mamba_ssm_dtype_from_config"):
            state = replace(state, ssm_dtype="model")  # the release's "auto": the conv state's dtype
        page = state_page_bytes(state, model, engine.tensor_parallel_size, engine.num_speculative_tokens)
        specs.append(MambaSpec(name, "state", engine.block_size or align, page, page,
                               drafter=data["speculative"] is not None, mode=engine.mamba_cache_mode,
                               speculative_blocks=engine.num_speculative_tokens, kinds=(state.kind,), hybrid=hybrid))
    return specs



@dataclass(frozen=True)
class RecurrentSummary:
    """The recurrent state one request holds on one rank, apart from the KV cache.

    state_bytes      one layer's state (conv + temporal), before padding
    request_bytes    one state in every recurrent layer: layers × state_bytes
    pages            pages a request holds per layer in this mode (at `tokens` for mode "all")
    page_bytes       one page after padding to the attention page
    held_bytes       the pool blocks the request's state groups hold (padding and padding layers included)
    """

    mode: str
    kinds: tuple[str, ...]
    layers: int
    state_bytes: int
    request_bytes: int
    pages: int
    page_bytes: int
    attention_block_tokens: int
    state_block_tokens: int
    groups: int
    held_bytes: int


def summary(kernel, tokens: int) -> RecurrentSummary | None:
    """The recurrent-state part of `kernel`'s figures, or None for a model without recurrent layers."""
    states = [s for s in kernel.specs() if isinstance(s, MambaSpec)]
    if not states:
        return None
    layout = kernel.layout()
    e = kernel.engine
    state_groups = [g for g in layout.groups if isinstance(g.spec, MambaSpec)]
    attention = [g.block_tokens for g in layout.groups if isinstance(g.spec, (FullAttentionSpec, SlidingWindowSpec))]
    pages = kernel._blocks(state_groups[0], tokens, 1 + e.num_speculative_tokens)
    held = sum(kernel._blocks(g, tokens, 1 + e.num_speculative_tokens) for g in state_groups)
    per_block = layout.bytes_per_block if layout.grouped else state_groups[0].page_bytes
    kinds = tuple(sorted({d["state"].kind for _, d in kernel.model.nodes(e.speculative_method)
                          if d["state"] is not None}))
    padded = state_groups[0].members[0].page_bytes
    return RecurrentSummary(e.mamba_cache_mode, kinds, len(states), max(s.raw_page_bytes for s in states),
                            sum(s.raw_page_bytes for s in states), pages, padded,
                            attention[0] if attention else 0, state_groups[0].block_tokens, len(state_groups),
                            held * per_block)
