"""Which vLLM release a record comes from, and how that release accounted its memory.

A record is predicted with its release's rules pack (pricing/rules: the pack's defaults, start-up
check, CUDA-graph accounting and fitted era laws); the era here labels it and names the laws its
prediction took (registry/vllm_eras.yaml, with their sources).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pricing.registry import Registry
from pricing.rules.release import era_law_names

_VERSION = re.compile(r"(\d+)\.(\d+)")


@dataclass(frozen=True)
class Era:
    """A release as far as memory accounting goes."""

    label: str  # "0.19", "v0", "unknown"
    release: tuple[int, int] | None  # (0, 19); None for v0 and unknown
    engine: str  # "v0" | "v1"
    graph_estimate_in_budget: bool  # the CUDA-graph estimate is subtracted from the KV budget
    default_utilization: float

    @property
    def known(self) -> bool:
        return self.engine == "v0" or self.release is not None


def has_sampler_law(reg: Registry, era: Era, sampler: str) -> bool:
    """Whether `era` has a law of its own for the sampler path `sampler` (else the native one's applies)."""
    return any(reg[name].value.get("sampler") == sampler for name in era_laws(reg, era, sampler))


def era_laws(reg: Registry, era: Era, sampler: str) -> list[str]:
    """The names of the vllm_eras.laws_until entries a start-up of `era` whose sampler warm-up
    took path `sampler` is predicted with (Release.laws lays the same ones over the registry)."""
    release = era.release if era.release is not None else ((0, 6) if era.engine == "v0" else None)
    return era_law_names(reg, release, sampler) if release is not None else []


def release_of(text: str) -> tuple[int, int] | None:
    """(major, minor) of a version text ("0.19.1", "V1 ~0.11.1 (…)"), None when it names none."""
    m = _VERSION.search(text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def era_of(version: str | None, reg: Registry) -> Era:
    """The era of a logged version string ("0.19.0", "V1 ~0.11.1 (…)", "v0 engine (~0.6)", None)."""
    since = release_of(str(reg.value("vllm_eras.graph_estimate_in_budget_since")))
    util_rows = reg.value("vllm_eras.default_gpu_memory_utilization")
    text = (version or "").strip()
    if text.lower().startswith("v0"):
        return Era("v0", None, "v0", False, float(util_rows[0]["value"]))
    release = release_of(text) if text and not text.lower().startswith("not stated") else None
    if release is None:
        return Era("unknown", None, "v1", True, float(util_rows[-1]["value"]))
    util = float(util_rows[0]["value"])
    for row in util_rows:
        if release >= release_of(str(row["since"])):
            util = float(row["value"])
    return Era(f"{release[0]}.{release[1]}", release, "v1", release >= since, util)
