"""A capacity review: a scenario under its base and every variant, side by side, with the
grid's ranking (`plan scenario --variants`, `plan compare FILE`); its renderings are
planner/report/review.py's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from planner.app.fleet import FleetResult
from planner.app.max_rate import MaxRateResult
from planner.scenario import Scenario, grid_points


class GridPoint(BaseModel):
    """One point of a scenario's grid, in the ranking: cheapest first, infeasible last."""

    rank: int
    variant: str
    values: dict[str, Any] = Field(description="the point's value of each axis")
    feasible: bool
    cost_per_month: float | None
    gpus: int | None


class Comparison(BaseModel):
    """`plan scenario --variants --format json` and `plan compare --json`: the base and each variant
    (each a scenario's result), with the grid's ranking when the file has a grid."""

    kind: Literal["comparison"] = Field("comparison", description="which report this is (the schema's "
                                                                  "discriminator)")
    review: str
    base: FleetResult
    variants: list[FleetResult]
    grid: dict[str, list[Any]] = Field(default_factory=dict, description="the scenario's grid axes and values")
    ranking: list[GridPoint] = Field(default_factory=list, description="the grid's points by cost (then GPUs), "
                                     "feasible first")

    @property
    def results(self) -> list[FleetResult]:
        return [self.base] + self.variants


def compare(scenario: Scenario, names: list[str] | None = None,
            progress: Callable[[int, int, str], None] | None = None, time_limit: float | None = None,
            executor: str = "sequential", ray_address: str | None = None, registry=None, tables=None) -> Comparison:
    """The scenario as written, then under each variant (in file order, or `names`); `time_limit`
    bounds each solve (planner/app/fleet.py `plan_scenario`); the variants are planned by
    `executor` (planner/app/executors.py), with the same results in the same order; under `registry`
    (the command's; None: the shipped one) with `tables`, the command's store (None: none kept)."""
    from planner.app.executors import plan_variants

    names = list(scenario.variants) if names is None else names
    total = 1 + len(names)
    if progress:
        progress(0, total, "base")
    done = [0]

    def tick(name: str) -> None:
        if done[0] and progress:  # the base is the first job: its start was said above
            progress(done[0], total, name)
        done[0] += 1

    jobs = [(scenario, "base")] + [(scenario.apply(name), name) for name in names]  # the base planned as a job
    base, *out = plan_variants(jobs, time_limit, executor, ray_address, tick, registry, tables)
    if progress:
        progress(total, total, "done")
    return Comparison(review=scenario.review, base=base, variants=out, grid=scenario.grid,
                      ranking=rank_grid(scenario, out))


def rank_grid(scenario: Scenario, results: list[FleetResult]) -> list[GridPoint]:
    """The grid's points (the variants `grid_points` names) ranked by $/month, then GPUs; the
    points nothing serves last, in grid order."""
    points = dict(grid_points(scenario.grid))
    mine = [r for r in results if r.variant in points]
    order = sorted(mine, key=lambda r: (not r.feasible, r.cost_per_month if r.feasible else 0,
                                        r.gpus if r.feasible else 0))
    return [GridPoint(rank=i, variant=r.variant, values=points[r.variant], feasible=r.feasible,
                      cost_per_month=r.cost_per_month if r.feasible else None, gpus=r.gpus if r.feasible else None)
            for i, r in enumerate(order, start=1)]


class MaxRatePoint(BaseModel):
    """One point of `plan compare --max-rate`: its label, its value of each axis, and the most
    requests per second its pool serves within the targets (`plan --max-rate`'s answer)."""

    label: str
    values: dict[str, Any] = Field(description="the point's value of each axis (model, chip, ...)")
    result: MaxRateResult


class MaxRateComparison(BaseModel):
    """`plan compare --max-rate --json`: per point (a model, a chip, ...), the highest rate its pool
    of --max-gpus GPUs serves within the service targets, the point's first."""

    kind: Literal["max_rate_comparison"] = Field("max_rate_comparison", description="which report this is (the "
                                                 "schema's discriminator)")
    review: str = Field(description="what was compared: the values held fixed, then the axes that vary")
    points: list[MaxRatePoint]


def compare_max_rate(points: list[tuple[str, dict, Any]], title: str,
                     progress: Callable[[str], None] | None = None, named=None, registry=None,
                     tables=None) -> MaxRateComparison:
    """Each point's `max_rate` (planner/app/max_rate.py), in order: (label, axis values, MaxRateRequest)."""
    from planner.app.max_rate import max_rate

    out = []
    for label, values, request in points:
        out.append(MaxRatePoint(label=label, values=values, result=max_rate(request, named, registry, tables)))
        if progress:
            progress(label)
    return MaxRateComparison(review=title, points=out)
