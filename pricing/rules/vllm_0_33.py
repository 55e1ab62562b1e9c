"""The grouping rules of vLLM 0.33.0 (v1/core/kv_cache_planning.py, vllm-0.33-memory.md §3).

`group(specs)` lays the caches of one rank out as KV cache groups sharing one block pool, in
vLLM's order (groups follow the first appearance of their layers). How many blocks a request
holds in a group is its specs' own law (pricing.specs); this module only combines specs.
"""

from __future__ import annotations

import sys
from math import lcm

from pricing.rules.load_checks import GptOssIntermediateDividesWorld, ValidateFp8BlockShape, ValidateFp8BlockShapeMoe
from pricing.rules.release import Release
from pricing.rules.shared import Group, Layout, align_hybrid_block_size, capture_ceilings
from pricing.specs import KVCacheSpec, MambaSpec
from pricing.units import cdiv, round_up

__all__ = ["LOAD_CHECKS", "RELEASE", "capture_ceilings", "fits_one_request", "group", "in_flight_batches",
           "logged_tokens"]


def _first_appearance(specs: list[KVCacheSpec], key) -> list[list[KVCacheSpec]]:
    buckets: dict = {}
    for s in specs:
        buckets.setdefault(key(s), []).append(s)
    return list(buckets.values())


def _uniform_page(specs: list[KVCacheSpec]) -> Layout:
    """_get_kv_cache_groups_uniform_page_size (§3.2 step 9): buckets of identical specs;
    group_size = the smallest bucket, or the largest when largest < 1.5 × smallest; each bucket
    dealt round-robin into cdiv(len, group_size) groups; short groups padded."""
    buckets = _first_appearance(specs, lambda s: (s.type_key(), s.page_bytes))
    sizes = [len(b) for b in buckets]
    group_size = min(sizes)
    if max(sizes) < 1.5 * min(sizes):
        group_size = max(sizes)
    groups = []
    padding = 0
    for bucket in buckets:
        n = cdiv(len(bucket), group_size)
        for i in range(n):
            members = tuple(bucket[i::n])
            padding += group_size - len(members)
            groups.append(Group(members))
    block = group_size * round_up(specs[0].page_bytes, specs[0].stride_alignment)
    return Layout(tuple(groups), block, True, "uniform page size: groups of "
                  f"{group_size} layers (kv_cache_planning._get_kv_cache_groups_uniform_page_size)", padding)


def _one_group(specs: list[KVCacheSpec], summed: bool, rule: str) -> Layout:
    group = Group(tuple(specs), summed)
    return Layout((group,), sum(round_up(s.page_bytes, s.stride_alignment) for s in specs), True, rule)


def unify_pages(specs: list[KVCacheSpec]) -> list[KVCacheSpec] | None:
    """unify_kv_cache_spec_page_size (§3.2 step 8): recurrent pages are padded to the largest; a
    page that divides the largest grows its block; other non-MLA attention pages are padded;
    anything else cannot be unified."""
    largest = max(s.page_bytes for s in specs)
    out = []
    for s in specs:
        if s.page_bytes == largest:
            out.append(s)
            continue
        unified = s.padded_to(largest) if isinstance(s, MambaSpec) else (s.grown_to(largest) or s.padded_to(largest))
        if unified is None:
            return None
        out.append(unified)
    return out


def packed(specs: list[KVCacheSpec]) -> Layout | None:
    """Block-outermost packing (_get_packed_kv_cache_groups, §3.2 step 7; the layout the
    DeepSeek-V4 backends force): the caches that grow with the context form one group whose block
    holds one page of each; the bounded caches are bucketed by type and dealt round-robin into the
    fewest groups whose pages fit that block. The pool block is the widest group rounded to the lcm
    of the block-stride alignments (_pool_bytes_per_block). None when they cannot be packed."""
    growing = [s for s in specs if s.grows]
    if not growing or len({s.block_tokens for s in growing}) != 1:
        return None
    anchor = sum(s.page_bytes for s in growing)
    groups = []
    for bucket in _first_appearance(specs, lambda s: ("growing",) if s.grows else s.type_key()):
        if bucket[0].grows:
            groups.append(Group(tuple(bucket), True))
            continue
        if max(s.page_bytes for s in bucket) > anchor:
            return None
        n = 1
        while max(sum(s.page_bytes for s in bucket[i::n]) for i in range(n)) > anchor:
            n += 1
        groups += [Group(tuple(bucket[i::n]), True) for i in range(n)]
    stride = lcm(*(s.stride_alignment for s in specs))
    block = round_up(max(g.layer_bytes for g in groups), stride)
    return Layout(tuple(groups), block, True, "block-outermost packing: one block holds a page of every "
                  f"context cache ({anchor:,} bytes, {block:,} with the block-stride alignment {stride}); bounded "
                  "caches packed into it (kv_cache_planning._get_packed_kv_cache_groups)")


def fallback(specs: list[KVCacheSpec], name: str = "vllm-0.33") -> Layout:
    """No rule groups these caches: each stays at its own page, a group of its own."""
    groups = tuple(Group((s,)) for s in specs)
    return Layout(groups, 0, False, f"{name} cannot group these caches: each cache priced at its own page")


def group(specs: list[KVCacheSpec], max_model_len: int) -> Layout:
    """KV cache groups for one rank's caches (in layer order), as vLLM 0.33 forms them."""
    if not specs:
        return Layout((), 0, True, "attention-free: no KV cache")
    if any(s.packed for s in specs):
        return packed(specs) or fallback(specs)
    if any(isinstance(s, MambaSpec) for s in specs):
        specs = align_hybrid_block_size(specs, max_model_len)
    if len({s.type_key() for s in specs}) == 1:
        if len({s.page_bytes for s in specs}) == 1:
            return _one_group(specs, False, "all layers mergeable: one group (kv_cache_planning, "
                              "is_kv_cache_spec_uniform)")
        return _one_group(specs, True, "same type, different sizes: one group of summed pages "
                          "(UniformTypeKVCacheSpecs)")
    unified = unify_pages(specs) if len({s.page_bytes for s in specs}) > 1 else specs
    if unified is None:
        return fallback(specs)
    return _uniform_page(unified)


def in_flight_batches(async_scheduling: bool, pipeline_parallel_size: int = 1) -> int:
    """max_concurrent_batches (config/vllm.py:588-609, vllm-0.33-memory.md §2.3): pp + 1 under
    asynchronous scheduling with the V2 model runner (0.33's default runner), else pp."""
    return pipeline_parallel_size + 1 if async_scheduling else pipeline_parallel_size


def fits_one_request(pool: int, layout: Layout, blocks: int, layer_bytes: int) -> bool:
    """The start-up check (kv_cache_planning, vllm-0.33-memory.md §3.3): the pool less the null
    block holds one request's blocks; caches no rule groups, their own pages."""
    if pool <= 0:
        return False
    if layout.grouped:
        return pool - layout.bytes_per_block >= layout.bytes_per_block * blocks
    return pool >= layer_bytes


def logged_tokens(num_blocks: int, layout: Layout, max_concurrency: float, max_model_len: int,
                  context_parallel: int) -> int:
    """"GPU KV cache size": int(max_concurrency × max_model_len) (kv_cache_utils.update_kv_cache_capacity)."""
    return int(max_concurrency * max_model_len)


# the load-time shape checks (pricing/rules/load_checks.py), in the order vLLM builds the layers; what
# differs between releases is the pack's registry facts fp8_block_fused_mismatch_allowed and
# fp8_moe_block_refinement
LOAD_CHECKS = (GptOssIntermediateDividesWorld(), ValidateFp8BlockShape(), ValidateFp8BlockShapeMoe())

RELEASE = Release("0.33", "0.33.0", "vllm_0_33", sys.modules[__name__], covers=("0.30", "0.33"))
