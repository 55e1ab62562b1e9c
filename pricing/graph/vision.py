"""Multimodal encoders as vLLM 0.33 builds them beside the decoder: the vision tower and the
projector that maps its features into the decoder's embedding space.

vLLM loads them with the weights (`Model loading took` counts them) on every rank, but they keep
no KV cache (their attention is encoder-only: `MMEncoderAttention`, no KV spec) and a decode step
never runs them; a tower node carries `tower="image"` (graph/nodes.py). vLLM skips building a
tower whose every modality is limited to zero (`--limit-mm-per-prompt '{"image": 0}'`, or
`--language-model-only`, which sets every limit to zero: interfaces.py `_mark_tower_model`); the
project plans the default, the tower loaded.

One builder per tower kind (the vision config's `model_type`) and one per projector kind (the
wrapper's `model_type`); a wrapper whose tower or projector is not here is said in the graph's
conventions (its weights are then not counted), never silently left out.
"""

from __future__ import annotations

from pricing.graph.common import TensorMaker, need
from pricing.registry import shipped

TOWER = "image"


def _vision_config(cfg: dict) -> dict:
    """The wrapper's vision_config, its config class's defaults filled in where the model's config
    was read (pricing/config/defaults.py decoder_config, with the command's registry)."""
    return dict(cfg["vision_config"])


def _siglip_mlp(make: TensorMaker, name: str, hidden: int, inter: int, quantized: bool) -> list:
    """SigLIP's MLP (siglip.py SiglipMLP): fc1 (ColumnParallelLinear) and fc2 (RowParallelLinear), with biases."""
    return [make.linear(f"{name}.fc1", inter, hidden, "column", quantized=quantized),
            make.plain(f"{name}.fc1.bias", inter, 1, "column"),
            make.linear(f"{name}.fc2", hidden, inter, "row", quantized=quantized),
            make.plain(f"{name}.fc2.bias", hidden)]


def siglip_tower(m, make: TensorMaker, vision: dict, prefix: str) -> str:
    """SigLIP's vision transformer (vLLM models/siglip.py SiglipVisionModel): the patch embedding
    (a Conv2d, never quantized) and the learned position embedding (nn.Embedding, replicated);
    per encoder layer q, k, v (QKVParallelLinear: the heads divided by tp) and out_proj
    (RowParallelLinear), each with its bias, LayerNorms 1 and 2 (weight and bias), fc1
    (ColumnParallelLinear) and fc2 (RowParallelLinear) with biases; the post LayerNorm, and the
    attention-pooling head when the config asks for it (vision_use_head). The quantization applies
    to q, k, v and out_proj; fc1 and fc2 are quantized only when hidden and intermediate sizes are
    multiples of the registry's alignment (bitsandbytes and torchao always). Returns the last node."""
    family = "siglip vision tower"
    hidden = need(vision, "hidden_size", family)
    inter = need(vision, "intermediate_size", family)
    layers = need(vision, "num_hidden_layers", family)
    patch = need(vision, "patch_size", family)
    channels = need(vision, "num_channels", family)
    positions = (need(vision, "image_size", family) // patch) ** 2
    reg = shipped()  # vLLM's rule for the tower's MLP, as the package states it (an overlay lays laws, not code)
    align = reg.value("quantization.vision_mlp_alignment")
    mlp_quantized = (make.quant.method in reg.value("quantization.vision_mlp_always_quantized")
                     or (hidden % align == 0 and inter % align == 0))
    p = f"{prefix}.vision_model"
    prev = m.add(f"{p}.embeddings", "embedding", tower=TOWER, tensors=[
        make.plain(f"{p}.embeddings.patch_embedding", hidden, channels * patch * patch),
        make.plain(f"{p}.embeddings.patch_embedding.bias", hidden),
        make.plain(f"{p}.embeddings.position_embedding", positions, hidden)])
    for i in range(layers):
        q = f"{p}.encoder.layers.{i}"
        attn = m.add(f"{q}.self_attn", "encoder", tower=TOWER, tensors=[
            make.plain(f"{q}.layer_norm1", hidden), make.plain(f"{q}.layer_norm1.bias", hidden),
            *(make.linear(f"{q}.self_attn.{x}_proj", hidden, hidden, "column") for x in "qkv"),
            *(make.plain(f"{q}.self_attn.{x}_proj.bias", hidden, 1, "column") for x in "qkv"),
            make.linear(f"{q}.self_attn.out_proj", hidden, hidden, "row"),
            make.plain(f"{q}.self_attn.out_proj.bias", hidden)])
        m.flow(prev, attn)
        mlp = m.add(f"{q}.mlp", "encoder", tower=TOWER, tensors=[
            make.plain(f"{q}.layer_norm2", hidden), make.plain(f"{q}.layer_norm2.bias", hidden),
            *_siglip_mlp(make, f"{q}.mlp", hidden, inter, mlp_quantized)])
        m.flow(attn, mlp)
        prev = mlp
    post = m.add(f"{p}.post_layernorm", "norm", tower=TOWER, tensors=[
        make.plain(f"{p}.post_layernorm", hidden), make.plain(f"{p}.post_layernorm.bias", hidden)])
    m.flow(prev, post)
    if vision.get("vision_use_head", True):
        h = f"{p}.head"
        head = m.add(h, "encoder", tower=TOWER, tensors=[
            make.plain(f"{h}.probe", hidden),
            make.plain(f"{h}.attention.in_proj_weight", 3 * hidden, hidden),
            make.plain(f"{h}.attention.in_proj_bias", 3 * hidden),
            make.plain(f"{h}.attention.out_proj", hidden, hidden),
            make.plain(f"{h}.attention.out_proj.bias", hidden),
            make.plain(f"{h}.layernorm", hidden), make.plain(f"{h}.layernorm.bias", hidden),
            *_siglip_mlp(make, f"{h}.mlp", hidden, inter, mlp_quantized)])
        m.flow(post, head)
        post = head
    return post


def gemma3_projector(m, make: TensorMaker, vision: dict, text_hidden: int) -> str:
    """Gemma 3's multimodal projector (vLLM models/gemma3_mm.py Gemma3MultiModalProjector): the
    soft-embedding RMSNorm over the vision width and the projection [vision hidden, text hidden],
    a plain parameter (never quantized, whole on every rank)."""
    hidden = need(vision, "hidden_size", "gemma3 projector")
    p = "multi_modal_projector"
    return m.add(p, "projection", tower=TOWER, tensors=[
        make.plain(f"{p}.mm_soft_emb_norm", hidden),
        make.plain(f"{p}.mm_input_projection_weight", hidden, text_hidden)])


def _biased(make: TensorMaker, name: str, rows: int, cols: int, placement: str) -> list:
    """A linear layer with its bias: the bias divided like the rows (column-parallel) or whole on
    every rank (row-parallel: added after the reduction)."""
    bias = make.plain(f"{name}.bias", rows, 1, "column") if placement == "column" else make.plain(f"{name}.bias", rows)
    return [make.linear(name, rows, cols, placement), bias]


def qwen3_vl_tower(m, make: TensorMaker, vision: dict, prefix: str) -> str:
    """Qwen3-VL's vision transformer, which Qwen3.5 and Qwen3.5-MoE load (vLLM models/qwen3_5.py
    imports qwen3_vl.py Qwen3_VisionTransformer): the patch embedding (a Conv3d over
    in_channels x temporal_patch_size x patch_size², with its bias, never quantized) and the learned
    position embedding (nn.Embedding, num_position_embeddings rows, replicated); per block
    (Qwen3_VisionBlock) LayerNorms 1 and 2 (weight and bias), the attention's qkv (QKVParallelLinear:
    the heads divided by tp) and proj (RowParallelLinear), the MLP's linear_fc1 (column) and
    linear_fc2 (row), each with its bias. The quantization's rules decide its linear layers (a
    ModelOpt MIXED_PRECISION checkpoint lists none of them). Returns the last node."""
    family = "qwen3-vl vision tower"
    hidden = need(vision, "hidden_size", family)
    inter = need(vision, "intermediate_size", family)
    depth = need(vision, "depth", family)
    patch = need(vision, "patch_size", family)
    kernel = need(vision, "in_channels", family) * need(vision, "temporal_patch_size", family) * patch * patch
    p = prefix
    prev = m.add(f"{p}.patch_embed", "embedding", tower=TOWER, tensors=[
        make.plain(f"{p}.patch_embed.proj", hidden, kernel),
        make.plain(f"{p}.patch_embed.proj.bias", hidden),
        make.plain(f"{p}.pos_embed", need(vision, "num_position_embeddings", family), hidden)])
    for i in range(depth):
        q = f"{p}.blocks.{i}"
        attn = m.add(f"{q}.attn", "encoder", tower=TOWER, tensors=[
            make.plain(f"{q}.norm1", hidden), make.plain(f"{q}.norm1.bias", hidden),
            *_biased(make, f"{q}.attn.qkv", 3 * hidden, hidden, "column"),
            *_biased(make, f"{q}.attn.proj", hidden, hidden, "row")])
        m.flow(prev, attn)
        mlp = m.add(f"{q}.mlp", "encoder", tower=TOWER, tensors=[
            make.plain(f"{q}.norm2", hidden), make.plain(f"{q}.norm2.bias", hidden),
            *_biased(make, f"{q}.mlp.linear_fc1", inter, hidden, "column"),
            *_biased(make, f"{q}.mlp.linear_fc2", hidden, inter, "row")])
        m.flow(attn, mlp)
        prev = mlp
    return prev


def qwen3_vl_merger(m, make: TensorMaker, vision: dict, text_hidden: int) -> str:
    """Qwen3-VL's patch merger (qwen3_vl.py Qwen3_VisionPatchMerger), the tower's projection into the
    decoder's width: a LayerNorm over the vision width (weight and bias), linear_fc1 over the
    spatial_merge_size² patches it merges (hidden x merge² square, column-parallel) and linear_fc2 to
    out_hidden_size (row-parallel), each with its bias; one more merger per
    deepstack_visual_indexes entry, its LayerNorm over the merged width (use_postshuffle_norm)."""
    family = "qwen3-vl patch merger"
    hidden = need(vision, "hidden_size", family)
    merged = hidden * need(vision, "spatial_merge_size", family) ** 2
    out = need(vision, "out_hidden_size", family)
    if out != text_hidden:
        raise ValueError(f"vision out_hidden_size {out} is not the decoder's hidden size {text_hidden}")

    def merger(name: str, norm: int) -> list:
        return [make.plain(f"{name}.norm", norm), make.plain(f"{name}.norm.bias", norm),
                *_biased(make, f"{name}.linear_fc1", merged, merged, "column"),
                *_biased(make, f"{name}.linear_fc2", out, merged, "row")]

    tensors = merger("visual.merger", hidden)
    for j in range(len(vision.get("deepstack_visual_indexes") or [])):
        tensors += merger(f"visual.deepstack_merger_list.{j}", merged)
    return m.add("visual.merger", "projection", tower=TOWER, tensors=tensors)


TOWERS = {"siglip_vision_model": siglip_tower,
          # Qwen3.5 / Qwen3.5-MoE vision configs name themselves so (the published files: qwen3_5_moe;
          # transformers 5.7 exports: qwen3_5_moe_vision / qwen3_5_vision)
          "qwen3_5": qwen3_vl_tower, "qwen3_5_moe": qwen3_vl_tower,
          "qwen3_5_vision": qwen3_vl_tower, "qwen3_5_moe_vision": qwen3_vl_tower}
PROJECTORS = {"gemma3": gemma3_projector, "qwen3_5": qwen3_vl_merger, "qwen3_5_moe": qwen3_vl_merger}
TOWER_PREFIX = {qwen3_vl_tower: "visual"}


def add_vision_tower(m, make: TensorMaker, cfg: dict, first_decoder_node: str) -> None:
    """The wrapper's vision tower and projector, feeding the decoder's first layer, when the
    project knows both kinds (the caller says a tower it could not add: build_graph)."""
    if not isinstance(cfg.get("vision_config"), dict):
        return
    vision = _vision_config(cfg)
    tower = TOWERS.get(str(vision.get("model_type")))
    projector = PROJECTORS.get(str(cfg.get("wrapper_model_type")))
    if tower is None or projector is None:
        return
    last = tower(m, make, vision, TOWER_PREFIX.get(tower, "vision_tower"))
    proj = projector(m, make, vision, m.hidden_size)
    m.flow(last, proj)
    m.flow(proj, first_decoder_node)
    layers = vision.get("num_hidden_layers") or vision.get("depth")
    m.conventions.append(f"vision tower ({vision['model_type']}, {layers} layers) and "
                         "projector held with the weights on every rank (vLLM builds them unless every image "
                         "limit is 0); no KV cache, not run by a decode step")
