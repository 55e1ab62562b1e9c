"""A service's autoscaled schedule: the replicas of its pool shape each interval of its
traffic needs within its service targets, held to its autoscaling policy, with the static peak
pool's cost and the schedule's per day (planner/traffic/schedule.py states the approximation)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from planner.request import ServiceSpec
from planner.traffic.intervals import Traffic
from planner.traffic.schedule import (
    IntervalPlan,
    NotServed,
    PoolShape,
    ServiceSchedule,
    at_risk,
    demand,
    hold,
    lead_minutes,
    scale_down,
    steps,
)


class ScheduleRequest(BaseModel):
    """A service to schedule: its spec (targets, lengths), its traffic and the pool shape to scale."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    name: str
    service: ServiceSpec
    traffic: Traffic
    shape: PoolShape
    price_per_gpu_hour: float | None = None  # USD per GPU-hour the pool is priced at (the chip's unless given)
    static_replicas: int | None = None  # the static plan's replicas at the peak, when one was planned


def schedule(request: ScheduleRequest) -> ServiceSchedule:
    """The request's schedule: per interval the replicas running, their GPUs and one replica's p99s,
    and GPU-hours and cost per day of the schedule against the static peak pool."""
    traffic, shape, service = request.traffic, request.shape, request.service
    found = demand(service, shape, traffic, benchmarks=True)
    if traffic.lead_minutes is not None:
        lead, lead_said = traffic.lead_minutes, "lead_minutes"
    else:
        lead, lead_said = lead_minutes(service, shape)
    down, _ = scale_down(traffic, shape.table.defaults.unrecorded)
    running = hold(found.needed, traffic.intervals, lead, down, traffic.cyclic)
    risky = at_risk(found.needed, traffic.intervals, lead, down, traffic.cyclic)
    gpus = shape.gpus
    price = request.price_per_gpu_hour if request.price_per_gpu_hour is not None else shape.price_per_gpu_hour
    rows = []
    for iv, need, run, risk, served in zip(traffic.intervals, found.needed, running, risky, found.served,
                                           strict=True):
        rows.append(IntervalPlan(interval=iv, replicas=run, needed=need, gpus=run * gpus, at_risk=risk,
                                 p99_ttft_ms=round(served.ttft.percentile(99) * 1000, 2) if served else None,
                                 p99_tpot_ms=round(served.tpot.percentile(99) * 1000, 2) if served else None))
    static = max([*found.needed, request.static_replicas or 0])
    per_day = 1440 / traffic.window_minutes
    hours_static = static * gpus * 24
    hours_scaled = sum((b - a) * n for a, b, n in steps(found.needed, traffic.intervals, lead, down,
                                                         traffic.cyclic)) * gpus / 60 * per_day
    rate = found.rates[found.bins[traffic.intervals.index(traffic.peak)]]
    return ServiceSchedule(
        service=request.name, source=traffic.source, window_start=traffic.window_start,
        shape=shape.described(price), per_replica_rate=rate,
        min_replicas=traffic.min_replicas, lead_minutes=round(lead, 2), lead_source=lead_said,
        scale_down_minutes=round(down, 2), intervals=rows, static_replicas=static,
        cost_static_per_day=round(hours_static * price, 2), cost_autoscaled_per_day=round(hours_scaled * price, 2),
        gpu_hours_static=round(hours_static, 2), gpu_hours_autoscaled=round(hours_scaled, 2))



def fleet_schedules(scenario, prepared: list, picks: list) -> tuple[list[ServiceSchedule], list[str]]:
    """The schedule of every service of a planned scenario that gives `traffic:`, on the pool shape
    its static plan chose (the cheapest at the peak interval), priced as the plan prices it; and a
    note for each service whose shape misses its targets at some interval's lengths even alone."""
    from planner.search.disagg import PairOption

    by_name = {s.name: s for s in scenario.services}
    out, notes = [], []
    for p, (_, option, replicas) in zip(prepared, picks, strict=True):
        traffic = scenario.traffic_of(by_name[p.name])
        if traffic is None or isinstance(option, PairOption):  # a disaggregated fleet: check_references refuses
            continue
        table = next(t for t in p.tables if t.chip.id == option.row.chip)
        try:
            out.append(schedule(ScheduleRequest(name=p.name, service=p.spec, traffic=traffic,
                                                shape=PoolShape(table, option.row), price_per_gpu_hour=option.price,
                                                static_replicas=replicas)))
        except NotServed as err:
            notes.append(f"{p.name}: no schedule: {err} (its pool was planned at the busiest interval's lengths)")
    return out, notes
