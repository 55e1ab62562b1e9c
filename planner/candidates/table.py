"""The oracle: every candidate vLLM instance of one service on one chip, judged by the memory
kernel ahead of the solve (chips-and-solver.md §2.2 item 9, "precompute the oracle").

A candidate is an instance shape (tp, dp, expert parallel, dcp, KV cache dtype) with a
utilization and a token budget. Its concurrency at the context length is
dp × min(max_num_seqs, requests one rank's pool holds) — `Capacity.requests_held()`, which is 0
when vLLM would refuse to start. `max_num_seqs` is set to what the pool holds at vLLM's default
`max_num_seqs` (so never above that default, 1,024 on chips of 70 GiB or more; and at most the
token budget, as vLLM requires), so the instance admits
everything its memory holds and no more. A smaller `max_num_seqs` only shrinks the fixed memory
(CUDA graphs, sampler), so the pool still holds that many; `verify()` asks the kernel again for
the rows that are reported.

Monotonicity used to prune (never a second memory model): for one shape and token budget the
KV pool is budget − fixed memory and the budget grows with utilization. Utilizations are
scanned from the highest down, and the scan stops at the first that holds fewer requests than
the one above it: every lower utilization holds no more, so it cannot be the best row of its
shape (see `ChipTable.dominant`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction

from planner.candidates.service import ResolvedService
from planner.candidates.shapes import (
    ChipTable,
    Row,
    Shape,
    ShapeVerdict,
    deployment_for,
    shapes,
)
from planner.candidates.store import TableStore
from planner.defaults import Reads
from planner.request import PoolLimits, ServiceSpec
from pricing.chips import Chip, get_chip
from pricing.errors import InputError, Quoted
from pricing.graph.model import ModelGraph
from pricing.kernel import Capacity, Kernel, Startup
from pricing.kernel.deployment import Deployment, beyond_positions
from pricing.kernel.startup import failed_check_at
from pricing.registry import Registry


def priced_chip(chip_id: str, limits: PoolLimits, registry: Registry | None = None) -> Chip:
    """The chip as `registry` states it (None: the shipped one), with the user's price (`--price 3.1`
    for all, `--price h200=3.1` for one)."""
    chip = get_chip(chip_id, registry)
    price = limits.prices.get(chip.id, limits.price)
    return chip.with_overrides(price=price) if price is not None else chip


def utilizations(service: ServiceSpec, chip: Chip, pre_snapshot: int, reads: Reads) -> list[float]:
    """The utilization grid, highest first. The default grid tops out where the engine keeps
    `grids.spare_memory_bytes` free beside the budget and what is held before it (the cap,
    floored to the grid step, is a candidate when it binds); utilizations the user gives are
    capped only where vLLM would refuse to start (budget + pre-snapshot beyond the chip)."""
    grid = sorted(service.gpu_memory_utilization or reads.value("grids.gpu_memory_utilization"), reverse=True)
    step = reads.value("grids.gpu_memory_utilization_step")
    ticks = round(1 / step)
    spare = 0 if service.gpu_memory_utilization else int(reads.value("grids.spare_memory_bytes"))
    cap = math.floor((chip.memory_bytes - pre_snapshot - spare) * ticks / chip.memory_bytes) / ticks
    kept = [u for u in grid if u <= cap]
    if service.gpu_memory_utilization is None and 0 < cap < grid[0] and cap not in kept:
        kept = [cap] + kept
    return kept


@dataclass(frozen=True)
class ShapeGrid:
    """What a shape is swept over: its verdict (in its table), the context length, the token
    budgets (smallest first), the utilizations (highest first), and the probe kernel with its flags
    (the smallest budget, the release's default utilization)."""

    verdict: ShapeVerdict
    length: int
    budgets: list[int]
    utils: list[float]
    probe: Kernel
    flags: Deployment


def shape_grid(model: ModelGraph, chip: Chip, service: ServiceSpec, shape: Shape,
               table: ChipTable) -> ShapeGrid | None:
    """A shape's verdict, appended to `table`, and the grid it is swept over: the context length,
    the token budgets (smallest first), the utilizations (`utilizations`, of a probe kernel at
    the smallest budget and the release's default utilization) and the probe; None when the probe
    is refused (vLLM rejects the flags: one point judged) or no utilization starts, the verdict
    saying why."""
    length = table.context_length
    verdict = ShapeVerdict(shape)
    table.verdicts.append(verdict)
    budgets = sorted(service.max_num_batched_tokens or tuple(table.defaults.value("grids.max_num_batched_tokens")))
    try:
        flags = deployment_for(shape, service, length, max_num_batched_tokens=budgets[0])
        probe = Kernel.of(model, flags, chip, table.registry, release=service.vllm_version)
    except InputError as err:
        verdict.invalid = Quoted("", err)  # the report names the field as its reader wrote it
        table.evaluated += 1
        return None
    table.evaluated += 1
    utils = utilizations(service, chip, probe.pre_snapshot_bytes(), table.defaults)
    if not utils:
        verdict.refusal = Startup(probe).failed_check()
        return None
    return ShapeGrid(verdict, length, budgets, utils, probe, flags)


def evaluate_shape(model: ModelGraph, chip: Chip, service: ServiceSpec, shape: Shape, table: ChipTable) -> None:
    """Evaluate one shape over the utilization × token-budget grid, appending rows to `table`.

    One kernel per token budget (the probe's for the smallest), each at the release's default
    utilization: the utilization changes only the budget, and the pool is affine in it
    (`Capacity.held_at`), so each utilization's requests and start-up checks are read off that
    kernel at the budget the utilization asks for. The scan runs from the highest utilization down
    and stops at the first that holds fewer requests than the one above it (or none); a token budget
    whose highest utilization holds none ends the shape, as a larger budget only grows the
    activation peak and the CUDA-graph captures. `table.evaluated` counts the grid points the scan
    judged (the points it reached, the one that stopped it included, and one per token budget the
    last rule ended)."""
    grid = shape_grid(model, chip, service, shape, table)
    if grid is None:
        return
    verdict, budgets, utils, probe = grid.verdict, grid.budgets, grid.utils, grid.probe
    release = probe.release  # resolved once for every kernel below
    margin = service.kv_margin(table.registry)
    for n, mbt in enumerate(budgets):  # the flags validated once, each budget a copy with its own
        kernel = probe if n == 0 else Kernel.of(model, grid.flags.model_copy(update={"max_num_batched_tokens": mbt}),
                                                chip, table.registry, release=release)
        top = 0
        capacity = Capacity(kernel)
        for util in utils:
            table.evaluated += 1
            budget = kernel.budget_of(util)
            held = capacity.held_at(budget, margin)
            if n == 0 and util == utils[0]:
                _record(verdict, kernel, held, util)
            if held < top or held == 0:
                break  # lower utilizations leave a smaller pool: they hold no more, and this holds less
            top = held
            table.rows.append(Row(chip.id, shape, util, mbt, min(held, mbt), min(held, mbt), grid.flags))
        if top == 0:  # larger token budgets hold none either
            table.evaluated += len(budgets) - n - 1
            return


def held_bound(model: ModelGraph, chip: Chip, service: ServiceSpec, shape: Shape, table: ChipTable) -> int:
    """At least the requests any row of `shape` holds (`Row.concurrency`), without pricing it: dp × the
    requests at max_model_len that one rank's budget at the grid's highest utilization holds once its
    weights alone are taken out, the KV margin held back (0 when vLLM rejects the flags or no
    utilization starts). A rank's pool is its budget less its fixed memory, weights, activations, CUDA
    graphs and the rest, each at least 0, and the budget is largest at the highest utilization; one
    request takes `Kernel.request_bytes` of it. The kernel's own figures at the smallest token budget
    (its weights and cache layout, which pricing the shape reads again from the model's memo): a
    bounded sweep's order (planner/search/sweep_time.py), never a row."""
    budgets = sorted(service.max_num_batched_tokens or tuple(table.defaults.value("grids.max_num_batched_tokens")))
    try:
        flags = deployment_for(shape, service, table.context_length, max_num_batched_tokens=budgets[0])
        kernel = Kernel.of(model, flags, chip, table.registry, release=service.vllm_version)
    except InputError:
        return 0
    utils = utilizations(service, chip, kernel.pre_snapshot_bytes(), table.defaults)
    if not utils:
        return 0
    pool = kernel.budget_of(utils[0]) - kernel.weight_bytes().weights
    keep = Fraction(1) - Fraction(str(service.kv_margin(table.registry)))
    return shape.dp * max(0, pool * keep.numerator // keep.denominator // kernel.request_bytes())


def whole_model(model: ModelGraph, chip: Chip, service: ServiceSpec, table: ChipTable) -> tuple[int, int] | None:
    """The bytes of the service's whole model and of one request at max_model_len on `chip`: one rank
    of tp 1 (its weights; `Kernel.request_bytes`), at the smallest token budget; None when vLLM
    rejects tp 1's flags. Every weight lives on one rank at least, and a request's caches on the
    ranks of a split add up to one rank's of tp 1 at least (heads, layers and context are divided
    among them, some replicated, each rank's in whole blocks), so no instance of G GPUs holds more
    than (G × the chip's memory − the weights) over the request's bytes: a bounded sweep's order
    (planner/search/sweep_time.py), never a row."""
    budgets = sorted(service.max_num_batched_tokens or tuple(table.defaults.value("grids.max_num_batched_tokens")))
    one = Shape(1, 1, False, 1, service.kv_cache_dtypes[0])
    try:
        flags = deployment_for(one, service, table.context_length, max_num_batched_tokens=budgets[0])
        kernel = Kernel.of(model, flags, chip, table.registry, release=service.vllm_version)
    except InputError:
        return None
    return kernel.weight_bytes().weights, kernel.request_bytes()


def verify(model: ModelGraph, table: ChipTable, service: ServiceSpec, row: Row) -> Kernel:
    """The kernel of a reported row of `table` at its own max_num_seqs; it must hold what the row says."""
    kernel = Kernel.of(model, row.deployment, table.chip, table.registry, release=service.vllm_version)
    held = Capacity(kernel).requests_held(service.kv_margin(table.registry))
    if held != row.held_per_rank:
        raise AssertionError(f"kernel holds {held} requests per rank for {row}, the oracle said {row.held_per_rank}")
    return kernel


def _record(verdict: ShapeVerdict, kernel: Kernel, held: int, utilization: float) -> None:
    """The verdict's figures: the kernel's, at the budget `utilization` asks for (the kernel's own
    utilization need not be it: nothing but the budget depends on it), of the stage that binds at
    that budget (with pipeline stages, which stage holds the fewest blocks depends on it)."""
    budget = kernel.budget_of(utilization)
    kernel = kernel.instance.binding_at(budget) if kernel.stage is not None else kernel
    fixed = kernel.fixed_bytes()
    verdict.weights = fixed.weights
    verdict.fixed = fixed.total
    verdict.budget = budget
    verdict.kv_pool = kernel.pool_at(budget)
    verdict.request_bytes = kernel.request_bytes()
    verdict.utilization = utilization
    verdict.max_num_batched_tokens = kernel.engine.max_num_batched_tokens
    verdict.held_per_rank = held
    verdict.refusal = failed_check_at(kernel, budget)


def sweep_key(resolved: ResolvedService, chip: Chip, limits: PoolLimits) -> tuple:
    """What a candidate table depends on: the whole service (its context length follows from it and
    the registry) but its target (concurrency and
    headroom, which only the solve reads), the whole chip but its price (which only the solve
    reads: `candidate_table` gives the table at another price as the same rows under that chip),
    the node size, the GPU cap and the service's registry."""
    sweep = resolved.spec.model_copy(update={"concurrency": 1, "headroom": 0.0})
    return (sweep, unpriced(chip), limits.gpus_per_node or chip.gpus_per_node, limits.max_gpus, resolved.registry)


def unpriced(chip: Chip) -> Chip:
    """The chip as a sweep reads it: without its price and the price's provenance."""
    return replace(chip, price_per_gpu_hour=0.0, price_estimate=False, price_as_of="",
                   provenance=tuple(p for p in chip.provenance if not p.name.endswith(".price_per_gpu_hour")))


def start_table(resolved: ResolvedService, chip: Chip, limits: PoolLimits) -> tuple[ModelGraph, ChipTable, list[Shape]]:
    """The model, an empty table and the shapes to evaluate on `chip`."""
    model, length, service = resolved.graph, resolved.context_length, resolved.spec
    if problem := beyond_positions(model, length):
        raise InputError("context_length", problem, f"use at most {model.max_position}")
    per_node = limits.gpus_per_node or chip.gpus_per_node
    reads = resolved.defaults.fresh()  # the table's own view: built once and shared, its reads are its own
    found, notes = shapes(model, chip, service, limits.max_gpus, per_node, reads)
    return model, ChipTable(chip, per_node, length, excluded=notes, defaults=reads, registry=resolved.registry,
                             tables=resolved.tables), found


def needs_stages(service: ServiceSpec, table: ChipTable) -> bool:
    """Whether a sweep prices pipeline-staged shapes: when --pp asks for stages or no single-stage row
    of `table` fits in a node (once one does, it stays so: rows are only added)."""
    return bool(service.pp) or not table.in_a_node()


def evaluate_staged(model: ModelGraph, chip: Chip, service: ServiceSpec, found: list[Shape], table: ChipTable) -> None:
    """Pipeline-staged shapes, evaluated only when the model needs more than a node (or --pp asks
    for stages): the single-stage shapes must have been evaluated already."""
    staged = [s for s in found if s.pp > 1]
    if needs_stages(service, table):
        for shape in staged:
            evaluate_shape(model, chip, service, shape, table)


def stage_within(model: ModelGraph, chip: Chip, service: ServiceSpec, found: list[Shape], table: ChipTable,
                 judge: Callable[[Shape], None]) -> None:
    """`evaluate_staged` after a sweep that skipped shapes by cost (plan's and a review's bounded
    sweeps): pipeline-staged shapes are swept only where the whole sweep would sweep them, when no
    single-stage row fits in a node. So the single-stage shapes in a node that the bound skipped
    are evaluated first, fewest GPUs first, until one row fits (their rows cost more than the
    bound: none is chosen, but they settle, as in the whole sweep, that no stage is needed); if
    none fits (or --pp asks for stages), each staged shape, fewest GPUs first, goes to `judge`,
    which sweeps it unless the bound skips it."""
    if not table.in_a_node():
        done = {v.shape for v in table.verdicts}
        for shape in sorted((sh for sh in found if sh.pp == 1 and sh not in done
                             and sh.nodes(table.gpus_per_node) == 1), key=lambda sh: sh.gpus):
            table.skipped -= 1
            evaluate_shape(model, chip, service, shape, table)
            if table.in_a_node():
                break
    if needs_stages(service, table):
        for shape in sorted((sh for sh in found if sh.pp > 1), key=lambda sh: sh.gpus):
            judge(shape)


def candidate_table(resolved: ResolvedService, chip: Chip, limits: PoolLimits) -> ChipTable:
    """Every candidate instance of `service` on `chip` the kernel accepts (the reusable unit of a
    scenario: one table per service and chip). With the command's store (`resolved.tables`),
    tables are reused across services and variants that share a `sweep_key` (a review's services
    of one model at one context length share one sweep); the table is never changed after it is built."""
    tables = resolved.tables
    service = resolved.spec
    key = sweep_key(resolved, chip, limits) if tables is not None else None
    table = tables.get(key) if tables is not None else None
    if table is not None and table.chip != chip:  # the same sweep at another price: its rows, this chip
        priced = tables.get((key, chip))
        if priced is None:
            priced = replace(table, chip=chip)
            tables.keep((key, chip), priced)
        table = priced
    if table is None:
        model, table, found = start_table(resolved, chip, limits)
        for shape in found:
            if shape.pp == 1:
                evaluate_shape(model, chip, service, shape, table)
        evaluate_staged(model, chip, service, found, table)
        apply_latency(table, model, service)
        table.seal()
        if tables is not None:
            tables.keep(key, table)
    return table


def built_table(tables: TableStore | None, key: tuple) -> ChipTable | None:
    """The table of `sweep_key` built in the command's store `tables`, if any."""
    return tables.get(key) if tables is not None else None


def keep_table(tables: TableStore | None, key: tuple, table: ChipTable) -> None:
    """Keep a table built in a worker (planner/candidates/parallel.py) in the command's store (the
    table's own store from then on: the worker's went with its job)."""
    if tables is not None:
        table.tables = tables
        tables.keep(key, table)


def has_latency_target(service: ServiceSpec) -> bool:
    return service.tpot_ms is not None or service.ttft_ms is not None or service.workload is not None


def apply_latency(table: ChipTable, model: ModelGraph, service: ServiceSpec) -> None:
    if has_latency_target(service):
        from planner.candidates import latency  # the step model is priced only when a target asks for it

        latency.cap_rows(table, model, service)
