"""The planner's own defaults (planner/defaults.yaml): grids, report conventions and solver
parameters, each `{value, source, how}` like the pricing registry.

One entry point reads the file (`load`, the table kept by the shipped registry); the command or
the API call that makes the view hands it down whole: a resolved service's and each candidate
table's recording view (`Reads`, whose reads are a plan's provenance), a renderer's table (its
options or an argument). No module under planner/ but the entry points reads the file's values
from a module-level function (tests/test_defaults_reads.py says so)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pricing import yaml_fast
from pricing.registry import Sourced, shipped

PATH = Path(__file__).with_name("defaults.yaml")


class Defaults:
    """planner/defaults.yaml by name: what a command reads its planner defaults from, unrecorded
    (a renderer's conventions, a bound), made once (`load`) and handed down."""

    def __init__(self, table: dict[str, Sourced]):
        self.table = table

    def sourced(self, name: str) -> Sourced:
        """One default with its provenance (`grids.max_num_batched_tokens`, `report.hours_per_month`...)."""
        try:
            return self.table[name]
        except KeyError:
            raise KeyError(f"planner/defaults.yaml has no value named {name!r}") from None

    def value(self, name: str) -> Any:
        return self.sourced(name).value

    def reads(self) -> Reads:
        """A new recording view of this table (a resolved service's, a candidate table's)."""
        return Reads(self)

    @property
    def unrecorded(self) -> Defaults:
        """This view, which records nothing."""
        return self

    def __repr__(self) -> str:
        return f"Defaults({len(self.table)} values)"


def load() -> Defaults:
    """planner/defaults.yaml, read once and kept by the shipped registry, the owner of the package's
    data (Registry.derived): the one entry point to the file, called by the command or the API call
    that makes the view."""
    return shipped().derived(("planner.defaults",), lambda: Defaults(_read()))


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
    """One default with its provenance, for tests and scripts (a module under planner/ is handed a
    view instead)."""
    return load().sourced(name)


def value(name: str) -> Any:
    """One default's value, for tests and scripts (a module under planner/ is handed a view instead)."""
    return load().value(name)


class Reads:
    """A recording view of the defaults `table`: what one plan read through it, by name. A plan's
    provenance lists the defaults its views recorded (its service's, planner/candidates/service.py
    `ResolvedService.defaults`, and each candidate table's, built once and shared), sorted by name,
    so what it lists does not depend on which service or table was built first."""

    def __init__(self, table: Defaults, names=()):
        self.table = table
        self.names: set[str] = set(names)

    def sourced(self, name: str) -> Sourced:
        found = self.table.sourced(name)
        self.names.add(name)
        return found

    def value(self, name: str) -> Any:
        return self.sourced(name).value

    @property
    def unrecorded(self) -> Defaults:
        """The table this view reads, recording nothing: for reads that shape no plan's provenance
        (a use case whose result lists no planner defaults: a review's fleet, P/D, max rate)."""
        return self.table

    def fresh(self) -> Reads:
        """A new, empty view of the same table (a candidate table's, from its service's)."""
        return Reads(self.table)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Reads) and self.names == other.names

    __hash__ = None  # it records: compared by what it holds, never a key

    def __repr__(self) -> str:
        return f"Reads({sorted(self.names)})"


View = Defaults | Reads  # either view, read through `.value` and `.sourced` (a Reads records what it reads)


def read_by(*views: Reads) -> list[Sourced]:
    """The defaults any of `views` (of one table) recorded, sorted by name."""
    return [views[0].table.sourced(n) for n in sorted(set().union(*(v.names for v in views)))] if views else []
