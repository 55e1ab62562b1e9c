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

from pricing.rules.load_checks import BUILDING_THE_MODEL
from pricing.rules.release import Release
from pricing.rules.shared import (
    Grouping,
    capture_ceilings,
    fits_by_groups,
    grown_pages,
    logged_blocks_per_group,
    one_batch,
)

__all__ = ["LOAD_CHECKS", "RELEASE", "capture_ceilings", "fits_one_request", "group", "in_flight_batches",
           "logged_tokens"]

NAME = "vllm-0.19"


GROUPING = Grouping(NAME, unify=grown_pages, ratio=1.5)
group = GROUPING.group
in_flight_batches = one_batch
fits_one_request = fits_by_groups
logged_tokens = logged_blocks_per_group


# the load-time shape checks (pricing/rules/load_checks.py), in the order vLLM builds the layers; what
# differs between releases is the pack's registry facts fp8_block_fused_mismatch_allowed,
# fp8_moe_block_refinement and wna16_group_refusals
LOAD_CHECKS = BUILDING_THE_MODEL

RELEASE = Release("0.19", "0.19.0", "vllm_0_19", sys.modules[__name__], covers=("0.12", "0.20"))
