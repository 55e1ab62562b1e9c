"""What every rules pack shares: the KV cache groups and the pool's layout they form, the hybrid
block alignment, the CUDA-graph capture ceilings on a release's capture-size grid, and the steps a
pack composes: the grouping skeleton (`Grouping`, written once, its steps as parameters), the
start-up checks, the in-flight batches and the logged capacity, each a law of some vLLM line.

A pack (one module per vLLM release, `RulesPack` in pricing/rules/release.py) picks among these
steps and names its parameters; no pack imports another. Nothing here names a release.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from math import lcm
from operator import attrgetter

from pricing.specs import FullAttentionSpec, KVCacheSpec, MambaSpec, Request
from pricing.units import cdiv, round_up

_NOT_LAW = frozenset({"layer", "name", "page_bytes", "raw_page_bytes"})  # a spec's fields its blocks() never reads


def _law_of(kind: type) -> Callable:
    """A function giving the values of a spec class's fields but `_NOT_LAW` (what its blocks()
    depends on; every spec class has several)."""
    return attrgetter(*(f.name for f in fields(kind) if f.name not in _NOT_LAW))


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
        laws = {}
        read = {}  # each member class's `_law_of`, made once a group
        for s in self.members:
            kind = type(s)
            law = read.get(kind) or read.setdefault(kind, _law_of(kind))
            key = (kind, law(s))
            if key not in laws:
                laws[key] = replace(s, layer="", name="", page_bytes=0, raw_page_bytes=0)
        object.__setattr__(self, "_laws", tuple(laws.values()))
        object.__setattr__(self, "_layer_bytes", sum(s.page_bytes for s in self.members))  # a group never changes

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
        return self._layer_bytes

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


def align_hybrid_block_size(specs: list[KVCacheSpec], max_model_len: int,
                            whole_sequence_state: bool = True) -> list[KVCacheSpec]:
    """_align_hybrid_block_size (platforms/interface.py:940-1130, vllm-0.33-memory.md §4.2): the
    attention block grows until one attention page covers one recurrent page, and the recurrent
    page is padded to it, so both share one pool.

      a1 = attention bytes per token, m = the largest recurrent page, align = kernel alignment
      none / align   block = align' × cdiv(m, align' × a1), align' = lcm(align, checkpoint) in align mode,
                     rounded up to a multiple of every backend's smallest kernel block
      all            block = c × cdiv(cdiv(m, a1), c), c = lcm(mamba chunk, align)
    The block only grows (a larger --block-size stays). The recurrent block is max_model_len in
    mode none (one state covers the whole sequence; `whole_sequence_state`, from vLLM 0.12's
    mamba_block_size), the attention block otherwise (and in mode none before 0.12).
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
    state_block = max_model_len if mode == "none" and whole_sequence_state else block
    out = []
    for s in specs:
        if isinstance(s, MambaSpec):
            out.append(replace(s, block_tokens=state_block, page_bytes=block * a1))
        elif isinstance(s, FullAttentionSpec):
            out.append(s.at_block(block))
        else:
            out.append(s)
    return out



@dataclass(frozen=True)
class Ceilings:
    mixed: int  # largest PIECEWISE capture size (tokens)
    decode: int  # largest uniform-decode FULL capture size (tokens)
    sizes: tuple[int, ...]


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
    # the largest size rounded up to 1 + K within the limit: round_up grows with the size, so the first from the top
    limit = min(max_num_seqs * q, mixed)
    decode = next((r for r in (round_up(s, q) for s in reversed(ordered)) if r <= limit), 0)
    return Ceilings(mixed, decode, ordered)


# ---- grouping steps ----------------------------------------------------------------------------

def first_appearance(specs: list[KVCacheSpec], key) -> list[list[KVCacheSpec]]:
    """The specs bucketed by `key`, buckets in order of their first member."""
    out: dict = {}
    for s in specs:
        out.setdefault(key(s), []).append(s)
    return list(out.values())


def buckets(specs: list[KVCacheSpec]) -> list[list[KVCacheSpec]]:
    """The layers of each distinct spec, in order of first appearance (same_type_layers)."""
    return first_appearance(specs, lambda s: (s.type_key(), s.page_bytes))


def pool_page(s: KVCacheSpec, stride_aligned: bool) -> int:
    """A layer's page in the pool block: rounded up to its block-stride alignment where the release
    does (_pool_bytes_per_block, vLLM 0.33), its own page before."""
    return round_up(s.page_bytes, s.stride_alignment) if stride_aligned else s.page_bytes


def one_group(specs: list[KVCacheSpec], rule: str, summed: bool = False, stride_aligned: bool = False) -> Layout:
    """All layers in one group (is_kv_cache_spec_uniform; `summed`: UniformTypeKVCacheSpecs, one type
    with different pages); the pool block holds every layer's page."""
    return Layout((Group(tuple(specs), summed),), sum(pool_page(s, stride_aligned) for s in specs), True, rule)


def dealt(specs: list[KVCacheSpec], group_size: int, rule: str, stride_aligned: bool = False) -> Layout:
    """Each spec's layers dealt round-robin into cdiv(count, group_size) groups, short ones padded
    (_get_kv_cache_groups_uniform_page_size: layers[i::num_groups]); the pool block is the group
    size × the (unified) page."""
    groups, padding = [], 0
    for bucket in buckets(specs):
        n = cdiv(len(bucket), group_size)
        for i in range(n):
            members = tuple(bucket[i::n])
            padding += group_size - len(members)
            groups.append(Group(members))
    return Layout(tuple(groups), group_size * pool_page(specs[0], stride_aligned), True, rule, padding)


def cannot_group(specs: list[KVCacheSpec], name: str) -> Layout:
    """vLLM raises NotImplementedError: each cache priced at its own page, as a group of its own."""
    return Layout(tuple(Group((s,)) for s in specs), 0, False,
                  f"{name} cannot group these caches (pages differ: NotImplementedError): each cache priced at its "
                  "own page")


def fallback(specs: list[KVCacheSpec], name: str) -> Layout:
    """No rule groups these caches: each stays at its own page, a group of its own."""
    groups = tuple(Group((s,)) for s in specs)
    return Layout(groups, 0, False, f"{name} cannot group these caches: each cache priced at its own page")


def grown_pages(specs: list[KVCacheSpec]) -> list[KVCacheSpec] | None:
    """unify_kv_cache_spec_page_size (vLLM 0.12–0.25): a page dividing the largest grows its block;
    None otherwise."""
    largest = max(s.page_bytes for s in specs)
    out = [s if s.page_bytes == largest else s.grown_to(largest) for s in specs]
    return None if any(s is None for s in out) else out


def unify_pages(specs: list[KVCacheSpec]) -> list[KVCacheSpec] | None:
    """unify_kv_cache_spec_page_size (vLLM 0.26 on; vllm-0.33-memory.md §3.2 step 8): recurrent pages
    are padded to the largest; a page that divides the largest grows its block; other non-MLA
    attention pages are padded; anything else cannot be unified."""
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
    """Block-outermost packing (_get_packed_kv_cache_groups, vllm-0.33-memory.md §3.2 step 7, from
    vLLM 0.20; the layout the DeepSeek-V4 backends force): the caches that grow with the context
    form one group whose block holds one page of each; the bounded caches are bucketed by type and
    dealt round-robin into the fewest groups whose pages fit that block. The pool block is the
    widest group rounded to the lcm of the block-stride alignments (_pool_bytes_per_block). None
    when they cannot be packed."""
    growing = [s for s in specs if s.grows]
    if not growing or len({s.block_tokens for s in growing}) != 1:
        return None
    anchor = sum(s.page_bytes for s in growing)
    groups = []
    for bucket in first_appearance(specs, lambda s: ("growing",) if s.grows else s.type_key()):
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


def group_size(specs: list[KVCacheSpec], ratio: float | None) -> int:
    """_get_kv_cache_groups_uniform_page_size: the smallest layer count among the buckets, or the
    largest when it is below `ratio` × the smallest (no `ratio`: always the smallest, vLLM 0.11)."""
    sizes = [len(b) for b in buckets(specs)]
    if ratio is not None and max(sizes) < ratio * min(sizes):
        return max(sizes)
    return min(sizes)


@dataclass(frozen=True)
class Grouping:
    """How a vLLM line forms KV cache groups from one rank's caches (in layer order): the skeleton
    (get_kv_cache_groups) written once, the steps that changed between lines as parameters.

      attention-free → no groups; packed caches → block-outermost packing (`packs`, from 0.20);
      recurrent layers → the hybrid block alignment; one spec → one group; one type → one summed
      group (UniformTypeKVCacheSpecs); otherwise pages made one size by `unify` (None: pages that
      differ cannot be grouped, NotImplementedError) and each spec's layers dealt round-robin into
      groups of group_size(`ratio`).

    name             the pack, in messages ("vllm-0.19")
    module           the vLLM module the rules are cited from ("kv_cache_utils"; "kv_cache_planning" in 0.33)
    whole_sequence_state   align_hybrid_block_size's (vLLM 0.12's mamba_block_size)
    stride_aligned   the pool block rounds each page up to its block-stride alignment (0.33)
    dealt_says       the wording of the dealt rule after "groups of N layers" ("" in 0.33)
    cannot_unify     the layout when `unify` fails (cannot_group; fallback in 0.33)
    """

    name: str
    module: str = "kv_cache_utils"
    unify: Callable[[list[KVCacheSpec]], list[KVCacheSpec] | None] | None = None
    ratio: float | None = None
    packs: bool = False
    whole_sequence_state: bool = True
    stride_aligned: bool = False
    dealt_says: str = ", dealt round-robin"
    cannot_unify: Callable[[list[KVCacheSpec], str], Layout] = cannot_group

    def group(self, specs: list[KVCacheSpec], max_model_len: int) -> Layout:
        """KV cache groups for one rank's caches (in layer order), as this vLLM line forms them."""
        if not specs:
            return Layout((), 0, True, "attention-free: no KV cache")
        if self.packs and any(s.packed for s in specs):
            return packed(specs) or fallback(specs, self.name)
        if any(isinstance(s, MambaSpec) for s in specs):
            specs = align_hybrid_block_size(specs, max_model_len, self.whole_sequence_state)
        if len({s.type_key() for s in specs}) == 1:
            if len({s.page_bytes for s in specs}) == 1:
                return one_group(specs, f"all layers mergeable: one group ({self.module}, is_kv_cache_spec_uniform)",
                                 stride_aligned=self.stride_aligned)
            return one_group(specs, "same type, different sizes: one group of summed pages (UniformTypeKVCacheSpecs)",
                             summed=True, stride_aligned=self.stride_aligned)
        if len({s.page_bytes for s in specs}) > 1:
            unified = self.unify(specs) if self.unify is not None else None
            if unified is None:
                return self.cannot_unify(specs, self.name)
            specs = unified
        size = group_size(specs, self.ratio)
        return dealt(specs, size, f"uniform page size: groups of {size} layers{self.dealt_says} "
                     f"({self.module}._get_kv_cache_groups_uniform_page_size)", self.stride_aligned)


# ---- the start-up check: does the pool hold one request at max_model_len -----------------------

def fits_layer_by_layer(pool: int, layout: Layout, blocks: int, layer_bytes: int) -> bool:
    """check_enough_kv_cache_memory (vLLM 0.10–0.13): Σ of every layer's max_memory_usage_bytes ≤
    the pool, before grouping."""
    return pool > 0 and layer_bytes <= pool


def fits_by_groups(pool: int, layout: Layout, blocks: int, layer_bytes: int) -> bool:
    """_check_enough_kv_cache_memory(_max_memory_usage_bytes_from_groups) (vLLM 0.14–0.28): one
    group, its layers' own bytes; several, the pool block × Σ blocks; no null block held back."""
    if pool <= 0:
        return False
    if not layout.grouped or len(layout.groups) == 1:
        return layer_bytes <= pool
    return layout.bytes_per_block * blocks <= pool


def fits_holding_null_block(pool: int, layout: Layout, blocks: int, layer_bytes: int) -> bool:
    """The start-up check (kv_cache_planning, vllm-0.33-memory.md §3.3; from vLLM 0.29): the pool
    less the null block holds one request's blocks; caches no rule groups, their own pages."""
    if pool <= 0:
        return False
    if layout.grouped:
        return pool - layout.bytes_per_block >= layout.bytes_per_block * blocks
    return pool >= layer_bytes


# ---- max_concurrent_batches ----------------------------------------------------------------------

def one_batch(async_scheduling: bool, pipeline_parallel_size: int = 1) -> int:
    """Sliding windows reserve for one batch of max_num_batched_tokens (vLLM 0.10–0.25: no
    max_in_flight_tokens)."""
    return 1


def pipeline_plus_async(async_scheduling: bool, pipeline_parallel_size: int = 1) -> int:
    """max_concurrent_batches (config/vllm.py:588-609, vllm-0.33-memory.md §2.3; from 0.26): pp + 1
    under asynchronous scheduling (the V2 model runner's count), else pp."""
    return pipeline_parallel_size + 1 if async_scheduling else pipeline_parallel_size


# ---- "GPU KV cache size: N tokens" ---------------------------------------------------------------

def logged_blocks_one_group(num_blocks: int, layout: Layout, max_concurrency: float, max_model_len: int,
                            context_parallel: int) -> int:
    """vLLM 0.10: num_blocks × block × dcp for one group; num_blocks // groups × the smallest block
    otherwise."""
    if len(layout.groups) == 1:
        return num_blocks * layout.groups[0].block_tokens * context_parallel
    return num_blocks // len(layout.groups) * min(g.block_tokens for g in layout.groups)


def logged_blocks_per_group(num_blocks: int, layout: Layout, max_concurrency: float, max_model_len: int,
                            context_parallel: int) -> int:
    """vLLM 0.11–0.20 (get_kv_cache_config_from_groups, _report_kv_cache_config): num_blocks // groups ×
    the smallest block × the context-parallel size."""
    return num_blocks // len(layout.groups) * min(g.block_tokens for g in layout.groups) * context_parallel


def logged_max_concurrency(num_blocks: int, layout: Layout, max_concurrency: float, max_model_len: int,
                           context_parallel: int) -> int:
    """vLLM 0.21 on (kv_cache_utils.update_kv_cache_capacity): int(max_concurrency × max_model_len)."""
    return int(max_concurrency * max_model_len)
