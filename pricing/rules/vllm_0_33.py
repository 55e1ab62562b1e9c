"""The grouping rules of vLLM 0.33.0 (v1/core/kv_cache_planning.py, vllm-0.33-memory.md §3).

`group(specs)` lays the caches of one rank out as KV cache groups sharing one block pool, in
vLLM's order (groups follow the first appearance of their layers). How many blocks a request
holds in a group is its specs' own law (pricing.specs); this module only combines specs.
"""

from __future__ import annotations

import sys

from pricing.rules.load_checks import (
    AttentionHeadsDivideTp,
    CtActorderRefused,
    GptOssIntermediateDividesWorld,
    GptqDescActRefused,
    KvHeadsSplit,
    LinearShardsDivide,
    Mamba2HeadsGroupsSplit,
    Nvfp4InFeatures,
    ValidateFp8BlockShape,
    ValidateFp8BlockShapeMoe,
    Wna16GroupsSplit,
)
from pricing.rules.release import Release
from pricing.rules.shared import (
    Grouping,
    capture_ceilings,
    fallback,
    fits_holding_null_block,
    logged_max_concurrency,
    pipeline_plus_async,
    unify_pages,
)

__all__ = ["LOAD_CHECKS", "RELEASE", "capture_ceilings", "fits_one_request", "group", "in_flight_batches",
           "logged_tokens"]


NAME = "vllm-0.33"

GROUPING = Grouping(NAME, module="kv_cache_planning", unify=unify_pages, ratio=1.5, packs=True, stride_aligned=True,
                    dealt_says="", cannot_unify=fallback)
group = GROUPING.group
in_flight_batches = pipeline_plus_async
fits_one_request = fits_holding_null_block
logged_tokens = logged_max_concurrency


# the load-time shape checks (pricing/rules/load_checks.py), in the order vLLM builds the layers; what
# differs between releases is the pack's registry facts fp8_block_fused_mismatch_allowed,
# fp8_moe_block_refinement and wna16_group_refusals; GPTQ's desc_act refusal is this pack's from the 0.30.0 wheel
# on (GptqDescActRefused), and compressed-tensors' group activation ordering's with it (CtActorderRefused), the
# 0.26 pack and older have neither; the Mamba-2 mixer's own split asserts (Mamba2HeadsGroupsSplit) are read in
# the 0.33.0 wheel only, and held by this pack alone
LOAD_CHECKS = (AttentionHeadsDivideTp(), GptqDescActRefused(), CtActorderRefused(), KvHeadsSplit(),
               Mamba2HeadsGroupsSplit(), LinearShardsDivide(), GptOssIntermediateDividesWorld(),
               ValidateFp8BlockShape(), ValidateFp8BlockShapeMoe(), Nvfp4InFeatures(), Wna16GroupsSplit())

RELEASE = Release("0.33", "0.33.0", "vllm_0_33", sys.modules[__name__], covers=("0.30", "0.33"))
