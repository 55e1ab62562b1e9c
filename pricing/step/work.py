"""The work of one rank in one step, layer by layer, from the model graph.

For every node of the graph that one rank runs, its linear layers at the width they are served
in: 2 FLOPs per weight element per token, the weights read once per step, the activations read
and written. Routed experts are read only where the step's tokens reach them: with E experts of
which each token picks k, a batch of n tokens touches E·(1 − (1 − k/E)^n) distinct experts in
expectation (uniform routing), and each rank reads its share of those; E and k are the layer's own
(graph/nodes.py Routing: a DSpark drafter layer has 128 experts and top-3 where V4.1's backbone
has 384 and top-6). Work is grouped by (node kind, served format, routing): nodes of one group
have the same shape, so their roofline summed is the group's roofline.

The attention over the context and the caches it reads are priced apart (`ContextWork`), from the
memory kernel's own per-token cache bytes, so the step model never keeps a second copy of the
cache law.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import wraps

from pricing.graph.model import ModelGraph
from pricing.graph.nodes import Tensor, without_name
from pricing.kernel import Kernel
from pricing.kernel.weights import WeightSizer, shard
from pricing.step.rates import chip_rates
from pricing.step.roofline import expected_experts  # noqa: F401 (the law's one home; tests read it here)


@dataclass(frozen=True)
class LinearGroup:
    """The linear work of every node of one kind whose matrices are served in one format.

    flops_per_token / act_bytes_per_token scale with the tokens of the step; weight_bytes is read
    once per step. Expert terms: per MoE layer, `expert_bytes` and `expert_flops_per_token` of one
    local expert, `local_experts` held by this rank and `moe_layers` such layers, each routing a
    token to `top_k` of its `experts` routed experts."""

    kind: str
    fmt: str
    flops_per_token: int = 0
    weight_bytes: int = 0
    act_bytes_per_token: int = 0
    logits_only: bool = False  # the LM head runs on one token per request, not every token
    expert_bytes: int = 0
    expert_flops_per_token: int = 0
    local_experts: int = 0
    moe_layers: int = 0
    experts: int = 0
    top_k: int = 0
    gemms: tuple[tuple[int, int, int], ...] = ()  # (n, k, count): the group's matrix multiplies as vLLM runs them

    @property
    def gemm_weight_bytes(self) -> float:
        """Bytes per weight element of the group's matrix multiplies (the served format's, scales included)."""
        elements = sum(n * k * c for n, k, c in self.gemms)
        return self.weight_bytes / elements if elements else 0.0

    def routed_work(self, tokens: float) -> tuple[float, float]:
        """FLOPs and expert bytes of `tokens` tokens through this group's MoE layers, by the
        layers' own routing: each token runs top_k experts; the rank holds `local_experts` of the
        `experts` and reads the ones the tokens touch, its share of E·(1 − (1 − k/E)^n)."""
        if not self.moe_layers:
            return 0.0, 0.0
        share = self.local_experts / self.experts
        touched = share * expected_experts(self.experts, self.top_k, tokens)
        routed = share * tokens * min(self.top_k, self.experts)
        return (self.moe_layers * self.expert_flops_per_token * routed,
                self.moe_layers * self.expert_bytes * touched)


@dataclass(frozen=True)
class Collectives:
    """What one rank exchanges per token in one step: tensor-parallel all-reduces (one per
    row-parallel output) and expert all-to-alls (dispatch and combine per MoE layer)."""

    all_reduces: int  # per step, each of `hidden × activation bytes` per token
    all_to_all_layers: int  # MoE layers whose tokens cross the expert-parallel group
    hidden: int
    layers: int  # decoder layers (attention or recurrent mixer nodes) the rank runs
    top_k: int = 0  # experts each token is dispatched to in those layers (their routing's)


@dataclass(frozen=True)
class SparseLayers:
    """Layers that state their caches (DeepSeek-V4): each query attends its sliding window and,
    on compressed layers, the compressed records (one per `ratio` tokens), only the `topk` an
    indexer picks where the layer has one; the indexer itself scores every compressed record.
    V4.1 also names a candidate selection (candidate_topk_blocks × candidate_block_size tokens);
    it is taken to bound what its other compressed layers attend (read off the config's names,
    not checked against vLLM's kernels).

    count            layers of this kind on the rank
    pair_flops       FLOPs per (query, attended record) per layer: 2 × heads per rank × (K + V width)
    index_flops      FLOPs per (query, scored record) per layer for the indexer (0: none)
    """

    count: int
    window: int
    ratio: int  # 0: window only
    topk: int  # 0: no indexer (every compressed record is attended, up to `candidates`)
    pair_flops: int
    index_flops: int
    candidates: int = 0  # records a candidate selection bounds the attention to (0: none)

    def flops(self, queries: float, context: float) -> float:
        """FLOPs of `queries` query tokens each seeing `context` tokens."""
        attended = min(context, self.window)
        scored = context / self.ratio if self.ratio else 0.0
        if self.ratio:
            cap = self.topk or self.candidates
            attended += min(scored, cap) if cap else scored
        return self.count * queries * (attended * self.pair_flops + scored * self.index_flops)


@dataclass(frozen=True)
class ContextWork:
    """Attention over the context: FLOPs per (query token, context token) pair summed over the
    attention layers, and the cache bytes one request reads per context token (the kernel's
    owned context caches) plus the bounded state it reads whatever its length."""

    flops_per_pair: int  # decode (a latent cache read absorbed: its width as K and as V)
    window_flops_per_pair: int  # the part of flops_per_pair in sliding-window layers
    prefill_flops_per_pair: int  # prefill: the query and output projections' head widths
    prefill_window_flops_per_pair: int
    window: int  # their window (0: none)
    cache_bytes_per_token: float
    bounded_bytes_per_request: int
    dcp: int
    sparse: tuple[SparseLayers, ...] = ()




def _graph_fact(name: str):
    """Keep a fact of (graph, drafter) on the graph under `name`, by drafter (ModelGraph.derived:
    dropped when the graph is edited; a pipeline stage's part of the graph derives its own)."""
    def keep(derive):
        @wraps(derive)
        def fact(model: ModelGraph, drafter: str | None):
            return model.derived((name, drafter), lambda: derive(model, drafter))
        return fact
    return keep


def _nodes(model: ModelGraph, drafter: str | None) -> tuple:
    """The nodes one forward runs, in order (walked once per graph and drafter by each fact kept
    below): the target's (`drafter` None) or drafter `drafter`'s own; a multimodal encoder is not among them
    (it runs once per image, not per step)."""
    if drafter is None:
        return tuple(model.nodes(None, towers=False))
    return tuple((n, d) for n, d in model.nodes(drafter, towers=False) if d["speculative"] == drafter)


@_graph_fact("step_tally")
def _tally(model: ModelGraph, speculative: str | None) -> tuple[tuple, dict]:
    """The graph's tensors counted by (node kind, routing, tensor without its name), and the MoE
    layers of each (kind, served format, routing): one walk per model, whatever the deployment."""
    tally: dict[tuple, list] = {}  # (kind, routing, the tensor but its name) -> [the first such tensor, count]
    moe_nodes: dict[tuple, set] = defaultdict(set)
    for name, data in _nodes(model, speculative):
        kind, routing = data["kind"], data["routing"]
        for t in data["tensors"]:
            # one per layer: a tensor's bytes never depend on its name
            tally.setdefault((kind, routing, without_name(t)), [t, 0])[1] += 1
            if t.split.startswith("expert"):
                moe_nodes[(kind, _fmt_key(t), routing)].add(name)
    return (tuple(((kind, routing, t), n) for (kind, routing, _), (t, n) in tally.items()),
            {key: len(names) for key, names in moe_nodes.items()})


# splits whose matrices read the layer's input as it is (no tensor-parallel slice of it): vLLM fuses those of one
# layer that share their input and format into one GEMM (QKVParallelLinear, MergedColumnParallelLinear, DeepSeek's
# fused_qkv_a_proj); a row-parallel matrix reads its own slice of another GEMM's output and runs alone
FUSED_SPLITS = ("column", "heads", "replicated")


@_graph_fact("step_gemms")
def _gemm_tally(model: ModelGraph, drafter: str | None) -> tuple:
    """The graph's non-expert matrix multiplies as vLLM runs them, per layer: the matrices of one node that
    share input width, format and a fusable split (FUSED_SPLITS) as one GEMM, every other matrix alone;
    counted by (node kind, format key, routing, the fused tensors without their names)."""
    tally: dict[tuple, int] = {}
    for _, data in _nodes(model, drafter):
        if data["kind"] == "embedding":
            continue
        fused: dict[tuple, list] = {}
        for t in data["tensors"]:
            if t.rows <= 1 or t.cols <= 1 or t.split.startswith("expert"):
                continue
            key = (t.cols, str(t.fmt), "fused") if t.split in FUSED_SPLITS else (id(t), None, "alone")
            fused.setdefault(key, []).append(t)
        for tensors in fused.values():
            key = (data["kind"], _fmt_key(tensors[0]), data["routing"], tuple(without_name(t) for t in tensors))
            tally[key] = tally.get(key, 0) + 1
    return tuple(tally.items())


def _fused_shapes(tally: tuple, tp: int, moe_tp: int, pad: int) -> dict[tuple, list[tuple[int, int, int]]]:
    """(n, k, count) of each fused GEMM on this rank, by (kind, format key, routing)."""
    out: dict[tuple, list] = defaultdict(list)
    for (kind, fmt, routing, tensors), n in tally:
        rows = cols = 0
        for fields in tensors:
            t = Tensor("", *fields)
            r, cols = shard(t, tp, moe_tp, pad)
            rows += r * t.count
        out[(kind, fmt, routing)].append((rows, cols, n))
    return out


def _fmt_key(t) -> str:
    return str(t.fmt) if t.rows > 1 and t.cols > 1 else "vector"


def linear_groups(kernel: Kernel, drafter: str | None = None) -> list[LinearGroup]:
    """The rank's linear work, grouped by (node kind, served format): the target's, or drafter
    `drafter`'s own layers. Identical tensors (one per layer) are sized once and counted. Memoised
    by the kernel (`Kernel.derived`: on the engine fields it reads, the splits)."""
    return kernel.derived(f"linear_groups.{drafter}", lambda e, reg: _linear_groups(kernel, e, reg, drafter))


def routes_experts(kernel: Kernel) -> bool:
    """Whether the deployment's model routes experts: a linear group of its graph has MoE layers."""
    return any(g.moe_layers for g in linear_groups(kernel))


def _linear_groups(kernel: Kernel, e, reg, drafter: str | None) -> list[LinearGroup]:
    """`linear_groups` with the engine `e` and the registry `reg` as the kernel's memo views them."""
    model = kernel.graph  # the layers this rank builds (its pipeline stage's)
    moe_tp = 0 if e.enable_expert_parallel else (
        e.tensor_parallel_size * e.data_parallel_size * e.prefill_context_parallel_size)
    sizer = WeightSizer(model, e, kernel.chip.generation, reg)
    pad = sizer.vocab_pad  # the release's vocabulary padding, as the weights read it
    tally, moe_layers = _tally(model, drafter)
    gemms = _fused_shapes(_gemm_tally(model, drafter), e.tensor_parallel_size, moe_tp, pad)
    acc: dict[tuple, dict] = defaultdict(lambda: defaultdict(int))
    for (kind, routing, t), n in tally:
        rows, cols = shard(t, e.tensor_parallel_size, moe_tp, pad)
        one = sizer.one(t)  # the bytes the served format holds (pricing/kernel/weights.py)
        matrix = t.rows > 1 and t.cols > 1
        a = acc[(kind, _fmt_key(t), routing)]
        if kind == "embedding":
            a["act_bytes_per_token"] += cols * 2 * n  # one row gathered per token
            continue
        if t.split.startswith("expert"):
            a["expert_bytes"] += one * n
            if matrix:
                a["expert_flops_per_token"] += 2 * rows * cols * n
            continue
        a["weight_bytes"] += one * t.count * n
        if matrix:
            a["flops_per_token"] += 2 * rows * cols * t.count * n
            a["act_bytes_per_token"] += (rows + cols) * 2 * t.count * n
    out = []
    for (kind, fmt, routing), a in sorted(acc.items(), key=lambda item: (item[0][:2], repr(item[0][2]))):
        layers = moe_layers.get((kind, fmt, routing), 0)
        experts, top_k = (routing.experts, routing.top_k) if layers else (0, 0)
        out.append(LinearGroup(
            kind, fmt, a["flops_per_token"], a["weight_bytes"], a["act_bytes_per_token"], kind == "lm_head",
            a["expert_bytes"] // max(1, layers), a["expert_flops_per_token"] // max(1, layers),
            sizer.local_experts(experts) if layers else 0, layers, experts, top_k,
            tuple(sorted(gemms.get((kind, fmt, routing), ())))))
    return out


@_graph_fact("step_exchanges")
def _exchanges(model: ModelGraph, drafter: str | None) -> tuple[int, int, int, int]:
    """Of the nodes one forward runs (the target's or drafter `drafter`'s): the decoder layers
    (attention or recurrent mixer nodes), the nodes holding a row-parallel or expert-row tensor,
    the MoE layers and the most experts their routing sends a token to. Graph facts, whatever
    the split: once per model and drafter."""
    layers = reduces = moe = top_k = 0
    for _, data in _nodes(model, drafter):
        layers += data["kind"] in ("attention", "mixer")
        splits = {t.split for t in data["tensors"]}
        if "row" in splits or "expert_row" in splits:
            reduces += 1
        if data["kind"] == "moe":
            moe += 1
            top_k = max(top_k, data["routing"].top_k if data["routing"] else 0)
    return layers, reduces, moe, top_k


def collectives(kernel: Kernel, drafter: str | None = None) -> Collectives:
    """Of the target's layers, or drafter `drafter`'s: row-parallel outputs are summed across
    the tensor-parallel group (one all-reduce per node holding a row-parallel or expert-row
    tensor); under expert parallelism with data parallel ranks, each MoE layer's tokens are
    dispatched to and combined from the expert ranks."""
    model, e = kernel.graph, kernel.engine  # the layers this rank builds (its pipeline stage's)
    layers, reduces, moe, top_k = _exchanges(model, drafter)
    exchanged = e.enable_expert_parallel and e.data_parallel_size > 1
    return Collectives(reduces if e.tensor_parallel_size > 1 else 0, moe if exchanged else 0, model.hidden_size, layers,
                       top_k if exchanged else 0)


@dataclass(frozen=True)
class _StatedAttention:
    """A layer stating its own caches (DeepSeek-V4): its window, its compression ratio (0: none)
    and whether an indexer picks the records it attends."""

    window: int
    ratio: int
    indexed: bool


@dataclass(frozen=True)
class _CacheAttention:
    """A layer under the generic KV law: K + V width read per context token at decode, Q + V
    width per pair at prefill (its projections'), and its sliding window (None or 0: none);
    `indexed`: a latent cache with a sparse-attention indexer (DeepSeek-V3.2's DSA)."""

    decode_width: int
    prefill_width: int
    window: int | None
    indexed: bool = False


@_graph_fact("step_attention_layers")
def _attention_layers(model: ModelGraph, drafter: str | None) -> tuple:
    """The layers with a cache among the nodes one forward runs, in order, with what their
    attention costs depend on besides the split (graph facts: once per model and drafter)."""
    all_heads = max(1, model.num_attention_heads)
    ratios = model.extras.get("ratios") or ()
    out = []
    for _, data in _nodes(model, drafter):
        c = data["cache"]
        if c is None and not data["caches"]:
            continue
        if c is None:  # stated caches: the sparse laws of SparseLayers
            layer = data["layer"]
            out.append(_StatedAttention(
                window=max((sc.window for sc in data["caches"] if sc.bound == "window"), default=0),
                ratio=int(ratios[layer]) if layer is not None and layer < len(ratios) else 0,
                indexed=any(".indexer." in t.name for t in data["tensors"])))
            continue
        decode_width = c.head_dim + (c.head_dim_v or c.head_dim)
        out.append(_CacheAttention(decode_width, _projection_width(data["tensors"], all_heads) or decode_width,
                                   c.window, c.sparse_indexer))
    return tuple(out)


def context_work(kernel: Kernel, drafter: str | None = None) -> ContextWork:
    """Of the target's layers, or drafter `drafter`'s. Attention FLOPs per (query, context) pair:
    2 × heads per rank × (K width + V width) per layer (a latent cache is read as both, absorbed:
    the width counted twice); stated caches (DeepSeek-V4) at the model's head width. A latent
    cache with a sparse-attention indexer (DeepSeek-V3.2, `index_topk` in its config) is one of
    `SparseLayers` in prefill and decode alike: its indexer (index_n_heads × index_head_dim, every
    head on every rank, as V4's) scores every earlier token and the latent, absorbed in prefill
    too, attends the `index_topk` it picks (DeepSeek-V3.2-Exp technical report,
    github.com/deepseek-ai/DeepSeek-V3.2-Exp DeepSeek_V3_2.pdf §2.1: the lightning indexer scores
    each preceding token, the top-k entries are attended, and DSA runs in MLA's MQA mode, each
    latent shared by every query head); the indexer's FLOPs at the chip's FP8 rate, in which it
    runs ("can be implemented in FP8", ibid.; vLLM's DeepGEMM fp8_mqa_logits), as bf16-rate FLOPs
    scaled by the two rates (V4's indexer is still priced at the bf16 rate). Its decode still
    reads every token's cache record (the latent of the picked ones alone is not told apart), and
    the kernel's padding of a rank's heads (to 64 at tp 8, vLLM's DeepSeek-V3.2 recipe) is not
    priced. Cache bytes
    from the kernel: the owned context caches per token, and the bounded caches' own pages
    (window rings, recurrent state), of the layers this work runs: the target's alone, or the
    drafter's alone, so each drafter pass reads the drafter's cache (an MTP drafter's k sequential
    passes k times: llm_base_proposer.propose runs its layers, attention included, once per draft
    token) and the verification reads the target's once."""
    model, e = kernel.graph, kernel.engine  # the layers this rank builds (its pipeline stage's)
    all_heads = max(1, model.num_attention_heads)
    heads = max(1, all_heads // e.tensor_parallel_size)
    full = window_part = prefill_full = prefill_window = 0
    window = 0
    head_dim = int(model.extras.get("head_dim") or model.hidden_size // all_heads)
    sparse: dict[tuple, int] = {}
    topk = int(model.extras.get("index_topk") or 0)
    index = int(model.extras.get("index_n_heads") or 0) * int(model.extras.get("index_head_dim") or 0)
    candidates = int(model.extras.get("candidate_topk_blocks") or 0) * int(model.extras.get("candidate_block_size")
                                                                          or 0)
    rates = chip_rates(kernel.chip, kernel.reg)
    fp8_cost = rates.bf16_flops / rates.flops_for("fp8")  # a DSA indexer FLOP in bf16 FLOPs (it runs in FP8)
    for layer in _attention_layers(model, drafter):
        if isinstance(layer, _StatedAttention):
            window = layer.window
            key = (window, layer.ratio, topk if layer.indexed else 0, 2 * heads * 2 * head_dim,
                   2 * index if layer.indexed else 0, candidates)
            sparse[key] = sparse.get(key, 0) + 1
        elif layer.indexed and topk:  # DSA: the indexer scores every token, the latent attends its top-k
            key = (0, 1, topk, 2 * heads * layer.decode_width, round(2 * index * fp8_cost), 0)
            sparse[key] = sparse.get(key, 0) + 1
        elif layer.window:
            window_part += 2 * heads * layer.decode_width
            prefill_window += 2 * heads * layer.prefill_width
            window = max(window, layer.window)
        else:
            full += 2 * heads * layer.decode_width
            prefill_full += 2 * heads * layer.prefill_width
    return ContextWork(flops_per_pair=full + window_part, window_flops_per_pair=window_part,
                       prefill_flops_per_pair=prefill_full + prefill_window,
                       prefill_window_flops_per_pair=prefill_window, window=window,
                       cache_bytes_per_token=float(kernel.cache_bytes_per_token(drafter=drafter is not None)),
                       bounded_bytes_per_request=kernel.own_page_bytes_steady(drafter=drafter is not None),
                       dcp=e.decode_context_parallel_size,
                       sparse=tuple(SparseLayers(n, *key) for key, n in sorted(sparse.items())))


def _projection_width(tensors, heads: int) -> int:
    """Q width + V width per head from the query and output projections (q_proj or q_b_proj
    rows, o_proj columns, over the heads); 0 when the layer has neither."""
    q = next((t.rows for t in tensors if t.name.endswith(("q_proj", "q_b_proj"))), 0)
    o = next((t.cols for t in tensors if t.name.endswith("o_proj")), 0)
    if not q or not o:
        return 0
    return q // heads + o // heads
