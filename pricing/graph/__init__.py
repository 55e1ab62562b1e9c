"""config → graph: build the model DAG for a model source, by family."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

from pricing.config import ModelSource, resolve
from pricing.config.defaults import TOWER_KEYS
from pricing.config.quantization import read as read_quantization
from pricing.errors import InputError
from pricing.graph import deepseek_v4, mla, recurrent, transformer
from pricing.graph.model import ModelGraph
from pricing.graph.nodes import Routing
from pricing.registry import Registry, shipped

# each family module names the model types it builds (FAMILIES) and builds them (build)
BUILDERS = {model_type: family.build for family in (transformer, mla, deepseek_v4, recurrent)
            for model_type in family.FAMILIES}


def build_graph(source: ModelSource, quantization: str | None = None) -> ModelGraph:
    model_type = source.config.get("model_type")
    if not model_type:
        raise InputError("config.json: model_type", "missing", "add the model_type field of the architecture")
    builder = BUILDERS.get(model_type)
    if builder is None:
        known = ", ".join(sorted(BUILDERS))
        raise InputError("config.json: model_type", f"{model_type!r} is not a supported family",
                         f"supported: {known}")
    # the quantization first, so a method the project cannot size names the file it came from
    quant = read_quantization(source.config, source.hf_quant_config, "bf16", quantization,
                              source.origin or source.name)
    try:
        graph = builder(source, quantization)
    except (KeyError, TypeError, ValueError) as err:
        if isinstance(err, InputError):
            raise
        raise InputError("config.json", f"malformed for the {model_type} family ({err})",
                         "check the model's config.json fields") from None
    graph.origin = source.origin
    _grouped_heads(graph)
    _untowered(graph, source.config)
    _step_facts(graph, source.config)
    graph.extras["source_folder"] = source.folder  # the checkpoint cross-check reads its files
    graph.extras["checkpoint_kv_cache"] = quant.kv_cache  # the KV-cache scheme the checkpoint states
    return graph.validate()


def _grouped_heads(graph: ModelGraph) -> None:
    """Grouped-query attention shares each KV head among a whole number of query heads: vLLM's
    Attention layer asserts `num_heads % num_kv_heads == 0` (vllm/model_executor/layers/attention/attention.py)."""
    heads, kv = graph.num_attention_heads, graph.num_kv_heads
    if graph.attention_backend == "gqa" and kv and heads % kv:
        raise InputError("config.json num_key_value_heads", f"{kv} KV heads do not divide the {heads} attention "
                         f"heads of {graph.name} (each KV head serves a whole number of query heads)",
                         "check num_attention_heads and num_key_value_heads")


def _untowered(graph: ModelGraph, cfg: dict) -> None:
    """A wrapper's encoder the graph holds no tower for is said, here and only here (no builder
    says it): its weights are not counted. The config names it (vision_config, ...), or, where a
    card keeps the decoder only, the wrapper is all that shows there is one."""
    if graph.tower_nodes:
        return
    wrapper = cfg.get("wrapper_model_type")
    towers = [f"{key} ({cfg[key].get('model_type') or key}) of the {wrapper} wrapper"
              for key in TOWER_KEYS if isinstance(cfg.get(key), dict)]
    if not towers and wrapper:
        towers = [f"the {wrapper} wrapper's encoder (the config states none)"]
    for tower in towers:
        graph.conventions.append(f"{tower} not sized: its encoder's weights are not counted (vLLM loads them "
                                 "unless every modality's --limit-mm-per-prompt is 0)")


def _step_facts(graph: ModelGraph, cfg: dict) -> None:
    """The config facts the step-time model reads (pricing/step): on the MoE layers, the experts
    each token routes to (their Routing); beside the graph, the attention head width and the
    sparse-attention selection widths."""
    top_k = cfg.get("num_experts_per_tok") or cfg.get("experts_per_token") or cfg.get("moe_topk") or 0
    _routing(graph, int(top_k[0] if isinstance(top_k, list) else top_k))
    for key in ("index_n_heads", "index_head_dim", "candidate_topk_blocks", "candidate_block_size"):
        if cfg.get(key):
            graph.extras.setdefault(key, int(cfg[key]))
    heads = cfg.get("num_attention_heads") or 1
    graph.extras.setdefault("head_dim", int(cfg.get("head_dim") or (cfg.get("hidden_size") or 0) // heads))


def _routing(graph: ModelGraph, top_k: int) -> None:
    """Every MoE layer that does not state its own routing (graph/nodes.py Routing) routes each
    token to `top_k` (the config's experts per token) of the routed experts its tensors hold."""
    for _, data in graph.g.nodes(data=True):
        if data["kind"] != "moe" or data["routing"] is not None:
            continue
        experts = max((t.count for t in data["tensors"] if t.split.startswith("expert")), default=0)
        if experts:
            data["routing"] = Routing(experts, top_k)


def load_model(model: str, quantization: str | None = None, registry: Registry | None = None) -> ModelGraph:
    """The graph for `--model` (card name, path or cached HF id): a graph of the caller's own, to
    edit freely. Built once per source by value (its fields and config as text, so an edited
    config.json is read anew) and copied. Its config is read against `registry` (None: the shipped
    one), which keeps it."""
    return read_model(model, quantization, registry).copy()


def read_model(model: str, quantization: str | None = None, registry: Registry | None = None) -> ModelGraph:
    """The graph for `--model` to read and never to edit (checks of a model's facts: its positions,
    heads, drafters): the graph `load_model` copies, without the copy."""
    reg = registry or shipped()
    source = resolve(model, reg)
    text = _as_text(source)
    return reg.derived(("graph", text, quantization), lambda: _built(text, quantization))


def _as_text(source: ModelSource) -> str:
    return json.dumps({**{f.name: getattr(source, f.name) for f in fields(source)},
                       "folder": None if source.folder is None else str(source.folder)}, sort_keys=True)


def _built(source: str, quantization: str | None) -> ModelGraph:
    """The graph of a source given as text (`_as_text`), kept on the registry its config was read
    against (Registry.derived); never handed out, only copied."""
    data = json.loads(source)
    folder = data.pop("folder")
    return build_graph(ModelSource(**data, folder=None if folder is None else Path(folder)), quantization)
