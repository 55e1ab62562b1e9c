"""A scenario's services planned together over one inventory (issue: scenario files).

Each service's candidates come from the same oracle and ranking as `plan` (planner/candidates/table.py,
planner/search/cpsat.py `options`); the CP-SAT model is `cpsat.build` over all services at once, so
their pools draw on the same GPUs of each chip, plus node packing: an instance never straddles
nodes unless it is larger than a node, when it takes whole nodes. Minimises the total cost (then
GPUs, headroom, rank, as `plan` does).

When the inventory cannot serve every service, a second model lets services go unserved, serves
as many as it can at the lowest cost, and the report names the services left short and what they
would take on their own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ortools.sat.python import cp_model

from planner.candidates.shapes import ChipTable, replica_cap
from planner.candidates.table import candidate_table, priced_chip
from planner.request import PoolLimits, ServiceSpec
from planner.scenario import Scenario, Service
from planner.search import cpsat


@dataclass
class Prepared:
    """One service ready for the solver: its spec, limits and ranked options over its chips."""

    name: str
    spec: ServiceSpec
    limits: PoolLimits
    tables: list[ChipTable]
    options: list[cpsat.Option]
    node: dict[str, int]
    own_cost: float | None  # USD/hour of its cheapest pool on its own, the stock's replica caps aside
    sized: dict | None = None  # service targets: (chip id, row) -> planner.candidates.slo.Sizing


def _stock(scenario: Scenario, chip: str) -> int | None:
    stock = scenario.inventory.get(chip)
    return stock.gpus if stock else None


def prepare(scenario: Scenario, service: Service) -> Prepared:
    """The service's candidate tables (one per chip) and its options, each capped by the
    chip's stock as `plan --max-gpus` would cap it."""
    spec = scenario.service_spec(service)
    limits = scenario.limits(service)
    tables, node = [], {}
    for chip_id in limits.chips:
        stock = scenario.inventory.get(chip_id)
        chip = priced_chip(chip_id, limits)
        per_node = (stock.gpus_per_node if stock and stock.gpus_per_node else None) or chip.gpus_per_node
        node[chip.id] = per_node
        chip_limits = limits.model_copy(update={"chips": (chip_id,), "gpus_per_node": per_node,
                                                "max_gpus": _stock(scenario, chip_id) or limits.max_gpus})
        tables.append(candidate_table(spec, chip, chip_limits))
    sized = None
    if spec.slo is not None and spec.serving != "disagg":
        from planner import defaults
        from planner.candidates import slo  # the serving simulator runs only when targets ask for it
        from pricing.graph import load_model

        keep = 1 + defaults.value("report.alternatives")
        sized = slo.size_tables(load_model(spec.model, spec.quantization), tables, spec, limits, keep)
    opts = (cpsat.options(tables, spec, limits.model_copy(update={"max_gpus": None}), sized)
            if spec.serving != "disagg" else [])
    capped = []
    for o in opts:
        stock = _stock(scenario, o.row.chip)
        cap = replica_cap(o.row.gpus, node[o.row.chip], stock)
        if cap is None:
            capped.append(o)
        elif cap >= o.rmin:
            capped.append(replace(o, rmax=cap))
    if spec.serving != "agg":  # prefill × decode pairs, after the aggregated options in the tie-break
        from planner.search import disagg

        pairs, _ = disagg.fleet_options(spec, limits, {c: _stock(scenario, c) for c in limits.chips}, len(capped),
                                        node)
        opts, capped = opts + pairs, capped + pairs
    own = min((o.cost * o.rmin for o in opts), default=None)
    return Prepared(service.name, spec, limits, tables, capped, node, own, sized)


def _add_node_packing(pm: cpsat.PoolModel, services: list[Prepared], scenario: Scenario) -> None:
    """Instances larger than a node take whole nodes; the rest share nodes (power-of-two sizes
    pack a node exactly), so whole nodes of large instances plus the GPUs of small ones fit."""
    for chip, stock in scenario.inventory.items():
        if stock.gpus is None:
            continue
        node = next((p.node[chip] for p in services if chip in p.node), None)
        if node is None:
            continue
        big, small = [], []
        for p, r in zip(services, pm.r, strict=True):
            for o, ri in zip(p.options, r, strict=True):
                for gpus, count in o.row.instances(chip):
                    if gpus > node:
                        big.append(-(-gpus // node) * count * ri)
                    else:
                        small.append(gpus * count * ri)
        if big:
            pm.model.add(sum(big) <= stock.gpus // node)
            pm.model.add(node * sum(big) + sum(small) <= stock.gpus)


def _relaxed(prepared: list[Prepared], scenario: Scenario) -> tuple[list[int], list]:
    """Serve as many services as the inventory allows (then at the lowest cost): which are short."""
    m = cp_model.CpModel()
    served, picks_vars = [], []
    cost = 0
    for s, p in enumerate(prepared):
        x = [m.new_bool_var(f"x{s}_{i}") for i in range(len(p.options))]
        r = [m.new_int_var(0, o.rmax, f"r{s}_{i}") for i, o in enumerate(p.options)]
        for o, xi, ri in zip(p.options, x, r, strict=True):
            m.add(ri >= o.rmin * xi)
            m.add(ri <= o.rmax * xi)
        m.add(sum(x) <= 1)
        served.append(sum(x))
        picks_vars.append((x, r))
        cost += sum(o.cost_units * ri for o, ri in zip(p.options, r, strict=True))
    for chip, stock in scenario.inventory.items():
        if stock.gpus is None:
            continue
        use = [o.row.gpus_on(chip) * ri for p, (x, r) in zip(prepared, picks_vars, strict=True)
               for o, ri in zip(p.options, r, strict=True) if chip in o.row.chips]
        if use:
            m.add(sum(use) <= stock.gpus)
    bound = sum(max((o.cost_units * o.rmax for o in p.options), default=0) for p in prepared) + 1
    m.maximize(bound * sum(served) - cost)
    sol = cpsat.solver()
    sol.solve(m)
    short = [s for s, (x, _) in enumerate(picks_vars) if not any(sol.boolean_value(v) for v in x)]
    return short, picks_vars


def coupled(prepared: list[Prepared], inventory: dict[str, int]) -> bool:
    """Whether the inventory couples services: a chip with a GPU limit that two services could use."""
    users: dict[str, set[int]] = {}
    for i, p in enumerate(prepared):
        for chip in {c for o in p.options for c in o.row.chips} & set(inventory):
            users.setdefault(chip, set()).add(i)
    return any(len(who) > 1 for who in users.values())


def _solve_apart(prepared: list[Prepared], scenario: Scenario, inventory: dict[str, int],
                 time_limit: float | None) -> tuple[str, list]:
    """Services the inventory does not couple are solved one at a time: the total cost (and
    every later key) is a sum of independent terms, so each service's optimum is the fleet's."""
    picks, statuses = [], []
    for p in prepared:
        pm = cpsat.build([p.options], [p.spec.required], inventory)
        _add_node_packing(pm, [p], scenario)
        sol = cpsat.solve(pm, time_limit)
        if not sol.picks:
            return sol.status, []
        picks.append(sol.picks[0])
        statuses.append(sol.status)
    return ("OPTIMAL" if all(s == "OPTIMAL" for s in statuses) else "FEASIBLE"), picks


@dataclass
class FleetSearch:
    """The outcome of a scenario's solve: each service prepared, the status, one pick per service
    (none when nothing was found), whether every service had a candidate and whether the
    inventory coupled none of them (each solved on its own)."""

    prepared: list[Prepared]
    status: str
    picks: list
    solvable: bool
    decomposed: bool
    evaluated: int


def search_fleet(scenario: Scenario, refused: set[str], time_limit: float | None = None) -> FleetSearch:
    """Prepare every service but the `refused` ones and solve them together over the inventory;
    a refused service leaves the scenario unsolvable."""
    prepared = [prepare(scenario, s) for s in scenario.services if s.name not in refused]
    unique = {id(t): t for p in prepared for t in p.tables}  # tables shared between services count once
    evaluated = sum(t.evaluated for t in unique.values())
    inventory = {c: s.gpus for c, s in scenario.inventory.items() if s.gpus is not None}
    status, picks = "INFEASIBLE", []
    solvable = not refused and all(p.options for p in prepared)  # every service has a candidate
    decomposed = solvable and not coupled(prepared, inventory)
    if decomposed:
        status, picks = _solve_apart(prepared, scenario, inventory, time_limit)
    elif solvable:
        pm = cpsat.build([p.options for p in prepared], [p.spec.required for p in prepared], inventory)
        _add_node_packing(pm, prepared, scenario)
        sol = cpsat.solve(pm, time_limit)
        status, picks = sol.status, sol.picks
    return FleetSearch(prepared, status, picks, solvable, decomposed, evaluated)


def unserved(prepared: list[Prepared], scenario: Scenario) -> list[int]:
    """The services the inventory cannot serve beside the others (`_relaxed`)."""
    return _relaxed(prepared, scenario)[0]
