"""Hybrid decoders whose layers keep a recurrent state per request beside attention layers:

  qwen3_next, qwen3_5_moe   gated delta networks (GDN) every layer but each full_attention_interval-th,
                            gated GQA attention on the others, MoE with a shared expert
  nemotron_h                Mamba-2 mixers, GQA attention, MLP or MoE layers, per hybrid_override_pattern
  kimi_linear               Kimi delta attention (KDA) layers beside MLA layers, MoE after the first layer

Layer placement follows vLLM's model files (qwen3_next.py, qwen3_5.py, nemotron_h.py,
kimi_linear.py; mixers in layers/mamba/): projections into the mixer are column-parallel, out
projections row-parallel, the per-head vectors (A, D, dt_bias) divided like the heads. The state
a layer keeps is a RecurrentState (graph/nodes.py); its shape per rank is resolved by the kernel
(kernel/recurrent_state.py).
"""

from __future__ import annotations

from pricing.graph import mla
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
from pricing.graph.nodes import AttentionCache, RecurrentState
from pricing.graph.rotary import rope_parameters, rotary_cache
from pricing.graph.vision import add_vision_tower

QWEN = {"qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text"}
NEMOTRON = {"nemotron_h"}
KIMI = {"kimi_linear"}
FAMILIES = QWEN | NEMOTRON | KIMI

# torch dtype names a config may give for the recurrent (SSM) state
STATE_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def ssm_dtype(cfg: dict) -> str:
    """The temporal state's dtype: the config's mamba_ssm_dtype / mamba_ssm_cache_dtype, which
    vLLM copies into mamba_ssm_cache_dtype when that is "auto"; else the conv state's (model) dtype."""
    raw = cfg.get("mamba_ssm_dtype") or cfg.get("mamba_ssm_cache_dtype")
    return STATE_DTYPES.get(str(raw), "model") if raw else "model"


def _base(source, override: str | None, cfg: dict, model_type: str, *, kv_heads: int, note: str, experts: int,
          max_position: int, backend: str, speculative=()) -> tuple[ModelGraph, TensorMaker]:
    dtype = model_dtype(cfg)
    quant = quantization(cfg, source.hf_quant_config, dtype, override)
    make = TensorMaker(quant, dtype)
    m = ModelGraph(source.name, source.hf_id, model_type, "hybrid", "moe" if experts else "dense", dtype,
                   need(cfg, "hidden_size", model_type), need(cfg, "vocab_size", model_type),
                   need(cfg, "num_attention_heads", model_type), kv_heads, max_position, routed_experts=experts,
                   speculative_methods=tuple(speculative), quantization=quant.method, attention_backend=backend)
    m.conventions += [
        "recurrent layers keep one state per request (conv + temporal), each rank its tensor-parallel share of the "
        "heads and channels (vLLM mamba_utils.py MambaStateShapeCalculator)",
        note,
        "embedding and LM head at the checkpoint width, rows padded to the vocab padding then divided across the "
        "tensor-parallel group (VocabParallelEmbedding / ParallelLMHead)",
    ]
    return m, make


def _ends(m: ModelGraph, make: TensorMaker, cfg: dict, prev: str, final_name: str = "norm") -> str:
    return add_final_norm_and_head(m, make, cfg, prev, final_name)


# -- Qwen3-Next / Qwen3.5: gated delta networks ------------------------------------------------------

def gdn_state(cfg: dict) -> RecurrentState:
    """GatedDeltaNet state: conv over q, k, v (2 × head_k × k_heads + head_v × v_heads channels),
    temporal (v_heads, head_v, head_k) (mamba_utils.gated_delta_net_state_shape)."""
    nk, nv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    hk, hv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
    return RecurrentState("gated_delta", 2 * hk * nk + hv * nv, cfg["linear_conv_kernel_dim"], nv, hv, hk,
                          ssm_dtype=ssm_dtype(cfg), chunk_size=int(cfg.get("mamba_chunk_size") or 0))


def gdn_tensors(make: TensorMaker, cfg: dict, p: str) -> list:
    """Qwen3NextGatedDeltaNet: in_proj_qkvz and in_proj_ba column-parallel, conv1d over the q, k, v
    channels, A_log / dt_bias per value head, a gated RMS norm of one head, out_proj row-parallel.
    vLLM builds both projections as MergedColumnParallelLinear (layers/mamba/gdn/qwen_gdn_linear_attn.py
    create_qkvz_proj / create_ba_proj): Qwen3-Next (gqa_interleaved_layout, qwen3_next.py) one output
    each, interleaved by key-head group; Qwen3.5 (qwen3_5.py) four outputs [key, key, value, value] and two
    [value heads, value heads]."""
    hidden = cfg["hidden_size"]
    nk, nv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    key_dim, value_dim = nk * cfg["linear_key_head_dim"], nv * cfg["linear_value_head_dim"]
    conv_dim = 2 * key_dim + value_dim
    interleaved = cfg.get("model_type") == "qwen3_next"
    return [make.linear(f"{p}.in_proj_qkvz", 2 * key_dim + 2 * value_dim, hidden, "column",
                        outputs=(2 * key_dim + 2 * value_dim,) if interleaved else (key_dim, key_dim, value_dim,
                                                                                     value_dim)),
            make.linear(f"{p}.in_proj_ba", 2 * nv, hidden, "column", outputs=(2 * nv,) if interleaved else (nv, nv)),
            make.plain(f"{p}.conv1d", conv_dim, cfg["linear_conv_kernel_dim"], "column"),
            make.plain(f"{p}.A_log", nv, 1, "column"),
            make.plain(f"{p}.dt_bias", nv, 1, "column"),
            make.plain(f"{p}.norm", cfg["linear_value_head_dim"]),
            make.linear(f"{p}.out_proj", hidden, value_dim, "row")]


def gated_attention_tensors(make: TensorMaker, cfg: dict, p: str) -> list:
    """Qwen3NextAttention: q_proj carries the output gate (2 × heads × head_dim rows when
    attn_output_gate), per-head q/k RMS norms."""
    hidden, heads, kv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or hidden // heads
    gate = 2 if cfg.get("attn_output_gate", True) else 1
    return [make.linear(f"{p}.q_proj", gate * heads * hd, hidden, "column"),
            make.linear(f"{p}.k_proj", kv * hd, hidden, "heads", heads=kv),
            make.linear(f"{p}.v_proj", kv * hd, hidden, "heads", heads=kv),
            make.linear(f"{p}.o_proj", hidden, heads * hd, "row"),
            make.plain(f"{p}.q_norm", hd), make.plain(f"{p}.k_norm", hd)]


def qwen_moe_tensors(make: TensorMaker, cfg: dict, p: str) -> list:
    hidden, experts = cfg["hidden_size"], cfg["num_experts"]
    inter, shared = cfg["moe_intermediate_size"], cfg.get("shared_expert_intermediate_size") or 0
    t = routed_moe(make, p, hidden, inter, experts, shared, score_bias=False, shared_name="shared_expert")
    if shared:
        t.append(make.plain(f"{p}.shared_expert_gate", 1, hidden))
    return t


def qwen_layer_is_linear(cfg: dict, i: int) -> bool:
    types = cfg.get("layer_types")
    if types:
        return types[i] == "linear_attention"
    return (i + 1) % int(cfg.get("full_attention_interval", 4)) != 0


def build_qwen(source, override: str | None) -> ModelGraph:
    cfg = source.config
    model_type = cfg.get("model_type", "")
    n_layers = need(cfg, "num_hidden_layers", model_type)
    for field in ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
                  "linear_conv_kernel_dim", "num_key_value_heads", "num_experts", "moe_intermediate_size"):
        need(cfg, field, model_type)
    n_mtp = int(cfg.get("mtp_num_hidden_layers") or cfg.get("num_nextn_predict_layers") or 0)
    m, make = _base(source, override, cfg, model_type, kv_heads=cfg["num_key_value_heads"], experts=cfg["num_experts"],
                    max_position=need(cfg, "max_position_embeddings", model_type), backend="gqa",
                    note="q_proj carries the attention output gate (2 × heads × head_dim rows)",
                    speculative=("mtp",) if n_mtp else ())
    hidden, hd = cfg["hidden_size"], cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"]
    state = gdn_state(cfg)
    # qwen3_next.py Qwen3NextAttention / qwen3_5.py: one rope (mrope on Qwen3.5) over a partial rotary width
    rotary = [rotary_cache(m, hd, m.max_position, rope_parameters(cfg), base=cfg.get("rope_theta"),
                           partial_rotary_factor=cfg.get("partial_rotary_factor"))]
    mlp_only = set(cfg.get("mlp_only_layers") or [])
    step = cfg.get("decoder_sparse_step", 1) or 1

    def ffn(i: int, p: str, speculative: str | None) -> str:
        norm = [make.plain(f"{p}.post_attention_layernorm", hidden)]
        if i in mlp_only or (i + 1) % step:
            inter = need(cfg, "intermediate_size", model_type)
            return m.add(f"{p}.mlp", "mlp", layer=i, speculative=speculative,
                         tensors=norm + dense_mlp(make, f"{p}.mlp", hidden, inter))
        return m.add(f"{p}.mlp", "moe", layer=i, speculative=speculative,
                     tensors=norm + qwen_moe_tensors(make, cfg, f"{p}.mlp"))

    prev = m.add("embed_tokens", "embedding", tensors=[make.plain("embed_tokens", m.vocab_size, hidden, "vocab")])
    for i in range(n_layers):
        p = f"layers.{i}"
        norm = [make.plain(f"{p}.input_layernorm", hidden)]
        if qwen_layer_is_linear(cfg, i):
            mixer = m.add(f"{p}.linear_attn", "mixer", layer=i, state=state,
                          tensors=norm + gdn_tensors(make, cfg, f"{p}.linear_attn"))
        else:
            mixer = m.add(f"{p}.self_attn", "attention", layer=i, cache=AttentionCache("gqa", kv, hd, hd),
                          tensors=norm + gated_attention_tensors(make, cfg, f"{p}.self_attn"), buffers=rotary)
        m.flow(prev, mixer)
        prev = ffn(i, p, None)
        m.flow(mixer, prev)
    final = _ends(m, make, cfg, prev)
    add_vision_tower(m, make, cfg, "layers.0.linear_attn" if qwen_layer_is_linear(cfg, 0) else "layers.0.self_attn")
    if n_mtp:
        m.conventions.append("MTP layers (fc over [embedding; hidden], one full-attention MoE layer) share the "
                             "target's embedding and LM head and are held only while speculating")
    mtp_prev = final
    for j in range(n_mtp):
        i = n_layers + j
        p = f"mtp.layers.{j}"
        proj = add_mtp_projection(m, make, i, f"mtp.{j}.fc", (f"mtp.{j}.pre_fc_norm_embedding",
                                  f"mtp.{j}.pre_fc_norm_hidden", f"mtp.{j}.norm"), "column", mtp_prev)
        attn = m.add(f"{p}.self_attn", "attention", layer=i, speculative="mtp", cache=AttentionCache("gqa", kv, hd, hd),
                     tensors=[make.plain(f"{p}.input_layernorm", hidden)]
                     + gated_attention_tensors(make, cfg, f"{p}.self_attn"), buffers=rotary)
        m.flow(proj, attn)
        mtp_prev = ffn(i, p, "mtp")
        m.flow(attn, mtp_prev)
    return m


# -- Nemotron-H: Mamba-2 mixers ------------------------------------------------------------------

def mamba2_state(cfg: dict) -> RecurrentState:
    """Mamba-2 state: conv over x, B, C (intermediate + 2 × n_groups × d_state channels), temporal
    (heads, head_dim, d_state) (mamba_utils.mamba2_state_shape)."""
    heads, head_dim, d_state = cfg["mamba_num_heads"], cfg["mamba_head_dim"], cfg["ssm_state_size"]
    return RecurrentState("mamba2", heads * head_dim, cfg["conv_kernel"], heads, head_dim, d_state,
                          groups=cfg["n_groups"], group_channels=2 * d_state, ssm_dtype=ssm_dtype(cfg),
                          chunk_size=int(cfg.get("mamba_chunk_size") or cfg.get("chunk_size") or 0))


def mamba2_tensors(make: TensorMaker, cfg: dict, p: str) -> list:
    """MambaMixer2: in_proj to [z, x, B, C, dt] (2 × intermediate + 2 × n_groups × d_state + heads
    rows), conv1d over x, B, C with its bias, A and D in fp32 and dt_bias per head, a gated RMS
    norm over the intermediate width, out_proj row-parallel."""
    hidden = cfg["hidden_size"]
    heads, d_state, groups = cfg["mamba_num_heads"], cfg["ssm_state_size"], cfg["n_groups"]
    inter = heads * cfg["mamba_head_dim"]
    conv_dim = inter + 2 * groups * d_state
    # vLLM builds in_proj as MergedColumnParallelLinear [z, x, B, C, dt] where tp divides n_groups
    # (layers/mamba/mamba_mixer2.py MambaMixer2.__init__)
    t = [make.linear(f"{p}.in_proj", 2 * inter + 2 * groups * d_state + heads, hidden, "column",
                     outputs=(inter, inter, groups * d_state, groups * d_state, heads)),
         make.plain(f"{p}.conv1d", conv_dim, cfg["conv_kernel"], "column"),
         make.plain(f"{p}.A", heads, 1, "column", fmt="fp32"),
         make.plain(f"{p}.D", heads, 1, "column", fmt="fp32"),
         make.plain(f"{p}.dt_bias", heads, 1, "column"),
         make.plain(f"{p}.norm", inter, 1, "column"),
         make.linear(f"{p}.out_proj", hidden, inter, "row")]
    if cfg.get("use_conv_bias", True):
        t.append(make.plain(f"{p}.conv1d_bias", conv_dim, 1, "column"))
    if cfg.get("mamba_proj_bias"):
        t += [make.plain(f"{p}.in_proj_bias", 2 * inter + 2 * groups * d_state + heads, 1, "column"),
              make.plain(f"{p}.out_proj_bias", hidden)]
    return t


def build_nemotron(source, override: str | None) -> ModelGraph:
    cfg = source.config
    model_type = cfg.get("model_type", "")
    pattern = need(cfg, "hybrid_override_pattern", model_type)
    for field in ("mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel",
                  "num_key_value_heads"):
        need(cfg, field, model_type)
    hidden, heads, kv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or cfg.get("attention_head_dim") or hidden // heads
    experts = int(cfg.get("n_routed_experts") or 0) if "E" in pattern else 0
    m, make = _base(source, override, cfg, model_type, kv_heads=kv, experts=experts,
                    max_position=need(cfg, "max_position_embeddings", model_type), backend="gqa",
                    note="MLP and expert activations are relu2 (not gated): one up projection per expert")
    m.conventions.append("Mamba-2 in_proj assumes tp divides n_groups (groups are replicated otherwise)")
    state = mamba2_state(cfg)
    prev = m.add("embeddings", "embedding", tensors=[make.plain("embeddings", m.vocab_size, hidden, "vocab")])
    for i, kind in enumerate(pattern):
        p = f"layers.{i}"
        norm = [make.plain(f"{p}.norm", hidden)]
        if kind == "M":
            node = m.add(f"{p}.mixer", "mixer", layer=i, state=state,
                         tensors=norm + mamba2_tensors(make, cfg, f"{p}.mixer"))
        elif kind == "*":
            node = m.add(f"{p}.mixer", "attention", layer=i, cache=AttentionCache("gqa", kv, hd, hd), tensors=norm + [
                make.linear(f"{p}.mixer.q_proj", heads * hd, hidden, "column"),
                make.linear(f"{p}.mixer.k_proj", kv * hd, hidden, "heads", heads=kv),
                make.linear(f"{p}.mixer.v_proj", kv * hd, hidden, "heads", heads=kv),
                make.linear(f"{p}.mixer.o_proj", hidden, heads * hd, "row")])
        elif kind == "-":
            inter = need(cfg, "intermediate_size", model_type)
            node = m.add(f"{p}.mixer", "mlp", layer=i, tensors=norm + [
                make.linear(f"{p}.mixer.up_proj", inter, hidden, "column"),
                make.linear(f"{p}.mixer.down_proj", hidden, inter, "row")])
        elif kind == "E":
            inter = need(cfg, "moe_intermediate_size", model_type)
            shared = int(cfg.get("moe_shared_expert_intermediate_size") or 0) * int(cfg.get("n_shared_experts") or 1)
            t = norm + [make.plain(f"{p}.mixer.gate", experts, hidden, fmt="fp32"),
                        make.plain(f"{p}.mixer.gate.e_score_correction_bias", experts, fmt="fp32"),
                        make.linear(f"{p}.mixer.experts.w13", inter, hidden, "expert_column", expert_count=experts),
                        make.linear(f"{p}.mixer.experts.w2", hidden, inter, "expert_row", expert_count=experts)]
            if shared:
                t += [make.linear(f"{p}.mixer.shared_experts.up_proj", shared, hidden, "column"),
                      make.linear(f"{p}.mixer.shared_experts.down_proj", hidden, shared, "row")]
            node = m.add(f"{p}.mixer", "moe", layer=i, tensors=t)
        else:
            raise ValueError(f"unknown layer kind {kind!r} in hybrid_override_pattern")
        m.flow(prev, node)
        prev = node
    _ends(m, make, cfg, prev, "norm_f")
    return m


# -- Kimi-Linear: Kimi delta attention beside MLA -------------------------------------------------

def kda_state(cfg: dict) -> RecurrentState:
    """KDA state: conv over q, k, v (3 × heads × head_dim channels), temporal (heads, head_dim,
    head_dim) always in fp32 (mamba_utils.kda_state_shape / kda_state_dtype)."""
    lin = cfg["linear_attn_config"]
    heads, dim = lin["num_heads"], lin["head_dim"]
    return RecurrentState("kda", 3 * heads * dim, lin["short_conv_kernel_size"], heads, dim, dim, ssm_dtype="fp32",
                          chunk_size=int(cfg.get("mamba_chunk_size") or 0))


def kda_tensors(make: TensorMaker, cfg: dict, p: str) -> list:
    """KimiDeltaAttention as vLLM 0.33 builds it (layers/mamba/gdn/kimi_gdn_linear_attn.py
    KimiGatedDeltaNetAttention, without a full-rank gate): the q, k, v, b (beta) and f_a projections fused
    into one merged column layer in_proj_qkvgfab of outputs [q, k, v, heads, head_dim], the last (f_a)
    replicated on every rank (_KimiGDNMergedColumnParallelLinear, replicated_shard_id 4); one short conv per
    q, k, v, the forget gate's f_b and the output gate's g_b column-parallel after a replicated g_a, A_log and
    dt_bias in fp32, a gated RMS norm of one head, o_proj row-parallel."""
    hidden, lin = cfg["hidden_size"], cfg["linear_attn_config"]
    heads, dim, kernel = lin["num_heads"], lin["head_dim"], lin["short_conv_kernel_size"]
    proj = heads * dim
    outputs = (proj, proj, proj, heads, dim)  # q, k, v, b, f_a
    t = [make.linear(f"{p}.in_proj_qkvgfab", sum(outputs), hidden, "column", outputs=outputs, replicated_output=4)]
    t += [make.plain(f"{p}.{name}_conv1d", proj, kernel, "column") for name in ("q", "k", "v")]
    t += [make.linear(f"{p}.f_b_proj", proj, dim, "column"),
          make.plain(f"{p}.dt_bias", proj, 1, "column", fmt="fp32"),
          make.plain(f"{p}.A_log", heads, 1, "column", fmt="fp32"),
          make.linear(f"{p}.g_a_proj", dim, hidden, "replicated"),
          make.linear(f"{p}.g_b_proj", proj, dim, "column"),
          make.plain(f"{p}.o_norm", dim),
          make.linear(f"{p}.o_proj", hidden, proj, "row")]
    return t


def kimi_ffn_tensors(make: TensorMaker, cfg: dict, p: str, dense: bool) -> list:
    hidden = cfg["hidden_size"]
    if dense:
        return dense_mlp(make, p, hidden, cfg["intermediate_size"])
    inter = cfg["moe_intermediate_size"]
    shared = int(cfg.get("num_shared_experts") or 0) * inter
    return routed_moe(make, p, hidden, inter, cfg["num_experts"], shared)


def build_kimi(source, override: str | None) -> ModelGraph:
    cfg = source.config
    model_type = cfg.get("model_type", "")
    lin = need(cfg, "linear_attn_config", model_type)
    n_layers = need(cfg, "num_hidden_layers", model_type)
    for field in ("kv_lora_rank", "qk_rope_head_dim", "num_experts", "moe_intermediate_size"):
        need(cfg, field, model_type)
    max_position = cfg.get("max_position_embeddings") or need(cfg, "model_max_length", model_type)
    m, make = _base(source, override, cfg, model_type, kv_heads=1, experts=cfg["num_experts"],
                    max_position=max_position, backend="mla",
                    note="kda_layers and full_attn_layers count layers from 1 (vLLM kimi_linear.py is_kda_layer: "
                         "layer_idx + 1 in kda_layers)")
    m.conventions.append("MLA layers: kv_a_proj_with_mqa replicated, q/kv_b column-parallel, one latent head "
                         "cached (kv_lora_rank + rope dim) that no tensor parallelism divides")
    kda = set(lin.get("kda_layers") or [])
    first_dense = int(cfg.get("first_k_dense_replace") or 0)
    hidden = cfg["hidden_size"]
    state = kda_state(cfg)
    cache = AttentionCache("mla", 1, cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"], 0)
    prev = m.add("embed_tokens", "embedding", tensors=[make.plain("embed_tokens", m.vocab_size, hidden, "vocab")])
    for i in range(n_layers):
        p = f"layers.{i}"
        norm = [make.plain(f"{p}.input_layernorm", hidden)]
        if i + 1 in kda:
            mixer = m.add(f"{p}.self_attn", "mixer", layer=i, state=state,
                          tensors=norm + kda_tensors(make, cfg, f"{p}.self_attn"))
        else:
            mixer = m.add(f"{p}.self_attn", "attention", layer=i, cache=cache,
                          tensors=norm + mla.attention_tensors(make, cfg, f"{p}.self_attn", model_type))
        m.flow(prev, mixer)
        dense = i < first_dense
        ffn = m.add(f"{p}.mlp", "mlp" if dense else "moe", layer=i, tensors=[
            make.plain(f"{p}.post_attention_layernorm", hidden)] + kimi_ffn_tensors(make, cfg, f"{p}.mlp", dense))
        m.flow(mixer, ffn)
        prev = ffn
    _ends(m, make, cfg, prev)
    return m


def build(source, override: str | None) -> ModelGraph:
    model_type = source.config.get("model_type", "")
    if model_type in NEMOTRON:
        return build_nemotron(source, override)
    if model_type in KIMI:
        return build_kimi(source, override)
    return build_qwen(source, override)
