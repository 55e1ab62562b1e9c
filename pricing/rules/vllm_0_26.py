"""The KV-cache rules of vLLM 0.26–0.29 (the 0.28.0 wheel's v1/core/kv_cache_utils.py,
v1/kv_cache_interface.py and config/vllm.py).

As 0.21–0.25, with:
- Sliding windows and chunked-local attention reserve for max_in_flight_tokens =
  max_concurrent_batches × max_num_batched_tokens: 2 batches under asynchronous scheduling at pp 1
  (pp + 1 with the V2 model runner, pp with V1, which config/vllm.py use_v2_model_runner picks
  per model; pp + 1 is taken), else pp (from 0.26).
- Pages are unified as in 0.33: a recurrent page is padded to the largest (0.26), a dividing page
  grows its block, another non-MLA attention page is padded.
- From 0.27 layers of one type whose specs merge share a bucket; from 0.29 the start-up check
  holds the null block back as 0.33 does (not modelled: the 0.26–0.28 check is).
- Hybrids (registry facts by release, tests/golden/vllm-0.28.0): MLA beside recurrent layers aligns
  to at least 128 tokens from 0.27 (hybrid_mla_alignment); with prefix caching a Mamba-2 hybrid runs
  mode 'all' through 0.27 and 'align' from 0.28 (mamba_cache_mode_with_prefix_caching).
"""

from __future__ import annotations

import sys

from pricing.rules.load_checks import BUILDING_THE_MODEL
from pricing.rules.release import Release
from pricing.rules.shared import (
    Grouping,
    capture_ceilings,
    fits_by_groups,
    logged_max_concurrency,
    pipeline_plus_async,
    unify_pages,
)

__all__ = ["LOAD_CHECKS", "RELEASE", "capture_ceilings", "fits_one_request", "group", "in_flight_batches",
           "logged_tokens"]

NAME = "vllm-0.26"


GROUPING = Grouping(NAME, unify=unify_pages, ratio=1.5, packs=True)
group = GROUPING.group
in_flight_batches = pipeline_plus_async  # pp + 1 is taken (the V2 model runner's count)
fits_one_request = fits_by_groups  # the 0.26–0.28 check (0.29 holds the null block back: not modelled)
logged_tokens = logged_max_concurrency


# the load-time shape checks (pricing/rules/load_checks.py), in the order vLLM builds the layers; what
# differs between releases is the pack's registry facts fp8_block_fused_mismatch_allowed,
# fp8_moe_block_refinement and wna16_group_refusals
LOAD_CHECKS = BUILDING_THE_MODEL

RELEASE = Release("0.26", "0.28.0", "vllm_0_26", sys.modules[__name__], covers=("0.26", "0.29"))
