"""KV cache specs: one class per cache kind, as vLLM 0.33's v1/kv_cache_interface.py has them
(vllm-0.33-memory.md §2). A spec is one cache of one layer on one rank; it answers what one page
of it is, how many blocks a request holds in it (steady decode and at admission: the caller says
how many tokens are in flight), and which other specs it merges with into one KV cache group.

This package sits below both the kernel (which builds specs from the model graph) and the rules
packs (which group them): it imports neither.

    FullAttentionSpec          cdiv(tokens', block), tokens' = cdiv(tokens, dcp) when DCP-sharded
    MLAAttentionSpec           a full-attention latent cache (one head); compressed caches state
                               tokens per record (tokens_per_state)
    SlidingWindowSpec          cdiv(min(window - 1 + extra + in flight, M), block) + 1
    SlidingWindowMLASpec       the same for latent records (DeepSeek-V4 rings, V4 compressor states)
    ChunkedLocalAttentionSpec  cdiv(min(chunk + in flight, M), block)
    MambaSpec                  recurrent state: none 1 + K pages, align 2 + K, all one per block + K
    CircularBufferSpec         one page for the request's whole life (block tokens = ring rows)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import ClassVar

from pricing.units import cdiv


@dataclass(frozen=True)
class Request:
    """What the blocks one request holds depend on.

    tokens         the context the request holds
    in_flight      tokens scheduled but not yet computed: 1 + K in steady decode, the release's
                   max_in_flight_tokens at admission
    """

    tokens: int
    max_model_len: int
    in_flight: int
    dcp: int = 1


@dataclass(frozen=True)
class KVCacheSpec:
    """One cache of one layer on one rank.

    page_bytes       vLLM's page_size_bytes: one page as allocated (padding included)
    raw_page_bytes   vLLM's real_page_size_bytes: the records of one page, before padding
    per_token        record bytes per context token (caches whose page scales with the block)
    alignment        pages are padded to a multiple of this (block-outermost pools round to it)
    stride_alignment vLLM's block_stride_alignment, in bytes (1: none)
    packed           the backend forces the block-outermost layout (DeepSeek-V4)
    """

    layer: str
    name: str
    block_tokens: int
    page_bytes: int
    raw_page_bytes: int
    per_token: Fraction = Fraction(0)
    drafter: bool = False
    alignment: int = 1
    stride_alignment: int = 1
    packed: bool = False

    vllm_class: ClassVar[str] = "KVCacheSpec"
    grows: ClassVar[bool] = False  # a request's blocks grow with its context
    prefix_cacheable: ClassVar[bool] = True

    @property
    def id(self) -> str:
        return f"{self.layer}.{self.name}"

    def blocks(self, r: Request) -> int:
        raise NotImplementedError

    def type_key(self) -> tuple:
        """Specs with equal keys are one type (vLLM: is_uniform_with_collection); with equal pages
        too, they merge into one spec (vLLM: merge)."""
        return (self.vllm_class, self.block_tokens)

    def at_layer(self, layer: str) -> KVCacheSpec:
        """This cache on another layer: every field the same but `layer`. No spec class works a
        field out in __init__, so the fields are copied as they are (a model's every layer asks
        for one, at every cache layout worked out: three times cheaper than `replace`)."""
        spec = object.__new__(type(self))
        fields = spec.__dict__
        fields.update(self.__dict__)
        fields["layer"] = layer
        return spec

    def at_block(self, block_tokens: int) -> KVCacheSpec:
        """This cache with `block_tokens` per page (the page scales with its records)."""
        page = int(block_tokens * self.per_token)
        return replace(self, block_tokens=block_tokens, page_bytes=page, raw_page_bytes=page)

    def padded_to(self, page_bytes: int) -> KVCacheSpec | None:
        """This cache's page padded to `page_bytes`, or None when vLLM cannot pad it."""
        return None

    def grown_to(self, page_bytes: int) -> KVCacheSpec | None:
        """unify_kv_cache_spec_page_size: a page that divides `page_bytes` takes more tokens per block."""
        if page_bytes % self.page_bytes:
            return None
        factor = page_bytes // self.page_bytes
        return replace(self, block_tokens=self.block_tokens * factor, page_bytes=page_bytes,
                       raw_page_bytes=self.raw_page_bytes * factor)


@dataclass(frozen=True)
class FullAttentionSpec(KVCacheSpec):
    """A cache that grows with the context: cdiv(tokens', block) blocks (kv_cache_interface.py
    FullAttentionSpec.max_memory_usage_bytes); DCP shards the tokens across its group."""

    dcp_sharded: bool = True

    vllm_class: ClassVar[str] = "FullAttentionSpec"
    grows: ClassVar[bool] = True

    def blocks(self, r: Request) -> int:
        held = cdiv(r.tokens, r.dcp) if (self.dcp_sharded and r.dcp > 1) else r.tokens
        return cdiv(held, self.block_tokens)

    def type_key(self) -> tuple:
        return (self.vllm_class, self.block_tokens, self.dcp_sharded)

    def padded_to(self, page_bytes: int) -> KVCacheSpec | None:
        return replace(self, page_bytes=page_bytes)


@dataclass(frozen=True)
class MLAAttentionSpec(FullAttentionSpec):
    """A latent (MLA) cache: one head no tensor parallelism divides. A compressed cache stores one
    record per `tokens_per_state` context tokens (DeepSeek-V4's compressed and indexer caches)."""

    tokens_per_state: int = 1

    vllm_class: ClassVar[str] = "MLAAttentionSpec"

    def padded_to(self, page_bytes: int) -> KVCacheSpec | None:
        return None  # unify_kv_cache_spec_page_size pads no MLA page


@dataclass(frozen=True)
class SlidingWindowSpec(KVCacheSpec):
    """A ring bounded by `window` tokens: cdiv(min(window - 1 + extra + in flight, M), block) + 1
    blocks, the +1 because the window may start mid-block (SlidingWindowSpec.max_memory_usage_bytes);
    `extra_retained` = max(0, prefill lookahead tokens - 1). Never DCP-sharded."""

    window: int = 0
    extra_retained: int = 0

    vllm_class: ClassVar[str] = "SlidingWindowSpec"

    def blocks(self, r: Request) -> int:
        return cdiv(min(self.window - 1 + self.extra_retained + r.in_flight, r.max_model_len), self.block_tokens) + 1

    def type_key(self) -> tuple:
        return (self.vllm_class, self.block_tokens, self.window)

    def padded_to(self, page_bytes: int) -> KVCacheSpec | None:
        return replace(self, page_bytes=page_bytes)


@dataclass(frozen=True)
class SlidingWindowMLASpec(SlidingWindowSpec):
    """A window ring of latent records (DeepSeek-V4 window rings; V4's compressor states, whose
    blocks are a few rows and whose window is the rows the compressor looks back over)."""

    vllm_class: ClassVar[str] = "SlidingWindowMLASpec"
    prefix_cacheable: ClassVar[bool] = False

    def padded_to(self, page_bytes: int) -> KVCacheSpec | None:
        return None


@dataclass(frozen=True)
class ChunkedLocalAttentionSpec(KVCacheSpec):
    """Attention within chunks of `chunk` tokens: cdiv(min(chunk + in flight, M), block) blocks (no +1)."""

    chunk: int = 0

    vllm_class: ClassVar[str] = "ChunkedLocalAttentionSpec"

    def blocks(self, r: Request) -> int:
        return cdiv(min(self.chunk + r.in_flight, r.max_model_len), self.block_tokens)

    def type_key(self) -> tuple:
        return (self.vllm_class, self.block_tokens, self.chunk)

    def padded_to(self, page_bytes: int) -> KVCacheSpec | None:
        return replace(self, page_bytes=page_bytes)


@dataclass(frozen=True)
class HybridAlignment:
    """What vLLM's _align_hybrid_block_size (platforms/interface.py, §4.2) reads besides the pages.

    kernel_align      max(the backend's smallest kernel block, block_size), at least 128 for MLA
    kernel_multiple   the attention block is rounded up to a multiple of this (the lcm of every
                      backend's smallest kernel block)
    checkpoint_align  the prefill checkpoint's token alignment (lcm'd into kernel_align in align mode)
    chunk             the mamba chunk size mode "all" aligns the attention block to
    """

    kernel_align: int
    kernel_multiple: int = 1
    checkpoint_align: int = 1
    chunk: int = 0


@dataclass(frozen=True)
class MambaSpec(KVCacheSpec):
    """Recurrent state (Mamba-2, gated delta networks, Kimi delta attention): one page holds one
    request's state of one layer (MambaSpec.max_memory_usage_bytes).

      none   1 + K pages (the state block covers max_model_len)
      align  2 + K pages (vLLM 0.33's capacity line; the prefill checkpoint is not counted there)
      all    one page per block of context, plus K (not in vLLM 0.33; kept from the spec's table)
    """

    mode: str = "none"
    speculative_blocks: int = 0
    kinds: tuple[str, ...] = ()
    hybrid: HybridAlignment | None = None

    vllm_class: ClassVar[str] = "MambaSpec"

    @property
    def grows(self) -> bool:  # type: ignore[override]
        return self.mode == "all"

    def blocks(self, r: Request) -> int:
        if self.mode == "none":
            return 1 + self.speculative_blocks
        if self.mode == "align":
            return 2 + self.speculative_blocks
        return cdiv(r.tokens, self.block_tokens) + self.speculative_blocks

    def type_key(self) -> tuple:
        return (self.vllm_class, self.block_tokens)

    def padded_to(self, page_bytes: int) -> KVCacheSpec | None:
        return replace(self, page_bytes=page_bytes)

    def grown_to(self, page_bytes: int) -> KVCacheSpec | None:
        return self.padded_to(page_bytes)


@dataclass(frozen=True)
class CircularBufferSpec(KVCacheSpec):
    """A fixed ring of `block_tokens` rows, one page for the request's whole life, not prefix-cacheable
    (kv_cache_interface.py CircularBufferSpec: DeepSeek-V4.1's compressor states)."""

    vllm_class: ClassVar[str] = "CircularBufferSpec"
    prefix_cacheable: ClassVar[bool] = False

    def blocks(self, r: Request) -> int:
        return 1

    def grown_to(self, page_bytes: int) -> KVCacheSpec | None:
        return None


SPEC_CLASSES = (FullAttentionSpec, MLAAttentionSpec, SlidingWindowSpec, SlidingWindowMLASpec,
                ChunkedLocalAttentionSpec, MambaSpec, CircularBufferSpec)

__all__ = ["CircularBufferSpec", "ChunkedLocalAttentionSpec", "FullAttentionSpec", "HybridAlignment",
           "KVCacheSpec", "MLAAttentionSpec", "MambaSpec", "Request", "SPEC_CLASSES", "SlidingWindowMLASpec",
           "SlidingWindowSpec"]
