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

from pricing.rules.load_checks import BUILDING_THE_MODEL
from pricing.rules.release import Release
from pricing.rules.shared import (
    Grouping,
    capture_ceilings,
    fits_layer_by_layer,
    logged_blocks_per_group,
    one_batch,
)

__all__ = ["LOAD_CHECKS", "RELEASE", "capture_ceilings", "fits_one_request", "group", "in_flight_batches",
           "logged_tokens"]

NAME = "vllm-0.11"


GROUPING = Grouping(NAME, whole_sequence_state=False)  # pages that differ: NotImplementedError; block = cache block
group = GROUPING.group
in_flight_batches = one_batch
fits_one_request = fits_layer_by_layer
logged_tokens = logged_blocks_per_group


# the load-time shape checks (pricing/rules/load_checks.py), in the order vLLM builds the layers; what
# differs between releases is the pack's registry facts fp8_block_fused_mismatch_allowed,
# fp8_moe_block_refinement and wna16_group_refusals
LOAD_CHECKS = BUILDING_THE_MODEL

RELEASE = Release("0.11", "0.11.0", "vllm_0_11", sys.modules[__name__], covers=("0.11", "0.11"))
