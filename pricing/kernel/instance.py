"""One vLLM instance: a rank of every pipeline stage, and the figures vLLM works out over all of
them (vllm/v1/core/kv_cache_planning.py get_kv_cache_configs: every worker plans its own pool from
its own memory, and every one is set to the fewest blocks any holds; vllm-0.33-memory.md §3.5).

The KV cache groups are the same on every stage (formed over the whole model, then projected:
pricing/kernel/pipeline.py `project`), so a request holds the same blocks on each; what differs is
each stage's pool, and the engine's blocks, logged "GPU KV cache size", maximum concurrency and
start-up check take every stage into account. Without pipeline parallelism the instance is its one
rank. The ranks are `Kernel`s (pricing/kernel/kernel.py), each the memory of one rank alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pricing.graph.model import ModelGraph
from pricing.kernel import pipeline
from pricing.kernel.deployment import Engine
from pricing.kernel.pipeline import Stage


class Rank(Protocol):
    """What the instance reads of each rank (a Kernel)."""

    engine: Engine
    stage: Stage | None
    instance: Instance

    def rank_blocks(self) -> int: ...
    def fixed_bytes(self): ...
    def layout(self): ...
    def blocks_per_request(self, admission: bool = True) -> int: ...
    def kv_pool(self) -> int: ...
    def request_bytes(self) -> int: ...
    def rank_fits_one_request(self) -> bool: ...


class Instance:
    """The ranks of one instance's stages, in stage order (one without pipeline parallelism)."""

    __slots__ = ("engine", "ranks", "_binding")

    def __init__(self, engine: Engine, ranks: tuple[Rank, ...]):
        self.engine = engine
        self.ranks = ranks
        self._binding = None

    @classmethod
    def of(cls, model: ModelGraph, engine: Engine, rank_of: Callable[[Stage | None], Rank]) -> Instance:
        """The instance of `engine`, its parallel shape whole: a rank per pipeline stage of `model`
        (as get_pp_indices splits the layers), each built by `rank_of(stage)`, or the one rank
        (`rank_of(None)`) without pipeline parallelism. Each rank is told its instance."""
        if engine.pipeline_parallel_size == 1:
            ranks = (rank_of(None),)
        else:
            stages = pipeline.stages(model, engine.pipeline_parallel_size, engine.pp_layer_partition)
            ranks = tuple(rank_of(s) for s in stages)
        instance = cls(engine, ranks)
        for rank in ranks:
            rank.instance = instance
        return instance

    def binding(self) -> Rank:
        """The stage whose pool holds the fewest blocks (ties: the most fixed memory, then the first):
        the fullest rank."""
        if self._binding is None:
            self._binding = min(self.ranks, key=lambda k: (k.rank_blocks(), -k.fixed_bytes().total,
                                                           k.stage.index if k.stage else 0))
        return self._binding

    def binding_at(self, budget: int) -> Rank:
        """`binding` at `budget` instead of the engine's own: the stages' pools hold blocks of their
        own size (their own layers), so which stage holds the fewest changes with the budget."""
        return min(self.ranks, key=lambda k: (k.blocks_at(budget), -k.fixed_bytes().total,
                                              k.stage.index if k.stage else 0))

    def num_blocks(self) -> int:
        """The engine's block count: the fewest any stage's pool holds (get_kv_cache_configs)."""
        return min(k.rank_blocks() for k in self.ranks)

    def max_concurrency(self) -> float:
        """vLLM's logged "Maximum concurrency": num_blocks (null block included) over the blocks one
        max_model_len request needs; the ungrouped fallback divides each stage's bytes."""
        first = self.ranks[0]
        layout = first.layout()
        if not layout.groups:
            return float(self.engine.max_num_seqs)
        if layout.grouped:
            return self.num_blocks() / first.blocks_per_request()
        return min(max(0, k.kv_pool()) / k.request_bytes() for k in self.ranks)

    def kv_cache_tokens(self) -> int:
        """vLLM's logged "GPU KV cache size", by the release's law (vLLM 0.33: int(max_concurrency ×
        max_model_len))."""
        e = self.engine
        layout = self.ranks[0].layout()
        if not layout.groups or not layout.grouped:
            return int(self.max_concurrency() * e.max_model_len)
        return e.release.rules.logged_tokens(self.num_blocks(), layout, self.max_concurrency(), e.max_model_len,
                                             e.decode_context_parallel_size * e.prefill_context_parallel_size)

    def fits_one_request(self) -> bool:
        """vLLM's start-up check, on every stage, by the release's law (vLLM 0.33: available − one
        block ≥ one request at max_model_len)."""
        return all(k.rank_fits_one_request() for k in self.ranks)
