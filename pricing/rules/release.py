"""A vLLM release as one unit: its rules pack (how it groups caches), its registry namespace (the
data file of its engine facts), its enumerations and its defaults.

A release pack is one rules module plus one registry file: `pricing/rules/vllm_X_Y.py` provides
what `RulesPack` lists and builds its `Release`, whose `namespace` is the stem of its registry file
`pricing/registry/vllm_X_Y.yaml`. Only the pack names that file; everything else reads a release's
facts through `Release.fact` and its rules through `Release.rules`, so no code outside
pricing/rules/ names a release.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pricing.registry import Reads, Registry, shipped

if TYPE_CHECKING:
    from pricing.rules.shared import Ceilings, Layout
    from pricing.specs import KVCacheSpec


@runtime_checkable
class RulesPack(Protocol):
    """What a release's rules module provides (vllm_0_33.py is one)."""

    RELEASE: Release

    def group(self, specs: list[KVCacheSpec], max_model_len: int) -> Layout:
        """The KV cache groups one rank's caches (in layer order) form, as the release forms them."""

    def in_flight_batches(self, async_scheduling: bool, pipeline_parallel_size: int = 1) -> int:
        """max_concurrent_batches: the batches the scheduler keeps in flight."""

    def capture_ceilings(self, max_num_seqs: int, max_num_batched_tokens: int, spec_tokens: int, default_max: int,
                         grid: tuple[tuple[int, ...], int, int, int]) -> Ceilings:
        """The CUDA-graph capture ceilings on the release's capture-size grid."""


@dataclass(frozen=True)
class Release:
    """vLLM `version` (e.g. "0.33"): `rules` is its grouping module, `namespace` the registry file
    stem holding its facts (defaults, enumerations, capture-size grid)."""

    version: str
    full_version: str
    namespace: str
    rules: RulesPack = field(repr=False)

    @property
    def name(self) -> str:
        return f"vllm-{self.version}"

    def key(self, name: str) -> str:
        """The registry name of one of this release's facts."""
        return f"{self.namespace}.{name}"

    def fact(self, reg: Registry | Reads, name: str) -> Any:
        """One of this release's facts from `reg` (a recording view records it for provenance)."""
        return reg.value(self.key(name))

    def enumeration(self, name: str) -> tuple[str, ...]:
        """A set of names the release accepts (cache dtypes, CUDA-graph modes, ...), as shipped
        (read from the shipped registry on each call; the properties below keep theirs)."""
        return tuple(shipped().value(self.key(f"enumerations.{name}")))

    @cached_property  # a shipped enumeration: read once per release
    def kv_cache_dtypes(self) -> tuple[str, ...]:
        return self.enumeration("kv_cache_dtypes")

    @cached_property  # a shipped enumeration: read once per release
    def cudagraph_modes(self) -> tuple[str, ...]:
        return self.enumeration("cudagraph_modes")

    @cached_property  # a shipped enumeration: read once per release
    def mamba_cache_modes(self) -> tuple[str, ...]:
        return self.enumeration("mamba_cache_modes")

    def capture_size_grid(self, reg: Registry | Reads) -> tuple[tuple[int, ...], int, int, int]:
        """The CUDA-graph capture-size grid: (first sizes, step, until, step from `until` on)."""
        g = self.fact(reg, "capture_size_grid")
        return tuple(g["first"]), int(g["step"]), int(g["until"]), int(g["large_step"])

    def in_flight_batches(self, async_scheduling: bool, pipeline_parallel_size: int = 1) -> int:
        """max_concurrent_batches (config/vllm.py:588-609): pp + 1 under asynchronous scheduling
        with the V2 model runner (the default), else pp."""
        return self.rules.in_flight_batches(async_scheduling, pipeline_parallel_size)
