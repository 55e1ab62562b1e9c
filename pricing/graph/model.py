"""The model graph: a networkx DAG of layers, plus the few model-wide facts the kernel needs."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace

import networkx as nx

from pricing.errors import InputError


@dataclass(eq=False)
class ModelGraph:
    """A model as vLLM builds it: nodes are layers (see graph/nodes.py), edges data flow and
    cache sharing. Model-wide facts sit beside the graph (`extras`: what the config states).

    What is worked out from the nodes and edges (their walk order, the tensors sized per layer,
    a pipeline stage's part, the kernel's memo of its answers) is kept in the graph's own derived
    store, keyed by what it depends on beside the graph, and dropped whole by every edit (`add`,
    `flow`, `reads_cache`): an answer never outlives the graph it was worked out from. A graph is
    never a key (it is not hashable): two graphs are two models, however alike."""

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
    _derived: dict = field(default_factory=dict, init=False, repr=False)

    __hash__ = None  # mutable while it is built: never a memo key (its derived store is the memo)

    @property
    def cache_kv_heads(self) -> int:
        """KV heads one attention layer's cache holds: the model's KV heads under grouped-query
        attention, one (latent) head for MLA and DeepSeek's compressed caches."""
        return max(1, self.num_kv_heads) if self.attention_backend == "gqa" else 1

    def derived(self, key, compute):
        """compute(), once per `key` until the graph is next edited. `key` holds the values the
        fact depends on beside the graph (a chip, a registry, a stage), never an identity."""
        store = self._derived
        try:
            return store[key]
        except KeyError:
            value = store[key] = compute()
            return value

    def _edited(self) -> None:
        self._derived.clear()

    # -- building ---------------------------------------------------------------------------
    def add(self, node: str, kind: str, *, layer: int | None = None, tensors=(), cache=None, caches=(),
            state=None, speculative: str | None = None, tower: str | None = None, buffers=(),
            routing=None) -> str:
        self.g.add_node(node, kind=kind, layer=layer, tensors=tuple(tensors), cache=cache, caches=tuple(caches),
                        state=state, speculative=speculative, tower=tower, routing=routing,
                        buffers=tuple(b for b in buffers if b is not None))
        self._edited()
        return node

    def flow(self, src: str, dst: str) -> None:
        self.g.add_edge(src, dst, flow="data")
        self._edited()

    def reads_cache(self, owner: str, reader: str, cache: str) -> None:
        self.g.add_edge(owner, reader, flow="reads_cache", cache=cache)
        self._edited()

    def part(self, nodes, conventions: list[str]) -> ModelGraph:
        """A new graph of `nodes` only (a pipeline stage's layers), with the same model-wide facts
        and `conventions`; it derives its own facts."""
        return replace(self, g=self.g.subgraph(nodes).copy(), extras=dict(self.extras), conventions=conventions)

    def copy(self) -> ModelGraph:
        """An independent graph to edit: the same nodes (their data copied, the tensors and caches
        they hold are immutable values), facts and conventions."""
        return replace(self, g=self.g.copy(), extras=copy.deepcopy(self.extras), conventions=list(self.conventions))

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
        order = self.derived("topological_order",
                             lambda: tuple(nx.lexicographical_topological_sort(self.g, key=_natural)))
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
        return self.derived("has_window_caches", lambda: any(
            (d["cache"] is not None and d["cache"].window) or any(c.bound == "window" for c in d["caches"])
            for _, d in self.g.nodes(data=True)))


def _natural(name: str):
    parts = []
    for piece in name.replace("-", ".").split("."):
        parts.append((0, int(piece), "") if piece.isdigit() else (1, 0, piece))
    return tuple(parts)
