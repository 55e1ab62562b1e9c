"""A scenario's services planned together over one inventory (issue: scenario files).

Each service's candidates come from the same oracle and ranking as `plan` (planner/candidates/table.py,
planner/search/cpsat.py `options`); the CP-SAT model is `cpsat.build` over all services at once, so
their pools draw on the same GPUs of each chip, plus node packing: an instance never straddles
nodes unless it is larger than a node, when it takes whole nodes; and the scenario's `spare` whole
nodes of every chip its pools use (N+1 capacity) come out of that chip's inventory. Minimises the
total cost (then GPUs, headroom, rank, as `plan` does).

When the inventory cannot serve every service, a second model lets services go unserved, serves
as many as it can at the lowest cost, and the report names the services left short and what they
would take on their own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from planner.candidates.parallel import build_tables, fork_pool, use_workers, workers
from planner.candidates.service import ResolvedService, defaults_of, store_of
from planner.candidates.shapes import ChipTable, cheapest_pool, pool_gpus, replica_cap
from planner.candidates.table import (
    candidate_table,
    evaluate_shape,
    has_latency_target,
    priced_chip,
    stage_within,
    start_table,
)
from planner.limits import price_units
from planner.progress import stage
from planner.request import PoolLimits, ServiceSpec
from planner.scenario import Scenario
from planner.search import cpsat
from planner.search.staged import Budget, Stage, solve_lexicographic
from planner.search.status import STAGES, StageStatus
from planner.search.submodels import Inventory, NodePacking, PoolChoice
from planner.search.sweep_time import share, sweep_within, whole_limit
from pricing.chips import Chip


@dataclass
class Prepared:
    """One service ready for the solver: the service resolved (its spec, limits, graph and context
    length) and its ranked options over its chips."""

    resolved: ResolvedService
    tables: list[ChipTable]
    options: list[cpsat.Option]
    node: dict[str, int]
    own_cost: float | None  # USD/hour of its cheapest pool on its own, the stock's replica caps aside
    sized: dict | None = None  # service targets: (chip id, row) -> planner.candidates.slo.Sizing

    @property
    def name(self) -> str:
        return self.resolved.name

    @property
    def spec(self) -> ServiceSpec:
        return self.resolved.spec

    @property
    def limits(self) -> PoolLimits:
        return self.resolved.limits


def _stock(scenario: Scenario, chip: str) -> int | None:
    stock = scenario.inventory.get(chip)
    return stock.gpus if stock else None


def _pool_stock(scenario: Scenario, chip: str, node: int) -> int | None:
    """The chip's GPUs left to the pools once the scenario's spare nodes are kept (None: no inventory)."""
    return pool_gpus(_stock(scenario, chip), node, scenario.spare)


def spare_gpus(scenario: Scenario, prepared: list[Prepared]) -> dict[str, int]:
    """GPUs of each chip's spare nodes (the scenario's `spare` × its node size)."""
    out = {}
    for chip in scenario.inventory:
        node = next((p.node[chip] for p in prepared if chip in p.node), None)
        if node is not None and scenario.spare:
            out[chip] = scenario.spare * node
    return out


def table_requests(scenario: Scenario, service: ResolvedService) -> list[tuple[ResolvedService, Chip, PoolLimits]]:
    """What the service's candidate table on each of its chips is asked with: the service, the chip
    at the review's price, and limits of that chip alone (its node size, its stock as --max-gpus)."""
    limits = service.limits
    out = []
    for chip_id in limits.chips:
        stock = scenario.inventory.get(chip_id)
        chip = priced_chip(chip_id, limits, service.registry)
        per_node = (stock.gpus_per_node if stock and stock.gpus_per_node else None) or chip.gpus_per_node
        out.append((service, chip, limits.model_copy(update={"chips": (chip_id,), "gpus_per_node": per_node,
                                                          "max_gpus": _stock(scenario, chip_id) or limits.max_gpus})))
    return out


def bounded_tables(scenario: Scenario, service: ResolvedService) -> list[ChipTable] | None:
    """The service's candidate tables swept only as far as its own optimum can reach (None when its
    rows change after the sweep: latency or service targets, a disaggregated role).

    Its shapes are evaluated across its chips in order of one instance's cost in the solver's price
    units, and a shape whose one instance costs more than the cheapest pool found so far within the
    chips' stock (the replica caps `prepare` gives its options) is skipped: its pool costs more, so
    it is none of the options `own_optimum` can pick, on any of its keys (cost first). Tables of the
    service's own, unshared; `search_fleet` takes them only when the optima they give fit the
    inventory together, which makes the answer exact and proven."""
    spec = service.spec
    if has_latency_target(spec) or spec.slo is not None or spec.serving != "agg":
        return None
    requests = table_requests(scenario, service)
    started = [start_table(service, chip, chip_limits) for _, chip, chip_limits in requests]
    units = [price_units(chip.price_per_gpu_hour, service.defaults.unrecorded) for _, chip, _ in requests]
    stocks = [_pool_stock(scenario, chip.id, limits.gpus_per_node) for _, chip, limits in requests]
    cheapest = None  # the cheapest pool within the stock found so far, in price units

    def judge(i: int, shape) -> None:
        """Sweep `shape` on chip `i` unless one instance costs more than the cheapest pool so far."""
        nonlocal cheapest
        (_, chip, limits), (model, table, _) = requests[i], started[i]
        if cheapest is not None and shape.gpus * units[i] > cheapest:
            table.skipped += 1
            return
        before = len(table.rows)
        evaluate_shape(model, chip, spec, shape, table)
        pool = cheapest_pool(table.rows[before:], spec.required, limits.gpus_per_node, stocks[i], units[i])
        if pool is not None and (cheapest is None or pool < cheapest):
            cheapest = pool

    for _, i, shape in sorted((shape.gpus * units[i], i, shape) for i, (_, _, found) in enumerate(started)
                              for shape in found if shape.pp == 1):
        judge(i, shape)
    for i, ((_, chip, _), (model, table, found)) in enumerate(zip(requests, started, strict=True)):
        stage_within(model, chip, spec, found, table, lambda shape, i=i: judge(i, shape))
    for _, table, found in started:  # in the whole sweep's order (single-stage shapes, then staged; each
        place = {sh: (sh.pp > 1, k) for k, sh in enumerate(found)}  # in the shapes' order): ties read alike
        table.verdicts.sort(key=lambda v: place[v.shape])
        table.rows.sort(key=lambda r: place[r.shape])
    return [table.seal() for _, table, _ in started]


def prepare(scenario: Scenario, service: ResolvedService, tables: list[ChipTable] | None = None) -> Prepared:
    """The service's candidate tables (one per chip; `tables` when given, in its chips' order) and its
    options, each capped by the chip's stock and by the service's own max_gpus, as `plan --max-gpus`
    would cap it."""
    spec, limits = service.spec, service.limits
    given, tables, node = tables, [], {}
    for i, (asked, chip, chip_limits) in enumerate(table_requests(scenario, service)):
        node[chip.id] = chip_limits.gpus_per_node
        tables.append(given[i] if given is not None else candidate_table(asked, chip, chip_limits))
    sized = None
    unrecorded = service.defaults.unrecorded  # a fleet's result lists no planner defaults
    if spec.slo is not None and spec.serving != "disagg":
        from planner.candidates import slo  # the serving simulator runs only when targets ask for it

        keep = 1 + unrecorded.value("report.alternatives")
        sized = slo.size_tables(service.graph, tables, spec, limits, keep, unrecorded)
    opts = (cpsat.options(tables, spec, limits.model_copy(update={"max_gpus": None}), sized, unrecorded)
            if spec.serving != "disagg" else [])
    capped = []
    for o in opts:
        stock = _pool_stock(scenario, o.row.chip, node[o.row.chip])
        caps = [c for c in (replica_cap(o.row.gpus, node[o.row.chip], stock),
                            replica_cap(o.row.gpus, node[o.row.chip], limits.max_gpus)) if c is not None]
        cap = min(caps, default=None)  # the chip's stock, and the service's own max_gpus (plan --max-gpus)
        if cap is None:
            capped.append(o)
        elif cap >= o.rmin:
            capped.append(replace(o, rmax=cap))
    if spec.serving != "agg":  # prefill × decode pairs, after the aggregated options in the tie-break
        from planner.search import disagg

        stock = {c: _pool_stock(scenario, c, node[priced_chip(c, limits, service.registry).id]) for c in limits.chips}
        pairs, _ = disagg.fleet_options(service, stock, len(capped), node)
        opts, capped = opts + pairs, capped + pairs
    own = min((o.cost * o.rmin for o in opts), default=None)
    return Prepared(service, tables, capped, node, own, sized)


def node_stock(scenario: Scenario, prepared: list[Prepared]) -> dict[str, tuple[int, int]]:
    """(GPUs, GPUs per node) of every chip of the inventory with a GPU count and a node size."""
    out = {}
    for chip, stock in scenario.inventory.items():
        node = next((p.node[chip] for p in prepared if chip in p.node), None)
        if stock.gpus is not None and node is not None:
            out[chip] = (stock.gpus, node)
    return out


def undominated(options: list[cpsat.Option], nodes: dict[str, int]) -> list[int]:
    """The indices of a service's options that none of its other options dominates, in order.

    Option i dominates option j when it takes GPUs on the same chips and no more of what the
    Inventory and the NodePacking count on any of them (GPUs; whole nodes of instances larger than
    a node, `nodes[chip]` GPUs; GPUs of smaller ones), and is better on the search's keys (cost,
    then GPUs, then requests held, then rank, every option at its fewest replicas). Swapping j for i
    keeps any solution feasible and makes it strictly better, so no optimum takes j: the coupled
    model over the rest has the same optimum and is far smaller (a 500-service review keeps about
    4 of its 90 options a service), arithmetic done in Python first (chips-and-solver.md §2.4)."""
    def use(o: cpsat.Option) -> tuple[int, ...]:
        out: list[int] = []
        for chip in o.row.chips:
            node = nodes.get(chip)
            big = small = 0
            for gpus, count in o.row.instances(chip):
                if node is not None and gpus > node:
                    big += -(-gpus // node) * count * o.rmin
                else:
                    small += gpus * count * o.rmin
            out += [o.row.gpus_on(chip) * o.rmin, big, small]
        return tuple(out)

    fronts: dict[tuple[str, ...], list[tuple[int, ...]]] = {}
    kept = []
    for i in sorted(range(len(options)), key=lambda i: _keys(options[i])):  # the better first
        mine, front = use(options[i]), fronts.setdefault(tuple(options[i].row.chips), [])
        if any(all(a <= b for a, b in zip(other, mine, strict=True)) for other in front):
            continue
        front.append(mine)
        kept.append(i)
    return sorted(kept)


def _keys(o: cpsat.Option) -> tuple[int, int, int, int]:
    """An option's place on the search's keys at its fewest replicas: cost, GPUs, most held, rank."""
    return o.cost_units * o.rmin, o.row.gpus * o.rmin, -o.row.concurrency * o.rmin, o.rank


@dataclass
class FleetModel:
    """The scenario's coupled model and, per service, the indices (into its options) of the
    options the model holds (`undominated`)."""

    pool: cpsat.PoolModel
    kept: list[list[int]]

    def solve(self, budget: Budget) -> cpsat.Solution:
        """The staged solve, its picks indexed into each service's whole option list."""
        sol = cpsat.solve(self.pool, deadline=budget)
        if not sol.picks:  # no plan
            return sol
        picks = [(kept[i], o, r) for kept, (i, o, r) in zip(self.kept, sol.picks, strict=True)]
        return cpsat.Solution(sol.status, picks, sol.stages)


def fleet_model(prepared: list[Prepared], scenario: Scenario,
                start: list[tuple[int, cpsat.Option, int]] | None = None) -> FleetModel:
    """The scenario's coupled model: `cpsat.build` over every service's undominated options (their
    PoolChoices and the shared Inventory, less the spare nodes of a chip in use), composed with the
    scenario's NodePacking; started from `start` (the services' own optima, never dominated) when
    given."""
    inventory = {c: s.gpus for c, s in scenario.inventory.items() if s.gpus is not None}
    stock = node_stock(scenario, prepared)
    nodes = {chip: node for chip, (_, node) in stock.items()}
    kept = [undominated(p.options, nodes) for p in prepared]

    def packing(m, pools, used) -> None:
        NodePacking(m, pools, stock, scenario.spare, used)

    pool = cpsat.build([[p.options[i] for i in k] for p, k in zip(prepared, kept, strict=True)],
                       [p.spec.required for p in prepared], inventory, spare_gpus(scenario, prepared),
                       coupling=packing,
                       start=None if start is None else [k.index(i) for k, (i, _, _) in zip(kept, start, strict=True)],
                       reads=defaults_of([p.resolved for p in prepared]))
    return FleetModel(pool, kept)


def _relaxed(prepared: list[Prepared], scenario: Scenario, budget: Budget | None = None) -> list[int] | None:
    """Serve as many services as the inventory allows (then at the lowest cost), within `budget`:
    which are short (None when the budget ends before any answer)."""
    from ortools.sat.python import cp_model  # OR-Tools is imported when a model is built (bench/bench_cli.py)
    m = cp_model.CpModel()
    nodes = {chip: node for chip, (_, node) in node_stock(scenario, prepared).items()}
    pools = [PoolChoice(m, [p.options[i] for i in undominated(p.options, nodes)], s, optional=True)
             for s, p in enumerate(prepared)]
    inventory = {c: s.gpus for c, s in scenario.inventory.items() if s.gpus is not None}
    Inventory(m, pools, inventory, spare_gpus(scenario, prepared))
    bound = sum(max((o.cost_units * o.rmax for o in p.options), default=0) for p in prepared) + 1
    stage = Stage("services served, then cost", sum(p.cost for p in pools) - bound * sum(p.served for p in pools))
    solved = solve_lexicographic(m, [stage], budget or Budget(None, defaults_of([p.resolved for p in prepared])))
    if solved.solver is None:
        return None
    return [s for s, pool in enumerate(pools) if pool.picked(solved) is None]


def own_optimum(p: Prepared) -> tuple[int, cpsat.Option, int] | None:
    """The service's optimum on its own, within its chips' stock (its options' replica caps):
    every option at its fewest replicas (more only costs more), the least by the search's keys,
    cost, then GPUs, then most requests held, then rank. Exact by enumeration, so proven."""
    units = [(o.cost_units * o.rmin, o.row.gpus * o.rmin, -o.row.concurrency * o.rmin, o.rank, i)
             for i, o in enumerate(p.options)]
    if not units:
        return None
    *_, i = min(units)
    return i, p.options[i], p.options[i].rmin


def fits(prepared: list[Prepared], picks: list[tuple[int, cpsat.Option, int]], scenario: Scenario) -> bool:
    """Whether the picks fit the inventory together: on each chip with a GPU count, the GPUs, and
    the node packing `_add_node_packing` states (whole nodes for instances larger than a node),
    beside the spare whole nodes of a chip the picks use."""
    for chip, stock in scenario.inventory.items():
        if stock.gpus is None:
            continue
        node = next((p.node[chip] for p in prepared if chip in p.node), None)
        big = small = 0
        for _, o, replicas in picks:
            for gpus, count in o.row.instances(chip):
                if node is not None and gpus > node:
                    big += -(-gpus // node) * count * replicas
                else:
                    small += gpus * count * replicas
        if node is None:
            if small > stock.gpus:
                return False
            continue
        spare = scenario.spare if big + small else 0
        if big + spare > stock.gpus // node or node * (big + spare) + small > stock.gpus:
            return False
    return True


def proven(picks: list[tuple[int, cpsat.Option, int]]) -> list[StageStatus]:
    """The stages of an answer proven without the solver (each service's own optimum, which fit)."""
    cost = round(sum(o.cost * r for _, o, r in picks), 4)
    held = sum(o.row.concurrency * r for _, o, r in picks)
    return [StageStatus(stage=STAGES[0], status="OPTIMAL", value=cost, bound=cost, gap=0.0),
            StageStatus(stage=STAGES[1], status="OPTIMAL", value=held, bound=held, gap=0.0)]


@dataclass
class FleetSearch:
    """The outcome of a scenario's solve: each service prepared, the status, one pick per service
    (none when nothing was found), whether every service had a candidate, whether the services'
    own optima were the answer (they fit the inventory together), and what each stage proved."""

    prepared: list[Prepared]
    status: str
    picks: list
    solvable: bool
    decomposed: bool
    evaluated: int
    stages: list[StageStatus]
    short: list[int] | None = None  # when no plan serves every service: those the inventory cannot serve beside
    # the others (`unserved`), found within the same --time-limit; None when not asked or not found in time
    swept: tuple[int, int] | None = None  # (shapes priced, shapes in all) of a sweep --time-limit bounded
    # (planner/search/sweep_time.py); None when every shape was priced
    whole_limit: float | None = None  # with `swept`: the least --time-limit that sweeps every shape


def search_fleet(scenario: Scenario, services: list[ResolvedService], refused: set[str],
                 time_limit: float | None = None, parallel_tables: bool = True, bounded: bool = False) -> FleetSearch:
    """Prepare every service (the scenario's, resolved) but the `refused` ones and solve them
    together over the inventory; a refused service leaves the scenario unsolvable.

    Each service's own optimum (`own_optimum`) is a lower bound of the fleet's on every key (the
    keys are sums over services, and the inventory only removes choices): when the optima fit the
    inventory together they are the fleet's optimum, proven without the coupled model. Otherwise
    the coupled CP-SAT model is solved, started from them (a hint). With `bounded` (one review, no
    variants to share whole tables with), each service is first swept only as far as its own
    optimum can reach (`bounded_tables`); when every service has one and they fit, that is the
    answer; otherwise every table is swept whole and the search runs as without. A given
    `time_limit` is shared by the sweep, counted in shapes, and the solver (planner/search/
    sweep_time.py `share`); a sweep it bounds prices shapes in an order set by the review and the rows
    priced, never the clock, until its share is spent (`sweep_within`), and the answer is then the
    best over the shapes priced: FEASIBLE, never OPTIMAL, and UNKNOWN, never INFEASIBLE, where the
    shapes priced give no plan (`swept` says how many)."""
    served = [s for s in services if s.name not in refused]
    store = store_of(served)
    stage(store, f"sweeping the instance shapes of {len(served):,} service{'s' if len(served) != 1 else ''}")
    requests = [r for s in served for r in table_requests(scenario, s)]
    given = share(requests, time_limit, defaults_of(services))
    if given.budget is not None:  # no decomposed attempt: its own sweep would not be counted
        sweep_within(requests, given.budget, given.pending)
    elif bounded and not refused:
        found = _bounded(scenario, served, parallel_tables)
        if found is not None:
            return found
    if parallel_tables and given.budget is None:
        build_tables(requests, store)  # in workers, for many tables
    prepared = [prepare(scenario, s) for s in served]
    unique = {id(t): t for p in prepared for t in p.tables}  # tables shared between services count once
    evaluated = sum(t.evaluated for t in unique.values())
    unpriced = sum(t.unpriced for t in unique.values())
    swept = whole = None
    if unpriced:
        priced = sum(len(t.verdicts) for t in unique.values())
        swept = (priced, priced + unpriced)
        whole = whole_limit(given.shapes, defaults_of(services))
    solvable = not refused and all(p.options for p in prepared)  # every service has a candidate
    if not solvable:
        return FleetSearch(prepared, _unproven("INFEASIBLE", swept), [], solvable, False, evaluated, [], swept=swept,
                           whole_limit=whole)
    own = [own_optimum(p) for p in prepared]
    if fits(prepared, own, scenario):
        return FleetSearch(prepared, _unproven("OPTIMAL", swept), own, solvable, True, evaluated, proven(own),
                           swept=swept, whole_limit=whole)
    stage(store, f"CP-SAT: {len(prepared):,} services together over {evaluated:,} candidates")
    # the coupled solve and, when it proves no plan, who is short share --time-limit
    budget = Budget(given.solver, defaults_of(services))
    sol = fleet_model(prepared, scenario, own).solve(budget)
    short = _relaxed(prepared, scenario, budget) if sol.status == "INFEASIBLE" and swept is None else None  # over a
    # bounded sweep no plan is UNKNOWN, not proven: who is short is not asked
    return FleetSearch(prepared, _unproven(sol.status, swept), sol.picks, solvable, False, evaluated, sol.stages,
                       short, swept, whole)


def _unproven(status: str, swept: tuple[int, int] | None) -> str:
    """The status of a search over a bounded sweep's shapes: what the solver proved holds over the
    shapes priced only, so an optimum is FEASIBLE and no plan is UNKNOWN (`swept`: None, unbounded)."""
    if swept is None:
        return status
    return {"OPTIMAL": "FEASIBLE", "INFEASIBLE": "UNKNOWN"}.get(status, status)


def _bounded(scenario: Scenario, served: list[ResolvedService], parallel: bool) -> FleetSearch | None:
    """The decomposed answer from bounded tables, or None when a service cannot be bounded, has no
    option, or the optima do not fit the inventory together. With `parallel`, many services' tables
    are swept in worker processes (planner/candidates/parallel.py `use_workers`), a model a job."""
    if parallel and use_workers(len(served), defaults_of(served)):
        shares = _model_shares(scenario, served)
        with fork_pool(workers()) as pool:
            found = {i: tables for share, out in pool.imap_unordered(_bounded_share, [(scenario, served, share)
                                                                                      for share in shares])
                     for i, tables in zip(share, out, strict=True)}
        bounded = [found[i] for i in range(len(served))]
    else:
        bounded = [bounded_tables(scenario, s) for s in served]
    prepared = []
    for s, tables in zip(served, bounded, strict=True):
        if tables is None:
            return None
        p = prepare(scenario, s, tables)
        if not p.options:
            return None
        prepared.append(p)
    own = [own_optimum(p) for p in prepared]
    if not fits(prepared, own, scenario):
        return None
    evaluated = sum(t.evaluated for p in prepared for t in p.tables)
    return FleetSearch(prepared, "OPTIMAL", own, True, True, evaluated, proven(own))


def _model_shares(scenario: Scenario, served: list[ResolvedService]) -> list[list[int]]:
    """The services' indices by model, the models with the most service chips first: one job a
    model, so that a worker's kernel memo serves all its services, dealt to the workers as they
    come free (the largest first, so that none is left alone with one at the end)."""
    by_model: dict[tuple, list[int]] = {}
    for i, s in enumerate(served):
        by_model.setdefault((s.spec.model, s.spec.quantization), []).append(i)
    return sorted(by_model.values(), key=lambda g: -sum(len(served[i].limits.chips) for i in g))


def _bounded_share(job: tuple[Scenario, list[ResolvedService], list[int]]
                   ) -> tuple[list[int], list[list[ChipTable] | None]]:
    scenario, served, share = job
    return share, [bounded_tables(scenario, served[i]) for i in share]


def unserved(prepared: list[Prepared], scenario: Scenario, found: FleetSearch | None = None) -> list[int]:
    """The services the inventory cannot serve beside the others (`_relaxed`): `found.short` when the
    search has it (solved within its --time-limit), else solved now within the default limit."""
    short = found.short if found is not None else None
    if short is None:
        short = _relaxed(prepared, scenario)
    return short or []
