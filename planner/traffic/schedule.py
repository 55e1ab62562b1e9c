"""A service's replicas over the day: for each interval, the fewest replicas of one pool shape that
meet the service targets at the interval's arrivals, held to an autoscaling policy.

The approximation (the fast path): per length bin (the intervals' mean lengths rounded up to
planner/defaults.yaml traffic.length_digits significant digits, so the bin is never shorter than
the requests; unrounded where the rounded pair would not fit the shape's max_model_len), the highest
rate one replica serves within every target is found once by the serving simulator
(planner/candidates/slo.py highest_rate: Poisson arrivals, tails included, on a grid of
three significant digits); an interval at rate λ then needs ceil(λ / that rate) replicas, each
seeing λ / R ≤ the rate found (the percentiles never fall as the rate rises, property-tested in
tests/test_serving.py); the peak interval of each bin is simulated at its share to check it, and at
one replica fewer while that meets, so that a flat profile needs exactly what the static plan buys
(planner/candidates/slo.py size); no other interval of the bin needs more than its peak.
Within an interval arrivals are taken as steady at its mean rate (Poisson): a burst inside an
interval above its mean is not seen. Its requests are drawn from the window's length histograms
when there are any (a trace's or an export's own, else the workload's `lengths`), so a long-prompt
tail reaches the p99s, and all intervals are then one bin at the histograms' means; else they are
at the interval's mean lengths (uniform around them by the workload's range_ratio).

The policy: at least `min_replicas` in every interval; a replica takes `lead_minutes` to serve
(model load and warm-up: the weights' bytes per rank over planner/defaults.yaml
traffic.storage_bytes_per_second, plus traffic.warm_up_seconds), so the replicas an interval needs
run from `lead_minutes` before it starts; they are kept `scale_down_minutes` after it ends (the
HorizontalPodAutoscaler's stabilization window). A day or week profile is a cycle (its last hour
ramps into its first); a trace or an export is not. An interval whose need rises above what an
autoscaler reacting to load (HPA, KEDA) runs as it begins (the needs before it, kept the scale-down
delay) is flagged at risk when the lead time is positive: its capacity must be started before its
load arrives, which such an autoscaler does `lead_minutes` late.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from planner.candidates import slo
from planner.candidates.shapes import ChipTable, Row
from planner.defaults import View
from planner.limits import MAX_RATE
from planner.request import LengthsSpec, ServiceSpec
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


class ScheduleShape(BaseModel):
    """The pool shape a schedule scales: one replica's vLLM configuration on its chip, at its price."""

    chip: str
    split: str = Field(description="the instance's split, 'tp 8' or 'tp 1 × dp 4'")
    gpus_per_replica: int
    tensor_parallel_size: int
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    max_num_seqs: int
    max_num_batched_tokens: int
    gpu_memory_utilization: float
    kv_cache_dtype: str
    price_per_gpu_hour: float
    price_estimate: bool = Field(False, description="the price is the catalogue's estimate, not a quote")


class ServiceSchedule(BaseModel):
    """A service's autoscaled schedule on one pool shape, against the static pool that serves its peak."""

    service: str
    source: str = Field("", description="where the traffic came from")
    window_start: str | None = Field(None, description="the window's first minute, ISO-8601 UTC (a trace's or an "
                                     "export's); None: a profile's midnight")
    shape: ScheduleShape = Field(description="the pool shape: the static plan's, the cheapest at the peak interval")
    per_replica_rate: float = Field(description="highest requests/s one replica serves within the targets (the "
                                    "simulator, tails included), at the busiest interval's lengths")
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

    def described(self, price: float | None = None) -> ScheduleShape:
        """The shape as the schedule reports it (`price`: USD per GPU-hour, the chip's unless given)."""
        row = self.row
        return ScheduleShape(chip=row.chip, split=row.shape.split(), gpus_per_replica=row.gpus,
                             tensor_parallel_size=row.shape.tp, pipeline_parallel_size=row.shape.pp,
                             data_parallel_size=row.shape.dp, max_num_seqs=row.max_num_seqs,
                             max_num_batched_tokens=row.max_num_batched_tokens,
                             gpu_memory_utilization=row.gpu_memory_utilization,
                             kv_cache_dtype=row.shape.kv_cache_dtype,
                             price_per_gpu_hour=self.price_per_gpu_hour if price is None else price,
                             price_estimate=self.table.chip.price_estimate)


class NotServed(ValueError):
    """The shape misses the service targets at some interval's lengths even one request at a time."""


def length_bin(tokens: int, reads: View) -> int:
    """`tokens` rounded up to planner/defaults.yaml traffic.length_digits significant digits (read
    through `reads`)."""
    digits = reads.value("traffic.length_digits")
    scale = 10 ** max(0, len(str(tokens)) - digits)
    return -(-tokens // scale) * scale


def at(service: ServiceSpec, isl: int, osl: int, rate: float, lengths: LengthsSpec | None = None) -> ServiceSpec:
    """The service with its workload at these lengths and rate (drawn from `lengths` when given,
    isl/osl then its means; else from the workload's own `lengths` if it has them)."""
    update = {"isl": isl, "osl": osl, "requests_per_second": rate}
    if lengths is not None:
        update.update(lengths=lengths, range_ratio=0.0)
    return service.model_copy(update={"workload": service.workload.model_copy(update=update)})


def lengths_of(service: ServiceSpec, traffic: Traffic) -> LengthsSpec | None:
    """The histograms every interval's requests are drawn from: the traffic's own (a trace's or an
    export's, measured), else the workload's `lengths`; None: each interval's mean lengths."""
    return traffic.lengths if traffic.lengths is not None else service.workload.histograms()


def means(lengths: LengthsSpec) -> tuple[int, int]:
    """The histograms' mean prompt and output tokens, rounded up (the isl/osl they stand for)."""
    return (math.ceil(lengths.prompt.histogram().mean), math.ceil(lengths.output.histogram().mean))


@dataclass
class Demand:
    """A shape's need over the traffic: per length bin its highest rate per replica, per interval
    its fewest replicas and one replica's benchmark at its share."""

    rates: dict[tuple[int, int], float] = field(default_factory=dict)  # length bin -> req/s per replica
    bins: list[tuple[int, int]] = field(default_factory=list)  # each interval's length bin
    needed: list[int] = field(default_factory=list)
    served: list[Served | None] = field(default_factory=list)
    simulated: int = 0


def demand(service: ServiceSpec, shape: PoolShape, traffic: Traffic, benchmarks: bool = False) -> Demand:
    """The fewest replicas of `shape` meeting `service`'s targets at each interval (the fast path of
    the module docstring; at least `traffic.min_replicas`, and the replicas that hold a concurrency
    the service asks beside its traffic). `benchmarks`: also simulate one replica
    of every interval at its share, for its p99s. Raises NotServed when some bin is missed alone."""
    from planner.candidates.service import sweep_model

    model = sweep_model(service.model, service.quantization, shape.table.registry, shape.table.tables)
    unrecorded = shape.table.defaults.unrecorded  # a schedule's result lists no planner defaults
    ratio = service.workload.range_ratio
    context = shape.table.context_length

    def fits(isl: int, osl: int) -> bool:
        return math.ceil(isl * (1 + ratio)) + math.ceil(osl * (1 + ratio)) <= context

    every = list(range(len(traffic.intervals)))
    lengths = lengths_of(service, traffic)
    plain = service.model_copy(update={"workload": service.workload.model_copy(update={"lengths": None})})
    # (isl, osl, the service its requests come from, the intervals): the bins simulated
    bins: list[tuple[int, int, ServiceSpec, list[int]]] = []
    if lengths is None or traffic.lengths is not None:  # each interval at its mean lengths
        by_mean: dict[tuple[int, int], list[int]] = {}
        for i, iv in enumerate(traffic.intervals):
            binned = (length_bin(iv.isl, unrecorded), length_bin(iv.osl, unrecorded))
            by_mean.setdefault(binned if fits(*binned) else (iv.isl, iv.osl), []).append(i)
        bins += [(isl, osl, plain, members) for (isl, osl), members in by_mean.items()]
    if lengths is not None:  # and every interval drawing from the histograms: the tail
        bins.append((*means(lengths), at(service, *means(lengths), 0.0, lengths), every))
    out = Demand(needed=[0] * len(traffic.intervals), served=[None] * len(traffic.intervals),
                 bins=[(0, 0)] * len(traffic.intervals))
    benches: list = [None] * len(traffic.intervals)  # each interval's deciding bin's benchmark
    # a concurrency asked beside the traffic is held at every interval, as the static plan holds it
    least = traffic.min_replicas if service.implicit_concurrency else max(
        traffic.min_replicas, -(-service.required // shape.row.concurrency))
    for isl, osl, source, members in bins:
        peak = max(traffic.intervals[i].requests_per_second for i in members)
        spec = at(source, isl, osl, max(peak, slo.grid_rate(0, unrecorded)))
        candidate = slo.Candidate(model, shape.table, spec, shape.row, unrecorded)
        found = slo.highest_rate(candidate, MAX_RATE)
        out.simulated += found.simulated + 1
        if not found.rate:
            missed = slo.misses(spec, found.alone) if found.alone is not None else []
            said = ", ".join(f"p{p} {metric} {got:,.1f} ms > {ms:g} ms" if metric != "goodput" else
                             f"goodput {got:.3f} < {ms:g}" for metric, p, ms, got in missed)
            drawn = source.workload.lengths is not None
            at_lengths = f"lengths drawn from {lengths.source} (means isl {isl}, osl {osl})" if drawn else \
                f"isl {isl}, osl {osl}"
            raise NotServed(f"{shape.row.shape.split()} on {shape.table.chip.id} misses the targets at {at_lengths} "
                            + (f"even one request at a time ({said})" if missed else
                               f"even at {slo.grid_rate(0, unrecorded):g} requests/s"))
        # a histogram's means may be a mean bin's too: the lower rate is the one that binds
        out.rates[(isl, osl)] = min(found.rate, out.rates.get((isl, osl), math.inf))
        runs: dict[float, Served] = {}

        def bench(rate: float, candidate=candidate, runs=runs) -> Served:
            if rate not in runs:
                runs[rate] = candidate.run(rate)
                out.simulated += 1
            return runs[rate]

        need = {}
        for i in members:
            rate = traffic.intervals[i].requests_per_second
            # ceil of the quotient, not of its last bit's rounding error (a rate of exactly k × the rate found: k)
            need[i] = max(least, math.ceil(rate / found.rate - 1e-12) if rate else 0)
        top = max(members, key=lambda i: traffic.intervals[i].requests_per_second)
        if peak:  # the check: the peak at its share, and one replica fewer (as slo.size sizes a static pool)
            while slo.misses(spec, bench(peak / need[top])):
                need[top] += 1
            while need[top] > max(1, least) and not slo.misses(spec, bench(peak / (need[top] - 1))):
                need[top] -= 1
            for i in members:  # a lower rate never needs more than the peak (the percentiles rise with the rate)
                rate = traffic.intervals[i].requests_per_second
                need[i] = max(least, need[top] if rate == peak else min(need[i], need[top]))
        for i in members:  # an interval in two bins (its mean lengths, the histograms) needs the more
            if benches[i] is None or need[i] > out.needed[i]:
                out.needed[i], out.bins[i], benches[i] = need[i], (isl, osl), bench
    if benchmarks:
        for i, iv in enumerate(traffic.intervals):
            if iv.requests_per_second and out.needed[i]:
                out.served[i] = benches[i](iv.requests_per_second / out.needed[i])
    return out


def steps(needed: list[int], intervals: list[Interval], lead_minutes: float, scale_down_minutes: float,
          cyclic: bool) -> list[tuple[float, float, int]]:
    """The replicas running over the window as steps (start minute, end minute, replicas): each
    interval's need held from `lead_minutes` before it starts to `scale_down_minutes` after it ends
    (over the cycle's seam when `cyclic`), the most of those covering each moment."""
    window = sum(i.minutes for i in intervals)
    shifts = (-window, 0, window) if cyclic else (0,)
    spans = sorted((iv.start_minute + s - lead_minutes, iv.start_minute + iv.minutes + s + scale_down_minutes, n)
                   for s in shifts for iv, n in zip(intervals, needed, strict=True))
    cuts = sorted({0.0, float(window), *(min(window, max(0.0, x)) for a, b, _ in spans for x in (a, b))})
    out: list[tuple[float, float, int]] = []
    active: list[tuple[int, float]] = []  # (-replicas, end) of the spans begun, the most first
    k = 0
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        while k < len(spans) and spans[k][0] <= lo:
            heapq.heappush(active, (-spans[k][2], spans[k][1]))
            k += 1
        while active and active[0][1] <= lo:  # ended before this piece
            heapq.heappop(active)
        top = -active[0][0] if active else 0
        if out and out[-1][2] == top:
            out[-1] = (out[-1][0], hi, top)
        else:
            out.append((lo, hi, top))
    return out


def hold(needed: list[int], intervals: list[Interval], lead_minutes: float, scale_down_minutes: float,
         cyclic: bool) -> list[int]:
    """The replicas running in each interval: the most `steps` holds at any moment of it."""
    held = steps(needed, intervals, lead_minutes, scale_down_minutes, cyclic)
    out, k = [], 0
    for iv in intervals:
        end = iv.start_minute + iv.minutes
        while held[k][1] <= iv.start_minute:
            k += 1
        j, most = k, 0
        while j < len(held) and held[j][0] < end:
            most = max(most, held[j][2])
            j += 1
        out.append(most)
    return out


def at_risk(needed: list[int], intervals: list[Interval], lead_minutes: float, scale_down_minutes: float,
            cyclic: bool) -> list[bool]:
    """A ramp an autoscaler that reacts to load meets late: the interval needs more replicas than
    such an autoscaler runs as it begins (the needs before it, kept `scale_down_minutes`, none
    started ahead), and a new replica takes `lead_minutes` (> 0) to serve."""
    if lead_minutes <= 0:
        return [False] * len(needed)
    reactive = steps(needed, intervals, 0.0, scale_down_minutes, cyclic)
    window = sum(i.minutes for i in intervals)
    out = []
    for iv, n in zip(intervals, needed, strict=True):
        if iv.start_minute == 0 and not cyclic:
            out.append(False)  # the window's first interval: what ran before it is not known
            continue
        before = (iv.start_minute or window) - 1e-9  # just before it begins (over the seam when cyclic)
        out.append(n > next(r for a, b, r in reactive if a <= before < b))
    return out


def lead_minutes(service: ServiceSpec, shape: PoolShape) -> tuple[float, str]:
    """Model load and warm-up of one replica: one rank's weights (EPLB's redundant experts included)
    over planner/defaults.yaml traffic.storage_bytes_per_second, plus traffic.warm_up_seconds; with
    how it was found."""
    from planner.candidates.service import sweep_model
    from pricing.kernel import Kernel

    model = sweep_model(service.model, service.quantization, shape.table.registry, shape.table.tables)
    kernel = Kernel.of(model, shape.row.deployment, shape.table.chip, shape.table.registry,
                       release=service.vllm_version)
    w = kernel.weight_bytes()
    shard = w.weights + w.eplb_redundant
    unrecorded = shape.table.defaults.unrecorded
    bandwidth = unrecorded.value("traffic.storage_bytes_per_second")
    warm = unrecorded.value("traffic.warm_up_seconds")
    seconds = shard / bandwidth + warm
    return seconds / 60, (f"{shard / 2**30:.1f} GiB per rank at {bandwidth / 1e9:g} GB/s plus {warm:g} s warm-up, "
                          "planner/defaults.yaml traffic")


def replicas_needed(service: ServiceSpec, shape: PoolShape, traffic: Traffic) -> list[int]:
    """The replicas of `shape` running in each interval of `traffic`: the fewest meeting `service`'s
    targets at each interval's arrivals (`demand`), held to the traffic's policy (min replicas, lead
    time: its own or the weights' load time, scale-down delay; `hold`). For ANY candidate shape;
    raises NotServed when the shape misses the targets even one request at a time."""
    need = demand(service, shape, traffic).needed
    lead = traffic.lead_minutes if traffic.lead_minutes is not None else lead_minutes(service, shape)[0]
    return hold(need, traffic.intervals, lead, scale_down(traffic, shape.table.defaults.unrecorded)[0],
                traffic.cyclic)


def scale_down(traffic: Traffic, reads: View) -> tuple[float, str]:
    """The scale-down delay in minutes, with where it comes from (the default read through `reads`)."""
    if traffic.scale_down_minutes is not None:
        return traffic.scale_down_minutes, "scale_down_minutes"
    entry = reads.sourced("traffic.scale_down_seconds")
    return entry.value / 60, f"planner/defaults.yaml traffic.scale_down_seconds ({entry.source})"
