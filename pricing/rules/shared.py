"""What every rules pack shares: the KV cache groups and the pool's layout they form, the hybrid
block alignment, and the CUDA-graph capture ceilings on a release's capture-size grid.

A pack (one module per vLLM release, `RulesPack` in pricing/rules/release.py) combines cache specs
(pricing.specs) into these types; the kernel reads them. Nothing here names a release.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import lcm

from pricing.specs import FullAttentionSpec, KVCacheSpec, MambaSpec, Request
from pricing.units import cdiv, round_up

_NOT_LAW = frozenset({"layer", "name", "page_bytes", "raw_page_bytes"})  # a spec's fields its blocks() never reads


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
        for s in self.members:
            key = (type(s), *(v for k, v in s.__dict__.items() if k not in _NOT_LAW))
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
    full = [round_up(s, q) for s in ordered if round_up(s, q) <= min(max_num_seqs * q, mixed)]
    decode = max(full) if full else 0
    return Ceilings(mixed, decode, ordered)
