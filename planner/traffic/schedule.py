"""A service's replicas over the day: for each interval, the fewest replicas of one pool shape that
meet the service targets at the interval's arrivals, held to an autoscaling policy.

The approximation (the fast path): per length bin (the intervals' mean lengths rounded up to
planner/defaults.yaml traffic.length_digits significant digits, so the bin is never shorter than
the requests), the highest rate one replica serves within every target is found once by the serving
simulator (planner/candidates/slo.py highest_rate: Poisson arrivals, tails included, on a grid of
three significant digits); an interval at rate λ then needs ceil(λ / that rate) replicas, each
seeing λ / R ≤ the rate found (the percentiles never fall as the rate rises, property-tested in
tests/test_serving.py), and the peak interval of each bin is simulated at its share to check it.
Within an interval arrivals are taken as steady at its mean rate (Poisson); a burst inside an
interval above its mean is not seen.

The policy: at least `min_replicas` in every interval; a replica takes `lead_minutes` to serve
(model load and warm-up: the weights' bytes per rank over planner/defaults.yaml
traffic.storage_bytes_per_second, plus traffic.warm_up_seconds), so the replicas an interval needs
run from `lead_minutes` before it starts; they are kept `scale_down_minutes` after it ends (the
HorizontalPodAutoscaler's stabilization window). A day or week profile is a cycle (its last hour
ramps into its first); a trace or an export is not. An interval whose need rises above the one
before it (a ramp) is flagged at risk when the lead time is positive: its capacity must be started
before its load arrives, which an autoscaler reacting to load (HPA, KEDA) does `lead_minutes` late.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from planner import defaults
from planner.candidates import slo
from planner.candidates.shapes import ChipTable, Row
from planner.limits import MAX_RATE
from planner.request import ServiceSpec
from planner.traffic.intervals import Interval, Traffic
from pricing.serving import Served


class IntervalPlan(BaseModel):
    """One interval of the schedule: its arrivals, the replicas running and what one replica sees."""

    interval: Interval
    replicas: int = Field(description="replicas running in the interval (the need, held to the policy)")
    needed: int = Field(0, description="the fewest replicas meeting the targets at the interval's arrivals")
    gpus: int
    p99_ttft_ms: float | None = Field(None, description="simulated p99 TTFT of one replica at its share of the rate "
                                      "(None: no request arrives)")
    p99_tpot_ms: float | None = None
    at_risk: bool = Field(False, description="a ramp: its replicas must start lead_minutes before its load, which an "
                          "autoscaler reacting to load does late")


class ServiceSchedule(BaseModel):
    """A service's autoscaled schedule on one pool shape, against the static pool that serves its peak."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    service: str
    source: str = Field("", description="where the traffic came from")
    shape: object = Field(description="the pool shape: planner/app/result.py PoolPlan of the static (peak) pool")
    per_replica_rate: float = Field(description="highest requests/s one replica serves within the targets (the "
                                    "simulator, tails included), at the peak interval's lengths")
    min_replicas: int
    lead_minutes: float
    lead_source: str = Field("", description="how the lead time was found")
    scale_down_minutes: float
    intervals: list[IntervalPlan]
    static_replicas: int = Field(description="the peak pool: what a static plan buys")
    cost_static_per_day: float
    cost_autoscaled_per_day: float
    gpu_hours_static: float = Field(description="GPU-hours a day of the static pool")
    gpu_hours_autoscaled: float = Field(description="GPU-hours a day of the schedule")


@dataclass(frozen=True)
class PoolShape:
    """One instance configuration a pool is made of: a candidate row of its chip's table (what
    planner/search/cpsat.py Option.row and planner/candidates/slo.py Sizing.candidate carry)."""

    table: ChipTable
    row: Row

    @property
    def gpus(self) -> int:
        return self.row.gpus

    @property
    def price_per_gpu_hour(self) -> float:
        return self.table.chip.price_per_gpu_hour


class NotServed(ValueError):
    """The shape misses the service targets at some interval's lengths even one request at a time."""


def length_bin(tokens: int) -> int:
    """`tokens` rounded up to planner/defaults.yaml traffic.length_digits significant digits."""
    digits = defaults.value("traffic.length_digits")
    scale = 10 ** max(0, len(str(tokens)) - digits)
    return -(-tokens // scale) * scale


def at(service: ServiceSpec, isl: int, osl: int, rate: float) -> ServiceSpec:
    """The service with its workload at these lengths and rate."""
    return service.model_copy(update={"workload": service.workload.model_copy(
        update={"isl": isl, "osl": osl, "requests_per_second": rate})})


@dataclass
class Demand:
    """A shape's need over the traffic: per length bin its highest rate per replica, per interval
    its fewest replicas and one replica's benchmark at its share."""

    rates: dict[tuple[int, int], float] = field(default_factory=dict)  # length bin -> req/s per replica
    needed: list[int] = field(default_factory=list)
    served: list[Served | None] = field(default_factory=list)
    simulated: int = 0


def demand(service: ServiceSpec, shape: PoolShape, traffic: Traffic, benchmarks: bool = False) -> Demand:
    """The fewest replicas of `shape` meeting `service`'s targets at each interval (the fast path of
    the module docstring; at least `traffic.min_replicas`). `benchmarks`: also simulate one replica
    of every interval at its share, for its p99s. Raises NotServed when some bin is missed alone."""
    from planner.candidates.table import sweep_model

    model = sweep_model(service.model, service.quantization)
    bins: dict[tuple[int, int], list[int]] = {}
    for i, iv in enumerate(traffic.intervals):
        bins.setdefault((length_bin(iv.isl), length_bin(iv.osl)), []).append(i)
    out = Demand(needed=[0] * len(traffic.intervals), served=[None] * len(traffic.intervals))
    for (isl, osl), members in bins.items():
        peak = max(traffic.intervals[i].requests_per_second for i in members)
        spec = at(service, isl, osl, max(peak, slo.grid_rate(0)))
        candidate = slo.Candidate(model, shape.table, spec, shape.row)
        ceiling = min(MAX_RATE, slo.grid_rate(slo.grid_index(max(peak, slo.grid_rate(0))) + 1))
        found = slo.highest_rate(candidate, ceiling)
        out.simulated += found.simulated + 1
        if not found.rate:
            missed = slo.misses(spec, found.alone) if found.alone is not None else []
            raise NotServed(f"{shape.row.shape.split()} on {shape.table.chip.id} misses the targets at isl {isl}, "
                            f"osl {osl}" + (f" even one request at a time ({len(missed)} targets)" if missed else ""))
        out.rates[(isl, osl)] = found.rate
        runs: dict[float, Served] = {}

        def bench(rate: float, candidate=candidate, runs=runs) -> Served:
            if rate not in runs:
                runs[rate] = candidate.run(rate)
                out.simulated += 1
            return runs[rate]

        for i in members:
            rate = traffic.intervals[i].requests_per_second
            out.needed[i] = max(traffic.min_replicas, math.ceil(rate / found.rate - 1e-12) if rate else 0)
        top = max(members, key=lambda i: traffic.intervals[i].requests_per_second)
        if peak:
            while slo.misses(spec, bench(peak / out.needed[top])):  # the check: the peak at its share
                out.needed[top] += 1
            for i in members:
                if traffic.intervals[i].requests_per_second == peak:
                    out.needed[i] = max(out.needed[i], out.needed[top])
        if benchmarks:
            for i in members:
                rate = traffic.intervals[i].requests_per_second
                if rate and out.needed[i]:
                    out.served[i] = bench(rate / out.needed[i])
    return out


def hold(needed: list[int], intervals: list[Interval], lead_minutes: float, scale_down_minutes: float,
         cyclic: bool) -> list[int]:
    """The replicas running in each interval: every interval's need held from `lead_minutes` before
    it starts to `scale_down_minutes` after it ends (over the cycle's seam when `cyclic`)."""
    window = sum(i.minutes for i in intervals)
    running = list(needed)
    for j, target in enumerate(intervals):
        lo, hi = target.start_minute - lead_minutes, target.start_minute + target.minutes + scale_down_minutes
        for i, iv in enumerate(intervals):
            shifts = (-window, 0, window) if cyclic else (0,)
            if any(iv.start_minute + s < hi and iv.start_minute + iv.minutes + s > lo for s in shifts):
                running[i] = max(running[i], needed[j])
    return running


def at_risk(needed: list[int], lead_minutes: float, cyclic: bool) -> list[bool]:
    """A ramp: the interval needs more replicas than the one before it, and they take `lead_minutes` to serve."""
    return [lead_minutes > 0 and (i > 0 or cyclic) and n > needed[i - 1] for i, n in enumerate(needed)]


def lead_minutes(service: ServiceSpec, shape: PoolShape) -> tuple[float, str]:
    """Model load and warm-up of one replica: one rank's weights (EPLB's redundant experts included)
    over planner/defaults.yaml traffic.storage_bytes_per_second, plus traffic.warm_up_seconds; with
    how it was found."""
    from planner.candidates.shapes import deployment
    from planner.candidates.table import sweep_model
    from pricing.kernel import Kernel

    model = sweep_model(service.model, service.quantization)
    kernel = Kernel.of(model, deployment(shape.row, service, shape.table.context_length), shape.table.chip,
                       release=service.vllm_version)
    w = kernel.weight_bytes()
    shard = w.weights + w.eplb_redundant
    bandwidth = defaults.value("traffic.storage_bytes_per_second")
    warm = defaults.value("traffic.warm_up_seconds")
    seconds = shard / bandwidth + warm
    return seconds / 60, (f"{shard / 2**30:.1f} GiB per rank at {bandwidth / 1e9:g} GB/s, plus {warm:g} s warm-up "
                          "(planner/defaults.yaml traffic)")


def replicas_needed(service: ServiceSpec, shape: PoolShape, traffic: Traffic) -> list[int]:
    """The replicas of `shape` running in each interval of `traffic`: the fewest meeting `service`'s
    targets at each interval's arrivals (`demand`), held to the traffic's policy (min replicas, lead
    time: its own or the weights' load time, scale-down delay; `hold`). For ANY candidate shape;
    raises NotServed when the shape misses the targets even one request at a time."""
    need = demand(service, shape, traffic).needed
    lead = traffic.lead_minutes if traffic.lead_minutes is not None else lead_minutes(service, shape)[0]
    return hold(need, traffic.intervals, lead, scale_down(traffic)[0], traffic.cyclic)


def scale_down(traffic: Traffic) -> tuple[float, str]:
    """The scale-down delay in minutes, with where it comes from."""
    if traffic.scale_down_minutes is not None:
        return traffic.scale_down_minutes, "scale_down_minutes"
    entry = defaults.sourced("traffic.scale_down_seconds")
    return entry.value / 60, f"planner/defaults.yaml traffic.scale_down_seconds ({entry.source})"
