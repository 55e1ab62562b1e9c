"""A vLLM release as one unit: its rules pack (how it groups caches), its registry namespace (the
data file of its engine facts), its enumerations and its defaults.

A release pack is one rules module plus one registry file: `pricing/rules/vllm_X_Y.py` provides
what `RulesPack` lists and builds its `Release`, whose `namespace` is the stem of its registry file
`pricing/registry/vllm_X_Y.yaml`. Only the pack names that file; everything else reads a release's
facts through `Release.fact` and its rules through `Release.rules`, so no code outside
pricing/rules/ names a release.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pricing.registry import Reads, Registry, Sourced, shipped

if TYPE_CHECKING:
    from pricing.rules.shared import Ceilings, Layout
    from pricing.specs import KVCacheSpec


@runtime_checkable
class RulesPack(Protocol):
    """What a release's rules module provides (vllm_0_33.py is one)."""

    RELEASE: Release
    LOAD_CHECKS: tuple  # the load-time shape checks vLLM runs while it builds the model (load_checks.py)

    def group(self, specs: list[KVCacheSpec], max_model_len: int) -> Layout:
        """The KV cache groups one rank's caches (in layer order) form, as the release forms them."""

    def in_flight_batches(self, async_scheduling: bool, pipeline_parallel_size: int = 1) -> int:
        """max_concurrent_batches: the batches the scheduler keeps in flight."""

    def capture_ceilings(self, max_num_seqs: int, max_num_batched_tokens: int, spec_tokens: int, default_max: int,
                         grid: tuple[tuple[int, ...], int, int, int]) -> Ceilings:
        """The CUDA-graph capture ceilings on the release's capture-size grid."""

    def fits_one_request(self, pool: int, layout: Layout, blocks: int, layer_bytes: int) -> bool:
        """The start-up check: does a KV pool of `pool` bytes hold one request at max_model_len,
        which needs `blocks` pool blocks of `layout` (Σ over groups), or `layer_bytes` counted layer
        by layer at each layer's own page (before grouping pads anything)."""

    def logged_tokens(self, num_blocks: int, layout: Layout, max_concurrency: float, max_model_len: int,
                      context_parallel: int) -> int:
        """The "GPU KV cache size: N tokens" the release logs."""


@dataclass(frozen=True)
class Release:
    """vLLM `version` (e.g. "0.33"): `rules` is its grouping module, `namespace` the registry file
    stem holding its facts (defaults, enumerations, capture-size grid)."""

    version: str
    full_version: str
    namespace: str
    rules: RulesPack = field(repr=False)
    covers: tuple[str, str] = ("", "")  # the first and last vLLM line (major.minor) the pack serves

    def serves(self, release: tuple[int, ...]) -> bool:
        """Whether the pack's rules are those of vLLM `release` ((0, 19) or (0, 19, 1))."""
        first, last = self.span
        return first <= tuple(release[:2]) <= last

    @cached_property  # read by every registry fact and rules lookup: parsed once per release
    def span(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The first and last vLLM line the pack serves, as release tuples."""
        return release_tuple(self.covers[0]), release_tuple(self.covers[1])

    @cached_property  # read by every registry fact that changed within the pack: parsed once per release
    def parts(self) -> tuple[int, ...]:
        """The release as a tuple: (0, 19, 1) of "0.19.1"."""
        return release_tuple(self.full_version)

    def as_release(self, full_version: str) -> Release:
        """The pack serving vLLM `full_version` (e.g. "0.19.1"): the same rules and facts, that name."""
        return self if full_version == self.full_version else replace(self, full_version=full_version)

    @property
    def served_as(self) -> str:
        """What a report says of the release: "vLLM 0.19.1 (pack vllm-0.19)"."""
        return f"vLLM {self.full_version} (pack {self.name})"

    def laws(self, reg: Registry, sampler: str | None = None, reads: Reads | None = None) -> Registry:
        """The registry with the fixed-memory laws fitted for this pack's releases laid over the
        current ones (registry vllm_eras.laws_until: each entry's `since`–`until` holds the pack's
        line; an entry naming a `sampler` path applies only to start-ups whose top-k/top-p warm-up
        took it, by default the path vllm_eras.sampler_path_unstated names). `reg` itself when no law
        of its era differs (vLLM 0.33)."""
        if self.key("era_laws") not in reg:  # a pack whose laws are the registry's own (asking is not reading)
            return reg
        look = reads if reads is not None else reg  # a recording view lists what the choice read
        mine = set(look.value(self.key("era_laws")))
        changed = {}
        for name in [n for n in era_law_names(reg, release_tuple(self.full_version), sampler, look) if n in mine]:
            entry = look[name]
            law = entry.value["law"]
            how = f"era {entry.value.get('since', '')}–{entry.value['until']}: {entry.how}"
            changed[law] = Sourced(law, entry.value["value"], entry.source, how)
        return reg.overlay(changed) if changed else reg

    @property
    def name(self) -> str:
        return f"vllm-{self.version}"

    def key(self, name: str) -> str:
        """The registry name of one of this release's facts."""
        return f"{self.namespace}.{name}"

    def fact(self, reg: Registry | Reads, name: str) -> Any:
        """One of this release's facts from `reg` (a recording view records it for provenance), for
        this release (of_release)."""
        return self.of_release(reg.value(self.key(name)))

    def of_release(self, value: Any) -> Any:
        """A fact's value for this release: a fact that changed within the pack's releases is
        written `{by_release: [{since: "0.12", value: ...}, {since: "0.20", value: ...}]}`, and the
        last row whose `since` this release reaches holds; any other value is the pack's."""
        if not (isinstance(value, dict) and "by_release" in value):
            return value
        mine = self.parts
        rows = [row for row in value["by_release"] if release_tuple(str(row["since"])) <= mine]
        return (rows or value["by_release"][:1])[-1]["value"]

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


_RELEASE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def release_tuple(text: str) -> tuple[int, ...]:
    """(0, 19) of "0.19", (0, 19, 1) of "0.19.1"; () when the text names no release."""
    m = _RELEASE.search(text or "")
    return tuple(int(g) for g in m.groups() if g is not None) if m else ()


def era_law_names(reg: Registry, release: tuple[int, ...], sampler: str | None, look=None) -> list[str]:
    """The vllm_eras.laws_until entries a start-up of `release` is predicted with (its line within
    the entry's `since`–`until`; an entry naming a `sampler` path, only when the warm-up took that
    path: `sampler`, else vllm_eras.sampler_path_unstated)."""
    if not release:
        return []
    look = reg if look is None else look  # `look`: the view the values are read through
    path = sampler or str(look["vllm_eras.sampler_path_unstated"].value)
    line = tuple(release[:2])
    return [name for name in reg.names("vllm_eras.laws_until.")
            if look[name].value.get("sampler", path) == path
            and release_tuple(str(look[name].value.get("since", "0.0"))) <= line
            <= release_tuple(str(look[name].value["until"]))]
