"""YAML read through libyaml's C loader when PyYAML was built with it (the same safe subset as
`yaml.safe_load`, an order of magnitude faster: the registry and the cards are read at every
start), the pure-Python safe loader otherwise."""

from __future__ import annotations

from typing import Any

import yaml

SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(text: str) -> Any:
    return yaml.load(text, Loader=SAFE_LOADER)  # noqa: S506 - a safe loader
