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

from pricing import yaml_fast

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


    def overlay(self, values: dict[str, Sourced]) -> Registry:
        """A copy with `values` laid over it, each keeping its own provenance."""
        merged = dict(self._values)
        merged.update(values)
        return Registry(merged, self.raw)

    def __hash__(self) -> int:  # memo keys hold the registry whole: equal content, equal key
        return hash(self._key())

    def __eq__(self, other) -> bool:
        return isinstance(other, Registry) and self._key() == other._key()

    def _key(self):
        if not hasattr(self, "_cached_key"):
            self._cached_key = tuple(sorted((n, repr(v.value)) for n, v in self._values.items()))
        return self._cached_key


def overlay_from(data: dict, base: Registry | None = None) -> Registry:
    """An overlay given as data (the layout of an overlay file) laid over the shipped registry."""
    base = base or shipped()
    values: dict[str, Sourced] = {}
    for stem, node in data.items():
        _flatten(stem, node, values)
    return base.overlay(values)


def read_overlay(path: str | Path, base: Registry | None = None) -> Registry:
    """`--registry overlay.yaml`: the shipped registry with the overlay's values laid over it.

    The overlay has the registry's own layout: file stem, then the dotted path, each leaf
    `{value, source, how}` (`plan calibrate --out` writes one). A leaf must replace a value the
    registry has, or add one inside a table it has (a new family's law); anything else is named
    as bad input, so a typo is never silently ignored.
    """
    from pricing.errors import InputError

    base = base or shipped()
    path = Path(path)
    try:
        data = yaml_fast.load(path.read_text())
    except OSError as err:
        raise InputError("--registry", f"cannot read {path}: {err.strerror}", "give an overlay YAML file") from None
    except yaml.YAMLError as err:
        raise InputError("--registry", f"{path} is not valid YAML ({str(err).splitlines()[0]})",
                         "fix the file, or write one with `plan calibrate --out`") from None
    if not isinstance(data, dict):
        raise InputError("--registry", f"{path} holds no mapping", "give registry file stems as top-level keys")
    values: dict[str, Sourced] = {}
    for stem, node in data.items():
        if stem == "chips":
            raise InputError("--registry", f"{path}: chips cannot be overlaid",
                             "give a chip's memory or price with --memory-bytes / --price")
        if stem not in base.raw:
            raise InputError("--registry", f"{path}: {stem!r} is not a registry file",
                             f"use one of {', '.join(sorted(base.raw))}")
        _flatten(stem, node, values)
    for name in values:
        parent = name.rsplit(".", 1)[0]
        if name not in base and not ("." in parent and _is_table(base, parent) and parent not in base):
            raise InputError("--registry", f"{path}: {name} is not a registry value",
                             "check the name against `plan memory --provenance` or the registry files")
    return base.overlay(values)


def _is_table(reg: Registry, dotted: str) -> bool:
    stem, _, rest = dotted.partition(".")
    node = reg.raw.get(stem)
    for part in rest.split(".") if rest else []:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return isinstance(node, dict) and not _is_leaf(node)


_ACTIVE: list[Registry] = []


def activate(reg: Registry | None) -> None:
    """Make `reg` the registry every later `load()` returns (the CLI's `--registry`); None
    restores the shipped one."""
    _ACTIVE.clear()
    if reg is not None:
        _ACTIVE.append(reg)


def load() -> Registry:
    """The registry in use: the shipped one, or the overlay the command line activated."""
    return _ACTIVE[0] if _ACTIVE else shipped()


@lru_cache(maxsize=1)
def shipped() -> Registry:
    """The registry shipped with the package."""
    values: dict[str, Sourced] = {}
    raw: dict[str, Any] = {}
    for path in sorted(HERE.glob("*.yaml")):
        data = yaml_fast.load(path.read_text())
        raw[path.stem] = data
        _flatten(path.stem, data, values)
    return Registry(values, raw)
