"""What sets a pool's size, in words with its numbers: the weights forcing the instance's split,
the KV cache, max_num_seqs, the token budget, the NVLink domain, or the inventory.

A pool of one instance that holds more than the target is sized by the smallest instance that
starts: the weights (with the fixed memory) force the split, and the KV cache does not bind. A
pool of several instances is sized by what one instance holds: the KV cache, or a cap on
max_num_seqs (vLLM's default, or the token budget, which max_num_seqs may not exceed)."""

from __future__ import annotations

from planner.candidates.latency import memory_only_gpus, step_replicas
from planner.candidates.shapes import ChipTable, Row, replica_cap
from planner.candidates.step_fields import StepFigures
from planner.numbers import count, duration, given, money, number, ratio, size
from planner.request import ServiceSpec


def _narrower(v) -> str:
    """Why a narrower split serves nothing: its fixed memory exceeds the budget, or leaves a pool
    short of one request at the context length."""
    at = f"at {v.shape.gpus} GPU{'s' if v.shape.gpus > 1 else ''} ({v.shape.split()})"
    if v.fixed >= v.budget or not v.request_bytes:
        return f"{at} the fixed memory is {size(v.fixed)} per rank against a {size(v.budget)} budget"
    return (f"{at} the fixed memory ({size(v.fixed)} per rank) leaves a {size(v.kv_pool)} KV pool of the "
            f"{size(v.budget)} budget, short of one {size(v.request_bytes)} request")


def binding(table: ChipTable, row: Row, replicas: int, target: int, kernel, seqs_cap: int, asked: bool = True) -> str:
    """One phrase naming what sets the size of `replicas` × `row` on `table`'s chip for `target`
    requests; `kernel` is the row's verified kernel, `seqs_cap` vLLM's default max_num_seqs;
    `asked`: the target was asked (not a rate's floor of one request, which no phrase quotes)."""
    held = row.concurrency * replicas
    of_asked = f" of the {count(target)} asked" if asked else ""
    if replicas == 1 and held > target:
        started = [v for v in table.verdicts if v.held_per_rank > 0]
        narrowest = min((v.shape.gpus for v in started), default=row.gpus)
        if 1 < row.gpus <= narrowest:
            tighter = [v for v in table.verdicts if v.shape.gpus < row.gpus and v.invalid is None and v.budget]
            worst = max(tighter, key=lambda v: (v.shape.gpus, v.budget - v.fixed), default=None)
            where = f"; {_narrower(worst)}" if worst else ""
            domain = f" (the NVLink domain is {table.chip.nvlink_domain} GPUs)" \
                if row.shape.tp == table.chip.nvlink_domain else ""
            return (f"weights force the split: {size(kernel.fixed_bytes().weights)} of weights per rank need "
                    f"{row.gpus} GPUs ({row.shape.split()}){domain}{where}; one instance holds {count(held)}{of_asked}")
        if row.gpus == 1:
            return f"one GPU is the smallest pool: it holds {count(held)}{of_asked}"
    per_rank = row.held_per_rank
    if replicas == 1 and held > target and row.gpus > 1 and asked:
        fewer = _fewer_gpus(table, row.gpus, target)
        if fewer:
            ranks = (f"its {count(row.shape.dp)} ranks hold {count(per_rank)} each, {count(held)} in all"
                     if row.shape.dp > 1 else f"its rank holds {count(held)}")
            return (f"KV cache: {fewer}; this instance is the smallest that holds them: {ranks} "
                    f"({_per_rank_words(kernel)})")
    if per_rank == row.max_num_batched_tokens and per_rank < seqs_cap:
        return f"token budget: max_num_seqs may not exceed max_num_batched_tokens {row.max_num_batched_tokens:,}"
    if per_rank >= seqs_cap:
        return f"max_num_seqs: vLLM's default cap of {seqs_cap:,} requests per rank"
    return (f"KV cache: {count(per_rank)} requests of {count(kernel.engine.max_model_len)} tokens per rank "
            f"({_per_rank_words(kernel)})")


def _per_rank_words(kernel) -> str:
    """A rank's KV pool and what one request at the context length takes of it."""
    length = kernel.engine.max_model_len
    admission = kernel.sequence_admission_bytes()
    each = (f"{size(kernel.request_bytes())} each: {size(kernel.sequence_variable_bytes(length))} of KV cache and "
            f"{size(admission)} reserved at admission" if admission else f"{size(kernel.request_bytes())} each")
    return (f"{size(kernel.kv_pool())} pool, {each}; vLLM's maximum concurrency, "
            f"{ratio(kernel.instance.max_concurrency())}, is before the KV margin and whole blocks per group")


def _memory_held(table: ChipTable, row: Row) -> int:
    """Requests per rank `row`'s memory holds (before a latency target capped it)."""
    cap = table.latency.get(row)
    return cap.memory if cap is not None else row.held_per_rank


def _fewer_gpus(table: ChipTable, gpus: int, target: int) -> str | None:
    """Why no pool of fewer than `gpus` GPUs of the chip serves `target` on memory: the most any
    split's replicas on fewer GPUs hold, in words; None when some such pool holds the target
    (a latency target, not memory, then rules it out)."""
    best = None
    for r in table.dominant():
        if r.gpus >= gpus:
            continue
        n = replica_cap(r.gpus, table.gpus_per_node, gpus - 1)
        held = n * r.shape.dp * _memory_held(table, r)
        if n and (best is None or held > best[0]):
            best = (held, n, r)
    if best is None or best[0] >= target:
        return None
    held, n, r = best
    return (f"fewer than {count(gpus)} {table.chip.id} GPUs hold at most {count(held)} of the {count(target)} asked "
            f"({count(n)} × ({r.shape.split()}), {count(_memory_held(table, r))} requests of "
            f"{count(table.context_length)} tokens per rank)")


def _forced_split(table: ChipTable, row: Row, replicas: int, service: ServiceSpec) -> str | None:
    """A latency target that rules out a pool of no more GPUs than the chosen one which memory
    alone would have served: the pool the target forced away from, and its figures; None when none."""
    gpus, target = row.gpus * replicas, service.required
    for r in sorted(table.dominant(), key=lambda r: (-r.gpus, r.shape)):
        cap = table.latency.get(r)
        if r.shape == row.shape or cap is None or cap.binds == "memory" or r.gpus > gpus:
            continue
        n = replica_cap(r.gpus, table.gpus_per_node, gpus) or 0
        if n * r.shape.dp * cap.memory >= target > n * r.concurrency:
            bound = service.tpot_ms if cap.binds == "tpot" else service.ttft_ms
            return (f"{cap.binds} {duration(bound)} forced ({row.shape.split()}): {count(n)} × ({r.shape.split()}) "
                    f"on {count(n * r.gpus)} GPUs serve {count(n * r.concurrency)} of the {count(target)} asked "
                    f"within it ({count(r.held_per_rank)} per rank; their memory would hold "
                    f"{count(n * r.shape.dp * cap.memory)})")
    return None


def latency_binding(table: ChipTable, row: Row, replicas: int, service: ServiceSpec, step: StepFigures | None,
                    memory: str) -> str:
    """The phrase naming what sets the pool's size: a latency target when it needs more
    replicas than memory would, or rules out a split of no more GPUs that memory alone would
    serve, else `memory` (the memory phrase), noting a target's cap on max_num_seqs when it
    lowers it."""
    cap = table.latency.get(row)
    if step is None or cap is None:
        return memory
    if step.binds == "requests per second":
        return (f"requests per second: {given(service.workload.requests_per_second)} asked; one instance serves at "
                f"most {number(cap.requests_per_second)} requests/s within the targets, at the {count(cap.held)} "
                "requests per rank it holds")
    if step.binds in ("tpot", "ttft"):
        target = service.tpot_ms if step.binds == "tpot" else service.ttft_ms
        return (f"{step.binds}: within {duration(target)} a rank of this split serves {count(cap.held)} requests "
                f"(max_num_seqs {count(cap.held)}) where its memory holds {count(cap.memory)}; memory alone would need "
                f"{count(memory_only_gpus(table, service))} {table.chip.id} GPUs, the target "
                f"{count(row.gpus * step_replicas(step, row))}")
    forced = _forced_split(table, row, replicas, service)
    if forced:
        memory = f"{forced}; {memory}"
    if cap.binds != "memory":
        target = service.tpot_ms if cap.binds == "tpot" else service.ttft_ms
        return (f"{memory}; {cap.binds} {duration(target)} caps max_num_seqs at {count(cap.held)} (memory would hold "
                f"{count(cap.memory)})")
    return memory


def default_max_num_seqs(model, chip, max_model_len: int, registry, release: str) -> int:
    """`release`'s default max_num_seqs on `chip` (the service's vLLM release: its registry file's
    scheduler_defaults, as `registry`, the plan's, states them)."""
    from pricing.kernel.deployment import Deployment, resolve_engine

    return resolve_engine(Deployment(max_model_len=max_model_len), model, chip, registry, release).max_num_seqs


def inventory_binds(full: list[tuple[str, int, int]], extra: float) -> str:
    """The inventory binds when its GPU counts make the fleet dearer than each service's cheapest
    pool on its own: by how much, and which chips it uses to the last GPU (chip, used, available)."""
    used = "".join(f"{count(used)} of {count(available)} {chip} GPUs in use, " if available else
                   f"no {chip} GPUs in the inventory, " for chip, used, available in full)
    return f"inventory: {used}{money(extra)}/hour over each service's cheapest pool on its own"
