"""The registry: every magnitude the kernel uses that is not computed from the model graph.

Each value lives in a YAML data file of this folder as `{value, source, how}`: what it is,
where it came from, and how it was obtained. `Registry[name]` returns a `Sourced` value;
names are the dotted path inside the file, prefixed by the file's stem
(`cost_model_memory.activation_floor_bytes`). The kernel lists every value it read in its
provenance.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent


@dataclass(frozen=True)
class Sourced:
    """One registry value with its provenance."""

    name: str
    value: Any
    source: str
    how: str


def _is_leaf(node: Any) -> bool:
    return isinstance(node, dict) and "value" in node and "source" in node


def _flatten(prefix: str, node: Any, out: dict[str, Sourced]) -> None:
    if _is_leaf(node):
        out[prefix] = Sourced(prefix, node["value"], str(node["source"]), str(node.get("how", "")))
    elif isinstance(node, dict):
        for key, child in node.items():
            _flatten(f"{prefix}.{key}", child, out)


class Registry:
    """All registry values, flattened to dotted names."""

    def __init__(self, values: dict[str, Sourced], raw: dict[str, Any]):
        self._values = values
        self.raw = raw

    def __getitem__(self, name: str) -> Sourced:
        try:
            return self._values[name]
        except KeyError:
            raise KeyError(f"registry has no value named {name!r}") from None

    def __contains__(self, name: str) -> bool:
        return name in self._values

    def value(self, name: str) -> Any:
        return self[name].value

    def names(self, prefix: str = "") -> list[str]:
        return sorted(n for n in self._values if n.startswith(prefix))

    def with_overrides(self, overrides: dict[str, Any]) -> Registry:
        """A copy with some values replaced (used for what-ifs and tests); provenance says so."""
        values = dict(self._values)
        for name, value in overrides.items():
            values[name] = Sourced(name, value, "user override", "given on the command line or in a scenario")
        return Registry(values, self.raw)


@lru_cache(maxsize=1)
def load() -> Registry:
    """The registry shipped with the package."""
    values: dict[str, Sourced] = {}
    raw: dict[str, Any] = {}
    for path in sorted(HERE.glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        raw[path.stem] = data
        _flatten(path.stem, data, values)
    return Registry(values, raw)
