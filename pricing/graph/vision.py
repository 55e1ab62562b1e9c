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

from pricing.config.defaults import class_defaults
from pricing.graph.common import TensorMaker, need
from pricing.registry import load

TOWER = "image"


def _vision_config(cfg: dict) -> dict:
    """The wrapper's vision_config with its config class's defaults filled in."""
    vision = dict(cfg["vision_config"])
    for key, value in class_defaults(str(vision.get("model_type", ""))).items():
        vision.setdefault(key, value)
    return vision


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
    reg = load()
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


TOWERS = {"siglip_vision_model": siglip_tower}
PROJECTORS = {"gemma3": gemma3_projector}


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
    last = tower(m, make, vision, "vision_tower")
    proj = projector(m, make, vision, m.hidden_size)
    m.flow(last, proj)
    m.flow(proj, first_decoder_node)
    m.conventions.append(f"vision tower ({vision['model_type']}, {vision['num_hidden_layers']} layers) and "
                         "projector held with the weights on every rank (vLLM builds them unless every image "
                         "limit is 0); no KV cache, not run by a decode step")
