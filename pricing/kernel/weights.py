"""Weights per rank (spec: What is held before any request / Weights).

Linear layers at the width they are served in, the embedding at the checkpoint's width. Each
tensor is sized by its scheme (pricing/config/quantization.py): the parameters vLLM 0.33's
quantization method leaves on the GPU for this rank's shard (packed weights, scales, zero points,
group indices, Marlin repacking and padding), on this chip's generation. Dense layers are divided
across the tensor-parallel group; experts are divided by expert parallelism into whole experts per
rank (the fuller rank reported when they do not divide evenly: vLLM's determine_expert_map gives
ranks 0..rem-1 one more), and without it every rank holds a slice of every expert over the MoE
tensor-parallel group tp × dp × pcp (vllm-0.33-memory.md §7).

Per tensor and per node (`tensor_params`, `node_weight_bytes`) so that a pipeline stage can sum
its own layers.

Beside the parameters, the buffers the layers build at model construction (graph/nodes.py
`buffers`: the rotary embeddings' cos/sin caches): one per distinct buffer among the nodes this
rank holds (get_rope's _ROPE_DICT shares an instance between all layers of one rope
configuration), whole on every tensor-parallel rank, on each pipeline stage that builds a layer
using it (vllm-0.33-memory.md §8: a non-persistent buffer made during model load, inside "Model
loading took").
"""

from __future__ import annotations

from dataclasses import dataclass

from pricing.config.quantization import Mags, Param, Placement
from pricing.graph.model import ModelGraph
from pricing.graph.nodes import RotaryCache, Tensor, without_name
from pricing.kernel.deployment import Engine
from pricing.registry import Reads, Registry, Sourced
from pricing.units import cdiv, round_up


@dataclass(frozen=True)
class WeightBytes:
    weights: int  # everything but the EPLB replicas
    eplb_redundant: int  # redundant expert replicas + EPLB's expert buffer, moved out of weights
    experts_per_rank: int  # routed experts on the fullest rank (physical slots)
    expert_layer_bytes: int  # one MoE layer's local expert weights on this rank
    refusal: str | None = None  # vLLM would not load this checkpoint on this chip


def shard(t: Tensor, tp: int, moe_tp: int, vocab_pad: int) -> tuple[int, int]:
    """This rank's rows × cols of tensor `t` (one expert's, for experts)."""
    if t.split == "column":  # a replicated output of a merged layer whole on every rank
        return cdiv(t.rows - t.replicated_rows, tp) + t.replicated_rows, t.cols
    if t.split == "row":
        return t.rows, cdiv(t.cols, tp)
    if t.split == "heads":
        per_head = t.rows // t.heads
        return max(1, t.heads // tp) * per_head, t.cols
    if t.split == "vocab":
        return cdiv(round_up(t.rows, vocab_pad), tp), t.cols
    if t.split == "expert_column":
        return (t.rows, t.cols) if moe_tp == 0 else (cdiv(t.rows, moe_tp), t.cols)
    if t.split == "expert_row":
        return (t.rows, t.cols) if moe_tp == 0 else (t.rows, cdiv(t.cols, moe_tp))
    return t.rows, t.cols


@dataclass(frozen=True)
class Sized:
    """One scheme at one placement under one registry: its parameters, their bytes, vLLM's
    refusal of the shard's shape, and the registry entries the sizing read (for the provenance)."""

    params: list[Param]
    nbytes: int
    refusal: str | None
    read: dict


class WeightSizer:
    """Sizes tensors for one engine on one chip generation, reading the registry through `reg`
    (a recording view: what it reads is the provenance; a plain registry is viewed so)."""

    def __init__(self, model: ModelGraph, engine: Engine, generation: str, reg: Registry | Reads):
        self.model, self.engine, self.generation = model, engine, generation
        self.reg = reg if isinstance(reg, Reads) else Reads(reg)
        self.mags = Mags(self.reg)
        self.vocab_pad = engine.release.fact(self.reg, "vocab_padding")
        self.moe_tp = 0 if engine.enable_expert_parallel else (
            engine.tensor_parallel_size * engine.data_parallel_size * engine.prefill_context_parallel_size)
        self.dtype_bytes = self.mags.dtype_bytes
        self._shared = self.reg.derived("weights.sized", dict)  # {(scheme, placement): Sized}, shared by a sweep
        self._recorded: set = set()  # the (scheme, placement) keys whose reads and refusal are recorded
        self.refusals: list[str] = []
        self.notes: dict[str, tuple[str, str | None, str | None]] = {}

    def params(self, t: Tensor) -> list[Param]:
        """The parameters this rank holds for one copy of `t` (one expert, for experts)."""
        return self._sized(t)[0]

    def one(self, t: Tensor) -> int:
        return self._sized(t)[1]

    def _sized(self, t: Tensor) -> tuple[list[Param], int]:
        """`t`'s sizing from the registry's shared table, keyed by the scheme and the whole
        Placement; each key's registry reads and refusal recorded once for this engine."""
        rows, cols = shard(t, self.engine.tensor_parallel_size, self.moe_tp, self.vocab_pad)
        key = (t.fmt, Placement(rows, cols, t.cols, t.parts, self.model.dtype, self.generation,
                                t.split.startswith("expert")))
        sized = self._shared.get(key)
        if sized is None:
            reads = self.reg.nested()
            mags = Mags(reads)
            params = t.fmt.params(key[1], mags)
            sized = self._shared[key] = Sized(params, sum(p.nbytes(mags.dtype_bytes) for p in params),
                                              t.fmt.refuse(key[1]), reads.read)
        if key not in self._recorded:
            self._recorded.add(key)
            self.reg.record(sized.read)
            if sized.refusal:
                self.refusals.append(f"{t.name}: {sized.refusal}")
            if str(t.fmt) not in self.notes:
                note, refusal = t.fmt.serving(self.generation, self.mags)
                self.notes[str(t.fmt)] = (t.fmt.rule(), note, refusal)
        return sized.params, sized.nbytes

    def local_experts(self, count: int) -> int:
        e = self.engine
        if not e.enable_expert_parallel:
            return count
        physical = count + (e.num_redundant_experts if count == self.model.routed_experts else 0)
        return cdiv(physical, e.ep_size)

    def tensor_bytes(self, t: Tensor) -> int:
        """All copies of `t` this rank holds (its local experts, for experts)."""
        copies = self.local_experts(t.count) if t.split.startswith("expert") else t.count
        return self.one(t) * copies

    def record(self) -> str | None:
        """Put each scheme's rule (and the chip's kernel note) in the provenance; vLLM's refusal."""
        refusal = self.refusals[0] if self.refusals else None
        for key, (rule, note, refused) in sorted(self.notes.items()):
            if key in ("bf16", "fp16", "fp32"):
                continue
            name = f"quantization.scheme.{key}"
            self.reg.record({name: Sourced(name, rule, f"vLLM {self.engine.release.version} {self.model.quantization} "
                                           "loader, as sized by pricing/config/quantization.py",
                                           note or f"native on {self.generation}")})
            refusal = refusal or refused
        return refusal


def node_weight_bytes(model: ModelGraph, engine: Engine, generation: str, reg: Reads) -> dict[str, int]:
    """Bytes this rank holds for each node of the graph (routed experts at its local share); a
    buffer the nodes share (a rotary cache) on the first node, in topological order, that states it."""
    sizer = WeightSizer(model, engine, generation, reg)
    out = {name: sum(sizer.tensor_bytes(t) for t in data["tensors"])
           for name, data in model.nodes(engine.speculative_method)}
    sizer.record()
    placed: set[RotaryCache] = set()
    for name, data in model.nodes(engine.speculative_method):
        for b in data["buffers"]:
            if b not in placed:
                placed.add(b)
                out[name] += rotary_cache_bytes(b, model, reg)
    return out


def tensor_groups(model: ModelGraph, speculative: str | None) -> tuple[tuple[tuple[Tensor, int], ...], frozenset[str]]:
    """The tensors a deployment speculating with `speculative` holds, identical ones (equal in every
    field but the name) taken once, as (the first in topological order, how many), in the order of
    their first appearance; and the MoE layers holding all routed experts. Depends only on the
    graph, so the graph keeps it (ModelGraph.derived): sizing each engine of a sweep then prices a
    few dozen distinct shapes instead of every layer's tensors."""
    def derive():
        groups: dict[tuple, list] = {}
        expert_layers = set()
        for _, data in model.nodes(speculative):
            for t in data["tensors"]:
                group = groups.setdefault(without_name(t), [t, 0])
                group[1] += 1
                if t.split.startswith("expert") and t.count == model.routed_experts:
                    expert_layers.add(t.name.rsplit(".experts", 1)[0])
        return tuple((t, n) for t, n in groups.values()), frozenset(expert_layers)
    return model.derived(("tensor_groups", speculative), derive)


def rotary_caches(model: ModelGraph, speculative: str | None) -> tuple[RotaryCache, ...]:
    """The distinct rotary caches the nodes held by a deployment speculating with `speculative`
    state, in order of first appearance: one buffer each, however many layers use it. Kept by the
    graph (ModelGraph.derived)."""
    def derive():
        seen: dict[RotaryCache, None] = {}
        for _, data in model.nodes(speculative):
            for b in data["buffers"]:
                seen.setdefault(b)
        return tuple(seen)
    return model.derived(("rotary_caches", speculative), derive)


def buffer_bytes(model: ModelGraph, engine: Engine, reg: Reads) -> int:
    """This rank's share of the layers' buffers: each distinct rotary cache whole (rows × rotary_dim
    at its dtype: the model's, or the one the registry's rotary.cache_dtype names)."""
    return sum(rotary_cache_bytes(c, model, reg) for c in rotary_caches(model, engine.speculative_method))


def rotary_cache_bytes(cache: RotaryCache, model: ModelGraph, reg: Reads) -> int:
    """rows × rotary_dim elements of the dtype this registry's rotary.cache_dtype names for the
    model's model_type ("model": the checkpoint's dtype, get_rope's default)."""
    rule = reg["rotary.cache_dtype"]
    dtype = rule.value.get(model.model_type, rule.value["default"])
    return cache.rows * cache.rotary_dim * Mags(reg).dtype_bytes[model.dtype if dtype == "model" else dtype]


def weight_bytes(model: ModelGraph, engine: Engine, reg: Reads, generation: str) -> WeightBytes:
    """This rank's weights on a chip of `generation` (its kernels decide Marlin, swizzling, padding)."""
    sizer = WeightSizer(model, engine, generation, reg)
    experts = model.routed_experts
    local = sizer.local_experts(experts)
    total = 0
    expert_total = 0
    groups, expert_layers = tensor_groups(model, engine.speculative_method)
    for t, n in groups:
        if t.split.startswith("expert"):
            expert_total += sizer.tensor_bytes(t) * n
        else:
            total += sizer.tensor_bytes(t) * n
    refusal = sizer.record()
    total += buffer_bytes(model, engine, reg)
    eplb = 0
    per_layer = expert_total // max(1, len(expert_layers)) if expert_layers else 0
    if engine.enable_eplb and experts:
        # the replicas: the redundant share of this rank's expert slots, moved out of weights
        eplb = expert_total * engine.num_redundant_experts // (experts + engine.num_redundant_experts)
        # EPLB's expert_buffer: one more MoE layer of local expert weights (eplb_state.py:492)
        eplb_buffer = per_layer
        return WeightBytes(total + expert_total - eplb, eplb + eplb_buffer, local, per_layer, refusal)
    return WeightBytes(total + expert_total, 0, local if experts else 0, per_layer, refusal)
