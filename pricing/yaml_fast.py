"""YAML read through libyaml's C loader when PyYAML was built with it (the same safe subset as
`yaml.safe_load`, an order of magnitude faster: the registry and the cards are read at every
start), the pure-Python safe loader otherwise.

A user's file (a scenario, a registry overlay, a card of one's own) is read by `load_checked`:
a key given twice in one mapping (YAML says keys are unique; PyYAML keeps the last silently) and a
number that is not finite (`.nan`, `.inf`) are refused with the line and the path of the key."""

from __future__ import annotations

import math
from typing import Any

import yaml

SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
FLOAT_TAG = "tag:yaml.org,2002:float"


def load(text: str) -> Any:
    return yaml.load(text, Loader=SAFE_LOADER)  # noqa: S506 - a safe loader


class Refused(ValueError):
    """A document the tool will not read: `line` (1-based), `path` (`services[0].tp`, '' for the
    top) and what is wrong."""

    def __init__(self, line: int, path: str, problem: str):
        self.line, self.path, self.problem = line, path, problem
        super().__init__(f"line {line}: {path + ': ' if path else ''}{problem}")


def load_checked(text: str, lines: dict[str, int] | None = None) -> Any:
    """`text` as `load` reads it, after checking every mapping's keys are unique and every number
    finite (`Refused` otherwise; `yaml.YAMLError` for a text that is not YAML). `lines`, when
    given, receives the 1-based line of every mapping key, by path."""
    loader = SAFE_LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check(node, loader, lines if lines is not None else {})
        try:
            return loader.construct_document(node)
        except RecursionError:
            raise Refused(node.start_mark.line + 1, "", "nests too deeply") from None
    finally:
        loader.dispose()


def _check(root, loader, lines: dict[str, int]) -> None:
    stack = [(root, "")]
    seen_nodes = set()
    while stack:
        node, path = stack.pop()
        if id(node) in seen_nodes:  # an alias: its node was checked where the anchor is
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[str, int] = {}
            for key_node, value_node in node.value:
                key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"
                line = key_node.start_mark.line + 1
                if key == "<<" and key_node.tag.endswith(":merge"):
                    stack.append((value_node, path))
                    continue
                child = f"{path}.{key}" if path else key
                if key in first:
                    raise Refused(line, child, f"the key {key!r} is given twice (first on line {first[key]})")
                first[key] = line
                lines.setdefault(child, line)
                stack.append((value_node, child))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(node.value))
        elif isinstance(node, yaml.ScalarNode) and node.tag == FLOAT_TAG:
            value = loader.construct_yaml_float(node)
            if not math.isfinite(value):
                raise Refused(node.start_mark.line + 1, path, f"{node.value} is not a finite number")
