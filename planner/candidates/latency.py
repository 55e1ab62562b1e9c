"""Latency and throughput in the search: the step model (pricing/step) priced for the
oracle's candidate rows, turned into the integers CP-SAT works on.

A latency target caps the requests one rank may run at once: the largest batch whose steady
step meets --tpot-ms and whose prompt prefill meets --ttft-ms (both never fall as the batch
grows, so the cap is found by bisection). The cap becomes the row's max_num_seqs, which is how
a vLLM instance is held to it, and the row's concurrency falls to it: the solver then needs
more replicas of a narrow split, or picks a wider tp that decodes faster, whichever is cheaper.
A requests-per-second target raises each row's fewest replicas to what its throughput at that
cap needs. Each row remembers which limit set its concurrency (memory, tpot or ttft), and the
plan says which one binds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from planner.candidates.shapes import ChipTable, Row
from planner.candidates.speed_band import band
from planner.candidates.step_fields import StepFigures, step_fields
from planner.numbers import duration
from planner.request import ServiceSpec
from pricing.graph.model import ModelGraph
from pricing.kernel import Kernel
from pricing.step import StepModel, has_rates, missing_rates
from pricing.step.serving import Workload, largest_batch, serving
from pricing.units import cdiv


@dataclass(frozen=True)
class Cap:
    """What limits one row's requests per rank: its memory, and each latency target."""

    memory: int
    tpot: int | None
    ttft: int | None
    requests_per_second: float | None  # one instance at the capped batch

    @property
    def held(self) -> int:
        return min(x for x in (self.memory, self.tpot, self.ttft) if x is not None)

    @property
    def binds(self) -> str:
        """memory, tpot or ttft: the limit that sets the row's concurrency (memory wins ties)."""
        if self.memory <= self.held:
            return "memory"
        return "tpot" if self.tpot == self.held else "ttft"


def workload(service: ServiceSpec) -> Workload | None:
    w = service.workload
    return Workload(w.isl, w.osl) if w is not None else None


def constrains(service: ServiceSpec) -> bool:
    return (service.tpot_ms is not None or service.ttft_ms is not None
            or (service.workload is not None and service.workload.requests_per_second is not None))


def _step_model(model: ModelGraph, table: ChipTable, service: ServiceSpec, row: Row) -> StepModel:
    return StepModel(Kernel.of(model, row.deployment, table.chip, table.registry),
                     rates_accepted=service.speculative_acceptance)


def cap_rows(table: ChipTable, model: ModelGraph, service: ServiceSpec) -> None:
    """Cap every row of `table` at the batch that meets the service's latency targets (rows that
    cannot serve even one request within them are dropped, and the table says why)."""
    if not constrains(service) or not table.rows:
        return
    if not has_rates(table.chip, table.registry):
        table.latency_note = (f"{missing_rates(table.chip, table.registry)}, so no step time can be priced against "
                              "the latency targets")
        table.rows = []
        return
    length = table.context_length
    wl = workload(service)
    tpot = service.tpot_ms / 1000 if service.tpot_ms is not None else None
    ttft = service.ttft_ms / 1000 if service.ttft_ms is not None else None
    kept, fastest = [], None
    groups: dict[tuple, list[Row]] = {}
    for row in table.rows:
        groups.setdefault((row.shape, row.max_num_batched_tokens), []).append(row)
    for rows in groups.values():
        widest = max(rows, key=lambda r: r.held_per_rank)
        sm = _step_model(model, table, service, widest)
        limit = widest.held_per_rank
        b_tpot = largest_batch(sm, limit, length, wl, tpot_seconds=tpot) if tpot is not None else None
        b_ttft = largest_batch(sm, limit, length, wl, ttft_seconds=ttft) if ttft is not None else None
        one = serving(sm, 1, length, wl)
        if fastest is None or one.tpot_seconds < fastest[1].tpot_seconds:
            fastest = (widest, one, sm.eff.first_token_seconds)
        for row in rows:
            cap = Cap(row.held_per_rank, b_tpot, b_ttft, None)
            if cap.held < 1:
                continue
            rps = serving(sm, cap.held, length, wl).requests_per_second if wl is not None else None
            capped = replace(row, max_num_seqs=min(row.max_num_seqs, cap.held), held_per_rank=cap.held)
            table.latency[capped] = replace(cap, requests_per_second=rps)
            kept.append(capped)
    if not kept and fastest is not None:
        row, one, front = fastest
        s = row.shape
        table.latency_note = (f"no instance meets the latency targets: the fastest split, tp {s.tp}"
                              + (f" × dp {s.dp}" if s.dp > 1 else "") + f", takes {duration(one.tpot_seconds * 1000)} "
                              f"per output token and {duration(one.ttft_seconds * 1000)} to the first token at one "
                              f"request ({duration(front * 1000)} of it the API server's, outside the engine: "
                              "step_model.yaml first_token_seconds)")
    table.rows = kept


def replicas_for_rate(table: ChipTable, row: Row, service: ServiceSpec) -> int:
    """The fewest replicas of `row` that serve the workload's requests per second (0: no target)."""
    w = service.workload
    if w is None or w.requests_per_second is None:
        return 0
    rate = table.latency[row].requests_per_second if row in table.latency else None
    return math.ceil(w.requests_per_second / rate) if rate else 0


def figures(model: ModelGraph, table: ChipTable, service: ServiceSpec, row: Row, replicas: int) -> StepFigures | None:
    """The plan's step figures at its planned concurrency: the target spread over the replicas
    and each instance's data-parallel ranks. None when the chip has no peak rates."""
    if not has_rates(table.chip, table.registry):
        return None
    length = table.context_length
    wl = workload(service)
    per_instance = cdiv(service.concurrency, replicas)
    batch = max(1, min(row.held_per_rank, cdiv(per_instance, row.shape.dp)))
    sm = _step_model(model, table, service, row)
    s = serving(sm, batch, length, wl)
    rate = service.workload.requests_per_second if service.workload is not None else None
    if rate is not None and s.requests_per_second * replicas < rate:
        # the load the rate brings (Little's law): the fewest requests per rank that serve it
        lo, hi = batch, row.held_per_rank
        while lo < hi:
            mid = (lo + hi) // 2
            if serving(sm, mid, length, wl).requests_per_second * replicas >= rate:
                hi = mid
            else:
                lo = mid + 1
        batch = lo
        s = serving(sm, batch, length, wl)
    cap = table.latency.get(row)
    binds = "memory"
    if cap is not None and cap.binds != "memory" and row.gpus * replicas > memory_only_gpus(table, service):
        binds = cap.binds  # the target costs GPUs: memory alone would need fewer on this chip
    if wl is not None and service.workload.requests_per_second is not None and cap is not None:
        by_rate = replicas_for_rate(table, row, service)
        by_concurrency = cdiv(service.required, row.concurrency)
        if by_rate > by_concurrency:
            binds = "requests per second"
    return StepFigures(
        **step_fields(s, batch, wl.mean_context if wl else length, wl.isl if wl else length),
        pool_output_tokens_per_second=round(s.output_tokens_per_second * replicas, 1),
        pool_requests_per_second=round(s.requests_per_second * replicas, 3) if s.requests_per_second else None,
        binds=binds, tpot_band=band("tpot", batch, wl.mean_context if wl else length, sm.kernel),
        ttft_band=band("ttft", batch, wl.isl if wl else length, sm.kernel))


def memory_only_gpus(table: ChipTable, service: ServiceSpec) -> int:
    """The fewest GPUs of `table`'s chip that hold the target on memory alone (the rows' uncapped
    requests per rank)."""
    return min((r.gpus * cdiv(service.required, r.shape.dp * c.memory) for r, c in table.latency.items()),
               default=0)


def step_replicas(step: StepFigures, row: Row) -> int:
    """Replicas of `row` the figures were priced for (pool throughput over one instance's)."""
    return max(1, round(step.pool_output_tokens_per_second / step.output_tokens_per_second))


def memory_row(table: ChipTable, row: Row) -> Row:
    """`row` as its memory alone would size it (before a latency target capped it)."""
    cap = table.latency.get(row)
    return replace(row, held_per_rank=cap.memory) if cap is not None else row
