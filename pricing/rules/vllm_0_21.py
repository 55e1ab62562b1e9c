"""The KV-cache rules of vLLM 0.21–0.25 (the 0.24.0 wheel's v1/core/kv_cache_utils.py).

As 0.19, with two changes that move the figures:
- "GPU KV cache size" is int(max_concurrency × max_model_len) (_report_kv_cache_config, from 0.21).
- The DeepSeek-V4 caches are packed block-outermost (group_and_unify_kv_cache_specs, from 0.20).
From 0.24 an attention page that does not divide the largest is padded when its backend indexes
pages by the block stride (not modelled: the caches priced here divide). The CUDA-graph estimate
is taken from the KV budget from 0.21 (registry vllm_0_21.graph_estimate_in_budget).
Hybrids (registry facts, tests/golden/vllm-0.24.0): with prefix caching a Mamba-2 hybrid runs mode
'all' unless told otherwise (mamba_cache_mode_with_prefix_caching), and MLA beside recurrent layers
aligns to its backend's block only (hybrid_mla_alignment: no floor of 128 yet).
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
    logged_max_concurrency,
    one_batch,
)

__all__ = ["LOAD_CHECKS", "RELEASE", "capture_ceilings", "fits_one_request", "group", "in_flight_batches",
           "logged_tokens"]

NAME = "vllm-0.21"


GROUPING = Grouping(NAME, unify=grown_pages, ratio=1.5, packs=True)
group = GROUPING.group
in_flight_batches = one_batch
fits_one_request = fits_by_groups
logged_tokens = logged_max_concurrency


# the load-time shape checks (pricing/rules/load_checks.py), in the order vLLM builds the layers; what
# differs between releases is the pack's registry facts fp8_block_fused_mismatch_allowed,
# fp8_moe_block_refinement and wna16_group_refusals
LOAD_CHECKS = BUILDING_THE_MODEL

RELEASE = Release("0.21", "0.24.0", "vllm_0_21", sys.modules[__name__], covers=("0.21", "0.25"))
