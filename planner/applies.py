"""What an option or a scenario field needs to have an effect: a field given where it cannot apply
is refused in one line naming it, never taken silently. The command line's table is
planner/commands/flags.py `NEEDS`; a scenario's services are judged here, on the fields each
service writes itself (a `defaults:` value applies where it can and is not refused elsewhere)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable


@dataclasses.dataclass(frozen=True)
class Needs:
    """`option`, given, applies only where `holds(options)`: else it is refused, `without` saying
    what is missing and `fix` the way out (an option with no effect is never taken silently)."""

    option: str
    without: str
    holds: Callable[[dict], bool]
    fix: str


SERVICE_NEEDS = (
    Needs("speculative_acceptance", "speculative decoding (num_speculative_tokens 0)",
          lambda s: bool(s.get("num_speculative_tokens")), "add num_speculative_tokens: N, or drop it"),
)


def service_cannot_apply(written: set[str], merged: dict, dense_model: str | None) -> list[tuple[str, str, str]]:
    """(field, problem, fix) of each field a service writes (`written`) that cannot apply to it as
    merged with the scenario's defaults (`merged`); `dense_model`: the model's name when it is dense
    (dp is 1 on it: replicas scale a dense model, planner/candidates/shapes.py)."""
    out = [(row.option, f"has no effect without {row.without}", row.fix) for row in SERVICE_NEEDS
           if row.option in written and merged.get(row.option) is not None and not row.holds(merged)]
    if dense_model is not None and "dp" in written and any(d != 1 for d in merged.get("dp") or ()):
        out.append(("dp", dense_without(dense_model), "drop it"))
    return out


def dense_without(model: str) -> str:
    """Why dp cannot apply to a dense model."""
    return f"has no effect on {model}, a dense model: dp is 1 and replicas scale it"
