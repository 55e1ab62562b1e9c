"""A scenario's fleet over the day: the services with `traffic:` scheduled interval by
interval on one inventory (planner/search/time_fleet.py), so that services peaking at different
hours share GPUs; the GPUs the inventory needs at its busiest interval against the sum of the
services' own peaks; and each autoscaled pool's autoscaler settings (planner/report/autoscaler.py).

Each service's candidate shapes are its options as the scenario's search prepares them
(planner/search/fleet.py `prepare`, sized at the traffic's peak): the static plan's pick and the
cheapest others at the peak, up to planner/defaults.yaml
time_fleet.shapes_per_service in all (the search over the day is over those shapes only); on a chip
the inventory does not count, a shape whose least cost over the window (its min replicas, one where
requests arrive) exceeds a cost already found is never the answer, and is not simulated. A shape's
replicas per interval are the traffic's (planner/traffic/schedule.py `replicas_needed`, from its parts: the fewest
meeting the targets, min replicas, lead time and scale-down delay); a service without `traffic:`
keeps its static replicas all day.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field, PrivateAttr

from planner.candidates.service import defaults_of
from planner.scenario import Scenario
from planner.search.fleet import Prepared, spare_gpus
from planner.search.status import StageStatus
from planner.search.time_fleet import ServiceOverDay, ShapeOverDay, common_timeline, solve_time_fleet, spread
from pricing.errors import InputError

MINUTES_PER_DAY = 1440


class AutoscalerSettings(BaseModel):
    """What an autoscaled pool's autoscaler is set to (planner/report/autoscaler.py writes it), at the shape
    the fleet over the day keeps it on (the pool --emit k8s writes)."""

    min_replicas: int
    max_replicas: int
    per_replica_rate: float = Field(description="the highest requests/s one replica serves within the targets at the "
                                    "peak interval's lengths (the serving simulator, tails included)")
    mean_e2e_seconds: float = Field(description="the simulator's mean E2E latency of one replica at that rate")
    running_per_replica: float = Field(description="target requests per replica: per_replica_rate × mean E2E "
                                       "(Little's law: requests in the system, queued ones included)")
    lead_minutes: float
    scale_down_minutes: float
    step: int = Field(description="the most replicas the schedule adds within one lead time (the scale-up policy)")


class ServiceOverTheDay(BaseModel):
    """One service over the day: the shape the fleet keeps it on, its replicas and GPUs per interval."""

    service: str
    autoscaled: bool = Field(description="the service has traffic: (else its static replicas all day)")
    chip: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    data_parallel_size: int
    gpus_per_replica: int
    price_per_gpu_hour: float
    replicas: list[int] = Field(description="replicas at each interval of the timeline")
    gpus: list[int]
    peak_gpus: int = Field(description="the service's own busiest interval's GPUs")
    cost_per_day: float = Field(description="USD a day of its replicas over the day")
    cost_static_per_day: float = Field(description="USD a day of its own peak pool held all day")
    same_as_static: bool = Field(description="the shape is the static plan's")
    shapes_considered: int
    autoscaler: AutoscalerSettings | None = Field(None, description="the autoscaler of its pool (with traffic:)")


class TimelineInterval(BaseModel):
    start_minute: int
    minutes: int


class FleetOverTheDay(BaseModel):
    """`plan scenario`'s fleet over the day: the peak of the sum against the sum of peaks."""

    timeline: list[TimelineInterval]
    services: list[ServiceOverTheDay]
    gpus: list[int] = Field(default_factory=list, description="the fleet's GPUs at each interval")
    peak_gpus: int | None = Field(None, description="GPUs the inventory needs at its busiest interval")
    sum_of_service_peaks: int | None = Field(None, description="the sum of each service's own peak GPUs (what "
                                             "pools sized each for its own peak take)")
    saving_gpus: int | None = None
    busiest_start_minute: int | None = None
    cost_autoscaled_per_day: float | None = None
    cost_static_per_day: float | None = Field(None, description="every service's own peak pool held all day")
    solver_status: str
    solver_stages: list[StageStatus] = Field(default_factory=list)
    inventory: dict[str, int] = Field(default_factory=dict, description="GPUs of each chip with a count, held at "
                                      "every interval")
    notes: list[str] = Field(default_factory=list)

    _options: list = PrivateAttr(default_factory=list)  # the option each service keeps (planner/search/cpsat.py)


def largest_step(replicas: list[int], minutes: list[int], lead_minutes: float, cyclic: bool) -> int:
    """The most replicas the schedule adds within any `lead_minutes` (at least one interval): from an
    interval to the highest within the lead after it (over the window's seam when `cyclic`)."""
    starts, at = [], 0
    for m in minutes:
        starts.append(at)
        at += m
    window = at
    step = 0
    for i, r in enumerate(replicas):
        for j, q in enumerate(replicas):
            ahead = (starts[j] - starts[i]) % window if cyclic else starts[j] - starts[i]
            if 0 < ahead <= max(lead_minutes, minutes[i]):
                step = max(step, q - r)
    return max(1, step)


def busiest_picks(over: FleetOverTheDay, prepared: list[Prepared]) -> list[tuple[int, object, int]]:
    """The fleet over the day's pools at its busiest interval, as planner/app/fleet.py `_plans` takes
    picks: (option index, option, replicas; at least one), per service."""
    t = next(i for i, a in enumerate(over.timeline) if a.start_minute == over.busiest_start_minute)
    return [(p.options.index(o), o, max(1, s.replicas[t])) for p, s, o in zip(prepared, over.services, over._options,
                                                                               strict=True)]


def _candidates(p: Prepared, static) -> list:
    """The static pick first, then the cheapest other aggregated options at the peak (an option
    dominated at the peak may still cost less over the day: fewer GPUs a replica when it is quiet)."""
    keep = p.resolved.defaults.unrecorded.value("time_fleet.shapes_per_service")
    kept = [o for o in p.options if hasattr(o.row, "chip")]
    kept.sort(key=lambda o: (o.cost_units * o.rmin, o.row.gpus * o.rmin, o.rank))
    out = [static] if static is not None and hasattr(static.row, "chip") else []
    out += [o for o in kept if o is not static]
    return out[:keep]


def _least_cost(option, traffic) -> float:
    """A lower bound of a shape's cost over the window (USD): at least its min replicas in every
    interval, and one where requests arrive (its need; the policy only adds)."""
    floor = sum(i.minutes * max(traffic.min_replicas, 1 if i.requests_per_second > 0 else 0)
                for i in traffic.intervals)
    return floor * option.row.gpus * option.price / 60


def _shape(p: Prepared, option):
    from planner.traffic.schedule import PoolShape

    return PoolShape(next(t for t in p.tables if t.chip.id == option.row.chip), option.row)


@dataclass(frozen=True)
class _Need:
    """One shape's replicas over a service's own bins (planner/traffic/schedule.py `replicas_needed`,
    from its parts, so that the demand's per-replica rates serve the autoscaler too) and its lead time."""

    replicas: list[int]
    demand: object  # planner/traffic/schedule.py Demand
    lead_minutes: float


def _need(p: Prepared, option, traffic) -> _Need:
    """As `replicas_needed`: the demand held to the traffic's policy (raises NotServed)."""
    from planner.traffic import schedule

    shape = _shape(p, option)
    found = schedule.demand(p.spec, shape, traffic)
    lead = traffic.lead_minutes if traffic.lead_minutes is not None else schedule.lead_minutes(p.spec, shape)[0]
    return _Need(schedule.hold(found.needed, traffic.intervals, lead,
                                 schedule.scale_down(traffic, p.resolved.defaults.unrecorded)[0], traffic.cyclic),
                 found, lead)


def _settings(p: Prepared, option, traffic, need: _Need) -> AutoscalerSettings:
    """The autoscaler of the service's pool on `option`'s shape: its replicas' range over its own
    bins, the simulator's target at the traffic's peak lengths (the demand's per-replica rate there)."""
    from planner.candidates import slo
    from planner.candidates.service import sweep_model
    from planner.traffic import schedule

    isl, osl = need.demand.bins[traffic.intervals.index(traffic.peak)]
    rate = need.demand.rates[(isl, osl)]
    model = sweep_model(p.spec.model, p.spec.quantization, p.resolved.registry, p.resolved.tables)
    candidate = slo.Candidate(model, _shape(p, option).table,
                              schedule.at(p.spec, isl, osl, rate), option.row, p.resolved.defaults.unrecorded)
    mean_e2e = candidate.run(rate).e2e.mean
    replicas = need.replicas
    return AutoscalerSettings(min_replicas=min(replicas), max_replicas=max(replicas), per_replica_rate=rate,
                              mean_e2e_seconds=round(mean_e2e, 4), running_per_replica=round(rate * mean_e2e, 3),
                              lead_minutes=round(need.lead_minutes, 3),
                              scale_down_minutes=round(schedule.scale_down(traffic, candidate.reads)[0], 3),
                              step=largest_step(replicas, [i.minutes for i in traffic.intervals], need.lead_minutes,
                                                traffic.cyclic))


def plan_over_the_day(scenario: Scenario, prepared: list[Prepared], static: list | None,
                      time_limit: float | None = None) -> FleetOverTheDay | None:
    """The fleet over the day of a scenario whose services have `traffic:` (None when none has):
    `prepared`, every service's options (planner/search/fleet.py); `static`, the static plan's picks
    ((index, option, replicas) per service; None when it found none)."""
    from planner.traffic.schedule import NotServed

    traffics = {p.name: scenario.traffic_of(s) for p in prepared for s in scenario.services if s.name == p.name}
    if not any(traffics.values()):
        return None
    longest = max(t.window_minutes for t in traffics.values() if t)
    repeats = {name: longest // t.window_minutes if t.cyclic and longest % t.window_minutes == 0 else 1
               for name, t in traffics.items() if t}  # a day's profile repeats over a week's
    bins = {name: [(i.start_minute + k * t.window_minutes, i.minutes) for k in range(repeats[name])
                   for i in t.intervals] for name, t in traffics.items() if t}
    try:
        timeline = common_timeline(list(bins.values()))
    except ValueError as err:
        raise InputError("traffic", f"the services cannot share one timeline: {err}",
                         "give every service's traffic the same window (a day, or a week)") from None
    minutes = [m for _, m in timeline]
    services, considered, own, notes = [], [], {}, []
    counted = {c for c, s in scenario.inventory.items() if s.gpus is not None}
    for k, p in enumerate(prepared):
        pick = static[k][1] if static else None
        shapes, free = [], None  # free: the least cost over the window of a shape on a chip without a GPU count
        for rank, option in enumerate(_candidates(p, pick)):
            traffic = traffics[p.name]
            if traffic is None:
                replicas = (option.rmin,) * len(timeline)
            elif option.row.chip not in counted and free is not None and _least_cost(option, traffic) > free:
                continue  # costs more over the window than a shape already found, whatever its need: never the answer
            else:
                try:
                    need = _need(p, option, traffic)
                except NotServed as err:
                    notes.append(f"{p.name}: {err}")
                    continue
                replicas = spread(need.replicas * repeats[p.name], bins[p.name], timeline)
                own[(p.name, id(option))] = need
            shapes.append(ShapeOverDay(option, option.row.chip, option.row.gpus, option.price, replicas, rank))
            if option.row.chip not in counted:
                cost = shapes[-1].cost(minutes)
                free = cost if free is None else min(free, cost)
        considered.append(len(shapes))
        services.append(ServiceOverDay(p.name, shapes))
    inventory = {c: s.gpus for c, s in scenario.inventory.items() if s.gpus is not None}
    found = solve_time_fleet(services, minutes, inventory, spare_gpus(scenario, prepared), time_limit,
                             reads=defaults_of([p.resolved for p in prepared]))
    day = MINUTES_PER_DAY / sum(minutes)
    out = []
    for k, (p, shape) in enumerate(zip(prepared, found.picks, strict=False)):
        row = shape.option.row
        pick = static[k][1] if static else None
        need = own.get((p.name, id(shape.option)))
        settings = _settings(p, shape.option, traffics[p.name], need) if need is not None else None
        out.append(ServiceOverTheDay(
            service=p.name, autoscaled=traffics[p.name] is not None, chip=row.chip, tensor_parallel_size=row.shape.tp,
            pipeline_parallel_size=row.shape.pp, data_parallel_size=row.shape.dp, gpus_per_replica=row.gpus,
            price_per_gpu_hour=shape.price_per_gpu_hour, replicas=list(shape.replicas), gpus=shape.gpus(),
            peak_gpus=shape.peak_gpus(), cost_per_day=round(shape.cost(minutes) * day, 2),
            cost_static_per_day=round(shape.peak_gpus() * shape.price_per_gpu_hour * 24, 2),
            same_as_static=shape.option is pick, shapes_considered=considered[k], autoscaler=settings))
        if pick is not None and shape.option is not pick:
            notes.append(f"{p.name}: over the day replicas of {row.gpus} × {row.chip} (tp {row.shape.tp}) cost less "
                         f"than the static plan's {pick.row.gpus} × {pick.row.chip} (tp {pick.row.shape.tp}); "
                         "the Kubernetes manifests are written for the pools over the day")
    over = FleetOverTheDay(
        timeline=[TimelineInterval(start_minute=a, minutes=m) for a, m in timeline], services=out, gpus=found.gpus,
        peak_gpus=found.peak_gpus, sum_of_service_peaks=found.sum_of_service_peaks,
        saving_gpus=None if found.peak_gpus is None else found.sum_of_service_peaks - found.peak_gpus,
        busiest_start_minute=None if found.busiest is None else timeline[found.busiest][0],
        cost_autoscaled_per_day=round(sum(s.cost_per_day for s in out), 2) if out else None,
        cost_static_per_day=round(sum(s.cost_static_per_day for s in out), 2) if out else None,
        solver_status=found.status, solver_stages=found.stages, inventory=inventory, notes=notes)
    over._options = [shape.option for shape in found.picks]
    return over

