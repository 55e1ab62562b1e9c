"""The KV-cache rules of vLLM 0.10 (0.10.0–0.10.2): v1/core/kv_cache_utils.py get_kv_cache_config,
unify_kv_cache_configs and v1/kv_cache_interface.py of the 0.10.2 wheel.

- Caches. An MLA cache is a FullAttentionSpec with use_mla (one latent row per token); there is no
  MLAAttentionSpec and no UniformTypeKVCacheSpecs yet.
- Grouping. Every layer's spec merges into one: one group (_get_kv_cache_config_uniform_type).
  Otherwise every page must be the same size (no page is grown or padded: NotImplementedError):
  the layers of each spec are cut into consecutive runs of the smallest count
  (layers[i:i + group_size], _get_kv_cache_config_uniform_page_size), and unify_kv_cache_configs
  sorts the groups by (spec class name, spec fields), so full attention comes before sliding window.
- Capacity. The pool block is the group size × the page; "GPU KV cache size" is num_blocks × the
  block size × dcp for one group, num_blocks // groups × the smallest block otherwise.
  check_enough_kv_cache_memory sums every layer's own max_memory_usage_bytes (no null block).
- Sliding windows hold window − 1 + max_num_batched_tokens tokens: one batch in flight whatever
  the scheduling (kv_cache_interface.py SlidingWindowSpec.max_memory_usage_bytes).
- Hybrids (model_executor/models/config.py MambaModelConfig, HybridAttentionMambaModelConfig): prefix
  caching is turned off, so one state per request, its block the attention block (16 × cdiv(state
  page, 16 × attention bytes per token)); the temporal state is held at the model dtype.
"""

from __future__ import annotations

import sys
from dataclasses import fields

from pricing.rules.load_checks import BUILDING_THE_MODEL
from pricing.rules.release import Release
from pricing.rules.shared import (
    Group,
    Layout,
    align_hybrid_block_size,
    buckets,
    cannot_group,
    capture_ceilings,
    fits_layer_by_layer,
    logged_blocks_one_group,
    one_batch,
    one_group,
)
from pricing.specs import FullAttentionSpec, KVCacheSpec, MambaSpec, MLAAttentionSpec

__all__ = ["LOAD_CHECKS", "RELEASE", "capture_ceilings", "fits_one_request", "group", "in_flight_batches",
           "logged_tokens"]

NAME = "vllm-0.10"


def as_full_attention(s: KVCacheSpec) -> KVCacheSpec:
    """An uncompressed latent cache as the releases before MLAAttentionSpec build it: a
    FullAttentionSpec (use_mla), the same page."""
    if type(s) is MLAAttentionSpec and s.tokens_per_state == 1:
        return FullAttentionSpec(**{f.name: getattr(s, f.name) for f in fields(FullAttentionSpec)})
    return s


def group(specs: list[KVCacheSpec], max_model_len: int) -> Layout:
    """KV cache groups for one rank's caches (in layer order), as vLLM 0.10 forms them."""
    if not specs:
        return Layout((), 0, True, "attention-free: no KV cache")
    specs = [as_full_attention(s) for s in specs]
    if any(isinstance(s, MambaSpec) for s in specs):
        specs = align_hybrid_block_size(specs, max_model_len, whole_sequence_state=False)  # block = cache block
    if len({(s.type_key(), s.page_bytes) for s in specs}) == 1:
        return one_group(specs, "all layers mergeable: one group (kv_cache_utils._get_kv_cache_config_uniform_type)")
    if len({s.page_bytes for s in specs}) > 1:
        return cannot_group(specs, NAME)
    runs = buckets(specs)
    size = min(len(b) for b in runs)
    groups, padding = [], 0
    for bucket in runs:
        for i in range(0, len(bucket), size):
            members = tuple(bucket[i:i + size])
            padding += size - len(members)
            groups.append(Group(members))
    groups.sort(key=lambda g: (g.spec.vllm_class, g.spec.type_key()))  # unify_kv_cache_configs' sort
    return Layout(tuple(groups), size * specs[0].page_bytes, True,
                  f"uniform page size: runs of {size} layers, sorted by spec class "
                  "(kv_cache_utils._get_kv_cache_config_uniform_page_size, unify_kv_cache_configs)", padding)


in_flight_batches = one_batch
fits_one_request = fits_layer_by_layer
logged_tokens = logged_blocks_one_group


# the load-time shape checks (pricing/rules/load_checks.py), in the order vLLM builds the layers; what
# differs between releases is the pack's registry facts fp8_block_fused_mismatch_allowed,
# fp8_moe_block_refinement and wna16_group_refusals
LOAD_CHECKS = BUILDING_THE_MODEL

RELEASE = Release("0.10", "0.10.2", "vllm_0_10", sys.modules[__name__], covers=("0.10", "0.10"))
