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
