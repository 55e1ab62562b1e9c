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

from pricing.rules.load_checks import GptOssIntermediateDividesWorld, ValidateFp8BlockShape, ValidateFp8BlockShapeMoe
from pricing.rules.release import Release
from pricing.rules.shared import Layout, capture_ceilings
from pricing.rules.vllm_0_19 import fits_one_request
from pricing.rules.vllm_0_21 import group_unified_by, logged_tokens
from pricing.rules.vllm_0_33 import unify_pages
from pricing.specs import KVCacheSpec

__all__ = ["LOAD_CHECKS", "RELEASE", "capture_ceilings", "fits_one_request", "group", "in_flight_batches",
           "logged_tokens"]

NAME = "vllm-0.26"


def group(specs: list[KVCacheSpec], max_model_len: int) -> Layout:
    """KV cache groups for one rank's caches (in layer order), as vLLM 0.26–0.29 form them (pages unified as 0.33)."""
    return group_unified_by(specs, max_model_len, unify_pages, NAME)


def in_flight_batches(async_scheduling: bool, pipeline_parallel_size: int = 1) -> int:
    """max_concurrent_batches: pp + 1 under asynchronous scheduling, else pp."""
    return pipeline_parallel_size + 1 if async_scheduling else pipeline_parallel_size


# the load-time shape checks (pricing/rules/load_checks.py), in the order vLLM builds the layers; what
# differs between releases is the pack's registry facts fp8_block_fused_mismatch_allowed and
# fp8_moe_block_refinement
LOAD_CHECKS = (GptOssIntermediateDividesWorld(), ValidateFp8BlockShape(), ValidateFp8BlockShapeMoe())

RELEASE = Release("0.26", "0.28.0", "vllm_0_26", sys.modules[__name__], covers=("0.26", "0.29"))
