"""The planner's own defaults (planner/defaults.yaml): grids, report conventions and solver
parameters, each `{value, source, how}` like the pricing registry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pricing import yaml_fast
from pricing.registry import Sourced, shipped

PATH = Path(__file__).with_name("defaults.yaml")


def _values() -> dict[str, Sourced]:
    """planner/defaults.yaml by name, read once and kept by the shipped registry, the owner of the
    package's data (Registry.derived)."""
    return shipped().derived(("planner.defaults",), _read)


def _read() -> dict[str, Sourced]:
    out: dict[str, Sourced] = {}

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict) and "value" in node and "source" in node:
            out[prefix] = Sourced(prefix, node["value"], str(node["source"]), str(node.get("how", "")))
        elif isinstance(node, dict):
            for key, child in node.items():
                walk(f"{prefix}.{key}" if prefix else key, child)

    walk("", yaml_fast.load(PATH.read_text()))
    return out


def sourced(name: str) -> Sourced:
    """One default with its provenance (`grids.max_num_batched_tokens`, `report.hours_per_month`...)."""
    try:
        return _values()[name]
    except KeyError:
        raise KeyError(f"planner/defaults.yaml has no value named {name!r}") from None


def value(name: str) -> Any:
    return sourced(name).value


class Reads:
    """A recording view of the defaults: what one plan read through it, by name. A plan's
    provenance lists the defaults its views recorded (its service's, planner/candidates/service.py
    `ResolvedService.defaults`, and each candidate table's, built once and shared), sorted by name,
    so what it lists does not depend on which service or table was built first."""

    def __init__(self, names=()):
        self.names: set[str] = set(names)

    def sourced(self, name: str) -> Sourced:
        found = sourced(name)
        self.names.add(name)
        return found

    def value(self, name: str) -> Any:
        return self.sourced(name).value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Reads) and self.names == other.names

    __hash__ = None  # it records: compared by what it holds, never a key

    def __repr__(self) -> str:
        return f"Reads({sorted(self.names)})"


def read_by(*views: Reads) -> list[Sourced]:
    """The defaults any of `views` recorded, sorted by name."""
    return [sourced(n) for n in sorted(set().union(*(v.names for v in views)))]


def read(reads: Reads | None, name: str) -> Any:
    """`name`'s value, recorded in `reads` where the caller keeps a plan's provenance (None: a use
    case whose result lists no planner defaults: a review's fleet, P/D, max rate)."""
    return reads.value(name) if reads is not None else value(name)
