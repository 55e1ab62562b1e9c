"""What a solve proved, stage by stage (planner/search/cpsat.py `solve`): the data every report
prints its solver line from, kept free of OR-Tools so the report reads it without importing the solver."""

from __future__ import annotations

from pydantic import BaseModel, Field

STAGES = ("cost, then GPUs", "requests held, then rank")


class StageStatus(BaseModel):
    """What one stage of the lexicographic solve proved, in the units a reviewer reads: stage one
    the cost ($/hour), stage two the requests held. `bound` is the best the solver proved
    possible (cost at least, requests at most); `gap` the share between it and `value`."""

    stage: str = Field(description="what the stage optimises: 'cost, then GPUs' or 'requests held, then rank'")
    status: str = Field(description="CP-SAT's status of the stage: OPTIMAL (proven), FEASIBLE (a solution, its "
                                    "optimum not proven), UNKNOWN (no solution within its limit), INFEASIBLE")
    value: float | None = Field(None, description="the stage's key in the solution: $/hour, or requests held")
    bound: float | None = Field(None, description="the solver's proven bound on it: the least $/hour, or the most "
                                                  "requests held, any solution can have")
    gap: float | None = Field(None, description="(value − bound) / value for the cost, (bound − value) / bound for "
                                                "the requests: 0 when proven")
    kept_previous: bool = Field(False, description="the stage ended without a solution: the previous stage's "
                                                   "plan is the answer")
    limit: str | None = Field(None, description="what ended the stage before it proved its optimum: "
                                                "'deterministic' (--time-limit, as deterministic work: the same "
                                                "answer on any machine load) or 'time' (the wall-clock backstop, "
                                                "planner/search/staged.py Budget: the answer may depend on load)")


def overall(stages: list[StageStatus]) -> str:
    """The status a report leads with: OPTIMAL only when every stage proved its optimum;
    FEASIBLE when a plan was found without that proof; else the first stage's status."""
    if stages and all(s.status == "OPTIMAL" for s in stages):
        return "OPTIMAL"
    if stages and stages[0].status in ("OPTIMAL", "FEASIBLE"):
        return "FEASIBLE"
    return stages[0].status if stages else "INFEASIBLE"


def summed(per_service: list[list[StageStatus]]) -> list[StageStatus]:
    """The stages of services solved one at a time, as one fleet's: statuses combined as
    `overall` combines stages, values and bounds added (each key is a sum over services)."""
    out = []
    for i, stage in enumerate(STAGES):
        mine = [stages[i] for stages in per_service if len(stages) > i]
        if not mine:
            continue
        statuses = [s.status for s in mine]
        status = "OPTIMAL" if all(st == "OPTIMAL" for st in statuses) else (
            "FEASIBLE" if all(st in ("OPTIMAL", "FEASIBLE") for st in statuses) else
            next(st for st in statuses if st not in ("OPTIMAL", "FEASIBLE")))
        known = all(s.value is not None and s.bound is not None for s in mine)
        value = round(sum(s.value for s in mine), 4) if known else None
        bound = round(sum(s.bound for s in mine), 4) if known else None
        limit = next((s.limit for s in mine if s.limit), None)
        out.append(StageStatus(stage=stage, status=status, value=value, bound=bound, gap=_gap(i, value, bound),
                               kept_previous=any(s.kept_previous for s in mine), limit=limit))
    return out


def _gap(stage: int, value: float | None, bound: float | None) -> float | None:
    if value is None or bound is None:
        return None
    if stage == 0:
        return round((value - bound) / value, 6) if value else 0.0
    return round((bound - value) / bound, 6) if bound else 0.0
