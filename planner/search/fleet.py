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

import time
from dataclasses import dataclass, replace

from ortools.sat.python import cp_model
from pydantic import BaseModel, Field

from planner import defaults
from planner.candidates import latency
from planner.candidates.table import ChipTable, candidate_table, context_length, deployment, priced_chip, verify
from planner.report.binds import binding, default_max_num_seqs
from planner.report.result import PoolPlan
from planner.report.serve import node_commands, serve_command
from planner.request import PoolLimits, ServiceSpec
from planner.scenario import Scenario, Service
from planner.search import cpsat
from pricing.graph import load_model
from pricing.kernel.deployment import beyond_positions


class ServicePlan(PoolPlan):
    """The pool chosen for one service: `plan`'s pool, with the service it serves."""

    service: str
    model: str
    target: int = Field(description="concurrency asked for")


class Shortfall(BaseModel):
    """A service the result does not serve: why, in full, and in a few words for a chart label."""

    service: str
    reason: str
    brief: str = Field(description="the reason in a few words (a chart's label): 'needs 4 h100', 'beyond 40,960 "
                                   "positions'")


class ChipUse(BaseModel):
    chip: str
    gpus: int
    available: int | None
    cost_per_hour: float


class FleetResult(BaseModel):
    review: str
    variant: str = "base"
    feasible: bool
    services: list[ServicePlan]
    chips: list[ChipUse]
    cost_per_hour: float
    cost_per_month: float
    gpus: int
    short: list[Shortfall] = []
    notes: list[str] = Field(default_factory=list, description="input that had no effect, one line each")
    decomposed: bool = Field(False, description="the inventory couples no services: each was solved on its own")
    own_cost_per_hour: float | None = Field(None, description="the sum of each service's cheapest pool on its own, "
                                            "without the inventory's GPU counts: the inventory binds when the total "
                                            "exceeds it")
    solver_status: str
    candidates_evaluated: int
    seconds: float


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
    opts = cpsat.options(tables, spec, limits.model_copy(update={"max_gpus": None}))
    capped = []
    for o in opts:
        stock = _stock(scenario, o.row.chip)
        cap = cpsat.replica_cap(o.row.gpus, node[o.row.chip], stock)
        if cap is None:
            capped.append(o)
        elif cap >= o.rmin:
            capped.append(replace(o, rmax=cap))
    own = min((o.price * o.row.gpus * o.rmin for o in opts), default=None)
    return Prepared(service.name, spec, limits, tables, capped, node, own)


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
                if o.row.chip != chip:
                    continue
                if o.row.gpus > node:
                    big.append(-(-o.row.gpus // node) * ri)
                else:
                    small.append(o.row.gpus * ri)
        if big:
            pm.model.add(sum(big) <= stock.gpus // node)
            pm.model.add(node * sum(big) + sum(small) <= stock.gpus)


def _plans(prepared: list[Prepared], picks, scenario: Scenario) -> list[ServicePlan]:
    out = []
    for p, (_, option, replicas) in zip(prepared, picks, strict=True):
        row = option.row
        model = load_model(p.spec.model, p.spec.quantization)
        length = context_length(model, p.spec)
        d = deployment(row, p.spec, length)
        held = row.concurrency * replicas
        table = next(t for t in p.tables if t.chip.id == row.chip)
        kernel = verify(model, table.chip, p.spec, row)
        binds = binding(table, latency.memory_row(table, row), replicas, p.spec.required, kernel,
                        default_max_num_seqs(model, table.chip, length))
        step = latency.figures(model, table, p.spec, row, replicas)
        binds = latency.binding(table, row, p.spec, step, binds)
        out.append(ServicePlan(
            service=p.name, model=p.spec.model, chip=row.chip, gpus=row.gpus * replicas, replicas=replicas,
            gpus_per_replica=row.gpus, tensor_parallel_size=row.shape.tp, pipeline_parallel_size=row.shape.pp,
            nodes_per_replica=row.shape.nodes(p.node[row.chip]), data_parallel_size=row.shape.dp,
            enable_expert_parallel=row.shape.ep, decode_context_parallel_size=row.shape.dcp,
            gpu_memory_utilization=row.gpu_memory_utilization, max_num_batched_tokens=row.max_num_batched_tokens,
            max_num_seqs=row.max_num_seqs, max_model_len=length, kv_cache_dtype=row.shape.kv_cache_dtype,
            target=p.spec.concurrency, concurrency=held, headroom=round(held / p.spec.concurrency - 1, 4),
            headroom_percent=round((held / p.spec.concurrency - 1) * 100, 2), binds=binds,
            cost_per_hour=round(option.price * row.gpus * replicas, 4),
            price_per_gpu_hour=option.price, price_estimate=priced_chip(row.chip, p.limits).price_estimate,
            price_as_of=priced_chip(row.chip, p.limits).price_as_of,
            vllm_serve=serve_command(model.hf_id, d, p.node[row.chip], p.spec.quantization),
            vllm_serve_nodes=node_commands(model.hf_id, d, p.node[row.chip], p.spec.quantization), step=step))
    return out


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
        cost += sum(o.price_units * o.row.gpus * ri for o, ri in zip(p.options, r, strict=True))
    for chip, stock in scenario.inventory.items():
        if stock.gpus is None:
            continue
        use = [o.row.gpus * ri for p, (x, r) in zip(prepared, picks_vars, strict=True)
               for o, ri in zip(p.options, r, strict=True) if o.row.chip == chip]
        if use:
            m.add(sum(use) <= stock.gpus)
    bound = sum(max((o.price_units * o.row.gpus * o.rmax for o in p.options), default=0) for p in prepared) + 1
    m.maximize(bound * sum(served) - cost)
    sol = cpsat.solver()
    sol.solve(m)
    short = [s for s, (x, _) in enumerate(picks_vars) if not any(sol.boolean_value(v) for v in x)]
    return short, picks_vars


def _alone(p: Prepared) -> tuple[str, str]:
    """What a short service would take on its own, with no inventory limit (the oracle asked
    again without the stock caps), in full and in a few words."""
    limits = p.limits.model_copy(update={"max_gpus": None})
    tables = [candidate_table(p.spec, t.chip, limits.model_copy(update={"chips": (t.chip.id,),
                                                                        "gpus_per_node": t.gpus_per_node}))
              for t in p.tables]
    unlimited = cpsat.options(tables, p.spec, limits)
    if not unlimited:
        return ("no configuration of this service fits any allowed chip at this context length, whatever the "
                "inventory", "no chip fits")
    best = min(unlimited, key=lambda o: (o.price_units * o.row.gpus * o.rmin, o.row.gpus * o.rmin, o.rank))
    gpus = f"{best.row.gpus * best.rmin} {best.row.chip}"
    return (f"it needs {gpus} GPUs on its own ({best.rmin} × (tp {best.row.shape.tp}, dp {best.row.shape.dp}) "
            f"holding {best.row.concurrency} requests each, ${best.price * best.row.gpus * best.rmin:,.2f}/hour)",
            f"needs {gpus}")


def coupled(prepared: list[Prepared], inventory: dict[str, int]) -> bool:
    """Whether the inventory couples services: a chip with a GPU limit that two services could use."""
    users: dict[str, set[int]] = {}
    for i, p in enumerate(prepared):
        for chip in {o.row.chip for o in p.options} & set(inventory):
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


def refused_context(scenario: Scenario, service: Service) -> Shortfall | None:
    """Why vLLM would not start the service at its context length, or None: a max_model_len
    beyond the model's positions is refused before any memory is sized, on every chip."""
    spec = scenario.service_spec(service)
    model = load_model(spec.model, spec.quantization)
    problem = beyond_positions(model, context_length(model, spec))
    if problem is None:
        return None
    return Shortfall(service=service.name, brief=f"beyond {model.max_position:,} positions",
                     reason=f"vLLM would not start: max_model_len {problem} (vllm/config/model.py: \"User-specified "
                            f"max_model_len is greater than the derived max_model_len\"); at most "
                            f"{model.max_position:,} tokens")


def plan_scenario(scenario: Scenario, variant: str = "base", time_limit: float | None = None) -> FleetResult:
    """Plan every service of the scenario together over its inventory (`time_limit`: the
    solver's wall-clock bound, default planner/defaults.yaml). A service vLLM would not start
    at its context length leaves the result infeasible, with vLLM's reason."""
    start = time.perf_counter()
    refused = {s.name: why for s in scenario.services if (why := refused_context(scenario, s))}
    prepared = [prepare(scenario, s) for s in scenario.services if s.name not in refused]
    unique = {id(t): t for p in prepared for t in p.tables}  # tables shared between services count once
    evaluated = sum(t.evaluated for t in unique.values())
    hours = defaults.value("report.hours_per_month")
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
    if picks:
        plans = _plans(prepared, picks, scenario)
        short = []
    else:
        plans = []
        short = list(refused.values())
        timed_out = status == "UNKNOWN"  # the time limit ended the search before any plan
        if not solvable:
            missing = [i for i, p in enumerate(prepared) if not p.options]
        else:
            missing = range(len(prepared)) if timed_out else _relaxed(prepared, scenario)[0] or range(len(prepared))
        for s in missing:
            p = prepared[s]
            stock = ", ".join(f"{c} {s.gpus}" for c, s in scenario.inventory.items()
                              if s.gpus is not None and c in p.limits.chips)
            if not p.options:
                reason = f"no configuration reaches {p.spec.required} requests" + (
                    f" within the inventory ({stock}); " if stock else "; ")
            elif timed_out:
                reason = f"{cpsat.no_plan_in_time(time_limit)} (--time-limit raises it); "
            else:
                reason = f"the inventory ({stock}) cannot hold it beside the other services; "
            alone, brief = _alone(p)
            short.append(Shortfall(service=p.name, reason=reason + alone, brief=brief))
        order = [s.name for s in scenario.services]
        short.sort(key=lambda x: order.index(x.service))
    chips = []
    for chip in sorted({pl.chip for pl in plans} | set(scenario.inventory)):
        used = [pl for pl in plans if pl.chip == chip]
        stock = scenario.inventory.get(chip)
        chips.append(ChipUse(chip=chip, gpus=sum(pl.gpus for pl in used), available=stock.gpus if stock else None,
                             cost_per_hour=round(sum(pl.cost_per_hour for pl in used), 4)))
    total = round(sum(pl.cost_per_hour for pl in plans), 4)
    return FleetResult(review=scenario.review, variant=variant, feasible=bool(plans), services=plans, chips=chips,
                       cost_per_hour=total, cost_per_month=round(total * hours, 2),
                       gpus=sum(pl.gpus for pl in plans), short=short, solver_status=status,
                       notes=list(dict.fromkeys(n for p in prepared for t in p.tables for n in t.excluded)),
                       decomposed=decomposed, own_cost_per_hour=None if refused or any(
                           p.own_cost is None for p in prepared) else round(sum(p.own_cost for p in prepared), 4),
                       candidates_evaluated=evaluated, seconds=round(time.perf_counter() - start, 3))
