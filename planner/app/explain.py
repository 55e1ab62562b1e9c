"""Why nothing fits: one sentence per chip naming the binding constraint with its numbers, and
the nearest thing that does fit."""

from __future__ import annotations

import math

from planner.app.result import Explanation
from planner.app.targets import missed_phrases
from planner.candidates.service import sweep_model
from planner.candidates.shapes import (
    ChipTable,
    ShapeVerdict,
    deployment_for,
    pool_gpus,
    replica_cap,
)
from planner.numbers import count, given, size
from planner.request import PoolLimits, ServiceSpec
from pricing.errors import InputError, mention, quoted, render
from pricing.kernel import Capacity, Kernel, Startup
from pricing.step.rates import has_rates, missing_rates
from pricing.units import cdiv, largest_such


def _split(shape) -> str:
    """The shape's split, with its KV cache dtype when it is not the model's."""
    return shape.split() + (f", kv cache {shape.kv_cache_dtype}" if shape.kv_cache_dtype != "auto" else "")


def explain(table: ChipTable, service: ServiceSpec, limits: PoolLimits, named=None,
            sized: dict | None = None) -> Explanation:
    """The binding constraint on one chip, named (Explanation.constraint) and in a sentence with
    its numbers and the nearest feasible change; a rejected flag, and each field the sentence
    mentions, named as `named` calls it (the command's flag; None: the field). With service
    targets, `sized` is the search's sizing of each row (planner/candidates/slo.py `size_tables`)."""
    name = table.chip.name

    def said(constraint: str, text: str) -> Explanation:
        return Explanation(chip=table.chip.id, constraint=constraint, text=render(text, named))

    valid = [v for v in table.verdicts if v.invalid is None]
    if not table.verdicts:
        why = "; ".join(table.excluded) or "the allowed splits leave no instance shape"
        return said("no_shape", f"{name}: no instance shape is allowed ({why}).")
    if not valid:
        example = quoted(table.verdicts[0].invalid, named)
        return said("flags", f"{name}: vLLM rejects every allowed shape, e.g. {example}.")
    # the loader, or a layer, refuses every split (or leaves it not verified to start: not offered)
    if all(v.refusal in ("quantization", "load", "unverified") for v in valid):
        return said("checkpoint", _not_loaded(table, service, valid))
    if not table.rows and table.latency_note:
        return said("latency", f"{name}: {table.latency_note}.")
    if not table.rows:
        started = any(v.budget and v.fixed < v.budget for v in valid)
        return said("context" if started else "weights", _no_request(table, service, valid))
    if service.slo is not None:
        missed = _targets_missed(table, service, limits, sized or {})
        if missed is not None:
            return said("service_targets", missed)
    return said("max_gpus", _too_few(table, service, limits))


def _not_loaded(table: ChipTable, service: ServiceSpec, valid: list[ShapeVerdict]) -> str:
    """The model loader refuses the checkpoint, or a layer its shard, at every allowed split: vLLM's
    words for the first, and the split (or chip) that loads it (pricing/kernel/startup.py
    `loading_split`, `load_split`). Splits no check of vLLM's refuses but that are not verified to
    start (check "unverified") are said apart: not offered, with why, never that vLLM would not load them."""
    model = sweep_model(service.model, service.quantization, table.registry, table.tables)
    ordered = sorted(valid, key=lambda v: (v.shape.gpus, v.shape))
    parts, fit = [], None
    for unverified in (False, True):
        these = [v for v in ordered if (v.refusal == "unverified") == unverified]
        if not these:
            continue
        d = deployment_for(these[0].shape, service, table.context_length)
        refusal = Startup(Kernel.of(model, d, table.chip, table.registry, release=service.vllm_version)).refusal()
        splits = ", ".join(dict.fromkeys(_split(v.shape) for v in these))
        parts.append(f"not offered at {splits}, not verified to start: {refusal.message}" if unverified else
                     f"vLLM would not load the checkpoint at {splits}: {refusal.message}")
        if these[0] is ordered[0]:  # the nearest fit to the smallest split
            fit = refusal.would_fit.replace("-tp ", mention("tensor_parallel_size") + " ").replace(
                "-dp ", mention("dp") + " ")  # vLLM's -tp and -dp, named as the command names them
    return f"{table.chip.name}: {'; '.join(parts)}. Nearest fit: {fit}."


def _no_request(table: ChipTable, service: ServiceSpec, valid: list[ShapeVerdict]) -> str:
    name = table.chip.name
    started = [v for v in valid if v.budget and v.fixed < v.budget]
    smallest = min(valid, key=lambda v: (v.shape.gpus, v.shape))
    if not started:
        widest = min(valid, key=lambda v: (v.fixed or 2**63, v.shape))
        return (f"{name}: weights alone need {size(smallest.weights)} per rank at {_split(smallest.shape)}; the widest "
                f"split allowed, {_split(widest.shape)}, still holds {size(widest.fixed)} of fixed memory per rank "
                f"against a budget of {size(widest.budget)} at utilization {widest.utilization:g}. Nearest fit: "
                f"{size(widest.fixed - widest.budget)} more per rank is needed: a chip with more memory, a wider split "
                f"({mention('tp')}, {mention('dp')}, {mention('max_gpus')}) or a smaller {mention('quantization')}.")
    best = max(started, key=lambda v: (v.kv_pool - v.request_bytes, v.shape))
    length = table.context_length
    fits = _longest_context(table, service, best)
    nearest = (f"the longest context this split holds is {count(fits)} tokens ({mention('context_length')} {fits})"
               if fits else "no context length fits this split")
    return (f"{name}: one request at {count(length)} tokens needs {size(best.request_bytes)} of KV cache per rank at "
            f"{_split(best.shape)}, more than the {size(best.kv_pool)} pool left after {size(best.fixed)} of fixed "
            f"memory at utilization {best.utilization:g}. Nearest fit: {nearest}.")


def _longest_context(table: ChipTable, service: ServiceSpec, v: ShapeVerdict) -> int:
    """The longest max_model_len one request fits at the shape's most generous setting (bisection
    over the kernel's verdict, which is monotone in the length)."""
    model = sweep_model(service.model, service.quantization, table.registry, table.tables)

    def holds(length: int) -> bool:
        d = deployment_for(v.shape, service, length, gpu_memory_utilization=v.utilization,
                           max_num_batched_tokens=v.max_num_batched_tokens)
        try:
            kernel = Kernel.of(model, d, table.chip, table.registry, release=service.vllm_version)
            return Capacity(kernel).requests_held(service.kv_margin(table.registry)) > 0
        except InputError:
            return False

    return largest_such(holds, 1, table.context_length)  # 0 when no length holds


def _gpus_for(replicas: int, row, per_node: int) -> int:
    """The fewest GPUs whose nodes pack `replicas` instances of `row` (shapes.replica_cap)."""
    budget = replicas * row.gpus
    while (replica_cap(row.gpus, per_node, budget) or 0) < replicas:
        budget += 1
    return budget


def _missed_words(missed: list[tuple[str, int, float, float]]) -> tuple[str, str]:
    """The targets a benchmark missed (targets.missed_phrases) and the bounds it would have met
    ('--p99-tpot-ms 5'), from slo.misses."""
    fixes = [f"{mention('goodput')} {math.floor(got * 1000) / 1000:g}" if metric == "goodput" else
             f"{mention(f'p{p}_{metric}_ms')} {math.ceil(got):g}" for metric, p, bound, got in missed]
    return "; ".join(missed_phrases(missed)), " ".join(fixes)


def _shortfall(missed: list[tuple[str, int, float, float]]) -> float:
    """How far a benchmark is from its targets: the largest ratio of what it measured to what was asked."""
    return max((bound / got if metric == "goodput" else got / bound) if got else math.inf
               for metric, _, bound, got in missed)


def _targets_missed(table: ChipTable, service: ServiceSpec, limits: PoolLimits, sized: dict) -> str | None:
    """With service targets at a rate, why no row of the chip serves them, from the simulator's
    benchmarks (slo.size_tables): even one request at a time misses a target (the split that
    misses least, and the bounds it would meet), or the replicas the GPUs allow miss them (their
    figures, and the fewest replicas that meet them, sized again without the cap). None when the
    memory of the concurrency asked is what binds (`_too_few` says so)."""
    from planner.candidates import slo  # the serving simulator, only with service targets

    name = table.chip.name
    if not has_rates(table.chip, table.registry):
        return (f"{name}: {missing_rates(table.chip, table.registry)}, so no benchmark can be simulated against the "
                "service targets.")
    per_node = table.gpus_per_node
    stock = pool_gpus(limits.max_gpus, per_node, limits.spare)

    def cap(row) -> int | None:
        return replica_cap(row.gpus, per_node, stock)

    mine = [(row, s) for (chip, row), s in sized.items()
            if chip == table.chip.id and (cap(row) is None or s.memory <= cap(row))]
    if not mine:
        return None
    queued = [(row, s) for row, s in mine if s.alone is None]
    if not queued:
        row, s = min(mine, key=lambda rs: (_shortfall(slo.misses(service, rs[1].alone)), rs[0].gpus, rs[0].shape))
        missed, fixes = _missed_words(slo.misses(service, s.alone))
        return (f"{name}: even one request at a time misses the service targets at every split; the closest, "
                f"{_split(row.shape)}: {missed}. Nearest fit: a bound no tighter than {fixes} (what one request alone "
                f"meets; queueing at the rate adds to it), or a faster chip.")
    rate = service.workload.requests_per_second
    capped = [(row, s) for row, s in queued if cap(row) is not None]
    if not capped:
        limit = table.defaults.unrecorded.value("limits.max_gpus")
        return (f"{name}: no replica count up to {count(limit)} of any split serves {given(rate)} requests/s "
                f"within the service targets.")
    row, s = min(capped, key=lambda rs: (_shortfall(slo.misses(service, rs[1].at(cap(rs[0])))), rs[0].gpus,
                                        rs[0].shape))
    most = cap(row)
    missed, _ = _missed_words(slo.misses(service, s.at(most)))
    within = f"within {mention('max_gpus')} {limits.max_gpus} on {per_node}-GPU nodes"
    if limits.spare:
        within += f" less the {limits.spare * per_node} GPUs of the spare nodes ({mention('spare')} {limits.spare})"
    head = (f"{name}: {within}, {count(most)} × {_split(row.shape)} (the most that fit) at {rate / most:,.2f} "
            f"requests/s each {'miss' if most > 1 else 'misses'} the service targets: {missed}.")
    needed = slo.size(s.candidate, s.memory, None).replicas
    if not needed:
        return head + f" No replica count up to {count(table.defaults.unrecorded.value('limits.max_gpus'))} meets them."
    return (head + f" Nearest fit: {mention('max_gpus')} {_gpus_for(needed, row, per_node) + limits.spare * per_node}"
            f" ({count(needed)} × {_split(row.shape)}).")


def _too_few(table: ChipTable, service: ServiceSpec, limits: PoolLimits) -> str:
    """The most a chip's --max-gpus reaches, less its --spare nodes, and the nearest --max-gpus that fits."""
    name = table.chip.name
    need = service.required
    per_node = table.gpus_per_node
    rows = table.dominant()
    stock = pool_gpus(limits.max_gpus, per_node, limits.spare)
    kept = limits.spare * per_node

    def reach(row):
        return (replica_cap(row.gpus, per_node, stock) or 0) * row.concurrency

    top = max(rows, key=lambda r: (reach(r), -r.gpus, r.shape))
    cap = replica_cap(top.gpus, per_node, stock) or 0

    def gpus_needed(row) -> int:
        return _gpus_for(cdiv(need, row.concurrency), row, per_node)

    cheapest = min(rows, key=lambda r: (gpus_needed(r), r.shape))
    max_gpus, spare = mention("max_gpus"), mention("spare")
    within = f"within {max_gpus} {limits.max_gpus} on {per_node}-GPU nodes"
    if limits.spare:
        nodes = f"{limits.spare} spare node{'s' if limits.spare > 1 else ''}"
        within = (f"within {max_gpus} {limits.max_gpus} less the {kept} GPUs of the {nodes} kept free ({spare} "
                  f"{limits.spare}), {stock} GPUs on {per_node}-GPU nodes," if stock else
                  f"{max_gpus} {limits.max_gpus} on {per_node}-GPU nodes leaves no GPU for the pool beside the {nodes} "
                  f"kept free ({spare} {limits.spare}, {kept} GPUs), so")
    spare_fix = f" with the spares kept, or {spare} 0 ({max_gpus} {gpus_needed(cheapest)} without)" if kept else ""
    return (f"{name}: {within} the most concurrency reachable is "
            f"{count(cap * top.concurrency)} ({count(cap)} × {_split(top.shape)}, {count(top.concurrency)} requests "
            f"each) against {count(need)} required. Nearest fit: {max_gpus} {gpus_needed(cheapest) + kept} "
            f"({count(cdiv(need, cheapest.concurrency))} × {_split(cheapest.shape)}){spare_fix}.")
