"""Which vLLM release a record comes from, and how that release accounted its memory.

The laws are modelled as vLLM 0.33 runs them; a record from an older release is predicted with
that release's own accounting (whether the CUDA-graph estimate is taken from the KV budget,
the default utilization), so its residual speaks to the laws and not to the era. The era
facts live in registry/vllm_eras.yaml with their sources.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pricing.registry import Registry

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


def era_registry(reg: Registry, era: Era, sampler: str = "native") -> Registry:
    """The registry as `era` ran: the current laws, with those that changed since laid over
    (registry vllm_eras.laws_until, each for the releases `since`–`until`; an entry that names a
    `sampler` path applies only to a start-up whose warm-up took that path). vLLM 0.33 and unknown
    releases get the registry as is."""
    from pricing.registry import Sourced

    changed = {}
    for name in era_laws(reg, era, sampler):
        entry = reg[name]
        law = entry.value["law"]
        how = f"era {entry.value.get('since', '')}–{entry.value['until']}: {entry.how}"
        changed[law] = Sourced(law, entry.value["value"], entry.source, how)
    return reg.overlay(changed) if changed else reg


def has_sampler_law(reg: Registry, era: Era, sampler: str) -> bool:
    """Whether `era` has a law of its own for the sampler path `sampler` (else the native one's applies)."""
    return any(reg[name].value.get("sampler") == sampler for name in era_laws(reg, era, sampler))


def era_laws(reg: Registry, era: Era, sampler: str) -> list[str]:
    """The names of the vllm_eras.laws_until entries a start-up of `era` whose sampler warm-up
    took path `sampler` is predicted with (its release within `since`–`until`; the entry's
    `sampler`, if it names one, that path)."""
    release = era.release if era.release is not None else ((0, 6) if era.engine == "v0" else None)
    if release is None:
        return []
    out = []
    for name in reg.names("vllm_eras.laws_until."):
        entry = reg[name].value
        if entry.get("sampler", sampler) == sampler and \
                release_of(str(entry.get("since", "0.0"))) <= release <= release_of(str(entry["until"])):
            out.append(name)
    return out


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
