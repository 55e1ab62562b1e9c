"""The grouping rules of vLLM 0.33.0 (v1/core/kv_cache_planning.py, vllm-0.33-memory.md §3).

`group(specs)` lays the caches of one rank out as KV cache groups sharing one block pool, in
vLLM's order (groups follow the first appearance of their layers). How many blocks a request
holds in a group is its specs' own law (pricing.specs); this module only combines specs.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from functools import lru_cache
from math import lcm

from pricing.rules.release import Release
from pricing.specs import FullAttentionSpec, KVCacheSpec, MambaSpec, Request
from pricing.units import cdiv, round_up


@dataclass(frozen=True)
class Group:
    """One KV cache group: layers that share block ids.

    summed   vLLM's UniformTypeKVCacheSpecs (layers of one type with different pages, or a packed
             group): the group's page_size_bytes is the sum of its layers' pages; otherwise the
             group's spec is one layer's and so is its page.
    """

    members: tuple[KVCacheSpec, ...]
    summed: bool = False

    def __post_init__(self):
        # the distinct laws among the members (what blocks() depends on: not the layer or the page)
        laws = {replace(s, layer="", name="", page_bytes=0, raw_page_bytes=0): None for s in self.members}
        object.__setattr__(self, "_laws", tuple(laws))

    @property
    def spec(self) -> KVCacheSpec:
        return self.members[0]

    @property
    def vllm_class(self) -> str:
        return "UniformTypeKVCacheSpecs" if self.summed else self.spec.vllm_class

    @property
    def layers(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.members)

    @property
    def block_tokens(self) -> int:
        return self.spec.block_tokens

    @property
    def page_bytes(self) -> int:
        """vLLM's page_size_bytes of the group's spec."""
        return self.layer_bytes if self.summed else self.spec.page_bytes

    @property
    def layer_bytes(self) -> int:
        """This group's layers' pages side by side: its share of one pool block."""
        return sum(s.page_bytes for s in self.members)

    @property
    def raw_page_bytes(self) -> int:
        return sum(s.raw_page_bytes for s in self.members)

    @property
    def grows(self) -> bool:
        return self.spec.grows

    def blocks(self, r: Request) -> int:
        """Blocks a request holds in this group (UniformTypeKVCacheSpecs: the most any layer needs)."""
        return max(s.blocks(r) for s in self._laws)


@dataclass(frozen=True)
class Layout:
    """The pool's layout: groups in vLLM's order, the pool block, and the rule used."""

    groups: tuple[Group, ...]
    bytes_per_block: int
    grouped: bool
    rule: str
    padding_layers: int = 0

    def __post_init__(self):
        object.__setattr__(self, "_held", {})  # blocks() by request: a layout never changes

    def blocks(self, r: Request) -> int:
        """Σ over the groups of the blocks request `r` holds (kv_cache_utils blocks_per_request)."""
        held = self._held.get(r)
        if held is None:
            held = self._held[r] = sum(g.blocks(r) for g in self.groups)
        return held


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


def _unify_pages(specs: list[KVCacheSpec]) -> list[KVCacheSpec] | None:
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


def _packed(specs: list[KVCacheSpec]) -> Layout | None:
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


def fallback(specs: list[KVCacheSpec]) -> Layout:
    """No rule groups these caches: each stays at its own page, a group of its own."""
    groups = tuple(Group((s,)) for s in specs)
    return Layout(groups, 0, False, "vllm-0.33 cannot group these caches: each cache priced at its own page")


def align_hybrid_block_size(specs: list[KVCacheSpec], max_model_len: int) -> list[KVCacheSpec]:
    """_align_hybrid_block_size (platforms/interface.py:940-1130, vllm-0.33-memory.md §4.2): the
    attention block grows until one attention page covers one recurrent page, and the recurrent
    page is padded to it, so both share one pool.

      a1 = attention bytes per token, m = the largest recurrent page, align = kernel alignment
      none / align   block = align' × cdiv(m, align' × a1), align' = lcm(align, checkpoint) in align mode,
                     rounded up to a multiple of every backend's smallest kernel block
      all            block = c × cdiv(cdiv(m, a1), c), c = lcm(mamba chunk, align)
    The block only grows (a larger --block-size stays). The recurrent block is max_model_len in
    mode none (one state covers the whole sequence), the attention block otherwise.
    """
    states = [s for s in specs if isinstance(s, MambaSpec)]
    attention = [s for s in specs if isinstance(s, FullAttentionSpec)]
    if not states or not attention:
        return specs
    h = states[0].hybrid
    mode = states[0].mode
    a1 = int(max(s.per_token for s in attention))
    m = max(s.raw_page_bytes for s in states)
    if mode == "all":
        chunk = lcm(h.chunk, h.kernel_align)
        block = chunk * cdiv(cdiv(m, a1), chunk)
    else:
        align = lcm(h.kernel_align, h.checkpoint_align) if mode == "align" else h.kernel_align
        block = round_up(align * cdiv(m, align * a1), h.kernel_multiple)
    block = max(block, max(s.block_tokens for s in attention))
    state_block = max_model_len if mode == "none" else block
    out = []
    for s in specs:
        if isinstance(s, MambaSpec):
            out.append(replace(s, block_tokens=state_block, page_bytes=block * a1))
        elif isinstance(s, FullAttentionSpec):
            out.append(s.at_block(block))
        else:
            out.append(s)
    return out


def group(specs: list[KVCacheSpec], max_model_len: int) -> Layout:
    """KV cache groups for one rank's caches (in layer order), as vLLM 0.33 forms them."""
    if not specs:
        return Layout((), 0, True, "attention-free: no KV cache")
    if any(s.packed for s in specs):
        return _packed(specs) or fallback(specs)
    if any(isinstance(s, MambaSpec) for s in specs):
        specs = align_hybrid_block_size(specs, max_model_len)
    if len({s.type_key() for s in specs}) == 1:
        if len({s.page_bytes for s in specs}) == 1:
            return _one_group(specs, False, "all layers mergeable: one group (kv_cache_planning, "
                              "is_kv_cache_spec_uniform)")
        return _one_group(specs, True, "same type, different sizes: one group of summed pages "
                          "(UniformTypeKVCacheSpecs)")
    unified = _unify_pages(specs) if len({s.page_bytes for s in specs}) > 1 else specs
    if unified is None:
        return fallback(specs)
    return _uniform_page(unified)


def in_flight_batches(async_scheduling: bool, pipeline_parallel_size: int = 1) -> int:
    """max_concurrent_batches (config/vllm.py:588-609, vllm-0.33-memory.md §2.3): pp + 1 under
    asynchronous scheduling with the V2 model runner (0.33's default runner), else pp."""
    return pipeline_parallel_size + 1 if async_scheduling else pipeline_parallel_size


@dataclass(frozen=True)
class Ceilings:
    mixed: int  # largest PIECEWISE capture size (tokens)
    decode: int  # largest uniform-decode FULL capture size (tokens)
    sizes: tuple[int, ...]


@lru_cache(maxsize=4096)
def capture_ceilings(max_num_seqs: int, max_num_batched_tokens: int, spec_tokens: int, default_max: int,
                     grid: tuple[tuple[int, ...], int, int, int]) -> Ceilings:
    """CUDA-graph capture sizes (config/vllm.py:2398-2640, vllm-0.33-memory.md §9.3) on the
    release's grid (first sizes, step up to `until`, then `large_step`): the ceiling is
    min(max_num_seqs × (1 + K) × 2, default_max, max_num_batched_tokens); the uniform-decode sizes
    are request counts of the grid times 1 + K."""
    first, step, until, large_step = grid
    q = 1 + spec_tokens
    ceiling = min(max_num_seqs * q * 2, default_max, max_num_batched_tokens)
    base = list(first) + list(range(step, min(ceiling + 1, until), step)) + list(range(until, ceiling + 1, large_step))
    sizes = {s for s in base if s <= ceiling}
    if max_num_batched_tokens <= ceiling:
        sizes.add(max_num_batched_tokens)
    if q > 1:
        counts = list(first) + list(range(step, until, step)) + list(
            range(until, min(max_num_seqs, default_max) + 1, large_step))
        counts.append(max_num_seqs)
        decode_sizes = {n * q for n in counts if n <= min(max_num_seqs, default_max) and n * q <= ceiling}
    else:
        decode_sizes = {max_num_seqs} if max_num_seqs <= ceiling else set()
    sizes |= {s for s in decode_sizes if s <= max_num_batched_tokens}
    ordered = tuple(sorted(sizes))
    mixed = ordered[-1] if ordered else 0
    full = [round_up(s, q) for s in ordered if round_up(s, q) <= min(max_num_seqs * q, mixed)]
    decode = max(full) if full else 0
    return Ceilings(mixed, decode, ordered)


RELEASE = Release("0.33", "0.33.0", "vllm_0_33", sys.modules[__name__])
