"""The caches one rank holds, as KV cache specs (pricing.specs: one class per cache kind, as
vLLM's kv_cache_interface.py has them), in the order vLLM registers their layers.

Generic layers follow the KV law of the spec ("What each request adds"):
  per token = n_tensors × max(1, ⌊kv_heads / tp⌋) × head width × bytes per element,
latent (MLA) caches one head that no tp shrinks; packed formats state their bytes per token.
Layers that state their caches are resolved by their family, recurrent state by the hybrid
resolver (pricing/kernel/families.py, handed in by the kernel).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

from pricing.chips import Chip
from pricing.errors import InputError
from pricing.graph.model import ModelGraph
from pricing.graph.nodes import AttentionCache
from pricing.kernel.deployment import Engine
from pricing.registry import Reads
from pricing.specs import FullAttentionSpec, KVCacheSpec, MLAAttentionSpec, SlidingWindowSpec

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


def kv_element_bytes(engine: Engine, model: ModelGraph, reg: Reads) -> int:
    dtype = engine.kv_cache_dtype
    if dtype == "auto":
        return DTYPE_BYTES.get(model.dtype, 2)
    entry = reg[f"formats.kv_cache_dtypes.{dtype}"]
    return int(entry.value)


def default_block_size(kind: str, chip: Chip, engine: Engine, reg: Reads) -> int:
    """The release's default tokens per block for an attention backend kind on this chip."""
    table = engine.release.fact(reg, "block_size")[kind]
    return int(table.get(chip.generation, table["default"]))


def generic_specs(node: str, cache: AttentionCache, model: ModelGraph, engine: Engine, chip: Chip, reg: Reads,
                  drafter: bool) -> list[KVCacheSpec]:
    """Specs of a layer under the generic KV law."""
    backend = "sparse_mla" if cache.sparse_indexer else ("mla" if cache.kind == "mla" else "gqa")
    default = default_block_size(backend, chip, engine, reg)
    if engine.block_size and engine.block_size % default:
        raise InputError("block_size", f"{engine.block_size} is not a multiple of the {default} tokens the {backend} "
                         f"attention backend on {chip.generation} takes ({engine.release.name}'s "
                         "get_supported_kernel_block_sizes, e.g. FlashAttention MultipleOf(16); the release's "
                         "block_size in the registry)",
                         f"use a multiple of {default}")
    block = engine.block_size or default
    if cache.kind == "mla":
        packed_key = None
        if engine.kv_cache_dtype in ("fp8_ds_mla", "nvfp4_ds_mla"):
            packed_key = engine.kv_cache_dtype
        elif cache.sparse_indexer:
            record = _sparse_record(chip, engine, reg)
            if record == "fp8_ds_mla" or (record == "fp8_ds_mla_if_fp8" and engine.kv_cache_dtype.startswith("fp8")):
                packed_key = "fp8_ds_mla"
        if packed_key:
            entry = reg[f"formats.packed_records.{packed_key}"]
            per_token = int(entry.value)
        else:
            per_token = cache.head_dim * kv_element_bytes(engine, model, reg)
    else:
        heads = max(1, cache.kv_heads // engine.tensor_parallel_size)
        per_token = heads * (cache.head_dim + cache.head_dim_v) * kv_element_bytes(engine, model, reg)
    page = block * per_token
    common = dict(layer=node, name="kv", block_tokens=block, page_bytes=page, raw_page_bytes=page,
                  per_token=Fraction(per_token), drafter=drafter)
    specs: list[KVCacheSpec] = []
    if cache.sparse_indexer:  # vLLM registers the indexer's K cache before the attention's own
        entry = reg["formats.packed_records.indexer_fp8"]
        rec = int(entry.value)
        specs.append(MLAAttentionSpec(node, "indexer", block, block * rec, block * rec, Fraction(rec),
                                      drafter=drafter))
    if cache.window:
        specs.append(SlidingWindowSpec(**common, window=cache.window))
    elif cache.kind == "mla":
        specs.append(MLAAttentionSpec(**common))
    else:
        specs.append(FullAttentionSpec(**common))
    return specs


def _sparse_record(chip: Chip, engine: Engine, reg: Reads) -> str:
    """How this chip's sparse-MLA backend stores a record: plain rows, or the fp8_ds_mla record."""
    table = engine.release.fact(reg, "sparse_mla_record")
    return str(table.get(chip.generation, table["default"]))


def cache_specs(model: ModelGraph, engine: Engine, chip: Chip, reg: Reads, *, stated_caches: Callable | None,
                state_caches: Callable | None) -> tuple[list[KVCacheSpec], list[str]]:
    """Every cache one rank holds, in layer order (vLLM orders groups by first appearance), and
    notes for provenance; the caches its layers state (`stated_caches`) and its recurrent state (`state_caches`)
    resolved by its family's hooks (pricing/kernel/families.py), None where it has none."""
    order: dict[str, int] = {}
    specs: list[KVCacheSpec] = []
    notes: list[str] = []
    stated = False
    has_state = False
    laws: dict = {}  # a layer's generic specs depend on its cache and whether it drafts; its name is their layer
    for name, data in model.nodes(engine.speculative_method):
        order[name] = len(order)
        if data["cache"] is not None:
            key = (data["cache"], data["speculative"] is not None)
            first = laws.get(key)
            if first is None:
                first = laws[key] = generic_specs(name, data["cache"], model, engine, chip, reg, key[1])
                specs += first
            else:
                specs += [s.at_layer(name) for s in first]
        if data["caches"]:
            stated = True
        if data["state"] is not None:
            has_state = True
    if stated:
        more, why = _hook(stated_caches, model, "stated caches")(model, engine, chip, reg)
        specs += more
        notes += why
    if has_state:
        specs += _hook(state_caches, model, "recurrent state")(model, engine, chip, reg)
    specs.sort(key=lambda s: order[s.layer])  # stable: a layer's own caches keep their order
    return specs, notes


def _hook(hook: Callable | None, model: ModelGraph, what: str) -> Callable:
    if hook is None:
        raise AssertionError(f"{model.name}: its layers have {what} and no resolver in pricing/kernel/families.py")
    return hook
