"""Pipeline parallelism as vLLM 0.33 lays it out: which layers, weights and caches each stage holds.

Layer partition (vllm/distributed/utils.py get_pp_indices): every stage gets
layers // pp decoder layers; the remainder goes one each to the stages before the last, from the
second-to-last backwards (the last stage already holds the final norm and the LM head). The
environment variable VLLM_PP_LAYER_PARTITION ("16,32") sets the counts instead; they must be pp
numbers summing to the layers (vLLM raises otherwise).

What else a stage holds (model_executor/models/llama.py, deepseek_v2.py, and every model that
uses PPMissingLayer): the embedding on the first stage, and on the last one as well when the LM
head is tied to it (each stage builds its own copy); the final norm and the LM head on the last
stage, and the drafter (MTP / EAGLE / DSpark) beside them, since vLLM proposes from the last
stage's hidden states. The sampler warm-up of the profile run runs only on the last stage
(vllm-0.33-memory.md §1.5). A multimodal wrapper's vision tower and projector are built on every
stage (models/gemma3_mm.py builds them with no pipeline-rank condition; since vLLM PR #24387 only
the first stage runs them).

KV cache (v1/core/kv_cache_planning.py get_global_kv_cache_groups, get_kv_cache_configs): the
groups are formed once over every stage's caches, then projected onto each stage, whose pool
block is its own largest projected group; every stage sizes its pool from its own available
memory, and all of them are set to the smallest block count (vllm-0.33-memory.md §3.3, §3.5).
A request holds the same blocks on every stage (block ids are global), each of its stage's block
size. Under asynchronous scheduling with the V2 model runner pp + 1 batches are in flight
(config/vllm.py max_concurrent_batches, §2.3).

Per stage as well: the CUDA graphs (their per-layer term counts the stage's layers). The pipeline
group's point-to-point communicator is not counted as a collective group: the pp start-up in the
calibration set (Llama-3.1-8B, tp 1 pp 2, vLLM 0.19) logs 0.07 GiB of non-torch memory per rank.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import lcm

from pricing.errors import InputError
from pricing.graph.model import ModelGraph
from pricing.rules.shared import Group
from pricing.units import round_up


@dataclass(frozen=True)
class Stage:
    """One pipeline stage: its index among `count` and the decoder layers [first_layer, end_layer)."""

    index: int
    count: int
    first_layer: int
    end_layer: int

    @property
    def is_first(self) -> bool:
        return self.index == 0

    @property
    def is_last(self) -> bool:
        return self.index == self.count - 1

    @property
    def layers(self) -> int:
        return self.end_layer - self.first_layer

    def __str__(self) -> str:
        return f"stage {self.index} of {self.count} (layers {self.first_layer}-{self.end_layer - 1})"


def backbone_layers(model: ModelGraph) -> int:
    """The decoder layers vLLM partitions (config num_hidden_layers): drafter layers are not among them."""
    return model.derived("backbone_layers", lambda: len({d["layer"] for _, d in model.g.nodes(data=True)
                                                         if d["layer"] is not None and d["speculative"] is None}))


def layer_partition(num_layers: int, pp: int, partition: tuple[int, ...] | None = None) -> tuple[int, ...]:
    """Layers per stage, as get_pp_indices computes them (VLLM_PP_LAYER_PARTITION when given)."""
    if partition is not None:
        if len(partition) != pp:
            raise InputError("pp_layer_partition", f"{len(partition)} stages given for pipeline parallel {pp} "
                             "(vLLM: 'len(partitions) does not match pp_size')", f"give {pp} layer counts")
        if sum(partition) != num_layers:
            raise InputError("pp_layer_partition", f"the counts sum to {sum(partition)}, the model has {num_layers} "
                             "layers (vLLM: 'sum(partitions) does not match num_hidden_layers')",
                             f"give counts summing to {num_layers}")
        if min(partition) < 1:
            raise InputError("pp_layer_partition", "every stage needs at least one layer", "use counts of 1 or more")
        return tuple(partition)
    if pp > num_layers:
        raise InputError("pipeline_parallel_size", f"{pp} stages for the {num_layers} layers of the model",
                         f"use at most {num_layers}")
    counts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        counts[-i] += 1
    return tuple(counts)


def stages(model: ModelGraph, pp: int, partition: tuple[int, ...] | None = None) -> tuple[Stage, ...]:
    counts = layer_partition(backbone_layers(model), pp, partition)
    out, start = [], 0
    for i, n in enumerate(counts):
        out.append(Stage(i, pp, start, start + n))
        start += n
    return tuple(out)


def holds(stage: Stage, data: dict, tied_embedding: bool) -> bool:
    """Whether a node of the graph lives on `stage`."""
    if data["speculative"] is not None:
        return stage.is_last
    if data["tower"]:
        return True
    layer = data["layer"]
    if layer is not None:
        return stage.first_layer <= layer < stage.end_layer
    kind = data["kind"]
    if kind == "embedding":
        return stage.is_first or (tied_embedding and stage.is_last)
    return stage.is_last  # final norm, LM head


def tied_embedding(model: ModelGraph) -> bool:
    return not any(d["kind"] == "lm_head" for _, d in model.g.nodes(data=True))




def _stage_graph(model: ModelGraph, stage: Stage) -> ModelGraph:
    tied = tied_embedding(model)
    nodes = [n for n, d in model.g.nodes(data=True) if holds(stage, d, tied)]
    conventions = list(model.conventions)
    if tied and stage.is_last and not stage.is_first:
        conventions.append("pipeline: the last stage builds its own copy of the tied embedding for the LM head "
                           "(llama.py: embed_tokens on the first rank, or the last when tie_word_embeddings)")
    return model.part(nodes, conventions)


def stage_graph(model: ModelGraph, stage: Stage | None) -> ModelGraph:
    """The part of the model graph one stage builds (the whole graph without pipeline parallelism),
    kept by the graph per stage (ModelGraph.derived)."""
    if stage is None or stage.count == 1:
        return model
    return model.derived(("stage", stage), lambda: _stage_graph(model, stage))


@dataclass(frozen=True)
class StageGroup(Group):
    """A global KV cache group seen from one stage: vLLM's spec (and so the blocks a request holds)
    stays the global group's, while the layers, and their share of the pool block, are the stage's
    own (`held`, possibly none)."""

    held: tuple = ()

    @property
    def layers(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.held)

    @property
    def layer_bytes(self) -> int:
        return sum(s.page_bytes for s in self.held)

    @property
    def raw_page_bytes(self) -> int:
        return sum(s.raw_page_bytes for s in self.held)


def project(layout, stage_layers: frozenset[str]):
    """_project_kv_cache_groups_to_worker: the global groups with only this stage's layers (a group
    may hold none), and the stage's pool block from them as _pool_bytes_per_block places one block:
    the widest group's layers, each page rounded to its block-stride alignment (layer-outer
    layouts), or the widest group rounded to the lcm of the alignments (block-outermost, §3.3)."""
    groups = tuple(StageGroup(g.members, g.summed, tuple(s for s in g.members if s.layer in stage_layers))
                   for g in layout.groups)
    if not layout.grouped:
        return replace(layout, groups=groups)
    members = [s for g in layout.groups for s in g.members]
    if any(s.packed for s in members):
        block = round_up(max(g.layer_bytes for g in groups), lcm(*(s.stride_alignment for s in members)))
    else:
        block = max(sum(round_up(s.page_bytes, s.stride_alignment) for s in g.held) for g in groups)
    return replace(layout, groups=groups, bytes_per_block=block)
