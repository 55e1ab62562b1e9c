"""The most requests per second a pool serves within service targets (`plan --max-rate`): for each
instance shape that fits the pool (`max_gpus` of a chip), as many replicas as pack into it, each
serving the highest rate one instance meets every target at, as the serving simulator benchmarks
it (planner/candidates/slo.py highest_rate: `vllm bench serve --request-rate` with Poisson
arrivals). The pool's rate is the best shape's replicas times that rate; its pool is reported as a
plan at that rate would report it (planner/app/plan.py pool_plan), so planning it back with
`--requests-per-second` needs no more GPUs than the pool."""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel, Field

from planner.app.plan import pool_plan
from planner.app.result import Explanation, PoolPlan, Target
from planner.app.serving import DisaggPlan
from planner.app.targets import measured_words, missed_phrases, target_words
from planner.candidates import slo
from planner.candidates.service import ResolvedService
from planner.candidates.shapes import pool_gpus, replica_cap
from planner.kinds import Serving
from planner.limits import MAX_RATE
from planner.numbers import given
from planner.request import MaxRateRequest
from planner.search.cpsat import Option, tables_for
from pricing.errors import mention, named_all, render
from pricing.kernel.report import memory_report
from pricing.step import has_rates


class ShapeRate(BaseModel):
    """One instance shape's most: its replicas in the pool and the highest rate each meets the targets at."""

    chip: str
    split: str = Field(description="the instance's split, 'tp 8' or 'tp 1 × dp 4'")
    gpus_per_replica: int
    replicas: int = Field(description="instances of the shape that pack into the pool")
    requests_per_second: float = Field(description="replicas × the rate per instance; 0 when even one request at "
                                                   "a time misses a target")
    requests_per_second_per_instance: float
    benchmarks: int = Field(description="rates simulated to find it")
    misses_alone: list[str] = Field(default_factory=list, description="the targets one request at a time misses")


class MaxRateResult(BaseModel):
    """`plan --max-rate --json`: the most requests per second the pool serves within the targets, the
    pool that serves it (a plan at that rate), and every shape's most."""

    kind: Literal["max_rate"] = Field("max_rate", description="which report this is (the schema's discriminator)")
    feasible: bool = Field(description="some shape meets the targets at a positive rate")
    requests_per_second: float = Field(0.0, description="the most requests per second the pool serves within "
                                       "every target (on a grid of three significant digits per instance)")
    max_gpus: int = Field(description="the pool: GPUs it may use")
    target: Target = Field(description="the service at that rate, every target restated")
    serving: Serving = Field(Serving.AGG, description="agg: an aggregated pool; disagg: a prefill and a decode pool")
    best: PoolPlan | None = Field(None, description="the aggregated pool at that rate, as `plan --requests-per-second` "
                                  "reports it")
    fleet: DisaggPlan | None = Field(None, description="the disaggregated fleet at that rate, as `plan --serving "
                                     "disagg --requests-per-second` reports it")
    binds: str = Field("", description="what sets the rate: the target the next rate of the grid misses")
    next_misses: list[str] = Field(default_factory=list, description="an aggregated pool: the targets one instance "
                                   "misses at the next rate of the grid (empty at the planner's ceiling)")
    shapes: list[ShapeRate] = Field(default_factory=list, description="every shape simulated, the most first")
    model: str = ""
    hf_id: str = ""
    explanations: list[Explanation] = Field(default_factory=list, description="why no shape serves a rate")
    notes: list[str] = Field(default_factory=list)
    seconds: float = 0.0
    hours_per_month: int = Field(exclude=True)  # planner/defaults.yaml report.hours_per_month, for the rendering


def max_rate(request: MaxRateRequest, named=None, registry=None, tables=None) -> MaxRateResult:
    """The most requests per second `request.limits` (max_gpus of its chips) serves within the targets
    (under `registry`, the command's; None: the shipped one; with `tables`, its store, planner/
    candidates/service.py TableStore; None: none kept)."""
    if request.service.serving == Serving.DISAGG:
        return _most_disagg(request, named, registry, tables)
    start = time.perf_counter()
    service, limits = request.judged, request.limits
    # the rows a plan at any rate sweeps (a rate caps each row's max_num_seqs at the requests it holds,
    # planner/candidates/latency.py cap_rows; the rate's value changes no row): planned back, the same rows
    # at any rate the same context length
    resolved = ResolvedService.of(request.at(1.0), limits, registry=registry, tables=tables)
    model = resolved.graph
    found, unpriced = [], []
    for table in tables_for(resolved):
        if not has_rates(table.chip, table.registry):
            unpriced.append(table.chip)
            continue
        stock = pool_gpus(limits.max_gpus, table.gpus_per_node, limits.spare)
        for row in table.dominant():
            replicas = replica_cap(row.gpus, table.gpus_per_node, stock)
            if not replicas:
                continue
            best = slo.highest_rate(slo.Candidate(model, table, service, row, resolved.defaults.unrecorded),
                                    MAX_RATE / replicas)
            found.append((table, row, replicas, best))
    found.sort(key=lambda f: (-f[3].rate * f[2], f[1].gpus * f[2] * f[0].chip.price_per_gpu_hour))
    shapes = [ShapeRate(chip=t.chip.id, split=row.shape.split(), gpus_per_replica=row.gpus, replicas=r,
                        requests_per_second=r * b.rate, requests_per_second_per_instance=b.rate,
                        benchmarks=b.simulated, misses_alone=missed_phrases(slo.misses(service, b.alone))
                        if b.alone is not None else []) for t, row, r, b in found]
    length = resolved.context_length
    if not found or not found[0][3].rate:
        asked = request.at(1.0)  # the target restated: the lengths and the targets, no rate found
        return named_all(MaxRateResult(
            hours_per_month=resolved.defaults.unrecorded.value("report.hours_per_month"),
            feasible=False, max_gpus=limits.max_gpus, shapes=shapes, model=model.name, hf_id=model.hf_id,
            target=Target.of(asked, length, target_words(asked)).model_copy(update={"requests_per_second": None}),
            explanations=[Explanation(chip=",".join(limits.chips), constraint="service_targets",
                                      text=render(_none_serves(request, found, unpriced), named))],
            seconds=round(time.perf_counter() - start, 3)), named)
    table, row, replicas, best = found[0]
    rate = replicas * best.rate
    at = request.at(rate)
    price = table.chip.price_per_gpu_hour
    pool = pool_plan(model, at, table, Option(row, price, 0, replicas, replicas, 0), replicas, spare=limits.spare,
                     reads=resolved.defaults.unrecorded)  # a rate's result lists no planner defaults
    sizing = slo.Sizing(replicas, runs={replicas: best.served}, candidate=best.candidate)
    pool = pool.model_copy(update={
        "serving": slo.figures(at, sizing, replicas, target_words(at)),
        "binds": render(_binds(at, best, replicas, row.shape.split(), limits.max_gpus), named),
        "memory": memory_report(pool.kernel, length).model_copy(update={"provenance": []})})
    misses = missed_phrases(slo.misses(at, best.above)) if best.above is not None else []
    return named_all(MaxRateResult(
        hours_per_month=resolved.defaults.unrecorded.value("report.hours_per_month"),
        feasible=True, requests_per_second=rate, binds=pool.binds, next_misses=misses, max_gpus=limits.max_gpus,
        target=Target.of(at, length, target_words(at)), best=pool, shapes=shapes, model=model.name, hf_id=model.hf_id,
        seconds=round(time.perf_counter() - start, 3)), named)


def _binds(at, best: slo.InstanceRate, replicas: int, split: str, max_gpus: int) -> str:
    """What sets the rate: the pool's GPUs hold `replicas` instances, and one instance misses a target
    at the next rate of the grid."""
    said = (f"{mention('max_gpus')} {max_gpus} holds {replicas} × {split}, each meeting the targets at "
            f"{given(best.rate)} requests/s ({measured_words(at, best.served)})")
    if best.above is None:
        return said + "; the rate is the planner's ceiling"
    missed = ", ".join(missed_phrases(slo.misses(at, best.above)))
    return said + f"; at {given(best.next_rate)} requests/s each: {missed}"


def _none_serves(request: MaxRateRequest, found: list, unpriced: list, registry=None) -> str:
    """Why the pool serves no rate: a chip without the step model's rates, no shape fits it, or every
    shape misses a target even one request at a time (the nearest named with its figures), or even
    at the lowest rate searched."""
    from pricing.step import missing_rates

    gpus = request.limits.max_gpus
    if not found:
        said = [f"{missing_rates(chip, registry)}, so no rate can be simulated" for chip in unpriced]
        priced = [c for c in request.limits.chips if c not in {chip.id for chip in unpriced}]
        if priced or not said:
            said.append(f"no instance shape of {request.service.model} fits {mention('max_gpus')} {gpus} on "
                        f"{', '.join(priced or request.limits.chips)}; raise {mention('max_gpus')}")
        return "; ".join(said)
    table, row, replicas, best = min(found, key=lambda f: len(slo.misses(request.judged, f[3].alone))
                                     if f[3].alone is not None else 0)
    if best.alone is None:
        return (f"{row.shape.split()} on {table.chip.id} misses the targets even at "
                f"{given(slo.grid_rate(0, best.candidate.reads))} requests/s per instance")
    return (f"every instance shape within {mention('max_gpus')} {gpus} misses the targets even one request at a "
            f"time, e.g. {row.shape.split()} on {table.chip.id}: "
            f"{', '.join(missed_phrases(slo.misses(request.judged, best.alone)))}; loosen the targets, shorten "
            f"{mention('isl')}/{mention('osl')} or raise {mention('max_gpus')}")


def _most_disagg(request: MaxRateRequest, named=None, registry=None, tables=None) -> MaxRateResult:
    """A disaggregated fleet's most: the highest grid rate at which `plan --serving disagg` finds a
    fleet within the pool (planner/search/disagg.py: the prefill pool's M/D/1 wait within TTFT, the
    decode pool within TPOT; more rate never needs fewer instances) that, under percentile targets
    (`request.slo`), meets them on the simulated arrivals as `--serving auto` judges a fleet
    (planner/app/same_arrivals.py), searched as the aggregated instance's rate is
    (slo.highest_index), from planner/defaults.yaml serving.disagg_first_rate in steps of
    serving.disagg_first_step grid rates, doubling."""
    from planner.app.disagg_plan import plan_disagg
    from planner.search.disagg import search

    start = time.perf_counter()
    limits = request.limits
    found: dict[int, object] = {}
    judged: dict[int, object] = {}  # under percentile targets: the fleet at the rate, on the simulated arrivals

    grid = tables.defaults  # the command's (a rate's result lists no planner defaults)
    first = slo.grid_rate(slo.grid_index(grid.value("serving.disagg_first_rate"), grid), grid)
    resolved = ResolvedService.of(request.at(first).model_copy(update={"slo": None}), limits, registry=registry,
                                  tables=tables)

    def sized(rate: float) -> ResolvedService:  # the fleet is sized by ttft_ms and tpot_ms; one graph, one length
        return resolved.asking(request.at(rate).model_copy(update={"slo": None}))

    def fits(k: int) -> bool:
        if k not in found:
            found[k] = search(sized(slo.grid_rate(k, grid)), 0)
        if found[k].chosen is None or request.slo is None:
            return found[k].chosen is not None
        if k not in judged:
            judged[k] = _fleet_judged(request, sized, slo.grid_rate(k, grid), named)
        return judged[k][1].meets

    lo, hi = slo.highest_index(fits, slo.grid_index(grid.value("serving.disagg_first_rate"), grid),
                               slo.grid_index(MAX_RATE, grid), step=grid.value("serving.disagg_first_step"))
    model = resolved.graph
    rate = slo.grid_rate(lo if lo is not None else hi, grid)
    at = request.at(rate)
    target = Target.of(at, resolved.context_length, target_words(at) if request.slo is not None else None)
    if lo is None:
        why = ("; ".join(e.text for e in found[hi].explanations) if hi not in judged else
               f"its fleet misses {', '.join(judged[hi][1].misses)} on the simulated arrivals")
        return named_all(MaxRateResult(
            hours_per_month=resolved.defaults.unrecorded.value("report.hours_per_month"),
            feasible=False, max_gpus=limits.max_gpus, serving=Serving.DISAGG, model=model.name, hf_id=model.hf_id,
            target=target.model_copy(update={"requests_per_second": None}),
            explanations=[Explanation(chip=",".join(limits.chips), constraint="service_targets", text=render(
                f"no disaggregated fleet within {mention('max_gpus')} {limits.max_gpus} serves even "
                f"{given(rate)} requests/s: {why}", named))],
            seconds=round(time.perf_counter() - start, 3)), named)
    fleet = judged[lo][0] if lo in judged else plan_disagg(sized(rate), 0, named)
    binds = (f"{mention('max_gpus')} {limits.max_gpus} holds {fleet.prefill.gpus} prefill + {fleet.decode.gpus} "
             f"decode GPUs at {given(rate)} requests/s")
    if lo in judged:
        met = judged[lo][1]
        binds += f" ({met.figures_words()} on the simulated arrivals)"
    if hi is None:
        binds += "; the rate is the planner's ceiling"
    elif hi in judged:
        binds += f"; at {given(slo.grid_rate(hi, grid))} requests/s its fleet misses {', '.join(judged[hi][1].misses)}"
    else:
        binds += (f"; at {given(slo.grid_rate(hi, grid))} requests/s: "
                  + "; ".join(e.text for e in found[hi].explanations))
    return named_all(MaxRateResult(
        hours_per_month=resolved.defaults.unrecorded.value("report.hours_per_month"),
        feasible=True, requests_per_second=rate, max_gpus=limits.max_gpus, serving=Serving.DISAGG, target=target,
        fleet=fleet, binds=render(binds, named), model=model.name, hf_id=model.hf_id,
        seconds=round(time.perf_counter() - start, 3)), named)


def _fleet_judged(request: MaxRateRequest, sized, rate: float, named=None):
    """The fleet `plan --serving disagg` sizes at `rate`, and it on the simulated arrivals under the
    request's percentile targets (planner/app/same_arrivals.py, as `--serving auto` judges it)."""
    from planner.app.disagg_plan import plan_disagg
    from planner.app.same_arrivals import fleet_served, simulated

    resolved = sized(rate)
    fleet = plan_disagg(resolved, 0, named)
    at = request.at(rate).model_copy(update={"ttft_ms": None, "tpot_ms": None})  # judged by the percentiles
    return fleet, simulated(at, Serving.DISAGG, fleet_served(at, fleet, rate, resolved.defaults.unrecorded))
