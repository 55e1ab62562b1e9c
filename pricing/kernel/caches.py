"""Cache specs: one per cache a rank holds, each answering what one page is and what kind of
bound it has (the shape of vLLM's kv_cache_interface.py: one spec per cache kind).

Generic layers follow the KV law of the spec ("What each request adds"):
  per token = n_tensors × max(1, ⌊kv_heads / tp⌋) × head width × bytes per element,
latent (MLA) caches one head that no tp shrinks; packed formats state their bytes per token.
Layers that state their caches are resolved by their family (STATED_RESOLVERS).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from pricing.chips import Chip
from pricing.graph.model import ModelGraph
from pricing.graph.nodes import AttentionCache
from pricing.kernel.deployment import Engine
from pricing.registry import Registry, Sourced

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


@dataclass(frozen=True)
class CacheSpec:
    """One cache of one layer on one rank.

    kind: "full" grows with the request's context; "window" is a ring bounded by `window`
    tokens; "ring" holds `entries` records for the request's whole life in one page; "state" is
    recurrent state (pages per request set by the recurrent cache mode).
    """

    layer: str
    name: str
    kind: str
    spec_type: str  # what vLLM would call the spec class; layers of one type can share a group
    block_tokens: int
    page_bytes: int  # one page as allocated (padding included)
    raw_page_bytes: int  # one page of records, before alignment padding
    per_token: Fraction = Fraction(0)  # record bytes per context token (full caches), before pages
    window: int = 0
    dcp_sharded: bool = True
    packed: bool = False  # block-outermost layout: the rules pack packs different pages into one block
    alignment: int = 1
    drafter: bool = False
    state_blocks_extra: int = 0  # recurrent: prefill checkpoint pages held in align mode
    hybrid: object = None  # recurrent: what the rules pack aligns the attention block with (HybridAlignment)

    @property
    def id(self) -> str:
        return f"{self.layer}.{self.name}"


def kv_element_bytes(engine: Engine, model: ModelGraph, reg: Registry, used: dict) -> int:
    dtype = engine.kv_cache_dtype
    if dtype == "auto":
        return DTYPE_BYTES.get(model.dtype, 2)
    entry = reg[f"formats.kv_cache_dtypes.{dtype}"]
    used[entry.name] = entry
    return int(entry.value)


def default_block_size(kind: str, chip: Chip, reg: Registry, used: dict) -> int:
    entry = reg["vllm_0_33.block_size"]
    used[entry.name] = entry
    table = entry.value[kind]
    return int(table.get(chip.generation, table["default"]))


def generic_specs(node: str, cache: AttentionCache, model: ModelGraph, engine: Engine, chip: Chip, reg: Registry,
                  used: dict, drafter: bool) -> list[CacheSpec]:
    """Specs of a layer under the generic KV law."""
    backend = "sparse_mla" if cache.sparse_indexer else ("mla" if cache.kind == "mla" else "gqa")
    block = engine.block_size or default_block_size(backend, chip, reg, used)
    if cache.kind == "mla":
        packed_key = None
        if engine.kv_cache_dtype in ("fp8_ds_mla", "nvfp4_ds_mla"):
            packed_key = engine.kv_cache_dtype
        elif cache.sparse_indexer and engine.kv_cache_dtype.startswith("fp8"):
            packed_key = "fp8_ds_mla"
        if packed_key:
            entry = reg[f"formats.packed_records.{packed_key}"]
            used[entry.name] = entry
            per_token = int(entry.value)
        else:
            per_token = cache.head_dim * kv_element_bytes(engine, model, reg, used)
    else:
        heads = max(1, cache.kv_heads // engine.tp)
        per_token = heads * (cache.head_dim + cache.head_dim_v) * kv_element_bytes(engine, model, reg, used)
    kind = "window" if cache.window else "full"
    spec_type = ("mla" if cache.kind == "mla" else "attention") + ("_window" if cache.window else "")
    specs = [CacheSpec(node, "kv", kind, spec_type, block, block * per_token, block * per_token, Fraction(per_token),
                       window=cache.window or 0, dcp_sharded=not cache.window, drafter=drafter)]
    if cache.sparse_indexer:
        entry = reg["formats.packed_records.indexer_fp8"]
        used[entry.name] = entry
        rec = int(entry.value)
        specs.append(CacheSpec(node, "indexer", "full", "mla", block, block * rec, block * rec, Fraction(rec),
                               drafter=drafter))
    return specs


# family -> function(model, engine, chip, reg, used) -> (specs, notes): resolves stated caches
STATED_RESOLVERS: dict[str, Callable] = {}
# family -> function(model, engine, chip, reg, used) -> list[CacheSpec]: recurrent state specs
STATE_RESOLVERS: dict[str, Callable] = {}


def cache_specs(model: ModelGraph, engine: Engine, chip: Chip, reg: Registry, used: dict[str, Sourced]
                ) -> tuple[list[CacheSpec], list[str]]:
    """Every cache one rank holds, in layer order, and notes for provenance."""
    specs: list[CacheSpec] = []
    notes: list[str] = []
    stated = False
    has_state = False
    for name, data in model.nodes(engine.spec_method):
        if data["cache"] is not None:
            specs += generic_specs(name, data["cache"], model, engine, chip, reg, used, data["speculative"] is not None)
        if data["caches"]:
            stated = True
        if data["state"] is not None:
            has_state = True
    if stated:
        resolver = STATED_RESOLVERS[model.attention_backend]
        more, why = resolver(model, engine, chip, reg, used)
        specs += more
        notes += why
    if has_state:
        specs += STATE_RESOLVERS[model.family](model, engine, chip, reg, used)
    return specs, notes
