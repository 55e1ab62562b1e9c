"""The search: choose, for each service, one candidate instance and its replica count, at the
lowest cost, with OR-Tools CP-SAT (chips-and-solver.md §2).

Three stages, as Google's samples lay them out: `build` the model from precomputed integer
tables (the oracle's rows, their replica bounds and costs), `solve` it with explicit
parameters (one worker, deterministic and time-bounded), and read the solution into plain
data. The model holds no arithmetic Python could do first.

Model, for services s and their candidate rows i (one row per instance shape, see
`ChipTable.dominant`):

    x[s,i] ∈ {0,1}, exactly one per service          the instance configuration
    r[s,i] = rmin[s,i] · x[s,i]                      its replica count: the fewest that reach the target
                                                      (more only cost more: submodels.py PoolChoice)
    Σ_i concurrency[s,i] · r[s,i] ≥ required[s]       the target (with headroom)
    Σ_{s,i on chip c} gpus[s,i] · r[s,i] + spare[c] · u[c] ≤ inventory[c]
                                                      shared GPUs (--max-gpus), less the spare nodes'
                                                      GPUs (--spare, N+1) of a chip in use:
    x[s,i] ⇒ u[c] for every chip c the row takes GPUs on      u[c] ∈ {0,1}

Objective, lexicographic: the lowest cost per hour, then the fewest GPUs, then the most
requests held (headroom), then the candidate's rank: the larger token budget, then the lower
utilization, then the smaller tp, dp, expert parallel off, the smaller dcp, then the order of
--kv-cache-dtype and --chip (summed over services, service s weighted s + 1, so that services
with the same options do not tie). Solved in two stages (§2.2 item 7a), each folding two keys into
one integer (item 7b) with a weight above the range of the second key: (cost, GPUs), then,
holding that optimum, (requests held, rank). Two stages keep the integers far below 2^63 even
for pools of thousands of GPUs; the rank makes the optimum unique, so the answer does not
depend on the solver's search order.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from planner.candidates import latency
from planner.candidates.service import ResolvedService
from planner.candidates.shapes import ChipTable, Row, Shape, cheapest_pool, pool_gpus, replica_cap
from planner.candidates.table import (
    candidate_table,
    evaluate_shape,
    has_latency_target,
    priced_chip,
    stage_within,
    start_table,
)
from planner.defaults import View
from planner.limits import price_units
from planner.progress import stage
from planner.request import PoolLimits, ServiceSpec
from planner.search.staged import Budget, Stage, solve_lexicographic
from planner.search.staged import ImpossibleSolve as ImpossibleSolve  # re-exported: callers catch it here
from planner.search.status import STAGES, StageStatus
from planner.search.submodels import Inventory, PoolChoice
from pricing.errors import mention
from pricing.units import cdiv

if TYPE_CHECKING:  # pragma: no cover  (OR-Tools is imported where a model is built or solved)
    from ortools.sat.python import cp_model

INT_LIMIT = 2**62


@dataclass(frozen=True)
class Option:
    """One candidate row as a pool choice: its integer cost and replica bounds."""

    row: Row
    price: float  # USD per GPU-hour
    price_units: int  # the same, in planner/defaults.yaml solver.price_units_per_dollar
    rmin: int  # fewest replicas that reach the target
    rmax: int  # most replicas the limits allow (packing into nodes within --max-gpus)
    rank: int  # tie-break order among the service's options (0 is preferred)

    @property
    def cost_units(self) -> int:
        """One replica's cost per hour in price units (a disaggregated choice sums its two pools)."""
        return self.price_units * self.row.gpus

    @property
    def cost(self) -> float:
        """One replica's cost in USD per hour."""
        return self.price * self.row.gpus


def options(tables: list[ChipTable], service: ServiceSpec, limits: PoolLimits,
            sized: dict | None, reads: View) -> list[Option]:
    """The service's options across chips, ranked for the tie-break; rows whose replica cap
    cannot reach the target are dropped (they are reported by the explanation instead). With
    service targets, `sized` (planner/candidates/slo.py) gives each row's fewest replicas at the
    rate; a row it did not size, or sized to none, is no option."""
    need = service.required
    kv_order = {kv: i for i, kv in enumerate(service.kv_cache_dtypes)}
    found = []
    for chip_order, table in enumerate(tables):
        price = table.chip.price_per_gpu_hour
        for row in table.dominant():
            if service.slo is not None:
                sizing = (sized or {}).get((table.chip.id, row))
                if sizing is None or not sizing.replicas:
                    continue
                rmin = max(cdiv(need, row.concurrency), sizing.replicas)
            else:
                rmin = max(cdiv(need, row.concurrency), latency.replicas_for_rate(table, row, service))
            cap = replica_cap(row.gpus, table.gpus_per_node, pool_gpus(limits.max_gpus, table.gpus_per_node,
                                                                         limits.spare))
            if cap is not None and cap < rmin:
                continue
            key = (-row.max_num_batched_tokens, row.gpu_memory_utilization, row.shape.pp, row.shape.tp, row.shape.dp,
                   row.shape.ep, row.shape.dcp, kv_order[row.shape.kv_cache_dtype], chip_order)
            found.append((key, row, price, price_units(price, reads), rmin, rmin if cap is None else cap))
    found.sort(key=lambda f: f[0])
    return [Option(row, price, pu, rmin, rmax, rank) for rank, (_, row, price, pu, rmin, rmax) in enumerate(found)]


@dataclass
class PoolModel:
    """The CP-SAT model of one or more services: one PoolChoice per service (planner/search/submodels.py),
    their shared Inventory, any coupling a caller composes in (`build`'s `coupling`), and the two stages
    of the objective: `primary` (cost, then GPUs) and `secondary` (headroom, then rank). `start`: the
    first stage's hint, one option index per service."""

    model: cp_model.CpModel
    pools: list[PoolChoice]
    primary: cp_model.LinearExpr | int = 0
    secondary: cp_model.LinearExpr | int = 0
    weights: tuple[int, int] = (1, 1)  # (w_cost, w_held): the folds of `_weights`
    used: dict[str, cp_model.IntVar] = field(default_factory=dict)  # chip -> u[c], whether a pool takes GPUs on it
    start: list[int] | None = None
    reads: View | None = None  # the defaults its stages and solves read (a Reads records them); `build`'s

    @property
    def services(self) -> list[list[Option]]:
        return [pool.options for pool in self.pools]

    @property
    def x(self) -> list[list[cp_model.IntVar]]:
        return [pool.x for pool in self.pools]

    @property
    def r(self) -> list[list[cp_model.LinearExpr]]:
        return [pool.r for pool in self.pools]

    def stages(self) -> list[Stage]:
        """The lexicographic stages: (cost, then GPUs), then (requests held, then rank), each folded
        into one integer and read back into its key (`_weights`)."""
        w_cost, w_held = self.weights
        units = self.reads.value("solver.price_units_per_dollar")

        def cost(objective: int, bound: int) -> tuple[float, float]:  # primary = w_cost · cost + GPUs
            return (objective // w_cost) / units, (max(bound, 0) // w_cost) / units

        def held(objective: int, bound: int) -> tuple[float, float]:  # secondary = ranks − w_held · held
            return -(objective // w_held), (w_held - 1 - bound) // w_held

        return [Stage(STAGES[0], self.primary, cost), Stage(STAGES[1], self.secondary, held, larger_is_better=True)]

    def forbid(self, service: int, index: int) -> None:
        """Leave the service's option `index` out of later solves (an alternative's re-solve)."""
        self.model.add(self.pools[service].x[index] == 0)


def build(services: list[list[Option]], required: list[int], inventory: dict[str, int] | None = None,
          spare: dict[str, int] | None = None, coupling: Callable | None = None,
          start: list[int] | None = None, *, reads: View) -> PoolModel:
    """The model: one configuration and a replica count per service, the target, shared GPUs; on a
    chip with an inventory, `spare[c]` GPUs (its spare nodes') come out of it when the chip is used.
    `coupling(model, pools, used)` adds a caller's submodel over the pools (a scenario's NodePacking)."""
    from ortools.sat.python import cp_model  # OR-Tools is imported when a model is built (bench/bench_cli.py)
    m = cp_model.CpModel()
    pools = [PoolChoice(m, opts, s, required[s]) for s, opts in enumerate(services)]
    used = Inventory(m, pools, inventory, spare).used
    if coupling is not None:
        coupling(m, pools, used)
    w_cost, w_held = _weights(services)
    primary = w_cost * sum(p.cost for p in pools) + sum(p.gpus for p in pools)
    secondary = sum((s + 1) * p.rank for s, p in enumerate(pools)) - w_held * sum(p.held for p in pools)
    return PoolModel(m, pools, primary, secondary, (w_cost, w_held), used, start, reads)


def _weights(services: list[list[Option]]) -> tuple[int, int]:
    """Weights that fold two keys into one integer: each exceeds the range of the key after it
    (cost over GPUs in the primary stage, requests held over rank in the secondary). The rank key
    weighs service s (from 0) by s + 1, so that services with the same options tie no more: the
    later service takes the better-ranked option (one service: the rank itself)."""
    gpus_range = sum(max((o.row.gpus * o.rmax for o in opts), default=0) for opts in services) + 1
    cost_range = sum(max((o.cost_units * o.rmax for o in opts), default=0) for opts in services) + 1
    held_range = sum(max((o.row.concurrency * o.rmax for o in opts), default=0) for opts in services) + 1
    rank_range = sum((s + 1) * max((o.rank + 1 for o in opts), default=0) for s, opts in enumerate(services)) + 1
    if cost_range * (gpus_range + 1) >= INT_LIMIT or held_range * (rank_range + 1) >= INT_LIMIT:
        raise OverflowError(f"the objective exceeds 2^62: lower {mention('max_gpus')} or the concurrency")
    return gpus_range + 1, rank_range + 1


@dataclass(frozen=True)
class Solution:
    status: str
    picks: list[tuple[int, Option, int]]  # per service: the chosen option's index, the option, its replicas
    stages: list[StageStatus] = field(default_factory=list)


Deadline = Budget  # the name report/ and older callers use: the budget one search's solves share


def time_limit_of(time_limit: float | None, reads: View) -> float:
    """The solver's bound: --time-limit, or planner/defaults.yaml solver.max_time_in_seconds."""
    return time_limit or reads.value("solver.max_time_in_seconds")


def no_plan_in_time(time_limit: float | None, reads: View) -> str:
    """What a search the time limit ended before any plan says (`plan` and `plan scenario` add their tail)."""
    return f"the solver found no plan within its {time_limit_of(time_limit, reads):g} s time limit"


def solve(pm: PoolModel, time_limit: float | None = None, deadline: Budget | None = None) -> Solution:
    """Solve lexicographically (planner/search/staged.py `solve_lexicographic`, the stages of
    `PoolModel.stages`) and read the solution into plain data (no picks when nothing is feasible).
    The stages share one budget (`deadline`, else one of `time_limit`); the first starts from
    `pm.start` when given."""
    budget = deadline or Budget(time_limit, pm.reads)
    if pm.start is not None:
        for i, pool in zip(pm.start, pm.pools, strict=True):
            for j, xj in enumerate(pool.x):
                pm.model.add_hint(xj, j == i)
    solved = solve_lexicographic(pm.model, pm.stages(), budget)
    if solved.solver is None:
        return Solution(solved.status, [], solved.stages)
    return Solution(solved.status, [pool.picked(solved) for pool in pm.pools], solved.stages)


@dataclass
class Search:
    """The outcome of a single-service search: the best pick and the alternatives, in order."""

    tables: list[ChipTable]
    options: list[Option]
    ranked: list[tuple[Option, int]]
    status: str
    evaluated: int
    seconds: float
    sized: dict = field(default_factory=dict)  # (chip id, row) -> planner.candidates.slo.Sizing
    stages: list[StageStatus] = field(default_factory=list)  # what each stage of the best pool's solve proved


def tables_for(resolved: ResolvedService, keep: int | None = None) -> list[ChipTable]:
    """The oracle's candidate table of the service on each allowed chip (of its limits), in --chip order.

    With `keep`, shapes are evaluated across chips in order of one instance's cost, and a shape
    whose single instance costs more than the `keep`-th cheapest pool found so far is skipped: its
    pool costs at least that much, so it can be neither the best nor one of the `keep` − 1
    alternatives (the ranking is by cost first). Without `keep`, every shape is evaluated."""
    service, limits = resolved.spec, resolved.limits
    seen, chips = set(), []
    for chip_id in limits.chips:
        chip = priced_chip(chip_id, limits, resolved.registry)
        if chip.id not in seen:
            seen.add(chip.id)
            chips.append(chip)
    if keep is None:
        tables = []
        for chip in chips:
            stage(resolved.tables,
                  f"sweeping instance shapes on {chip.id}; {sum(t.evaluated for t in tables):,} candidates evaluated")
            tables.append(candidate_table(resolved, chip, limits))
        return tables
    started = [start_table(resolved, chip, limits) for chip in chips]
    order = sorted(((shape.gpus * chip.price_per_gpu_hour, i, shape) for i, (chip, (_, _, found))
                    in enumerate(zip(chips, started, strict=True)) for shape in found if shape.pp == 1),
                   key=lambda o: (o[0], o[1]))
    need = service.required
    pools: list[float] = []  # the cheapest pool of each shape evaluated so far

    def judge(i: int, shape: Shape) -> None:
        """Sweep `shape` on chip `i` unless one instance costs more than the keep-th cheapest pool."""
        model, table, _ = started[i]
        if len(pools) >= keep and shape.gpus * chips[i].price_per_gpu_hour > sorted(pools)[keep - 1]:
            table.skipped += 1
            return
        before = len(table.rows)
        stage(resolved.tables,
              f"sweeping instance shapes: {sum(t.evaluated for _, t, _ in started):,} candidates evaluated")
        evaluate_shape(model, chips[i], service, shape, table)
        cheapest = cheapest_pool(table.rows[before:], need, table.gpus_per_node,
                                 pool_gpus(limits.max_gpus, table.gpus_per_node, limits.spare),
                                 chips[i].price_per_gpu_hour)
        if cheapest is not None:
            pools.append(cheapest)

    for _, i, shape in order:
        judge(i, shape)
    for i, (chip, (model, table, found)) in enumerate(zip(chips, started, strict=True)):
        stage_within(model, chip, service, found, table, lambda shape, i=i: judge(i, shape))
    return [table for _, table, _ in started]


def search(resolved: ResolvedService, alternatives: int | None = None, budget: Budget | None = None) -> Search:
    """Oracle sweep, then CP-SAT: the best pool, then the best pools of the next `alternatives`
    shapes (default: the planner's report.alternatives; each re-solve forbids the shapes already
    reported), every solve within one `budget` (default: one of the service's --time-limit; a
    command that runs several searches may share one)."""
    start = time.perf_counter()
    service, limits = resolved.spec, resolved.limits
    reads = resolved.defaults
    wanted = 1 + (alternatives if alternatives is not None else reads.value("report.alternatives"))
    stage(resolved.tables, f"sweeping instance shapes on {', '.join(limits.chips)}")
    # latency targets cap rows after the sweep: the cost bound, which reads rows as they come, is off then
    tables = tables_for(resolved, keep=None if has_latency_target(service) else wanted)
    sized = {}
    if service.slo is not None:
        from planner.candidates import slo  # the serving simulator runs only when targets ask for it

        stage(resolved.tables,
              f"{sum(t.evaluated for t in tables):,} candidates evaluated; simulating the service targets")
        sized = slo.size_tables(resolved.graph, tables, service, limits, wanted, reads)
    opts = options(tables, service, limits, sized, reads)
    evaluated = sum(t.evaluated for t in tables)
    if not opts:
        return Search(tables, opts, [], "INFEASIBLE", evaluated, time.perf_counter() - start, sized)
    inventory = {t.chip.id: limits.max_gpus for t in tables} if limits.max_gpus is not None else None
    spare = {t.chip.id: limits.spare * t.gpus_per_node for t in tables}  # --spare: whole nodes kept free
    pm = build([opts], [service.required], inventory, spare, reads=reads)
    ranked: list[tuple[Option, int]] = []
    status, stages = "INFEASIBLE", []
    budget = budget or Budget(limits.time_limit, reads)  # the best pool and its alternatives share --time-limit
    for n in range(min(wanted, len(opts))):
        stage(resolved.tables,
              f"{evaluated:,} candidates evaluated; CP-SAT: pool {n + 1} of {min(wanted, len(opts))}")
        sol = solve(pm, deadline=budget)
        if n == 0:
            status, stages = sol.status, sol.stages
        if not sol.picks:
            break
        index, option, replicas = sol.picks[0]
        ranked.append((option, replicas))
        pm.forbid(0, index)
    return Search(tables, opts, ranked, status, evaluated, time.perf_counter() - start, sized, stages)
