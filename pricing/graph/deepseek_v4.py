"""The DeepSeek-V4 family: V4-Flash and V4-Pro (deepseek_v4) and V4.1-Flash with its DSpark
drafter (deepseek_v41). Their layers state their own caches (spec: When the graph states its
caches); facts from shared/reference/deepseek-v4-family.md.

V4: every layer owns a 128-token window ring; ratio-4 layers own a compressed cache, an
indexer K cache and two compressor-state rings; ratio-128 layers own a compressed cache and
one compressor-state ring; the MTP layer is window-only and exists only while speculating.
V4.1: only kv_source_layer_ids own the compressed cache (and, with it, the indexer K cache);
every other compressed layer reads the nearest owner at or below it; index sources without K
read layer 20's; the ratio-2 owners keep a compressor-state ring; every layer, and each of the
three DSpark layers while speculating, owns a window ring.
"""

from __future__ import annotations

from pricing.graph.common import TensorMaker, model_dtype, need, quantization
from pricing.graph.model import ModelGraph
from pricing.graph.nodes import Routing, StatedCache
from pricing.graph.rotary import rope_parameters, rotary_cache

FAMILIES = {"deepseek_v4", "deepseek_v41", "deepseek_v41_text"}
# the order vLLM 0.33's DeepSeek-V4 attention registers a layer's caches (its KV cache groups follow it)
V4_REGISTRATION_ORDER = {"swa": 0, "indexer": 1, "indexer_compressor_state": 2, "compressed": 3, "compressor_state": 4}


def _attention_tensors(make: TensorMaker, cfg: dict, p: str) -> list:
    hidden, heads, head_dim = cfg["hidden_size"], cfg["num_attention_heads"], cfg["head_dim"]
    q_lora, o_lora, o_groups = cfg["q_lora_rank"], cfg["o_lora_rank"], cfg["o_groups"]
    return [
        make.plain(f"{p}.attn_norm", hidden),
        make.linear(f"{p}.attn.wq_a", q_lora, hidden, "replicated"),
        make.plain(f"{p}.attn.q_norm", q_lora),
        make.linear(f"{p}.attn.wq_b", heads * head_dim, q_lora, "column"),
        make.linear(f"{p}.attn.wkv", head_dim, hidden, "replicated"),
        make.plain(f"{p}.attn.kv_norm", head_dim),
        make.linear(f"{p}.attn.wo_a", o_groups * o_lora, heads * head_dim // o_groups, "column"),
        make.linear(f"{p}.attn.wo_b", hidden, o_groups * o_lora, "row"),
        make.plain(f"{p}.attn.attn_sink", heads, 1, "column", fmt="fp32"),
    ]


def _hyper_connection_tensors(make: TensorMaker, cfg: dict, p: str) -> list:
    """mHC mixing weights (fp32): (2 + hc) × hc rows over hc × hidden inputs, before attention and FFN."""
    hc, hidden = cfg.get("hc_mult", 1), cfg["hidden_size"]
    if hc <= 1:
        return []
    mix = (2 + hc) * hc
    return [make.plain(f"{p}.hc_{part}_fn", mix, hc * hidden, fmt="fp32") for part in ("attn", "ffn")] + [
        make.plain(f"{p}.hc_{part}_base", mix, fmt="fp32") for part in ("attn", "ffn")]


def _moe_tensors(make: TensorMaker, cfg: dict, p: str, experts: int, hash_routed: bool) -> list:
    hidden, inter = cfg["hidden_size"], cfg["moe_intermediate_size"]
    shared = (cfg.get("n_shared_experts") or 0) * inter
    t = [make.plain(f"{p}.ffn_norm", hidden)]
    if hash_routed:  # hash-routed layers look experts up by token id (tid2eid) instead of a learned gate
        t.append(make.plain(f"{p}.ffn.gate.tid2eid", cfg["vocab_size"], cfg["num_experts_per_tok"], fmt="fp32"))
    else:
        t += [make.plain(f"{p}.ffn.gate", experts, hidden),
              make.plain(f"{p}.ffn.gate.bias", experts, fmt="fp32")]
    t += [make.linear(f"{p}.ffn.experts.w13", 2 * inter, hidden, "expert_column", expert_count=experts),
          make.linear(f"{p}.ffn.experts.w2", hidden, inter, "expert_row", expert_count=experts)]
    if shared:
        t += [make.linear(f"{p}.ffn.shared_experts.w13", 2 * shared, hidden, "column"),
              make.linear(f"{p}.ffn.shared_experts.w2", hidden, shared, "row")]
    return t


def _drafter_routing(cfg: dict, method: str) -> Routing:
    """A drafter layer's experts: DSpark's own (vLLM builds the layers past num_hidden_layers with
    `dspark_n_routed_experts or n_routed_experts` experts, each token picking
    `dspark_num_experts_per_tok or num_experts_per_tok`: vllm/models/deepseek_v41/nvidia/model.py
    DeepseekV4MoE; V4.1-Flash: 128 and 3, against the backbone's 384 and 6); V4's MTP layer the
    backbone's."""
    experts, top_k = cfg["n_routed_experts"], need(cfg, "num_experts_per_tok", "deepseek_v4")
    if method == "dspark":
        return Routing(cfg.get("dspark_n_routed_experts") or experts, cfg.get("dspark_num_experts_per_tok") or top_k)
    return Routing(experts, top_k)


def _window(cfg: dict, v41: bool) -> StatedCache:
    record = {"fp8_ds_mla": 584, "mxfp8": 528} if v41 else {"fp8_ds_mla": 584}
    return StatedCache("swa", record, 1, "window", window=cfg["sliding_window"], geometry="window")


def _compressed(ratio: int, v41: bool) -> StatedCache:
    record = {"fp8_ds_mla": 584, "mxfp8": 528, "nvfp4_ds_mla": 288} if v41 else {"fp8_ds_mla": 584}
    return StatedCache("compressed", record, ratio, "context", geometry="compressed")


def _indexer(ratio: int) -> StatedCache:
    return StatedCache("indexer", {"fp8": 132}, ratio, "context", geometry="compressed")


def build(source, override: str | None) -> ModelGraph:
    cfg = source.config
    model_type = cfg.get("model_type", "")
    v41 = model_type.startswith("deepseek_v41")
    family = "deepseek_v41" if v41 else "deepseek_v4"
    for field in ("hidden_size", "num_hidden_layers", "vocab_size", "num_attention_heads", "head_dim",
                  "qk_rope_head_dim", "q_lora_rank", "o_lora_rank", "o_groups", "sliding_window", "compress_ratios",
                  "n_routed_experts", "moe_intermediate_size", "max_position_embeddings", "index_n_heads",
                  "index_head_dim", "index_topk"):
        need(cfg, field, family)
    hidden, n_layers, vocab = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    heads, experts = cfg["num_attention_heads"], cfg["n_routed_experts"]
    ratios = list(cfg["compress_ratios"])
    if len(ratios) < n_layers:
        from pricing.errors import InputError

        raise InputError("config.json: compress_ratios", f"has {len(ratios)} entries for {n_layers} layers",
                         "give one compress ratio per layer")
    dtype = model_dtype(cfg)
    quant = quantization(cfg, source.hf_quant_config, dtype, override)
    make = TensorMaker(quant, dtype)
    n_draft = cfg.get("num_nextn_predict_layers", 0) or 0
    dspark = v41 and bool(cfg.get("dspark_target_layer_ids"))
    methods = ("dspark",) if dspark else (("mtp",) if n_draft else ())
    m = ModelGraph(source.name, source.hf_id, model_type, family, "moe", dtype, hidden, vocab, heads, 1,
                   cfg["max_position_embeddings"], routed_experts=experts, speculative_methods=methods,
                   quantization=quant.method, attention_backend=family)
    m.extras.update(version="v41" if v41 else "v4", o_groups=cfg["o_groups"], sliding_window=cfg["sliding_window"],
                    index_topk=cfg["index_topk"], hc_mult=cfg.get("hc_mult", 1),
                    candidate_topk_blocks=cfg.get("candidate_topk_blocks", 0), ratios=ratios)
    m.conventions += [
        "DeepSeek-V4 caches are stated per layer: compressed, indexer and window-ring records, one page geometry each",
        "routed experts served per expert_dtype (fp4 -> MXFP4); other linear layers per quantization_config",
        "the router (gate) is unquantized at model dtype and replicated; hash-routed layers keep a token-id table",
    ]
    if v41:
        m.conventions.append("V4.1 engram embedding tables live in host memory (engram_config.verify_host_memory): "
                             "not counted on the GPU")
    prev = m.add("embed_tokens", "embedding", tensors=[make.plain("embed_tokens", vocab, hidden, "vocab")])
    hash_layers = cfg.get("num_hash_layers", 0) or 0
    kv_sources = list(cfg.get("kv_source_layer_ids") or [])
    index_sources = list(cfg.get("index_source_layer_ids") or [])
    idx_heads, idx_dim = cfg["index_n_heads"], cfg["index_head_dim"]
    head_dim = cfg["head_dim"]

    # two ropes (deepseek-v4-family.md §3): window-only layers the plain one (rope_theta, no scaling),
    # compressed layers YaRN at compress_rope_theta; both over rope_dim and the whole position window
    rope_dim = cfg["qk_rope_head_dim"]
    plain_rope = rotary_cache(m, rope_dim, m.max_position, {"rope_type": "default"}, base=cfg.get("rope_theta"),
                              rotary_dim=rope_dim)
    yarn_rope = rotary_cache(m, rope_dim, m.max_position, rope_parameters(cfg), base=cfg.get("compress_rope_theta"),
                             rotary_dim=rope_dim)

    def owner_of(i: int, sources: list[int]) -> int | None:
        below = [s for s in sources if s <= i]
        return max(below) if below else None

    attn_nodes = {}
    for i in range(n_layers):
        p = f"layers.{i}"
        ratio = ratios[i]
        tensors = _attention_tensors(make, cfg, p) + _hyper_connection_tensors(make, cfg, p)
        caches = [_window(cfg, v41)]
        if ratio > 0:
            coff = 2 if ratio != 128 else 1
            owns = (i in kv_sources) if v41 else True
            if owns:
                caches.append(_compressed(ratio, v41))
                tensors += [make.linear(f"{p}.attn.compressor.wkv", coff * head_dim, hidden, "replicated"),
                            make.plain(f"{p}.attn.compressor.norm", head_dim)]
                if (v41 and ratio == 2) or not v41:
                    tensors.append(make.linear(f"{p}.attn.compressor.wgate", coff * head_dim, hidden, "replicated"))
                    tensors.append(make.plain(f"{p}.attn.compressor.ape", ratio, coff * head_dim, fmt="fp32"))
                    caches.append(StatedCache("compressor_state", {"state": 0}, 1, "entries", entries=ratio,
                                              geometry=f"state_ratio_{ratio}" if not v41 else "state"))
            has_indexer = (i in index_sources) if v41 else ratio == 4
            if has_indexer:
                tensors += [make.linear(f"{p}.attn.indexer.wq_b", idx_heads * idx_dim, cfg["q_lora_rank"],
                                        "replicated"),
                            make.plain(f"{p}.attn.indexer.weights_proj", idx_heads, hidden)]
                owns_k = (i in kv_sources) if v41 else True
                if owns_k:
                    caches.append(_indexer(ratio))
                    if v41:
                        tensors += [make.linear(f"{p}.attn.indexer.wk", idx_dim, head_dim, "replicated"),
                                    make.plain(f"{p}.attn.indexer.k_norm", idx_dim)]
                    else:
                        tensors += [make.linear(f"{p}.attn.indexer.compressor.wkv", 2 * idx_dim, hidden, "replicated"),
                                    make.linear(f"{p}.attn.indexer.compressor.wgate", 2 * idx_dim, hidden,
                                                "replicated")]
                        caches.append(StatedCache("indexer_compressor_state", {"state": 0}, 1, "entries",
                                                  entries=ratio, geometry="state_indexer"))
        if not v41:  # V4's modules register the indexer's caches before the attention's own (vLLM 0.33 oracle)
            caches.sort(key=lambda c: V4_REGISTRATION_ORDER[c.name])
        attn = m.add(f"{p}.attn", "attention", layer=i, tensors=tensors, caches=caches,
                     buffers=[yarn_rope if ratio > 0 else plain_rope])
        attn_nodes[i] = attn
        m.flow(prev, attn)
        if v41 and ratio > 0 and i not in kv_sources:
            owner = owner_of(i, kv_sources)
            if owner is not None:
                m.reads_cache(attn_nodes[owner], attn, "compressed")
        if v41 and i in index_sources and i not in kv_sources:
            owner = owner_of(i, kv_sources)
            if owner is not None:
                m.reads_cache(attn_nodes[owner], attn, "indexer")
        ffn = m.add(f"{p}.ffn", "moe", layer=i, tensors=_moe_tensors(make, cfg, p, experts, i < hash_layers))
        m.flow(attn, ffn)
        prev = ffn
    final = m.add("norm", "norm", tensors=[make.plain("norm", hidden)] + (
        [make.plain("hc_head_fn", cfg["hc_mult"], cfg["hc_mult"] * hidden, fmt="fp32")] if cfg.get("hc_mult") else []))
    m.flow(prev, final)
    head = m.add("lm_head", "lm_head", tensors=[make.head("lm_head", vocab, hidden)])
    m.flow(final, head)
    # the drafter: V4's MTP layer, V4.1's DSpark stages; window-only, held only while speculating
    method = methods[0] if methods else None
    draft_prev = final
    if method == "dspark":
        targets = cfg["dspark_target_layer_ids"]
        rank = cfg.get("dspark_markov_rank", 256)
        proj = m.add("dspark.main_proj", "projection", speculative="dspark", tensors=[
            make.linear("dspark.main_proj", hidden, len(targets) * hidden, "replicated"),
            make.plain("dspark.main_norm", hidden),
            make.plain("dspark.markov_head.u", vocab, rank, "vocab"),
            make.plain("dspark.markov_head.v", rank, hidden)])
        for t in targets:
            m.flow(attn_nodes[t], proj)
        draft_prev = proj
    for j in range(n_draft if method else 0):
        i = n_layers + j
        p = f"layers.{i}"
        tensors = _attention_tensors(make, cfg, p) + _hyper_connection_tensors(make, cfg, p)
        if method == "mtp":
            tensors += [make.plain(f"{p}.enorm", hidden), make.plain(f"{p}.hnorm", hidden),
                        make.linear(f"{p}.e_proj", hidden, hidden, "replicated"),
                        make.linear(f"{p}.h_proj", hidden, hidden, "replicated")]
        attn = m.add(f"{p}.attn", "attention", layer=i, tensors=tensors, caches=[_window(cfg, v41)],
                     speculative=method, buffers=[plain_rope])
        m.flow(draft_prev, attn)
        routing = _drafter_routing(cfg, method)
        ffn = m.add(f"{p}.ffn", "moe", layer=i, speculative=method, routing=routing,
                    tensors=_moe_tensors(make, cfg, p, routing.experts, False))
        m.flow(attn, ffn)
        draft_prev = ffn
    return m
