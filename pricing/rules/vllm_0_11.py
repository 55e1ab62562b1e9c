"""The KV-cache rules of vLLM 0.11 (0.11.0–0.11.2): v1/core/kv_cache_utils.py get_kv_cache_configs
and get_kv_cache_groups, v1/kv_cache_interface.py of the 0.11.0 wheel.

- Caches. MLAAttentionSpec exists; layers of one type with different pages form one
  UniformTypeKVCacheSpecs group (its page is the sum of its layers').
- Grouping. One spec: one group; one type: one summed group; otherwise every page must be the
  same size (still no growing or padding: NotImplementedError). Each spec's layers are dealt
  round-robin into cdiv(count, smallest count) groups (layers[i::num_groups]), in order of first
  appearance (the sort of 0.10 is gone).
- Capacity. "GPU KV cache size" is num_blocks // groups × the smallest block × dcp
  (get_kv_cache_config_from_groups); check_enough_kv_cache_memory still sums every layer's own
  max_memory_usage_bytes, per worker, before grouping.
- Sliding windows hold window − 1 + max_num_batched_tokens tokens (one batch in flight).
- Hybrids (as 0.10; tests/golden/vllm-0.11.0/nemotron-3-nano-30b-a3b_*): prefix caching is turned
  off, so one state per request, its block the attention block; the temporal state is held at the
  model dtype (registry mamba_cache_mode_with_prefix_caching, mamba_ssm_dtype_from_config).
"""

from __future__ import annotations

import sys

from pricing.rules.load_checks import GptOssIntermediateDividesWorld, ValidateFp8BlockShape, ValidateFp8BlockShapeMoe
from pricing.rules.release import Release
from pricing.rules.shared import Group, Layout, align_hybrid_block_size, capture_ceilings
from pricing.rules.vllm_0_10 import buckets, cannot_group, fits_one_request, in_flight_batches, one_group
from pricing.specs import KVCacheSpec, MambaSpec
from pricing.units import cdiv

__all__ = ["LOAD_CHECKS", "RELEASE", "capture_ceilings", "fits_one_request", "group", "in_flight_batches",
           "logged_tokens"]

NAME = "vllm-0.11"


def summed_group(specs: list[KVCacheSpec]) -> Layout:
    """UniformTypeKVCacheSpecs.from_specs: one type, different pages, one group of summed pages."""
    return Layout((Group(tuple(specs), True),), sum(s.page_bytes for s in specs), True,
                  "same type, different sizes: one group of summed pages (UniformTypeKVCacheSpecs)")


def dealt(specs: list[KVCacheSpec], group_size: int, rule: str) -> Layout:
    """Each spec's layers dealt round-robin into cdiv(count, group_size) groups, short ones padded
    (_get_kv_cache_groups_uniform_page_size: layers[i::num_groups])."""
    groups, padding = [], 0
    for bucket in buckets(specs):
        n = cdiv(len(bucket), group_size)
        for i in range(n):
            members = tuple(bucket[i::n])
            padding += group_size - len(members)
            groups.append(Group(members))
    return Layout(tuple(groups), group_size * specs[0].page_bytes, True, rule, padding)


def group(specs: list[KVCacheSpec], max_model_len: int) -> Layout:
    """KV cache groups for one rank's caches (in layer order), as vLLM 0.11 forms them."""
    if not specs:
        return Layout((), 0, True, "attention-free: no KV cache")
    if any(isinstance(s, MambaSpec) for s in specs):
        specs = align_hybrid_block_size(specs, max_model_len, whole_sequence_state=False)  # block = cache block
    if len({s.type_key() for s in specs}) == 1:
        if len({s.page_bytes for s in specs}) == 1:
            return one_group(specs, "all layers mergeable: one group (kv_cache_utils, is_kv_cache_spec_uniform)")
        return summed_group(specs)
    if len({s.page_bytes for s in specs}) > 1:
        return cannot_group(specs, NAME)
    size = min(len(b) for b in buckets(specs))
    return dealt(specs, size, f"uniform page size: groups of {size} layers, dealt round-robin "
                 "(kv_cache_utils._get_kv_cache_groups_uniform_page_size)")


def logged_tokens(num_blocks: int, layout: Layout, max_concurrency: float, max_model_len: int,
                  context_parallel: int) -> int:
    """num_blocks // groups × the smallest block × the context-parallel size."""
    return num_blocks // len(layout.groups) * min(g.block_tokens for g in layout.groups) * context_parallel


# the load-time shape checks (pricing/rules/load_checks.py), in the order vLLM builds the layers; what
# differs between releases is the pack's registry facts fp8_block_fused_mismatch_allowed and
# fp8_moe_block_refinement
LOAD_CHECKS = (GptOssIntermediateDividesWorld(), ValidateFp8BlockShape(), ValidateFp8BlockShapeMoe())

RELEASE = Release("0.11", "0.11.0", "vllm_0_11", sys.modules[__name__], covers=("0.11", "0.11"))
