"""How the DeepSeek-V4 family's stated caches resolve on a chip, and the buffers its model code
allocates at the token budget or the context bound (spec: When the graph states its caches;
Activations). Facts: shared/reference/deepseek-v4-family.md, registry deepseek_v4.yaml.
"""

from __future__ import annotations

import math
from fractions import Fraction

from pricing.chips import Chip
from pricing.errors import InputError
from pricing.graph.model import ModelGraph
from pricing.kernel import activations
from pricing.kernel.deployment import Engine
from pricing.registry import Reads
from pricing.specs import CircularBufferSpec, KVCacheSpec, MLAAttentionSpec, SlidingWindowMLASpec
from pricing.units import cdiv, round_up

FP8_NAMES = ("auto", "fp8", "fp8_e4m3", "fp8_ds_mla")
RECORDS = {"fp8_ds_mla": "deepseek_v4.records.fp8_ds_mla_v4", "mxfp8": "deepseek_v4.records.mxfp8_v41",
           "nvfp4_ds_mla": "deepseek_v4.records.nvfp4_ds_mla_v41", "fp8": "deepseek_v4.records.indexer_fp8"}


def record_bytes(fmt: str, reg: Reads) -> int:
    """The bytes of one stored record in format `fmt` (registry deepseek_v4.records)."""
    return reg.value(RECORDS[fmt])


def _by_generation(table: dict, chip: Chip):
    return table.get(chip.generation, table.get("default"))


def mega_attention(model: ModelGraph, engine: Engine, chip: Chip, reg: Reads) -> tuple[bool, str]:
    """Whether V4.1's mega attention serves this tensor-parallel width on this chip, and why."""
    if not chip.sm100_family:
        if engine.mega_attention:
            raise InputError("mega_attention", f"needs the SM100 family; {chip.id} is {chip.generation}",
                             "drop the flag")
        return False, f"{chip.generation}: mega attention exists only on the SM100 family"
    rule = reg.value("deepseek_v4.mega_attention")
    local = model.num_attention_heads // engine.tensor_parallel_size
    per_group = model.num_attention_heads // model.extras["o_groups"]
    serves = local % rule["heads_multiple"] == 0 and per_group == rule["heads_per_group"]
    why = (f"{local} local heads at tp {engine.tensor_parallel_size}, {per_group} heads per wo_a group: mega attention "
           + ("serves this width" if serves
              else f"does not serve this width (needs a multiple of {rule['heads_multiple']} local heads and "
                   f"{rule['heads_per_group']} per group)"))
    if engine.mega_attention is True and not serves:
        raise InputError("mega_attention", why,
                         "use a tensor-parallel size that leaves a multiple of 8 heads per rank")
    if engine.mega_attention is False:
        return False, "mega attention switched off by --no-mega-attention"
    return serves, why


def record_formats(model: ModelGraph, engine: Engine, chip: Chip, reg: Reads) -> tuple[dict, str]:
    """The record format per cache role the attention backend actually runs, and the reason."""
    kv = engine.kv_cache_dtype
    if kv not in FP8_NAMES + ("nvfp4_ds_mla",):
        raise InputError("kv_cache_dtype", f"{kv!r} is not served by the DeepSeek-V4 backends (only fp8 caches)",
                         "use fp8 (or leave it auto)")
    if model.extras["version"] == "v4":
        if kv == "nvfp4_ds_mla":
            raise InputError("kv_cache_dtype", "nvfp4_ds_mla is a DeepSeek-V4.1 format", "use fp8")
        return ({"compressed": "fp8_ds_mla", "window": "fp8_ds_mla", "indexer": "fp8"},
                f"V4 rewrites kv_cache_dtype {kv} to fp8_ds_mla ({record_bytes('fp8_ds_mla', reg)}-byte records) on "
                "every chip (SM120's FlashInfer "
                "sparse backend included)")
    if not chip.sm100_family:
        if kv == "nvfp4_ds_mla":
            raise InputError("kv_cache_dtype", f"FlashMLA decodes nvfp4_ds_mla only on SM100; {chip.id} is "
                             f"{chip.generation}", "use fp8")
        return ({"compressed": "fp8_ds_mla", "window": "fp8_ds_mla", "indexer": "fp8"},
                f"{chip.generation}: V4.1 serves {kv} as fp8_ds_mla ({record_bytes('fp8_ds_mla', reg)}-byte records, "
                "FlashMLA sparse)")
    mega, why = mega_attention(model, engine, chip, reg)
    if mega and kv in ("auto", "fp8", "fp8_e4m3", "nvfp4_ds_mla"):
        return ({"compressed": "nvfp4_ds_mla", "window": "mxfp8", "indexer": "fp8"},
                f"{chip.generation}: {why}; kv_cache_dtype {kv} resolves to nvfp4_ds_mla "
                f"({record_bytes('nvfp4_ds_mla', reg)}-byte compressed records, {record_bytes('mxfp8', reg)}-byte "
                "window records)")
    if kv == "nvfp4_ds_mla":
        raise InputError("kv_cache_dtype", f"nvfp4_ds_mla needs mega attention, and {why}", "use fp8")
    return ({"compressed": "mxfp8", "window": "mxfp8", "indexer": "fp8"},
            f"{chip.generation}: {why}; V4.1 serves {kv} as the {record_bytes('mxfp8', reg)}-byte MXFP8 record "
            "(FlashMLA)")


def _next_pow2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def resolve_caches(model: ModelGraph, engine: Engine, chip: Chip, reg: Reads
                   ) -> tuple[list[KVCacheSpec], list[str]]:
    """Specs of every stated cache this rank holds (the drafter's only while speculating), as
    vLLM 0.33's DeepSeek-V4 modules build them: window rings SlidingWindowMLASpec; compressed and
    indexer caches MLAAttentionSpec with their tokens per record; V4's compressor states
    SlidingWindowMLASpec of a few rows; V4.1's compressor states CircularBufferSpec rings."""
    v41 = model.extras["version"] == "v41"
    formats, why = record_formats(model, engine, chip, reg)
    if v41:
        align = _by_generation(reg.value("deepseek_v4.alignment.v41"), chip)
        state_align = reg.value("deepseek_v4.alignment.v41_state")
        block = _by_generation(reg.value("deepseek_v4.page_tokens.v41_compressed"), chip)
        window_tokens = _by_generation(reg.value("deepseek_v4.page_tokens.v41_window"), chip)
        state = reg.value("deepseek_v4.compressor_state.v41")
        rows = max(state["min_rows"], _next_pow2(engine.num_speculative_tokens + 2))
        states = {"state": {"rows": rows, "row_bytes": state["row_bytes"]}}
        window_stride = _by_generation(reg.value("deepseek_v4.alignment.v41_window_stride"), chip)
    else:
        align = state_align = reg.value("deepseek_v4.alignment.v4")
        geometry = reg.value("deepseek_v4.page_tokens.v4")
        block, window_tokens = geometry["compressed"], geometry["window"]
        state = reg.value("deepseek_v4.compressor_state.v4")
        states = {f"state_ratio_{r}": state[f"ratio_{r}"] for r in (4, 128)}
        states["state_indexer"] = state["indexer"]
        window_stride = False
    records = {role: record_bytes(fmt, reg) for role, fmt in formats.items()}
    stride = math.lcm(records["window"], records["compressed"]) if window_stride else 1
    specs: list[KVCacheSpec] = []
    notes = [why]
    for name, data in model.nodes(engine.speculative_method):
        drafter = data["speculative"] is not None
        for c in data["caches"]:
            if c.bound == "window":
                rec = records["window"]
                raw = window_tokens * rec
                specs.append(SlidingWindowMLASpec(name, c.name, window_tokens, round_up(raw, align), raw, Fraction(rec),
                                                  drafter=drafter, alignment=align, stride_alignment=stride,
                                                  packed=True, window=c.window))
            elif c.bound == "context":
                rec = records["indexer" if c.name == "indexer" else "compressed"]
                raw = block // c.per_record * rec
                specs.append(MLAAttentionSpec(name, c.name, block, round_up(raw, align), raw,
                                              Fraction(rec, c.per_record), drafter=drafter, alignment=align,
                                              packed=True, dcp_sharded=True, tokens_per_state=c.per_record))
            else:
                geo = states[c.geometry]
                raw = geo["rows"] * geo["row_bytes"]
                common = dict(layer=name, name=c.name, block_tokens=geo["rows"], page_bytes=round_up(raw, state_align),
                              raw_page_bytes=raw, per_token=Fraction(geo["row_bytes"]), drafter=drafter,
                              alignment=state_align, packed=True)
                if v41:
                    specs.append(CircularBufferSpec(**common))
                else:
                    specs.append(SlidingWindowMLASpec(**common, window=geo["window"]))
    return specs, notes


def model_buffers(model: ModelGraph, engine: Engine, chip: Chip, reg: Reads) -> dict[str, int]:
    """Buffers the model's own code allocates before the KV cache (vLLM's profiler counts them):
    the prefill gather workspaces (one lane at the larger request: the attention's or the
    indexer's; DSpark's in a second lane), the indexer's logits stand-in, the top-k buffers (one
    more for DSpark), the candidate-block buffer and the drafter's hidden-state buffer while
    speculating. (The plain and YaRN rotary caches are the layers' own buffers, graph nodes'
    `buffers`, counted with the weights as vLLM's "Model loading took" counts them.)"""
    w = {k: reg.value(f"deepseek_v4.workspaces.{k}") for k in (
        "prefill_chunk", "gather_width", "gather_index_bytes", "indexer_gather_factor", "indexer_logits_bytes",
        "index_bytes")}
    M, T = engine.max_model_len, engine.max_num_batched_tokens
    window = model.extras["sliding_window"]
    ratios = [r for r in model.extras["ratios"][: len(model.extras["ratios"])] if r > 0]
    smallest = min(ratios) if ratios else 0
    act_bytes = activations.DTYPE_BYTES.get(model.dtype, 2)

    def attention_lane(ratio: int) -> int:
        rows = (cdiv(M, ratio) if ratio else 0) + window + T
        return w["prefill_chunk"] * rows * (w["gather_width"] * act_bytes + w["gather_index_bytes"])

    # the indexer K gather: 40 × max_model_len // r entries of the indexer's record, r its caches' compress ratio
    indexer_ratio = min((c.per_record for _, d in model.g.nodes(data=True) for c in d["caches"] if c.name == "indexer"),
                        default=0)
    indexer_lane = (w["indexer_gather_factor"] * M // indexer_ratio * reg.value("deepseek_v4.records.indexer_fp8")
                    if indexer_ratio else 0)
    out = {"prefill gather (target lane)": max(attention_lane(smallest), indexer_lane)}
    speculating = engine.speculative_method is not None
    if engine.speculative_method == "dspark":
        out["prefill gather (DSpark lane)"] = attention_lane(0)
    out["indexer logits"] = w["indexer_logits_bytes"]
    drafts = 2 if engine.speculative_method == "dspark" else 1
    out["top-k indices"] = T * model.extras["index_topk"] * w["index_bytes"] * drafts
    if model.extras.get("candidate_topk_blocks"):
        out["candidate blocks"] = T * model.extras["candidate_topk_blocks"] * w["index_bytes"]
    if speculating:
        out["drafter hidden states"] = T * model.extras["hc_mult"] * model.hidden_size * act_bytes
    return out

