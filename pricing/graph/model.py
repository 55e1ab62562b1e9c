"""The model graph: a networkx DAG of layers, plus the few model-wide facts the kernel needs."""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

from pricing.errors import InputError


@dataclass(eq=False)
class ModelGraph:
    """A model as vLLM builds it: nodes are layers (see graph/nodes.py), edges data flow and
    cache sharing. Model-wide facts sit beside the graph."""

    name: str
    hf_id: str
    model_type: str
    family: str  # builder family: dense | moe | mla | mla_sparse | deepseek_v4 | recurrent hybrids ...
    activation_family: str  # registry activation_buffers key: moe | dense | llama
    dtype: str
    hidden_size: int
    vocab_size: int
    num_attention_heads: int
    num_kv_heads: int
    max_position: int
    routed_experts: int = 0
    speculative_methods: tuple[str, ...] = ()
    quantization: str = "none"
    attention_backend: str = "gqa"  # gqa | mla | sparse_mla | deepseek_v4 | deepseek_v41
    conventions: list[str] = field(default_factory=list)
    origin: str = ""  # where the architecture was read: model card, folder, file, Hugging Face cache
    extras: dict = field(default_factory=dict)
    g: nx.DiGraph = field(default_factory=nx.DiGraph)

    def __hash__(self) -> int:
        return id(self)

    # -- building ---------------------------------------------------------------------------
    def add(self, node: str, kind: str, *, layer: int | None = None, tensors=(), cache=None, caches=(),
            state=None, speculative: str | None = None, tower: str | None = None, buffers=(),
            routing=None) -> str:
        self.g.add_node(node, kind=kind, layer=layer, tensors=tuple(tensors), cache=cache, caches=tuple(caches),
                        state=state, speculative=speculative, tower=tower, routing=routing,
                        buffers=tuple(b for b in buffers if b is not None))
        for fact in DERIVED_EXTRAS:  # facts derived from the nodes are worked out again
            self.extras.pop(fact, None)
        return node

    def flow(self, src: str, dst: str) -> None:
        self.g.add_edge(src, dst, flow="data")
        self.extras.pop("topological_order", None)  # an edge reorders the walk

    def reads_cache(self, owner: str, reader: str, cache: str) -> None:
        self.g.add_edge(owner, reader, flow="reads_cache", cache=cache)
        self.extras.pop("topological_order", None)

    def validate(self) -> ModelGraph:
        if not nx.is_directed_acyclic_graph(self.g):
            cycle = nx.find_cycle(self.g)
            raise InputError("model graph", f"has a cycle through {cycle[0][0]}", "the config's layer references loop")
        return self

    # -- reading ----------------------------------------------------------------------------
    def nodes(self, speculative: str | None = None, towers: bool = True):
        """(name, data) of the nodes held by a deployment speculating with `speculative`
        (None: not speculating, so drafter nodes are left out), in topological order.
        `towers=False` leaves out the multimodal encoders (held, but not run by a decode step)."""
        order = self.extras.get("topological_order")
        if order is None:  # a derived extra: worked out once per graph (DERIVED_EXTRAS)
            order = self.extras["topological_order"] = tuple(nx.lexicographical_topological_sort(self.g, key=_natural))
        nodes = self.g.nodes
        for name in order:
            data = nodes[name]
            if (data["speculative"] is None or data["speculative"] == speculative) and (towers or not data["tower"]):
                yield name, data

    @property
    def tower_nodes(self) -> list[str]:
        """The nodes of the multimodal encoders (vision tower and projector), if any."""
        return [n for n, d in self.g.nodes(data=True) if d["tower"]]

    @property
    def has_experts(self) -> bool:
        return self.routed_experts > 0

    @property
    def has_window_caches(self) -> bool:
        """Whether any layer keeps a sliding-window cache (generic or stated)."""
        if "has_window_caches" not in self.extras:
            self.extras["has_window_caches"] = any(
                (d["cache"] is not None and d["cache"].window) or any(c.bound == "window" for c in d["caches"])
                for _, d in self.g.nodes(data=True))
        return self.extras["has_window_caches"]


# facts the graph caches about its own nodes in `extras` (has_window_caches, the nodes' topological order,
# weights.tensor_groups, weights.rotary_caches, pipeline.backbone_layers): dropped when a node is added
# (the order also when an edge is), and derived anew by a pipeline stage's part of the graph
DERIVED_EXTRAS = ("has_window_caches", "topological_order", "tensor_groups", "rotary_caches", "backbone_layers",
                  "step_tally", "step_exchanges", "step_attention_layers")  # the last three: pricing/step/work.py


def _natural(name: str):
    parts = []
    for piece in name.replace("-", ".").split("."):
        parts.append((0, int(piece), "") if piece.isdigit() else (1, 0, piece))
    return tuple(parts)
