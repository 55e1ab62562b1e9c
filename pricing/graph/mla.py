"""Multi-head latent attention with mixture of experts: deepseek_v3 and kimi_k2 (first dense
layers, shared experts, MTP layers only while speculating), and the sparse-attention variants
deepseek_v32 and glm_moe_dsa (an indexer with its own cache records on every layer).

Layer placement follows vLLM's DeepseekV2/V3 model: q_a_proj and kv_a_proj_with_mqa are
ReplicatedLinear (fused_qkv_a_proj), q_b/kv_b column-parallel, o_proj row-parallel; the router
(GateLinear) is an unquantized model-dtype layer on every rank; the LM head is a ParallelLMHead
at model dtype.
"""

from __future__ import annotations

from pricing.graph.common import (
    TensorMaker,
    add_final_norm_and_head,
    add_mtp_projection,
    dense_mlp,
    model_dtype,
    need,
    quantization,
    routed_moe,
)
from pricing.graph.model import ModelGraph
from pricing.graph.nodes import AttentionCache
from pricing.graph.rotary import rope_parameters, rotary_cache

FAMILIES = {"deepseek_v3", "kimi_k2", "deepseek_v32", "glm_moe_dsa", "deepseek_v2"}
SPARSE = {"deepseek_v32", "glm_moe_dsa"}


def attention_tensors(make: TensorMaker, cfg: dict, p: str, model_type: str) -> list:
    hidden = cfg["hidden_size"]
    heads = need(cfg, "num_attention_heads", model_type)
    q_lora = cfg.get("q_lora_rank")
    kv_lora = need(cfg, "kv_lora_rank", model_type)
    nope = need(cfg, "qk_nope_head_dim", model_type)
    rope = need(cfg, "qk_rope_head_dim", model_type)
    v_dim = need(cfg, "v_head_dim", model_type)
    qk = nope + rope
    t = []
    if q_lora:
        t += [make.linear(f"{p}.q_a_proj", q_lora, hidden, "replicated"),
              make.plain(f"{p}.q_a_layernorm", q_lora),
              make.linear(f"{p}.q_b_proj", heads * qk, q_lora, "column")]
    else:
        t.append(make.linear(f"{p}.q_proj", heads * qk, hidden, "column"))
    t += [make.linear(f"{p}.kv_a_proj_with_mqa", kv_lora + rope, hidden, "replicated"),
          make.plain(f"{p}.kv_a_layernorm", kv_lora),
          make.linear(f"{p}.kv_b_proj", heads * (nope + v_dim), kv_lora, "column"),
          make.linear(f"{p}.o_proj", hidden, heads * v_dim, "row")]
    if model_type in SPARSE:
        ih, idim = need(cfg, "index_n_heads", model_type), need(cfg, "index_head_dim", model_type)
        t += [make.linear(f"{p}.indexer.wq_b", ih * idim, q_lora, "replicated"),
              make.linear(f"{p}.indexer.wk", idim, hidden, "replicated"),
              make.plain(f"{p}.indexer.k_norm", idim, 2),
              make.plain(f"{p}.indexer.weights_proj", ih, hidden)]
    return t


def ffn_tensors(make: TensorMaker, cfg: dict, p: str, dense: bool, model_type: str) -> list:
    hidden = cfg["hidden_size"]
    if dense:
        return dense_mlp(make, f"{p}.mlp", hidden, need(cfg, "intermediate_size", model_type))
    inter = need(cfg, "moe_intermediate_size", model_type)
    shared = (cfg.get("n_shared_experts") or 0) * inter
    return routed_moe(make, f"{p}.mlp", hidden, inter, need(cfg, "n_routed_experts", model_type), shared)


def build(source, override: str | None) -> ModelGraph:
    cfg = source.config
    model_type = cfg.get("model_type", "")
    hidden = need(cfg, "hidden_size", model_type)
    n_layers = need(cfg, "num_hidden_layers", model_type)
    vocab = need(cfg, "vocab_size", model_type)
    heads = need(cfg, "num_attention_heads", model_type)
    kv_lora = need(cfg, "kv_lora_rank", model_type)
    rope = need(cfg, "qk_rope_head_dim", model_type)
    experts = need(cfg, "n_routed_experts", model_type)
    first_dense = cfg.get("first_k_dense_replace", 0) or 0
    n_mtp = cfg.get("num_nextn_predict_layers", 0) or 0
    dtype = model_dtype(cfg)
    quant = quantization(cfg, source.hf_quant_config, dtype, override)
    make = TensorMaker(quant, dtype)
    sparse = model_type in SPARSE
    m = ModelGraph(source.name, source.hf_id, model_type, "mla_sparse" if sparse else "mla", "moe", dtype, hidden,
                   vocab, heads, 1, need(cfg, "max_position_embeddings", model_type), routed_experts=experts,
                   speculative_methods=("mtp",) if n_mtp else (), quantization=quant.method,
                   attention_backend="sparse_mla" if sparse else "mla")
    m.conventions += [
        "q_a_proj and kv_a_proj_with_mqa are ReplicatedLinear: whole on every rank (vLLM DeepseekV2 attention)",
        "the MoE router (GateLinear) is unquantized at model dtype and replicated on every rank",
        "the LM head is a ParallelLMHead at model dtype, divided across the tensor-parallel group like the embedding",
        "block-quantized FP8 weights carry one scale per weight_block_size tile",
        "MTP layers share the target's embedding and LM head and are held only while speculating",
    ]
    cache = AttentionCache("mla", 1, kv_lora + rope, 0, sparse_indexer=sparse)
    if sparse:
        m.extras["index_head_dim"] = cfg["index_head_dim"]
        m.extras["index_topk"] = need(cfg, "index_topk", model_type)  # or its class default (config_defaults)
    prev = m.add("embed_tokens", "embedding", tensors=[make.plain("embed_tokens", vocab, hidden, "vocab")])
    # deepseek_v2.py: the attention's rope is GPT-J style (is_neox_style=False); a sparse model's
    # indexer builds its own, NeoX style unless indexer_rope_interleave (then the same instance)
    rotary = [rotary_cache(m, rope, m.max_position, rope_parameters(cfg), base=cfg.get("rope_theta"),
                           rotary_dim=rope, is_neox_style=False)]
    if sparse:
        rotary.append(rotary_cache(m, rope, m.max_position, rope_parameters(cfg), base=cfg.get("rope_theta"),
                                   rotary_dim=rope, is_neox_style=not cfg.get("indexer_rope_interleave", False)))

    def decoder_layer(i: int, p: str, speculative: str | None, prev: str) -> str:
        tensors = [make.plain(f"{p}.input_layernorm", hidden)]
        tensors += attention_tensors(make, cfg, f"{p}.self_attn", model_type)
        attn = m.add(f"{p}.self_attn", "attention", layer=i, cache=cache, speculative=speculative, tensors=tensors,
                     buffers=rotary)
        m.flow(prev, attn)
        dense = i < first_dense
        mlp = m.add(f"{p}.mlp", "mlp" if dense else "moe", layer=i, speculative=speculative,
                    tensors=[make.plain(f"{p}.post_attention_layernorm", hidden)] + ffn_tensors(make, cfg, p, dense,
                                                                                              model_type))
        m.flow(attn, mlp)
        return mlp

    for i in range(n_layers):
        prev = decoder_layer(i, f"layers.{i}", None, prev)
    final = add_final_norm_and_head(m, make, cfg, prev)
    mtp_prev = final
    for j in range(n_mtp):
        i = n_layers + j
        p = f"layers.{i}"
        proj = add_mtp_projection(m, make, i, f"{p}.eh_proj", (f"{p}.enorm", f"{p}.hnorm", f"{p}.shared_head.norm"),
                                  "replicated", mtp_prev)
        mtp_prev = decoder_layer(i, p, "mtp", proj)
    return m
