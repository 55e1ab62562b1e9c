"""A fleet over the day: each service keeps one pool shape all day, its replicas follow
its traffic interval by interval, and every interval's pools share one inventory per chip; services
that peak at different hours share GPUs.

Model, for services s, their candidate shapes i and the intervals t of one common timeline
(`common_timeline`: every service's bins cut at every other's boundaries):

    x[s,i] ∈ {0,1}, exactly one per service          the shape, fixed over the day
    r[s,i,t] = need[s,i,t] · x[s,i]                  replicas at t: the shape's need there (the
                                                      traffic's `replicas_needed`, min replicas included);
                                                      more only cost more and take more GPUs, as
                                                      submodels.py PoolChoice fixes r at rmin
    Σ_{s,i on c} gpus[s,i] · r[s,i,t] + spare[c] · u[c,t] ≤ inventory[c]    for every t (submodels.Inventory)
    peak ≥ Σ_{s,i} gpus[s,i] · r[s,i,t]               for every t

Objective, lexicographic (planner/search/staged.py `solve_lexicographic`, one budget, deterministic
time): the lowest cost over the window (GPU-minutes × price, integer price units × minutes), then the
fewest GPUs at the busiest interval (`peak`), then the shapes' rank (the candidates' tie-break order,
service s weighted s + 1). The peak of the sum never exceeds the sum of the services' own peaks at
the same shapes (max_t Σ_s ≤ Σ_s max_t); the gap between them is what sharing the inventory over the
day saves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from planner.defaults import View
from planner.search.staged import Budget, Stage, solve_lexicographic
from planner.search.status import StageStatus
from planner.search.submodels import Inventory

if TYPE_CHECKING:  # pragma: no cover  (OR-Tools is imported where a model is built)
    from ortools.sat.python import cp_model

STAGES = ("cost over the window", "peak GPUs", "rank")
MINUTES_PER_HOUR = 60


@dataclass(frozen=True)
class ShapeOverDay:
    """One candidate shape of one service over the window: the thing chosen (`option`, handed back
    whole: a planner/search/cpsat.py Option or a test's token), its chip, GPUs per replica, price per
    GPU-hour (USD; in the model as planner/defaults.yaml solver.price_units_per_dollar units), the
    replicas it needs at each interval of the timeline, and its tie-break rank (0 preferred)."""

    option: object
    chip: str
    gpus_per_replica: int
    price_per_gpu_hour: float
    replicas: tuple[int, ...]
    rank: int = 0

    def gpus(self) -> list[int]:
        return [self.gpus_per_replica * r for r in self.replicas]

    def peak_gpus(self) -> int:
        return max(self.gpus(), default=0)

    def cost(self, minutes: Sequence[int]) -> float:
        """USD over the window: every interval's GPUs × its hours × the price."""
        return sum(g * m for g, m in zip(self.gpus(), minutes, strict=True)) * self.price_per_gpu_hour / 60

    def cost_units(self, minutes: Sequence[int], per_dollar: int) -> int:
        """The same in price units (`per_dollar` of them a dollar) × minutes (an integer: the model's objective)."""
        return sum(g * m for g, m in zip(self.gpus(), minutes, strict=True)) * round(self.price_per_gpu_hour
                                                                                     * per_dollar)


@dataclass(frozen=True)
class ServiceOverDay:
    """One service's candidate shapes, each over the same timeline."""

    name: str
    shapes: list[ShapeOverDay]


def common_timeline(bins: Sequence[Sequence[tuple[int, int]]]) -> list[tuple[int, int]]:
    """One timeline for services binned differently: (start minute, minutes) of every interval
    between consecutive boundaries of any service's bins. Every service's bins must cover the same
    window, from 0, without gaps (ValueError otherwise)."""
    ends = set()
    window = None
    for service_bins in bins:
        at = 0
        for start, minutes in service_bins:
            if start != at or minutes <= 0:
                raise ValueError(f"intervals must follow one another from minute 0 (found {start} after {at})")
            at = start + minutes
            ends.add(at)
        if window is not None and at != window:
            raise ValueError(f"the services' windows differ ({window} and {at} minutes)")
        window = at
    cuts = [0, *sorted(ends)]
    return [(a, b - a) for a, b in zip(cuts, cuts[1:], strict=False)]


def spread(values: Sequence[int], bins: Sequence[tuple[int, int]], timeline: Sequence[tuple[int, int]]) -> tuple[
        int, ...]:
    """A per-bin value on the common timeline: each interval takes the value of the bin holding it."""
    out, k = [], 0
    for start, _ in timeline:
        while bins[k][0] + bins[k][1] <= start:
            k += 1
        out.append(values[k])
    return tuple(out)


class ShapeOverDayChoice:
    """One service over the window: exactly one shape x[i], its replicas at interval t fixed at the
    shape's need there (the module's docstring). `at(t)` is the part submodels.Inventory reads for
    interval t."""

    def __init__(self, m: cp_model.CpModel, service: ServiceOverDay, index: int):
        self.service = service
        self.x = [m.new_bool_var(f"x{index}_{i}") for i in range(len(service.shapes))]
        m.add_exactly_one(self.x)

    def at(self, t: int) -> _AtInterval:
        return _AtInterval(self, t)

    def gpus(self, t: int):
        return sum(s.gpus_per_replica * s.replicas[t] * x for s, x in zip(self.service.shapes, self.x, strict=True))

    def cost(self, minutes: Sequence[int], per_dollar: int):
        return sum(s.cost_units(minutes, per_dollar) * x for s, x in zip(self.service.shapes, self.x, strict=True))

    @property
    def rank(self):
        return sum(s.rank * x for s, x in zip(self.service.shapes, self.x, strict=True))

    def picked(self, solved) -> ShapeOverDay:
        return next(s for s, x in zip(self.service.shapes, self.x, strict=True) if solved.boolean_value(x))


@dataclass(frozen=True)
class _AtInterval:
    """A service's GPUs at one interval, as submodels.Inventory takes a part."""

    choice: ShapeOverDayChoice
    t: int

    def gpus_on(self, chip: str) -> list:
        return [s.gpus_per_replica * s.replicas[self.t] * x
                for s, x in zip(self.choice.service.shapes, self.choice.x, strict=True)
                if s.chip == chip and s.replicas[self.t]]

    def uses(self, chip: str) -> list:
        return [x for s, x in zip(self.choice.service.shapes, self.choice.x, strict=True)
                if s.chip == chip and s.replicas[self.t]]


@dataclass
class TimeFleetSolution:
    """What the solve found: the status, what each stage proved, and per service the shape chosen
    (empty when nothing fits); the fleet's GPUs per interval, its busiest interval's GPUs
    (`peak_gpus`) and the sum of the services' own peaks at the same shapes."""

    status: str
    stages: list[StageStatus]
    picks: list[ShapeOverDay] = field(default_factory=list)
    minutes: list[int] = field(default_factory=list)

    @property
    def gpus(self) -> list[int]:
        return [sum(p.gpus()[t] for p in self.picks) for t in range(len(self.minutes))] if self.picks else []

    @property
    def peak_gpus(self) -> int | None:
        return max(self.gpus, default=0) if self.picks else None

    @property
    def sum_of_service_peaks(self) -> int | None:
        return sum(p.peak_gpus() for p in self.picks) if self.picks else None

    @property
    def busiest(self) -> int | None:
        """The index of the first interval at the peak."""
        return self.gpus.index(self.peak_gpus) if self.picks else None


def time_fleet_model(services: Sequence[ServiceOverDay], minutes: Sequence[int], inventory: dict[str, int] | None,
                     spare: dict[str, int] | None, reads: View) -> tuple[cp_model.CpModel,
                                                                         list[ShapeOverDayChoice], list[Stage]]:
    """The model of the module's docstring and its stages (`inventory`: GPUs per chip; `spare`: the
    GPUs of the spare nodes kept on a chip in use; its price units read through `reads`)."""
    from ortools.sat.python import cp_model  # OR-Tools is imported when a model is built (bench/bench_cli.py)

    for s in services:
        for shape in s.shapes:
            if len(shape.replicas) != len(minutes):
                raise ValueError(f"{s.name}: {len(shape.replicas)} intervals of replicas, the timeline has "
                                 f"{len(minutes)}")
    m = cp_model.CpModel()
    choices = [ShapeOverDayChoice(m, s, k) for k, s in enumerate(services)]
    for t in range(len(minutes)):
        Inventory(m, [c.at(t) for c in choices], inventory, spare)
    top = sum(max((shape.peak_gpus() for shape in s.shapes), default=0) for s in services)
    peak = m.new_int_var(0, top, "peak_gpus")
    for t in range(len(minutes)):
        m.add(peak >= sum(c.gpus(t) for c in choices))
    per_dollar = reads.value("solver.price_units_per_dollar")
    per_dollar_minute = per_dollar * MINUTES_PER_HOUR
    stages = [Stage(STAGES[0], sum(c.cost(minutes, per_dollar) for c in choices),
                    read=lambda value, bound: (round(value / per_dollar_minute, 4), round(bound / per_dollar_minute,
                                                                                          4))),
              Stage(STAGES[1], peak),
              Stage(STAGES[2], sum((k + 1) * c.rank for k, c in enumerate(choices)))]
    return m, choices, stages


def solve_time_fleet(services: Sequence[ServiceOverDay], minutes: Sequence[int], inventory: dict[str, int] | None,
                     spare: dict[str, int] | None = None, time_limit: float | None = None, *,
                     reads: View) -> TimeFleetSolution:
    """The cheapest shapes over the window within the inventory at every interval, then the fewest
    peak GPUs (the module's docstring), within `time_limit` (planner/search/staged.py Budget), the
    planner defaults read through `reads`."""
    if any(not s.shapes for s in services):
        return TimeFleetSolution("INFEASIBLE", [], [], list(minutes))
    m, choices, stages = time_fleet_model(services, minutes, inventory, spare, reads)
    solved = solve_lexicographic(m, stages, Budget(time_limit, reads))
    if solved.solver is None:
        return TimeFleetSolution(solved.status, solved.stages, [], list(minutes))
    return TimeFleetSolution(solved.status, solved.stages, [c.picked(solved) for c in choices], list(minutes))
