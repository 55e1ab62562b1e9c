"""The words every report shares: the solver's status, each stage's, and the footnote of an
estimated price."""

from __future__ import annotations

from pricing.errors import mention, render


def price_footnotes(pools, named=None) -> list[str]:
    """One footnote per chip whose price is an estimate (the `*` beside its cost); the price it
    mentions named as `named` calls it (`plan`'s --price, a scenario's inventory price)."""
    seen: dict[str, str] = {}
    for p in pools:
        if p.price_estimate and p.chip not in seen:
            seen[p.chip] = (f"* {p.chip}: ${p.price_per_gpu_hour:.2f}/GPU-hour is an estimate as of {p.price_as_of}, "
                            f"not a quote (give yours with {render(mention('price'), named)})")
    return list(seen.values())


def solver_phrase(status: str, stages: list | None = None) -> str:
    """The solver's status in words, as every report prints it: OPTIMAL is an optimum every stage
    proved; otherwise each stage's status, and where a stage has a solution without its proof, its
    value, the solver's bound and the gap between them (planner/search/cpsat.py `solve`). It mentions
    time_limit: the printer names it (`render`)."""
    if status == "OPTIMAL":
        return "solver OPTIMAL (optimum proven)"
    if status == "UNKNOWN":
        return f"solver UNKNOWN (no plan found within the time limit; {mention('time_limit')} raises it)"
    if status != "FEASIBLE":
        return f"solver {status}"
    if not stages:
        return f"solver FEASIBLE (optimum not proven within the time limit; {mention('time_limit')} raises it)"
    return "solver FEASIBLE (optimum not proven: " + "; ".join(stage_words(s) for s in stages) + \
        f"; {mention('time_limit')} raises it)"


def unserved_words(r) -> str:
    """A review's headline when its answer serves not every service (planner/app/fleet.py
    FleetResult): proven, or what is true when nothing is proven (`unproven`; it mentions time_limit)."""
    return r.unproven or "not every service can be served"


def no_plan_cell(r) -> str:
    """A table's cost cell for a review's answer without a plan: infeasible only where proven."""
    return "no plan found" if r.unproven else "infeasible"


def bounded_words(priced: int, shapes: int, found: bool = True) -> str:
    """What a sweep --time-limit bounded says of the answer (planner/search/sweep_time.py): every
    report prints it beside the solver's status; of a plan only where one was `found`. It mentions time_limit."""
    swept = f"sweep bounded by {mention('time_limit')}: {priced:,} of {shapes:,} shapes priced"
    return f"{swept}; the plan is the best of those, not proven optimal over all shapes" if found else swept


LIMITS = {"deterministic": "the time limit (as deterministic work)",
          "time": "the wall-clock backstop (the machine was too slow for the time limit's work)"}
"""What ended a stage (planner/search/status.py `StageStatus.limit`), as a report says it."""


def stage_words(s) -> str:
    """One stage's status (planner/search/status.py StageStatus), with its value, bound and gap when
    it has a solution it did not prove."""
    limit = LIMITS.get(s.limit or "", "its limit")
    if s.status == "OPTIMAL":
        return f"{s.stage} OPTIMAL"
    if s.kept_previous:
        return f"{s.stage} {s.status} ({limit} ended it without a solution: the previous stage's plan is kept)"
    if s.value is None:
        return f"{s.stage} {s.status}"
    if s.stage.startswith("cost"):
        figures = f"${s.value:,.2f}/hour, at least ${s.bound:,.2f}"
    else:
        figures = f"{s.value:,.0f} requests held, at most {s.bound:,.0f}"
    return f"{s.stage} {s.status} when {limit} ended it: {figures}, gap {s.gap:.2%}"
