"""The grouping rules of vLLM 0.33.0 (v1/core/kv_cache_planning.py, vllm-0.33-memory.md §3).

`group(specs)` lays the caches of one rank out as KV cache groups sharing one block pool; the
blocks a request holds in each group, in steady decode and at admission, follow the specs'
max_memory_usage rules (§2.2, §2.3):
  full      cdiv(tokens', block), tokens' = cdiv(tokens, dcp) for DCP-sharded caches
  window    steady:    cdiv(min(window - 1 + 1 + spec tokens, M), block) + 1
            admission: cdiv(min(window - 1 + max_in_flight_tokens, M), block) + 1
  ring      one page for the request's whole life (CircularBufferSpec)
  state     recurrent state: none 1 + K pages, align 2 + K (+ checkpoint), all one per block + K
"""

from __future__ import annotations

from dataclasses import dataclass
from math import lcm

from pricing.kernel.caches import CacheSpec
from pricing.units import cdiv, round_up

RELEASE = "vllm-0.33"


@dataclass(frozen=True)
class Group:
    """One KV cache group: layers that share block ids, and its share of one pool block."""

    kind: str
    spec_type: str
    members: tuple[CacheSpec, ...]
    block_tokens: int
    window: int = 0
    dcp_sharded: bool = True

    @property
    def layers(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.members)

    @property
    def page_bytes(self) -> int:
        """Bytes of this group's block: its layers' pages side by side."""
        return sum(s.page_bytes for s in self.members)

    @property
    def raw_page_bytes(self) -> int:
        return sum(s.raw_page_bytes for s in self.members)


@dataclass(frozen=True)
class Layout:
    """The pool's layout: groups, the pool block (the widest group's block), and the rule used."""

    groups: tuple[Group, ...]
    bytes_per_block: int
    grouped: bool
    rule: str
    padding_layers: int = 0


def _bucket_key(s: CacheSpec):
    if s.kind == "ring":
        return ("ring",)
    return (s.kind, s.spec_type if s.kind == "full" else s.kind, s.window, s.block_tokens, s.dcp_sharded)


def _uniform_page(specs: list[CacheSpec]) -> Layout:
    """_get_kv_cache_groups_uniform_page_size (§3.2 step 9): buckets of identical specs;
    group_size = the smallest bucket, or the largest when largest < 1.5 × smallest; each bucket
    dealt round-robin into cdiv(len, group_size) groups; short groups padded."""
    buckets: dict = {}
    for s in specs:
        buckets.setdefault(_bucket_key(s), []).append(s)
    sizes = [len(b) for b in buckets.values()]
    group_size = min(sizes)
    if max(sizes) < 1.5 * min(sizes):
        group_size = max(sizes)
    groups = []
    padding = 0
    for bucket in buckets.values():
        n = cdiv(len(bucket), group_size)
        for i in range(n):
            members = tuple(bucket[i::n])
            padding += group_size - len(members)
            first = members[0]
            groups.append(Group(first.kind, first.spec_type, members, first.block_tokens, first.window,
                                first.dcp_sharded))
    page = specs[0].page_bytes
    return Layout(tuple(groups), group_size * page, True, "uniform page size: groups of "
                  f"{group_size} layers (kv_cache_planning._get_kv_cache_groups_uniform_page_size)", padding)


def _one_group(specs: list[CacheSpec], rule: str) -> Layout:
    first = specs[0]
    group = Group(first.kind, first.spec_type, tuple(specs), first.block_tokens, first.window, first.dcp_sharded)
    return Layout((group,), group.page_bytes, True, rule)


def _unify_pages(specs: list[CacheSpec]) -> list[CacheSpec] | None:
    """unify_kv_cache_spec_page_size (§3.2 step 8): a page that divides the largest grows its
    block; recurrent and non-MLA attention pages are padded; anything else cannot be unified."""
    from dataclasses import replace

    largest = max(s.page_bytes for s in specs)
    out = []
    for s in specs:
        if s.page_bytes == largest:
            out.append(s)
        elif s.kind in ("full", "window") and largest % s.page_bytes == 0:
            factor = largest // s.page_bytes
            out.append(replace(s, block_tokens=s.block_tokens * factor, page_bytes=largest,
                               raw_page_bytes=s.raw_page_bytes * factor))
        elif s.kind == "state" or not s.spec_type.startswith("mla"):
            out.append(replace(s, page_bytes=largest))
        else:
            return None
    return out


def _packed(specs: list[CacheSpec]) -> Layout | None:
    """Block-outermost packing (§3.2 step 7, the layout the DeepSeek-V4 backends force): the
    caches that grow with the context form one group whose block holds one page of each; the
    bounded caches (window rings, fixed rings) are bucketed by kind and dealt round-robin into
    the fewest groups whose pages fit that block. None when they cannot be packed."""
    growing = [s for s in specs if s.kind == "full"]
    bounded = [s for s in specs if s.kind != "full"]
    if not growing or len({s.block_tokens for s in growing}) != 1:
        return None
    align = lcm(*(s.alignment for s in growing))
    token_group = Group("full", "packed", tuple(growing), growing[0].block_tokens, 0, growing[0].dcp_sharded)
    block = round_up(token_group.page_bytes, align)
    groups = [token_group]
    buckets: dict = {}
    for s in bounded:
        buckets.setdefault(_bucket_key(s), []).append(s)
    for bucket in buckets.values():
        if max(s.page_bytes for s in bucket) > block:
            return None
        n = 1
        while max(sum(s.page_bytes for s in bucket[i::n]) for i in range(n)) > block:
            n += 1
        for i in range(n):
            members = tuple(bucket[i::n])
            first = members[0]
            groups.append(Group(first.kind, first.spec_type, members, first.block_tokens, first.window, False))
    return Layout(tuple(groups), block, True, "block-outermost packing: one block holds a page of every "
                  f"context cache ({block} bytes); bounded caches packed into it (kv_cache_planning packed groups)")


def fallback(specs: list[CacheSpec]) -> Layout:
    """No rule groups these caches: each stays at its own page, a group of its own."""
    groups = tuple(Group(s.kind, s.spec_type, (s,), s.block_tokens, s.window, s.dcp_sharded) for s in specs)
    return Layout(groups, 0, False, f"{RELEASE} cannot group these caches: each cache priced at its own page")


def align_hybrid_block_size(specs: list[CacheSpec]) -> list[CacheSpec]:
    """_align_hybrid_block_size (platforms/interface.py:940-1130, vllm-0.33-memory.md §4.2): the
    attention block grows until one attention page covers one recurrent page, and the recurrent
    page is padded to it, so both share one pool.

      a1 = attention bytes per token, m = the largest recurrent page, align = kernel alignment
      none / align   block = align' × cdiv(m, align' × a1), align' = lcm(align, checkpoint) in align mode
      all            block = c × cdiv(cdiv(m, a1), c), c = lcm(mamba chunk, align)
    The block only grows (a larger --block-size stays). The recurrent block is max_model_len in
    mode none (one state covers the whole sequence), the attention block otherwise.
    """
    from dataclasses import replace

    states = [s for s in specs if s.kind == "state"]
    attention = [s for s in specs if s.kind == "full"]
    if not states or not attention:
        return specs
    h = states[0].hybrid
    a1 = int(max(s.per_token for s in attention))
    m = max(s.raw_page_bytes for s in states)
    if h.mode == "all":
        chunk = lcm(h.chunk, h.kernel_align)
        block = chunk * cdiv(cdiv(m, a1), chunk)
    else:
        align = lcm(h.kernel_align, h.checkpoint_align) if h.mode == "align" else h.kernel_align
        block = align * cdiv(m, align * a1)
    block = max(block, max(s.block_tokens for s in attention))
    state_block = h.max_model_len if h.mode == "none" else block
    out = []
    for s in specs:
        if s.kind == "full":
            page = int(block * s.per_token)
            out.append(replace(s, block_tokens=block, page_bytes=page, raw_page_bytes=page))
        elif s.kind == "state":
            out.append(replace(s, block_tokens=state_block, page_bytes=block * a1))
        else:
            out.append(s)
    return out


def group(specs: list[CacheSpec]) -> Layout:
    """KV cache groups for one rank's caches, as vLLM 0.33 forms them."""
    if not specs:
        return Layout((), 0, True, "attention-free: no KV cache")
    if any(s.packed for s in specs):
        return _packed(specs) or fallback(specs)
    if any(s.kind == "state" for s in specs):
        specs = align_hybrid_block_size(specs)
    kinds = {_bucket_key(s) for s in specs}
    if len(kinds) == 1:
        if len({s.page_bytes for s in specs}) == 1:
            return _one_group(specs, "all layers mergeable: one group (kv_cache_planning, is_kv_cache_spec_uniform)")
        return _one_group(specs, "same type, different sizes: one group of summed pages (UniformTypeKVCacheSpecs)")
    unified = _unify_pages(specs) if len({s.page_bytes for s in specs}) > 1 else specs
    if unified is None:
        return fallback(specs)
    return _uniform_page(unified)


# -- what a request holds -------------------------------------------------------------------------

def full_blocks(g: Group, tokens: int, dcp: int) -> int:
    held = cdiv(tokens, dcp) if (g.dcp_sharded and dcp > 1) else tokens
    return cdiv(held, g.block_tokens)


def window_blocks(g: Group, in_flight: int, max_model_len: int) -> int:
    """SlidingWindowSpec: cdiv(min(window - 1 + in-flight tokens, M), block) + 1."""
    return cdiv(min(g.window - 1 + in_flight, max_model_len), g.block_tokens) + 1


def state_blocks(spec: CacheSpec, mode: str, spec_tokens: int, tokens: int) -> int:
    """MambaSpec pages per request: none 1 + K; align 2 + K + checkpoint pages; all one per block + K."""
    if mode == "none":
        return 1 + spec_tokens
    if mode == "align":
        return 2 + spec_tokens + spec.state_blocks_extra
    return cdiv(tokens, spec.block_tokens) + spec_tokens


def blocks(g: Group, *, tokens: int, max_model_len: int, dcp: int, in_flight: int, mode: str, spec_tokens: int
           ) -> int:
    """Blocks a request of `tokens` holds in group `g` with `in_flight` tokens scheduled."""
    if g.kind == "full":
        return full_blocks(g, tokens, dcp)
    if g.kind == "window":
        return window_blocks(g, in_flight, max_model_len)
    if g.kind == "ring":
        return 1
    return max(state_blocks(s, mode, spec_tokens, tokens) for s in g.members)
