"""The KV-cache rules of vLLM 0.19 (the pack serves 0.12–0.20): v1/core/kv_cache_utils.py and
v1/kv_cache_interface.py of the 0.19.0 wheel.

- Grouping. As 0.11, and pages that differ are unified: a page that divides the largest takes
  more tokens per block (unify_kv_cache_spec_page_size; any other page: NotImplementedError).
  The group size is the smallest layer count, or the largest when it is below 1.5 × the smallest
  (_get_kv_cache_groups_uniform_page_size; 1.25 × in 0.12–0.17, not modelled).
- Capacity. "GPU KV cache size" is num_blocks // groups × the smallest block × pcp × dcp
  (_report_kv_cache_config). The start-up check (_check_enough_kv_cache_memory over the groups,
  from 0.14; 0.12–0.13 summed the layers as 0.11) asks one request's blocks × the pool block, or
  for one group its layers' own bytes, of the pool: no null block held back.
- Sliding windows hold window − 1 + max_num_batched_tokens tokens (one batch in flight).
- Hybrids (registry facts, tests/golden/vllm-0.19.0): the model config aligns MLA beside recurrent
  layers to 64 tokens (hybrid_mla_alignment); with prefix caching a Mamba-2 hybrid runs mode 'all'
  (mamba_cache_mode_with_prefix_caching).
"""

from __future__ import annotations

import sys

from pricing.rules.load_checks import GptOssIntermediateDividesWorld, ValidateFp8BlockShape, ValidateFp8BlockShapeMoe
from pricing.rules.release import Release
from pricing.rules.shared import Layout, align_hybrid_block_size, capture_ceilings
from pricing.rules.vllm_0_10 import buckets, cannot_group, in_flight_batches, one_group
from pricing.rules.vllm_0_11 import dealt, logged_tokens, summed_group
from pricing.specs import KVCacheSpec, MambaSpec

__all__ = ["LOAD_CHECKS", "RELEASE", "capture_ceilings", "fits_one_request", "group", "in_flight_batches",
           "logged_tokens"]

NAME = "vllm-0.19"


def grown_pages(specs: list[KVCacheSpec]) -> list[KVCacheSpec] | None:
    """unify_kv_cache_spec_page_size: a page dividing the largest grows its block; None otherwise."""
    largest = max(s.page_bytes for s in specs)
    out = [s if s.page_bytes == largest else s.grown_to(largest) for s in specs]
    return None if any(s is None for s in out) else out


def group_size(specs: list[KVCacheSpec]) -> int:
    """The smallest layer count, or the largest when it is below 1.5 × the smallest."""
    sizes = [len(b) for b in buckets(specs)]
    return max(sizes) if max(sizes) < 1.5 * min(sizes) else min(sizes)


def uniform_page(specs: list[KVCacheSpec], unify, name: str) -> Layout:
    """One spec / one type / page-uniform groups, after `unify` has made the pages one size."""
    if len({s.type_key() for s in specs}) == 1:
        if len({s.page_bytes for s in specs}) == 1:
            return one_group(specs, "all layers mergeable: one group (kv_cache_utils, is_kv_cache_spec_uniform)")
        return summed_group(specs)
    unified = unify(specs) if len({s.page_bytes for s in specs}) > 1 else specs
    if unified is None:
        return cannot_group(specs, name)
    size = group_size(unified)
    return dealt(unified, size, f"uniform page size: groups of {size} layers, dealt round-robin "
                 "(kv_cache_utils._get_kv_cache_groups_uniform_page_size)")


def group(specs: list[KVCacheSpec], max_model_len: int) -> Layout:
    """KV cache groups for one rank's caches (in layer order), as vLLM 0.19 forms them."""
    if not specs:
        return Layout((), 0, True, "attention-free: no KV cache")
    if any(isinstance(s, MambaSpec) for s in specs):
        specs = align_hybrid_block_size(specs, max_model_len)
    return uniform_page(specs, grown_pages, NAME)


def fits_one_request(pool: int, layout: Layout, blocks: int, layer_bytes: int) -> bool:
    """_check_enough_kv_cache_memory(_max_memory_usage_bytes_from_groups): one group, its layers'
    own bytes; several, the group size × the page × Σ blocks; no null block held back."""
    if pool <= 0:
        return False
    if not layout.grouped or len(layout.groups) == 1:
        return layer_bytes <= pool
    return layout.bytes_per_block * blocks <= pool


# the load-time shape checks (pricing/rules/load_checks.py), in the order vLLM builds the layers; what
# differs between releases is the pack's registry facts fp8_block_fused_mismatch_allowed and
# fp8_moe_block_refinement
LOAD_CHECKS = (GptOssIntermediateDividesWorld(), ValidateFp8BlockShape(), ValidateFp8BlockShapeMoe())

RELEASE = Release("0.19", "0.19.0", "vllm_0_19", sys.modules[__name__], covers=("0.12", "0.20"))
