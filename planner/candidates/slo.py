"""Service targets at a rate: the fewest replicas of a candidate instance that serve the
workload's requests per second within every percentile target, found with the serving simulator
(pricing/serving: vLLM 0.33's scheduler step by step on the step model).

R replicas share the rate evenly, so each instance is simulated at rate / R as `vllm bench serve
--request-rate` would run it (Poisson arrivals, planner/defaults.yaml serving.requests requests,
seed serving.seed). A higher rate per instance never lowers a percentile (property-tested), so
the fewest replicas is the smallest R whose simulation meets the targets: searched down from the
step model's closed-form estimate (rate over one instance's throughput at its batch cap) while it
meets them, else up by doubling and bisection. An instance that misses a target even alone (one
request at a time) is dropped with its figures.

Only the instance shapes that could be among the cheapest are simulated: in order of a lower bound
on their pool's cost (the closed form's replicas with planner/defaults.yaml
serving.capacity_allowance), until `keep` simulated pools cost less than the next bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pydantic import BaseModel, Field, model_validator

from planner.candidates.shapes import ChipTable, Row, pool_gpus, replica_cap
from planner.defaults import View
from planner.request import PoolLimits, ServiceSpec
from pricing.graph.model import ModelGraph
from pricing.kernel import Kernel
from pricing.serving import ClosedLoop, Fixed, Instance, Poisson, Served, StepCost, Traffic, Uniform, simulate
from pricing.step import StepModel, has_rates
from pricing.step.serving import Workload, largest_batch, serving
from pricing.units import cdiv


@dataclass
class Sizing:
    """One row sized to the targets: its fewest replicas and the benchmarks simulated on the way."""

    replicas: int  # 0: no replica count meets the targets
    runs: dict[int, Served] = field(default_factory=dict)  # replicas -> the benchmark of one instance at rate / R
    memory: int = 1  # the replicas memory alone needs
    alone: Served | None = None  # one request at a time, when even that misses
    candidate: Candidate | None = None

    def at(self, replicas: int) -> Served:
        """The benchmark of one instance at rate / `replicas` (simulated if not yet)."""
        if replicas not in self.runs:
            self.runs[replicas] = self.candidate.run(self.candidate.service.workload.requests_per_second / replicas)
        return self.runs[replicas]

    @property
    def served(self) -> Served:
        return self.runs[self.replicas]


def traffic(service: ServiceSpec, rate: float | None, count: int | None, reads: View) -> Traffic:
    """The benchmark one instance sees at `rate` requests/s (None: one request at a time): each
    request's prompt and output drawn from the workload's histograms (`lengths`), else uniform
    around isl/osl by its range_ratio, else isl/osl exactly."""
    w = service.workload
    spec = w.histograms()
    if spec is not None:
        prompt, output = spec.prompt.histogram(spec.source), spec.output.histogram(spec.source)
    elif w.range_ratio:
        prompt, output = Uniform.around(w.isl, w.range_ratio), Uniform.around(w.osl, w.range_ratio)
    else:
        prompt, output = Fixed(w.isl), Fixed(w.osl)
    arrivals = Poisson(rate) if rate is not None else ClosedLoop(1)
    return Traffic(arrivals, prompt, output, count=count or reads.value("serving.requests"),
                   seed=reads.value("serving.seed"))


def misses(service: ServiceSpec, served: Served) -> list[tuple[str, int, float, float]]:
    """The targets `served` misses: (metric, percentile, bound ms, measured ms); goodput as
    ('goodput', 0, fraction asked, fraction met)."""
    slo = service.slo
    out = []
    for metric, p, ms in slo.targets:
        got = served.metric(metric).percentile(p) * 1000
        if got > ms:
            out.append((metric, p, ms, got))
    if slo.goodput is not None:
        met = goodput(service, served)
        if met < slo.goodput:
            out.append(("goodput", 0, slo.goodput, met))
    return out


def goodput(service: ServiceSpec, served: Served) -> float:
    """The fraction of requests meeting every per-request bound the targets give."""
    slo = service.slo

    def seconds(metric):
        ms = slo.bound(metric)
        return ms / 1000 if ms is not None else None

    return served.goodput(ttft=seconds("ttft"), tpot=seconds("tpot"), e2e=seconds("e2e"))


class Candidate:
    """One row's instance, ready to simulate."""

    def __init__(self, model: ModelGraph, table: ChipTable, service: ServiceSpec, row: Row, reads: View):
        kernel = Kernel.of(model, row.deployment, table.chip, table.registry, release=service.vllm_version)
        inst = Instance.of(kernel)
        self.instance = replace(inst, blocks=int(inst.blocks * (1 - service.kv_margin(table.registry))))
        self.step = StepModel(kernel, rates_accepted=service.speculative_acceptance)
        self.cost = StepCost.of(self.step, inst)
        self.service, self.row = service, row
        self.reads = reads  # the defaults its simulations read (a Reads records them: a plan's provenance)

    def run(self, rate: float | None, count: int | None = None) -> Served:
        return simulate(self.instance, self.cost, traffic(self.service, rate, count, self.reads))

    def estimate(self) -> float:
        """Requests/s of one instance by the step model's closed form, at the largest batch whose
        steady step meets the tightest TPOT bound (its batch cap without one)."""
        w = self.service.workload
        workload = Workload(w.isl, w.osl)
        held = max(1, self.row.held_per_rank)
        tpot = self.service.slo.bound("tpot")
        if tpot is not None:
            held = max(1, largest_batch(self.step, held, self.instance.max_model_len, workload,
                                        tpot_seconds=tpot / 1000))
        return serving(self.step, held, self.instance.max_model_len, workload).requests_per_second


def size(candidate: Candidate, memory: int, cap: int | None) -> Sizing:
    """The fewest replicas (at least `memory`, at most `cap`) whose instance meets the targets."""
    service = candidate.service
    rate = service.workload.requests_per_second
    sizing = Sizing(0, memory=memory, candidate=candidate)

    def meets(r: int) -> bool:
        return not misses(service, sizing.at(r))

    alone = candidate.run(None, count=candidate.reads.value("serving.alone_requests"))
    if misses(service, alone):
        sizing.alone = alone
        return sizing
    limit = cap if cap is not None else candidate.reads.value("limits.max_gpus")
    r = min(limit, max(memory, math.ceil(rate / candidate.estimate())))
    if meets(r):
        while r > memory and meets(r - 1):
            r -= 1
        sizing.replicas = r
        return sizing
    lo = r  # misses
    hi = r + 1
    while not meets(hi):
        lo = hi
        if hi >= limit:
            return sizing
        hi = min(limit, max(hi + 1, math.ceil(hi * 1.25)))
    sizing.replicas = bisect(lambda k: not meets(k), lo, hi)[1]
    return sizing


def bisect(holds: Callable[[int], bool], lo: int, hi: int) -> tuple[int, int]:
    """The boundary of a predicate that holds up to some index and not above, between `lo`, where it
    holds, and `hi`, where it does not: the adjacent pair (last index where it holds, first where it
    does not), asking it only at midpoints. The fewest replicas that meet (`size`: `holds` is 'misses')
    and the highest rate that meets (`highest_index`) are both this boundary."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if holds(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi


def size_tables(model: ModelGraph, tables: list[ChipTable], service: ServiceSpec, limits: PoolLimits,
                keep: int, reads: View) -> dict[tuple[str, Row], Sizing]:
    """Each promising row of `tables` (the best of each shape) sized to the service's targets, by
    (chip id, row); rows left out are never cheaper than the `keep` cheapest sized (the defaults
    read through `reads`)."""
    allowance = reads.value("serving.capacity_allowance")
    rate = service.workload.requests_per_second
    bounds = []
    for table in tables:
        if not has_rates(table.chip, table.registry):
            continue
        for row in table.dominant():
            memory = cdiv(service.required, row.concurrency)
            candidate = Candidate(model, table, service, row, reads)
            low = max(memory, math.floor(rate / (candidate.estimate() * allowance)), 1)
            price = row.gpus * table.chip.price_per_gpu_hour
            bounds.append((low * price, table, row, candidate, memory, price))
    bounds.sort(key=lambda b: b[0])
    sized: dict[tuple[str, Row], Sizing] = {}
    costs: list[float] = []
    for bound, table, row, candidate, memory, price in bounds:
        if len(costs) >= keep and bound > sorted(costs)[keep - 1]:
            break
        stock = pool_gpus(limits.max_gpus, table.gpus_per_node, limits.spare)
        s = size(candidate, memory, replica_cap(row.gpus, table.gpus_per_node, stock))
        sized[(table.chip.id, row)] = s
        if s.replicas:
            costs.append(s.replicas * price)
    return sized


def binding(service: ServiceSpec, sizing: Sizing) -> tuple[int, list[tuple[str, int, float, float]]] | None:
    """Which targets set the replica count: (replicas, the targets missed one replica fewer, as
    `misses` gives them); None when memory (the concurrency held) does. The report words it."""
    r = sizing.replicas
    if r <= sizing.memory or (r - 1) not in sizing.runs:
        return None
    return r, misses(service, sizing.runs[r - 1])


class ParetoPoint(BaseModel):
    """One simulated pool: a shape at a replica count, its TPOT (p99, and at the percentile the TPOT
    target names) and its cost per token."""

    chip: str
    split: str = Field(description="the instance's split, 'tp 8' or 'tp 1 × dp 4'")
    replicas: int
    p99_tpot_ms: float
    tpot_percentile: int = Field(99, description="the percentile of TPOT the target names (99 without a TPOT "
                                 "target): the front's axis")
    tpot_ms: float | None = Field(None, description="TPOT at tpot_percentile (p99_tpot_ms when that is 99)")
    cost_per_million_output_tokens: float
    front: bool = Field(description="on the Pareto front over tpot_ms: no simulated pool both cheaper and faster")
    meets_tpot: bool = Field(True, description="tpot_ms meets the TPOT target (true without one)")
    chosen: bool = Field(False, description="the pool the plan reports")

    @model_validator(mode="after")
    def _at_p99_unless_told(self):
        if self.tpot_ms is None:
            self.tpot_ms = self.p99_tpot_ms
        return self


def frontier(service: ServiceSpec, sized: dict, prices: dict[str, float]) -> list[ParetoPoint]:
    """Every pool simulated while sizing (shape × replicas) that meets the targets other than
    TPOT's, as (p99 TPOT, $/M output tokens): the cost of each TPOT target, its front the
    cheapest pool for each. `prices`: USD per GPU-hour by chip."""
    w = service.workload
    tokens_an_hour = w.requests_per_second * w.osl * 3600
    bounds = [(p, ms) for metric, p, ms in service.slo.targets if metric == "tpot"]
    percentile = bounds[0][0] if bounds else 99  # the axis: the first TPOT target's percentile
    points = []
    for (chip, row), sizing in sized.items():
        split = f"tp {row.shape.tp}" + (f" × pp {row.shape.pp}" if row.shape.pp > 1 else "") + (
            f" × dp {row.shape.dp}" if row.shape.dp > 1 else "")
        for r, served in sorted(sizing.runs.items()):
            if r < sizing.memory or any(m != "tpot" for m, _, _, _ in misses(service, served)):
                continue
            cost = r * row.gpus * prices[chip] / tokens_an_hour * 1e6
            meets = all(served.tpot.percentile(p) * 1000 <= ms for p, ms in bounds)
            points.append([chip, split, r, served.tpot.percentile(percentile) * 1000, cost,
                           served.tpot.percentile(99) * 1000, meets])
    points.sort(key=lambda p: (p[3], p[4]))
    out, cheapest = [], math.inf
    for chip, split, r, tpot, cost, p99, meets in points:
        front = cost < cheapest
        cheapest = min(cheapest, cost)
        out.append(ParetoPoint(chip=chip, split=split, replicas=r, p99_tpot_ms=round(p99, 2),
                               tpot_percentile=percentile, tpot_ms=round(tpot, 2),
                               cost_per_million_output_tokens=round(cost, 4), front=front,
                               meets_tpot=meets))
    return out


class ServingFigures(BaseModel):
    """A pool's service targets as `vllm bench serve` would measure one instance at its share of
    the rate (the serving simulator, pricing/serving)."""

    requests_per_second: float = Field(description="the rate the pool serves")
    requests_per_second_per_instance: float
    requests_simulated: int
    ttft_ms: dict[str, float] = Field(description="time to first token by percentile (p50, p90, p99)")
    tpot_ms: dict[str, float] = Field(description="time per output token after the first, by percentile")
    itl_ms: dict[str, float] = Field(description="inter-token latency over every token gap, by percentile")
    e2e_ms: dict[str, float] = Field(description="end-to-end latency by percentile")
    goodput: float = Field(description="fraction of requests meeting every per-request bound the targets give")
    preemptions: int = Field(description="preemptions in the simulated benchmark of one instance")
    targets: list[str] = Field(default_factory=list, description="the targets, in words")
    pareto: list[ParetoPoint] = Field(default_factory=list, description="every pool simulated while sizing that "
                                      "meets the targets other than TPOT's: $/M output tokens against p99 TPOT")


def figures(service: ServiceSpec, sizing: Sizing, replicas: int, targets: list[str], sized: dict | None = None,
            prices: dict[str, float] | None = None) -> ServingFigures:
    """The plan's simulated figures at `replicas` (simulated now if the search did not), with
    the targets in the report's words and the Pareto front of every pool `sized` simulated (this
    one marked)."""
    rate = service.workload.requests_per_second
    served = sizing.at(replicas)

    def by_percentile(metric):
        return {f"p{p}": round(served.metric(metric).percentile(p) * 1000, 2) for p in (50, 90, 99)}

    return ServingFigures(requests_per_second=rate, requests_per_second_per_instance=round(rate / replicas, 4),
                          requests_simulated=served.requests, ttft_ms=by_percentile("ttft"),
                          tpot_ms=by_percentile("tpot"), itl_ms=by_percentile("itl"), e2e_ms=by_percentile("e2e"),
                          goodput=round(goodput(service, served), 4), preemptions=served.preemptions, targets=targets,
                          pareto=_marked(frontier(service, sized, prices), sizing, replicas) if sized else [])


def _marked(points: list[ParetoPoint], sizing: Sizing, replicas: int) -> list[ParetoPoint]:
    row = sizing.candidate.row
    split = f"tp {row.shape.tp}" + (f" × pp {row.shape.pp}" if row.shape.pp > 1 else "") + (
        f" × dp {row.shape.dp}" if row.shape.dp > 1 else "")
    return [p.model_copy(update={"chosen": True}) if (p.chip, p.split, p.replicas) == (row.chip, split, replicas)
            else p for p in points]


# -- the most a pool serves: the highest rate per instance that meets the targets -------------------
def _grid(reads: View) -> tuple[int, int]:
    """The rate grid's first mantissa (10^(digits-1)) and the exponent of its lowest rate's last digit
    (planner/defaults.yaml serving.rate_digits, serving.lowest_rate, read through `reads`)."""
    digits = reads.value("serving.rate_digits")
    return 10 ** (digits - 1), round(math.log10(reads.value("serving.lowest_rate"))) - (digits - 1)


def grid_rate(k: int, reads: View) -> float:
    """The k-th rate of the grid the highest rate is searched on (requests/s): `serving.rate_digits`
    significant digits (three: 100 … 999 × 10^e) from `serving.lowest_rate` up, so consecutive rates
    differ by at most 1 % and each prints exactly. Searching a fixed grid makes the answer the grid's
    highest meeting rate whatever the starting guess (the percentiles do not fall as the rate rises)."""
    first, low = _grid(reads)
    mantissa, exponent = first + k % (9 * first), k // (9 * first) + low
    return mantissa * 10**exponent if exponent >= 0 else mantissa / 10**-exponent


def grid_index(rate: float, reads: View) -> int:
    """The index of the highest grid rate at or below `rate` (0 below the grid)."""
    if rate < grid_rate(0, reads):
        return 0
    first, low = _grid(reads)
    exponent = math.floor(math.log10(rate)) - (len(str(first)) - 1)
    k = (exponent - low) * 9 * first + min(9 * first - 1, max(0, int(rate / 10**exponent) - first))
    while k > 0 and grid_rate(k, reads) > rate:
        k -= 1
    while grid_rate(k + 1, reads) <= rate:
        k += 1
    return k


@dataclass
class InstanceRate:
    """One row's instance at the highest grid rate that meets every target (`rate` 0 and `alone`
    set when even one request at a time misses), with its benchmark there."""

    candidate: Candidate
    rate: float = 0.0
    served: Served | None = None
    above: Served | None = None  # the next grid rate's benchmark, which misses (None at the ceiling)
    alone: Served | None = None
    simulated: int = 0

    @property
    def next_rate(self) -> float:
        """The grid rate above `rate`, the lowest the instance misses at."""
        grid = self.candidate.reads.unrecorded
        return grid_rate(grid_index(self.rate, grid) + 1, grid)


def highest_index(meets: Callable[[int], bool], start: int, top: int, step: int = 1) -> tuple[int | None, int | None]:
    """The highest grid index in [0, `top`] where `meets` holds, for a predicate that holds up to
    some index and not above: from `start`, steps doubling from `step` up (or down) to a bracket,
    then bisection. Returns (that index, the index above it, which misses); (None, 0) when even
    index 0 misses and (top, None) when `top` meets."""
    k = max(0, min(top, start))
    if meets(k):
        lo = k
        while lo < top and meets(min(top, lo + step)):
            lo, step = min(top, lo + step), step * 2
        if lo == top:
            return top, None
        hi = min(top, lo + step)
    else:
        hi = k
        while hi > 0 and not meets(max(0, hi - step)):
            hi, step = max(0, hi - step), step * 2
        if hi == 0:
            return None, 0
        lo = max(0, hi - step)
    return bisect(meets, lo, hi)


def highest_rate(candidate: Candidate, ceiling: float) -> InstanceRate:
    """The highest grid rate (at most `ceiling`) one instance serves within the targets: from the
    step model's closed-form estimate (`highest_index`); the grid's defaults read unrecorded (a
    rate's result lists no planner defaults)."""
    service = candidate.service
    found = InstanceRate(candidate)
    runs: dict[int, Served] = {}
    grid = candidate.reads.unrecorded

    def meets(k: int) -> bool:
        if k not in runs:
            runs[k] = candidate.run(grid_rate(k, grid))
        return not misses(service, runs[k])

    alone = candidate.run(None, count=grid.value("serving.alone_requests"))
    if misses(service, alone):
        found.alone = alone
        return found
    lo, hi = highest_index(meets, grid_index(candidate.estimate(), grid), grid_index(ceiling, grid))
    found.simulated = len(runs)
    if lo is None:
        return found  # even the grid's lowest rate misses: only one request at a time meets them
    found.rate, found.served = grid_rate(lo, grid), runs[lo]
    found.above = runs[hi] if hi is not None else None
    return found
