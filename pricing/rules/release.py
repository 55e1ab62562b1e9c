"""A vLLM release as one unit: its rules pack (how it groups caches), its registry namespace (the
data file of its engine facts), its enumerations and its defaults. Adding a release is one rules
module that builds its `Release` and one registry data file named after `namespace`."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from types import ModuleType
from typing import Any

from pricing.registry import Registry, Sourced, load, shipped


@dataclass(frozen=True)
class Release:
    """vLLM `version` (e.g. "0.33"): `rules` is its grouping module, `namespace` the registry file
    stem holding its facts (defaults, enumerations, capture-size grid)."""

    version: str
    full_version: str
    namespace: str
    rules: ModuleType = field(repr=False)

    @property
    def name(self) -> str:
        return f"vllm-{self.version}"

    def key(self, name: str) -> str:
        """The registry name of one of this release's facts."""
        return f"{self.namespace}.{name}"

    def fact(self, reg: Registry, used: dict[str, Sourced] | None, name: str) -> Any:
        """One of this release's facts from `reg`, recorded in `used` for provenance."""
        entry = reg[self.key(name)]
        if used is not None:
            used[entry.name] = entry
        return entry.value

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

    @property
    def capture_size_grid(self) -> tuple[tuple[int, ...], int, int, int]:
        """The CUDA-graph capture-size grid: (first sizes, step, until, step from `until` on)."""
        g = load().value(self.key("capture_size_grid"))  # a dict: read per call, small
        return tuple(g["first"]), int(g["step"]), int(g["until"]), int(g["large_step"])

    def in_flight_batches(self, async_scheduling: bool, pipeline_parallel_size: int = 1) -> int:
        """max_concurrent_batches (config/vllm.py:588-609): pp + 1 under asynchronous scheduling
        with the V2 model runner (the default), else pp."""
        return self.rules.in_flight_batches(async_scheduling, pipeline_parallel_size)
