"""The kinds a plan's objects come in, as values the JSON prints as their words: a pool's role and
a plan's serving mode (vLLM's disaggregated prefill through its NixlConnector, or not)."""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    """What a pool's instances do: prefill and decode both, or one side of the KV hand-over."""

    AGGREGATED = "aggregated"
    PREFILL = "prefill"
    DECODE = "decode"


class Serving(StrEnum):
    """How a service is served: one aggregated pool, a prefill pool and a decode pool, or the
    cheaper of the two (`--serving`)."""

    AGG = "agg"
    DISAGG = "disagg"
    AUTO = "auto"
