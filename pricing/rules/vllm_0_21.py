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

from pricing.rules.load_checks import GptOssIntermediateDividesWorld, ValidateFp8BlockShape, ValidateFp8BlockShapeMoe
from pricing.rules.release import Release
from pricing.rules.shared import Layout, align_hybrid_block_size, capture_ceilings
from pricing.rules.vllm_0_10 import in_flight_batches
from pricing.rules.vllm_0_19 import fits_one_request, grown_pages, uniform_page
from pricing.rules.vllm_0_33 import fallback, packed
from pricing.specs import KVCacheSpec, MambaSpec

__all__ = ["LOAD_CHECKS", "RELEASE", "capture_ceilings", "fits_one_request", "group", "in_flight_batches",
           "logged_tokens"]

NAME = "vllm-0.21"


def group_unified_by(specs: list[KVCacheSpec], max_model_len: int, unify, name: str) -> Layout:
    """KV cache groups as vLLM 0.21 and later form them: packed specs first, then the hybrid block
    alignment, then page-uniform groups once `unify` has made the pages one size."""
    if not specs:
        return Layout((), 0, True, "attention-free: no KV cache")
    if any(s.packed for s in specs):
        return packed(specs) or fallback(specs, name)
    if any(isinstance(s, MambaSpec) for s in specs):
        specs = align_hybrid_block_size(specs, max_model_len)
    return uniform_page(specs, unify, name)


def group(specs: list[KVCacheSpec], max_model_len: int) -> Layout:
    """KV cache groups for one rank's caches (in layer order), as vLLM 0.21–0.25 form them (pages grown)."""
    return group_unified_by(specs, max_model_len, grown_pages, NAME)


def logged_tokens(num_blocks: int, layout: Layout, max_concurrency: float, max_model_len: int,
                  context_parallel: int) -> int:
    """int(max_concurrency × max_model_len)."""
    return int(max_concurrency * max_model_len)


# the load-time shape checks (pricing/rules/load_checks.py), in the order vLLM builds the layers; what
# differs between releases is the pack's registry facts fp8_block_fused_mismatch_allowed and
# fp8_moe_block_refinement
LOAD_CHECKS = (GptOssIntermediateDividesWorld(), ValidateFp8BlockShape(), ValidateFp8BlockShapeMoe())

RELEASE = Release("0.21", "0.24.0", "vllm_0_21", sys.modules[__name__], covers=("0.21", "0.25"))
