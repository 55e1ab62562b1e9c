"""Grouped-query-attention decoders: dense (llama, mistral, qwen2, qwen3), mixture of experts
(qwen3_moe, mixtral, minimax_m2) and sliding-window hybrids (gpt_oss, gemma2, gemma3)."""

from __future__ import annotations

from pricing.graph.common import (
    TensorMaker,
    add_final_norm_and_head,
    dense_mlp,
    model_dtype,
    need,
    quantization,
)
from pricing.graph.model import ModelGraph
from pricing.graph.nodes import AttentionCache
from pricing.graph.rotary import rope_parameters, rotary_cache
from pricing.graph.vision import add_vision_tower

LLAMA_LIKE = {"llama", "mistral", "qwen2", "qwen3"}
MOE = {"qwen3_moe", "mixtral", "qwen2_moe", "minimax_m2"}
WINDOW = {"gpt_oss", "gemma2", "gemma3", "gemma3_text"}
FAMILIES = LLAMA_LIKE | MOE | WINDOW
# per-head RMSNorms of q and k (qwen3.py, gemma3.py Gemma3Attention q_norm / k_norm)
QK_NORM = {"qwen3", "qwen3_moe", "gemma3", "gemma3_text"}
# the norms before and after the MLP besides the two of every decoder (gemma2.py, gemma3.py
# Gemma*DecoderLayer pre_feedforward_layernorm / post_feedforward_layernorm)
# RMSNorms of q and k over all heads at once, each rank holding its heads' share (minimax_m2.py
# MiniMaxM2Attention q_norm / k_norm, MiniMaxText01RMSNormTP)
QK_NORM_ALL_HEADS = {"minimax_m2"}
# an fp32 router with an fp32 score-correction bias (minimax_m2.py MiniMaxM2MoE: GateLinear at
# params_dtype float32, e_score_correction_bias when use_routing_bias)
FP32_ROUTER = {"minimax_m2"}
# a config whose `rotary_dim` sets the rotated width (minimax_m2.py: partial_rotary_factor = rotary_dim / head_dim)
ROTARY_DIM_FIELD = {"minimax_m2"}
SANDWICH_NORM = {"gemma2", "gemma3", "gemma3_text"}


def layer_windows(cfg: dict, n_layers: int) -> list[int | None]:
    """The sliding window of each layer (None: full attention), from `layer_types` or the
    gemma `sliding_window_pattern` (every pattern-th layer is global)."""
    window = cfg.get("sliding_window")
    types = cfg.get("layer_types")
    if types:
        return [int(window) if t == "sliding_attention" else None for t in types[:n_layers]]
    model_type = cfg.get("model_type", "")
    if window and model_type.startswith("gemma3"):
        pattern = int(need(cfg, "sliding_window_pattern", model_type))  # or Gemma3TextConfig's (config_defaults)
        return [None if (i + 1) % pattern == 0 else int(window) for i in range(n_layers)]
    if window and model_type == "gemma2":
        return [int(window) if i % 2 == 0 else None for i in range(n_layers)]
    if window and cfg.get("use_sliding_window", True) and model_type in ("mistral",):
        return [int(window)] * n_layers
    return [None] * n_layers


def layer_rotary(m: ModelGraph, cfg: dict, head_dim: int, window: int | None):
    """The rotary cache of one attention layer: gemma3's sliding layers override the config with
    rope_local_base_freq and no scaling (gemma3.py Gemma3Attention); every other layer uses the
    config's rope (llama.py, qwen3.py, gpt_oss.py, ...)."""
    if window and m.model_type.startswith("gemma3"):
        return rotary_cache(m, head_dim, m.max_position, {"rope_type": "default"}, base=cfg.get("rope_local_base_freq"))
    return rotary_cache(m, head_dim, m.max_position, rope_parameters(cfg), base=cfg.get("rope_theta"),
                        rotary_dim=cfg.get("rotary_dim") if m.model_type in ROTARY_DIM_FIELD else None,
                        partial_rotary_factor=cfg.get("partial_rotary_factor"))


def build(source, override: str | None) -> ModelGraph:
    cfg = source.config
    model_type = cfg.get("model_type", "")
    family = "moe" if model_type in MOE or model_type == "gpt_oss" else "dense"
    hidden = need(cfg, "hidden_size", model_type)
    n_layers = need(cfg, "num_hidden_layers", model_type)
    heads = need(cfg, "num_attention_heads", model_type)
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or hidden // heads
    vocab = need(cfg, "vocab_size", model_type)
    dtype = model_dtype(cfg)
    quant = quantization(cfg, source.hf_quant_config, dtype, override)
    make = TensorMaker(quant, dtype)
    windows = layer_windows(cfg, n_layers)
    experts = 0
    if family == "moe":
        experts = cfg.get("num_experts") or cfg.get("num_local_experts") or need(cfg, "num_experts", model_type)
    activation = "moe" if experts else ("llama" if model_type in LLAMA_LIKE else "dense")
    max_position = need(cfg, "max_position_embeddings", model_type)
    m = ModelGraph(source.name, source.hf_id, model_type, family, activation, dtype, hidden, vocab, heads, kv_heads,
                   max_position, routed_experts=experts, quantization=quant.method)
    m.conventions.append("embedding and LM head at the checkpoint width, rows padded to the vocab padding then "
                         "divided across the tensor-parallel group (VocabParallelEmbedding / ParallelLMHead)")
    bias = bool(cfg.get("attention_bias")) or model_type == "qwen2"
    prev = m.add("embed_tokens", "embedding", tensors=[make.plain("embed_tokens", vocab, hidden, "vocab")])
    mlp_only = set(cfg.get("mlp_only_layers") or [])
    sparse_step = cfg.get("decoder_sparse_step", 1) or 1
    for i in range(n_layers):
        p = f"layers.{i}"
        tensors = [
            make.linear(f"{p}.self_attn.q_proj", heads * head_dim, hidden, "column"),
            make.linear(f"{p}.self_attn.k_proj", kv_heads * head_dim, hidden, "heads", heads=kv_heads),
            make.linear(f"{p}.self_attn.v_proj", kv_heads * head_dim, hidden, "heads", heads=kv_heads),
            make.linear(f"{p}.self_attn.o_proj", hidden, heads * head_dim, "row"),
            make.plain(f"{p}.input_layernorm", hidden),
        ]
        if bias:
            tensors += [make.plain(f"{p}.self_attn.q_bias", heads * head_dim, 1, "column"),
                        make.plain(f"{p}.self_attn.k_bias", kv_heads * head_dim, 1, "heads", heads=kv_heads),
                        make.plain(f"{p}.self_attn.v_bias", kv_heads * head_dim, 1, "heads", heads=kv_heads)]
        if model_type in QK_NORM:
            tensors += [make.plain(f"{p}.self_attn.q_norm", head_dim), make.plain(f"{p}.self_attn.k_norm", head_dim)]
        if model_type in QK_NORM_ALL_HEADS:
            tensors += [make.plain(f"{p}.self_attn.q_norm", heads * head_dim, 1, "column"),
                        make.plain(f"{p}.self_attn.k_norm", kv_heads * head_dim, 1, "heads", heads=kv_heads)]
        if model_type == "gpt_oss":
            tensors.append(make.plain(f"{p}.self_attn.sinks", heads, 1, "column", fmt="fp32"))
        cache = AttentionCache("gqa", kv_heads, head_dim, head_dim, window=windows[i])
        attn = m.add(f"{p}.self_attn", "attention", layer=i, tensors=tensors, cache=cache,
                     buffers=[layer_rotary(m, cfg, head_dim, windows[i])])
        m.flow(prev, attn)
        norm = [make.plain(f"{p}.post_attention_layernorm", hidden)]
        if model_type in SANDWICH_NORM:
            norm += [make.plain(f"{p}.pre_feedforward_layernorm", hidden),
                     make.plain(f"{p}.post_feedforward_layernorm", hidden)]
        if experts and i not in mlp_only and (i + 1) % sparse_step == 0:
            inter = cfg.get("moe_intermediate_size") or cfg.get("intermediate_size")
            router_bias = model_type == "gpt_oss"
            if model_type in FP32_ROUTER:
                router = [make.plain(f"{p}.mlp.gate", experts, hidden, fmt="fp32")]
                if cfg.get("use_routing_bias"):
                    router.append(make.plain(f"{p}.mlp.e_score_correction_bias", experts, fmt="fp32"))
            else:
                router = [make.plain(f"{p}.mlp.router", experts, hidden)]
            ffn = router + [
                   make.linear(f"{p}.mlp.experts.w13", 2 * inter, hidden, "expert_column", expert_count=experts),
                   make.linear(f"{p}.mlp.experts.w2", hidden, inter, "expert_row", expert_count=experts)]
            if router_bias:
                ffn += [make.plain(f"{p}.mlp.router_bias", experts),
                        make.plain(f"{p}.mlp.experts.w13_bias", 2 * inter, 1, "expert_column", count=experts),
                        make.plain(f"{p}.mlp.experts.w2_bias", hidden, 1, "expert_row", count=experts)]
            shared = cfg.get("shared_expert_intermediate_size") or 0
            if shared:
                ffn += dense_mlp(make, f"{p}.mlp.shared_expert", hidden, shared)
                ffn.append(make.plain(f"{p}.mlp.shared_expert_gate", 1, hidden))
            mlp = m.add(f"{p}.mlp", "moe", layer=i, tensors=norm + ffn)
        else:
            inter = need(cfg, "intermediate_size", model_type)
            mlp = m.add(f"{p}.mlp", "mlp", layer=i, tensors=norm + dense_mlp(make, f"{p}.mlp", hidden, inter))
        m.flow(attn, mlp)
        prev = mlp
    add_final_norm_and_head(m, make, cfg, prev)
    add_vision_tower(m, make, cfg, "layers.0.self_attn")
    return m
