"""--time-limit over a review's candidate sweep: the sweep is sized before it runs, in shapes, and
the limit is shared between it and the solver, both counted as work rather than wall time, so that
the same review and limit give the same answer on an idle machine and a loaded one.

A candidate table is one service's sweep on one chip (planner/candidates/table.py `candidate_table`,
shared by every service of equal `sweep_key`); its shapes (`start_table`) are what it evaluates, each
over the utilization × token-budget grid. The review's shapes over planner/defaults.yaml
`sweep.shapes_per_second` (measured on one core) are the seconds the sweep is counted as: when they
take the whole limit, the review is refused before anything is swept, naming the limit it needs; else
the solver gets the rest of the limit (planner/search/staged.py Budget, deterministic work).
"""

from __future__ import annotations

import math

from planner import defaults
from planner.candidates.table import built_table, start_table, sweep_key
from pricing.errors import InputError


def sweep_shapes(requests) -> tuple[int, int]:
    """(tables, shapes) of the candidate tables `requests` ask for that are not built yet (each
    distinct `sweep_key` once): every shape a whole sweep may evaluate, pipeline-staged ones
    included (an upper bound: the bounded sweep and the staged rule evaluate fewer)."""
    seen: set = set()
    shapes = 0
    for request in requests:
        key = sweep_key(*request)
        if key in seen or built_table(key) is not None:
            continue
        seen.add(key)
        shapes += len(start_table(*request)[2])
    return len(seen), shapes


def solver_seconds(requests, time_limit: float | None) -> float | None:
    """What the solver has of `time_limit` once the sweep of `requests` is counted (None: no limit
    given, the solver's default applies and the sweep is not bounded); raises InputError naming the
    limit the sweep needs when the sweep alone would take it all."""
    if time_limit is None:
        return None
    tables, shapes = sweep_shapes(requests)
    rate = defaults.value("sweep.shapes_per_second")
    sweep = shapes / rate
    if sweep >= time_limit:
        raise InputError("time_limit", f"{time_limit:g} s is too short for this review: its candidate sweep "
                         f"({tables:,} tables, {shapes:,} shapes) counts as {sweep:.3g} s at the measured "
                         f"{rate:,} shapes a second, and the solver's share comes after it",
                         f"give at least {math.ceil(sweep) + 1}: the sweep's seconds and one for the solver")
    return time_limit - sweep
