"""A scenario's result, as the user reads it: each service's pool (planner/search/fleet.py's picks,
verified by the kernel, with what binds, the step figures and the launch commands), the chips
used, the total cost, and the services left short with what each would take on its own."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field, PrivateAttr

from planner.app.binds import binding, default_max_num_seqs, latency_binding
from planner.app.disagg_plan import launch_pools
from planner.app.fleet_schedule import FleetOverTheDay, plan_over_the_day
from planner.app.plan import serving_figures, token_costs
from planner.app.result import PoolPlan, Target
from planner.app.schedule import fleet_schedules
from planner.app.serve import instance_launches, pool_launch, served_model
from planner.app.serving import Handover
from planner.app.targets import target_words
from planner.candidates import latency
from planner.candidates.service import ResolvedService, defaults_of, store_of
from planner.candidates.store import TableStore
from planner.candidates.table import candidate_table, priced_chip, verify
from planner.defaults import View
from planner.kinds import Role, Serving
from planner.limits import price_units
from planner.numbers import plural
from planner.progress import stage
from planner.request import ServiceSpec
from planner.scenario import Scenario
from planner.search import cpsat
from planner.search.disagg import PairOption
from planner.search.fleet import Prepared, search_fleet, unserved
from planner.search.placement import ChipNodes, NodeUse, Placement, PoolShape, place
from planner.search.status import StageStatus
from planner.traffic.schedule import ServiceSchedule
from pricing.chips import get_chip
from pricing.errors import mention
from pricing.kernel.deployment import beyond_positions
from pricing.registry import Registry


@dataclass(frozen=True)
class RankBytes:
    """What the Kubernetes manifests read of a pool's rank (planner/report/k8s.py): its weight shard
    (EPLB's replicas included), the KV connector's host buffer, the checkpoint's stored bytes."""

    shard: int
    connector_host: int
    checkpoint: int

    @classmethod
    def of(cls, kernel) -> RankBytes:
        from pricing.kernel.checkpoint_check import graph_stored_bytes
        weights, connector = kernel.weight_bytes(), kernel.connector()
        return cls(weights.weights + weights.eplb_redundant, connector.host_bytes if connector else 0,
                   graph_stored_bytes(kernel.model, kernel.reg)[0])


def rank_bytes(pool: PoolPlan) -> RankBytes:
    """A pool's RankBytes: from the kernel it carries, or kept when it crossed processes without it."""
    if pool.kernel is not None:
        return RankBytes.of(pool.kernel)
    kept = getattr(pool, "_rank_bytes", None)
    if kept is None:
        raise AssertionError(f"{pool.model} on {pool.chip}: a pool without the kernel that verified it")
    return kept


class ServicePlan(PoolPlan):
    """The pool chosen for one service: `plan`'s pool, with the service it serves (a disaggregated
    service has two: its prefill pool and its decode pool, `role`)."""

    service: str
    served: str = Field("", exclude=True, description="the scenario's service this pool serves, as the file names it")
    model: str
    asked: int = Field(description="requests this pool is asked to hold: the service's concurrency, or a "
                                   "disaggregated role pool's requests in flight")
    target: Target = Field(description="what the service asks, every target restated (as `plan`'s `target`)")
    role: Role = Field(Role.AGGREGATED, description="aggregated, or the prefill or decode pool of a disaggregated "
                                                "service (vLLM's NixlConnector)")
    instance_commands: list[str] = Field(default_factory=list, description="a role's pool: one command per instance "
                                         "(each with its own port and NIXL side channel), then the router on the "
                                         "decode pool's")
    handover: Handover | None = Field(None, description="a role's pool: its service's KV hand-over, over one node's "
                                                        "NVLink only where placement laid both pools on that node")

    _rank_bytes: RankBytes | None = PrivateAttr(None)

    def __getstate__(self) -> dict:
        """Pickled (a review's worker hands its results back) without the kernel, which does not
        pickle; what the manifests read of it goes along (RankBytes)."""
        state = super().__getstate__()
        kept = rank_bytes(self) if self.kernel is not None else self._rank_bytes
        private = {**(state.get("__pydantic_private__") or {}), "_kernel": None, "_rank_bytes": kept}
        return state | {"__pydantic_private__": private}


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
    """`plan scenario --format json`: every service's pool over the inventory, the chips used and
    the total cost, or the services left short and why."""

    kind: Literal["scenario"] = Field("scenario", description="which report this is (the schema's discriminator)")
    review: str
    variant: str = "base"
    feasible: bool
    services: list[ServicePlan]
    chips: list[ChipUse]
    cost_per_hour: float | None = Field(description="USD per hour of every pool; null when not every service is served")
    cost_per_month: float | None = Field(description="cost_per_hour × the hours of a month; null when infeasible")
    gpus: int | None = Field(description="GPUs of every pool; null when not every service is served")
    short: list[Shortfall] = []
    notes: list[str] = Field(default_factory=list, description="input that had no effect, one line each")
    decomposed: bool = Field(False, description="each service's own optimum is the answer: they fit the inventory "
                                                "together, so no coupled model was solved")
    own_cost_per_hour: float | None = Field(None, description="the sum of each service's cheapest pool on its own, "
                                            "without the inventory's GPU counts: the inventory binds when the total "
                                            "exceeds it")
    solver_status: str = Field(description="OPTIMAL only when every stage proved its optimum")
    solver_stages: list[StageStatus] = Field(default_factory=list, description="what each stage of the solve "
                                             "proved: status, value, bound, gap")
    candidates_evaluated: int
    sweep_bounded: list[int] | None = Field(None, description="[shapes priced, shapes in all] when the time limit "
                                            "bounded the candidate sweep (planner/search/sweep_time.py): the plan, "
                                            "where one was found, is the best of the shapes priced, not proven "
                                            "optimal over all shapes; "
                                            "null when every shape was priced")
    unproven: str | None = Field(None, description="when no plan was found but none is proven impossible (solver "
                                 "UNKNOWN: the time limit ended the sweep or the solver first): what is true instead "
                                 "of 'not every service can be served', and the limit that may find one; null "
                                 "otherwise")
    seconds: float
    nodes: list[NodeUse] = Field(default_factory=list, description="the inventory's nodes and what runs on each GPU")
    placement_notes: list[str] = Field(default_factory=list, description="what the placement could not do")
    peak_gpus: int | None = Field(None, description="with traffic: the GPUs the inventory needs at its busiest "
                                  "interval over the day (over_the_day)")
    sum_of_service_peaks: int | None = Field(None, description="with traffic: the sum of each service's own peak GPUs")
    over_the_day: FleetOverTheDay | None = Field(None, description="with traffic: the fleet interval by interval "
                                                 "on one inventory (planner/app/fleet_schedule.py)")
    hours_per_month: int = Field(exclude=True)  # planner/defaults.yaml report.hours_per_month, for the rendering
    # the inventory makes the fleet dearer than each service's cheapest pool on its own, by at least the solver's
    # price unit (planner/defaults.yaml solver.price_units_per_dollar): what binds it (report/review.py binding)
    inventory_dearer: bool = Field(False, exclude=True)

    _day_pools: list[ServicePlan] = PrivateAttr(default_factory=list)  # with traffic: the pools over the day at their
    # busiest interval, what --emit k8s writes (each autoscaled)

    @property
    def emitted_pools(self) -> list[ServicePlan]:
        """The pools --emit k8s writes: over the day's when the services have traffic, else the plan's."""
        return self._day_pools or self.services

    schedules: list[ServiceSchedule] = Field(default_factory=list, description="each service with traffic: its "
                                             "autoscaled schedule (per interval: rate, replicas, GPUs, p99s) and its "
                                             "cost per day against the static peak pool's")


def _plans(prepared: list[Prepared], picks, scenario: Scenario) -> tuple[list[ServicePlan], Placement]:
    """Each service's pool, laid with the others on the inventory's nodes, with its commands."""
    out, launch, paired = [], [], []
    for p, (_, option, replicas) in zip(prepared, picks, strict=True):
        if isinstance(option, PairOption):
            paired.append((len(out), p, option))
            for fields, role in _role_fields(p, option):
                out.append(fields)
                launch.append(role)
            continue
        row = option.row
        model = p.resolved.graph
        table = next(t for t in p.tables if t.chip.id == row.chip)
        length = table.context_length
        d = row.deployment
        held = row.concurrency * replicas
        kernel = verify(model, table, p.spec, row)
        binds = binding(table, latency.memory_row(table, row), replicas, p.spec.required, kernel,
                        default_max_num_seqs(model, table.chip, length, table.registry, p.spec.vllm_version))
        step = latency.figures(model, table, p.spec, row, replicas)
        binds = latency_binding(table, row, replicas, p.spec, step, binds)
        prices = {t.chip.id: t.chip.price_per_gpu_hour for t in p.tables}
        served, binds = serving_figures(p.spec, (p.sized or {}).get((row.chip, row)), replicas, binds,
                                        (p.sized, prices))
        cost = round(option.price * row.gpus * replicas, 4)
        per_output, per_input = token_costs(p.spec, step, cost)
        priced = priced_chip(row.chip, p.limits, p.resolved.registry)
        out.append(dict(
            deployment=d, served=p.name,
            service=p.name, model=p.spec.model, chip=row.chip, gpus=row.gpus * replicas, replicas=replicas,
            gpus_per_replica=row.gpus, tensor_parallel_size=row.shape.tp, pipeline_parallel_size=row.shape.pp,
            nodes_per_replica=row.shape.nodes(p.node[row.chip]), data_parallel_size=row.shape.dp,
            enable_expert_parallel=row.shape.ep, decode_context_parallel_size=row.shape.dcp,
            gpu_memory_utilization=row.gpu_memory_utilization, max_num_batched_tokens=row.max_num_batched_tokens,
            max_num_seqs=row.max_num_seqs, max_model_len=length, kv_cache_dtype=row.shape.kv_cache_dtype,
            asked=p.spec.concurrency, target=Target.of(p.spec, length, target_words(p.spec)), held=held,
            headroom=round(held / p.spec.concurrency - 1, 4),
            headroom_percent=round((held / p.spec.concurrency - 1) * 100, 2), binds=binds,
            cost_per_hour=cost, serving=served, cost_per_million_output_tokens=per_output,
            cost_per_million_input_tokens=per_input,
            price_per_gpu_hour=option.price, price_estimate=priced.price_estimate, price_as_of=priced.price_as_of,
            step=step))
        model_served = served_model(p.spec.model, p.spec.quantization, p.spec.vllm_version, p.resolved.registry)
        launch.append((model_served, d, p.node[row.chip], kernel))
    shapes = [PoolShape(f["service"], f["chip"], f["replicas"], f["gpus_per_replica"], f["tensor_parallel_size"],
                        role=f.get("role", Role.AGGREGATED)) for f in out]
    per_node = {f["chip"]: p.node[f["chip"]] for p in prepared for f in out if f["chip"] in p.node}
    unrecorded = defaults_of([p.resolved for p in prepared])  # a fleet's result lists no planner defaults
    laid = lay_out(shapes, scenario, per_node, prepared[0].resolved.registry, unrecorded)  # the command's
    for at, p, option in paired:  # both pools laid on one node: they hand over on its NVLink (same rows, counts)
        twin = option.row.within_node
        names = {out[at]["service"], out[at + 1]["service"]}
        if twin is not None and len({s.node for i in laid.instances if i.pool in names for s in i.slots}) == 1:
            for k, (fields, role) in enumerate(_role_fields(p, option, twin)):
                out[at + k], launch[at + k] = fields, role
    plans, side_port = [], None
    for fields, entry in zip(out, launch, strict=True):
        mine = [i for i in laid.instances if i.pool == fields["service"]]
        if isinstance(entry, RoleLaunch):  # a disaggregated service's pool: its connector and side channel
            from planner.app.disagg_launch import side_channel_base

            side_port = side_channel_base() if side_port is None else side_port
            (pool,) = launch_pools(entry.spec, [(entry.pool, entry.deployment, entry.per_node)], mine, side_port,
                                   entry.registry, unrecorded)
            side_port += len(mine) * entry.deployment.data_parallel_size
            fields["instance_commands"] = [x.line for x in pool.launches]
            plans.append(ServicePlan(**fields, **{k: getattr(pool, k) for k in ("instances", "vllm_serve",
                                                                                 "vllm_serve_nodes")})
                         .with_kernel(entry.pool.kernel))  # the rank's kernel: the manifests size host memory by it
            continue
        named, d, node, kernel = entry
        plans.append(ServicePlan(**fields, **pool_launch(instance_launches(named, d, node, mine, unrecorded)))
                     .with_kernel(kernel))
    _add_routers(plans, unrecorded)
    return plans, laid


@dataclass(frozen=True)
class RoleLaunch:
    """What a role pool's launch needs once it is placed."""

    spec: ServiceSpec
    pool: object  # RolePool
    deployment: object
    per_node: int
    registry: Registry  # the command's


def _add_routers(plans: list[ServicePlan], reads: View) -> None:
    """Each disaggregated service's router, after its decode pool's instance commands."""
    from planner.app.disagg_launch import router

    for plan in plans:
        if plan.role != Role.DECODE:
            continue
        prefill = next(p for p in plans if (p.served, p.role) == (plan.served, Role.PREFILL))
        plan.instance_commands.append(router(prefill.instances, plan.instances, reads).line)


def lay_out(shapes: list[PoolShape], scenario: Scenario, per_node: dict[str, int], registry: Registry,
            reads: View) -> Placement:
    """The fleet's instances on the inventory's whole nodes (planner/search/placement.py), with the
    scenario's spare nodes kept free."""
    chips = {}
    for chip_id, node in per_node.items():
        stock = scenario.inventory.get(chip_id)
        chips[chip_id] = ChipNodes(chip_id, node, get_chip(chip_id, registry).tp_domain, stock.gpus if stock else None)
    return place(shapes, chips, scenario.spare, reads)


def _role_fields(p: Prepared, option: PairOption, pair=None) -> list[tuple[dict, RoleLaunch]]:
    """A disaggregated service's two pools as `plan --serving disagg` reports them, as ServicePlan
    fields, each with what its launch needs: priced as `pair` hands over (default: the option's,
    over the network)."""
    from planner.app.disagg_plan import handover_of, role_pools

    fleet = option.row
    pair = pair or fleet.pair
    rate = p.spec.workload.requests_per_second
    out = []
    for pool, d, per_node in role_pools(p.resolved, pair, fleet.prefill, fleet.decode, rate, p.node):
        fields = pool.model_dump(include=set(PoolPlan.model_fields) - {"instances", "vllm_serve", "vllm_serve_nodes",
                                                                         "nodes", "memory"})
        spare = pool.held / max(1, pool.in_flight) - 1
        fields.update(headroom=spare, headroom_percent=round(spare * 100, 2), service=f"{p.name} ({pool.role})",
                      asked=pool.in_flight, target=Target.of(p.spec, pool.max_model_len, target_words(p.spec)),
                      role=pool.role,
                      handover=handover_of(pair), deployment=pool.deployment, served=p.name)
        out.append((fields, RoleLaunch(p.spec, pool, d, per_node, p.resolved.registry)))
    return out


def _alone(p: Prepared, bounded: bool = False) -> tuple[str, str]:
    """What a short service would take on its own, with no inventory limit (the oracle asked
    again without the stock caps; service targets sized again without them), in full and in a few
    words; with service targets no split meets, why, as `plan` explains it. After a sweep
    --time-limit bounded (`bounded`), no second sweep: its own tables, read without the stock's caps
    (planner/search/sweep_time.py)."""
    limits = p.limits.model_copy(update={"max_gpus": None})
    tables = p.tables if bounded else [
        candidate_table(p.resolved, t.chip, limits.model_copy(update={"chips": (t.chip.id,),
                                                                      "gpus_per_node": t.gpus_per_node}))
        for t in p.tables]
    sized = None
    if p.spec.slo is not None:  # aggregated pools only (planner/request.py service_problems refuses the others)
        from planner.candidates import slo  # the serving simulator, only with service targets

        sized = slo.size_tables(p.resolved.graph, tables, p.spec, limits, 1, p.resolved.defaults.unrecorded)
    unlimited = cpsat.options(tables, p.spec, limits, sized, p.resolved.defaults.unrecorded)
    if not unlimited and sized is not None:
        from planner.app.explain import explain

        # the fields it mentions kept as mentions, for the review to name as its file does
        return ("; ".join(explain(t, p.spec, limits, mention, sized).text.rstrip(".") for t in tables),
                "no chip meets its targets")
    if not unlimited and bounded:
        return (f"no shape priced within {mention('time_limit')} serves it on its own (a longer limit prices more)",
                "none priced fits")
    if not unlimited:
        return ("no configuration of this service fits any allowed chip at this context length, whatever the "
                "inventory", "no chip fits")
    best = min(unlimited, key=lambda o: (o.cost_units * o.rmin, o.row.gpus * o.rmin, o.rank))
    gpus = f"{best.row.gpus * best.rmin} {best.row.chip}"
    alone = plural(best.row.gpus * best.rmin, f"{best.row.chip} GPU")
    among = f" among the shapes priced within {mention('time_limit')}" if bounded else ""
    return (f"it needs {alone} on its own{among} ({best.rmin} × (tp {best.row.shape.tp}, dp {best.row.shape.dp}) "
            f"holding {best.row.concurrency} requests each, ${best.price * best.row.gpus * best.rmin:,.2f}/hour)",
            f"needs {gpus}")


def _unproven(found) -> str:
    """What is true of a search that ended UNKNOWN (no plan, none proven impossible): no plan among
    the shapes a bounded sweep priced, or none the solver found within the limit."""
    if found.swept:
        priced, shapes = found.swept
        return (f"no plan found among the {priced:,} of {shapes:,} shapes priced within {mention('time_limit')}; a "
                f"longer limit may find one (give at least {found.whole_limit:g} to sweep every shape)")
    return f"no plan found within {mention('time_limit')}; a longer limit may find one"


def resolve_services(scenario: Scenario, registry: Registry | None = None, tables: TableStore | None = None
                     ) -> list[ResolvedService]:
    """Every service of the scenario resolved once under `registry` (the command's; None: the
    shipped one): its spec and limits merged with the defaults, its graph, its context length: what
    every stage of its planning reads."""
    return [ResolvedService.of(scenario.service_spec(s), scenario.limits(s), s.name, registry, tables)
            for s in scenario.services]


def refused_context(service: ResolvedService) -> Shortfall | None:
    """Why vLLM would not start the service at its context length, or None: a max_model_len
    beyond the model's positions is refused before any memory is sized, on every chip."""
    model = service.graph
    problem = beyond_positions(model, service.context_length)
    if problem is None:
        return None
    return Shortfall(service=service.name, brief=f"beyond {model.max_position:,} positions",
                     reason=f"vLLM would not start: max_model_len {problem} (vllm/config/model.py: \"User-specified "
                            f"max_model_len is greater than the derived max_model_len\"); at most "
                            f"{model.max_position:,} tokens")


def on_same_arrivals(scenario: Scenario, services: list[ResolvedService], skip: set[str]
                     ) -> tuple[Scenario, list[ResolvedService], list[str]]:
    """Each `serving: auto` service judged as `plan --serving auto` judges it (planner/app/disagg_plan.py
    `choose_serving`: its aggregated and its disaggregated plan, alone, on the same simulated arrivals,
    planner/app/same_arrivals.py): where only one kind meets its targets there, the service is
    planned as that kind (the cheaper within the inventory otherwise, the aggregated on a tie, as
    `plan` chooses), and a note says why. The scenario and its resolved services so judged, and the notes."""
    from planner.app.disagg_plan import choose_serving

    kinds, notes = {}, []
    for resolved in services:
        spec = resolved.spec
        w = spec.workload
        if (resolved.name in skip or spec.serving != Serving.AUTO or w is None or w.requests_per_second is None
                or spec.ttft_ms is None):
            continue
        same = choose_serving(resolved).same_arrivals
        if same is None or same.aggregated.meets == same.disaggregated.meets:
            continue
        kept, other = (Serving.AGG, same.disaggregated) if same.aggregated.meets else (Serving.DISAGG,
                                                                                       same.aggregated)
        kinds[resolved.name] = kept
        label = {Serving.AGG: "aggregated", Serving.DISAGG: "disaggregated"}
        notes.append(f"{resolved.name}: serving auto planned {label[kept]}: on the same simulated arrivals "
                     f"({same.requests:,} Poisson requests at {same.requests_per_second:g} requests/s) only its "
                     f"{label[kept]} plan meets the targets; the {label[other.serving]} one misses "
                     f"{', '.join(other.misses)}")
    if not kinds:
        return scenario, services, notes
    judged = [s.asking(s.spec.model_copy(update={"serving": kinds[s.name].value})) if s.name in kinds else s
              for s in services]
    scenario = scenario.model_copy(update={"services": [
        s.model_copy(update={"serving": kinds[s.name].value}) if s.name in kinds else s for s in scenario.services]})
    return scenario, judged, notes


def plan_scenario(scenario: Scenario, variant: str = "base", time_limit: float | None = None,
                  parallel_tables: bool = True, bounded: bool = False,
                  services: list[ResolvedService] | None = None,
                  registry: Registry | None = None, tables: TableStore | None = None) -> FleetResult:
    """Plan every service of the scenario together over its inventory (`time_limit`: the
    solver's time limit, default planner/defaults.yaml; `parallel_tables`: many candidate
    tables may be built in worker processes; `bounded`: each service swept only as far as its own
    optimum reaches, when that answers, `search_fleet`; `services`: the scenario's services as the
    caller resolved them, `resolve_services`, else resolved here under `registry` with the
    command's `tables`). A service vLLM
    would not start at its context length leaves the result infeasible, with vLLM's reason."""
    start = time.perf_counter()
    services = resolve_services(scenario, registry, tables) if services is None else services
    refused = {s.name: why for s in services if (why := refused_context(s))}
    scenario, services, judged = on_same_arrivals(scenario, services, set(refused))
    found = search_fleet(scenario, services, set(refused), time_limit, parallel_tables, bounded)
    prepared, status, picks, solvable = found.prepared, found.status, found.picks, found.solvable
    hours = defaults_of(services).value("report.hours_per_month")
    with_traffic = any(scenario.merged(s).traffic for s in scenario.services)
    if picks:
        plans, laid = _plans(prepared, picks, scenario)
        if with_traffic:
            stage(store_of(services), "simulating each service's schedule over the day")
        schedules, unscheduled = fleet_schedules(scenario, prepared, picks)
        short = []
    else:
        plans, laid, schedules, unscheduled = [], Placement(nodes=[], instances=[]), [], []
        short = list(refused.values())
        timed_out = status == "UNKNOWN"  # the time limit ended the search before any plan
        if not solvable:
            missing = [i for i, p in enumerate(prepared) if not p.options]
        else:
            missing = range(len(prepared)) if timed_out else unserved(prepared, scenario, found) or range(len(prepared))
        for s in missing:
            p = prepared[s]
            stock = ", ".join(f"{c} {s.gpus}" for c, s in scenario.inventory.items()
                              if s.gpus is not None and c in p.limits.chips)
            if stock and scenario.spare:
                stock += (f", less {scenario.spare} spare node{'s' if scenario.spare > 1 else ''} of each chip in use "
                          f"(spare: {scenario.spare})")
            within = [f"the inventory ({stock})"] if stock else []
            if p.limits.max_gpus is not None:  # the service's own cap
                within.append(f"its {mention('max_gpus')} {p.limits.max_gpus}")
            if not p.options:
                asked = (f"no configuration serves {p.spec.workload.requests_per_second:g} requests/s within its "
                         f"service targets" if p.spec.slo is not None else
                         f"no configuration reaches {p.spec.required} requests")
                if any(t.unpriced for t in p.tables):  # a sweep the limit bounded: among the shapes it priced
                    asked += f" among the shapes priced within {mention('time_limit')} (a longer limit prices more)"
                reason = asked + (f" within {' and '.join(within)}; " if within else "; ")
            elif timed_out and found.swept:  # a sweep the limit bounded: its shapes gave no plan, nothing proven
                priced, shapes = found.swept
                reason = (f"the {priced:,} of {shapes:,} shapes priced within its {time_limit:g} s time limit give no "
                          f"plan that fits the inventory ({mention('time_limit')} raises it); ")
            elif timed_out:
                said = cpsat.no_plan_in_time(time_limit, defaults_of(services))
                reason = f"{said} ({mention('time_limit')} raises it); "
            else:
                reason = f"the inventory ({stock}) cannot hold it beside the other services; "
            alone, brief = _alone(p, found.swept is not None)
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
    if not refused and with_traffic:
        stage(store_of(services), "CP-SAT: the fleet over the day")
    over = plan_over_the_day(scenario, prepared, picks or None, time_limit) if not refused else None
    day_pools = []
    if over is not None and over.peak_gpus is not None:
        from planner.app.fleet_schedule import busiest_picks

        day_pools = plans if all(s.same_as_static for s in over.services) else _plans(
            prepared, busiest_picks(over, prepared), scenario)[0]
    result = FleetResult(review=scenario.review, variant=variant, feasible=bool(plans), services=plans, chips=chips,
                       hours_per_month=hours,
                       cost_per_hour=total if plans else None,
                       cost_per_month=round(total * hours, 2) if plans else None,
                       gpus=sum(pl.gpus for pl in plans) if plans else None, short=short, solver_status=status,
                       solver_stages=found.stages,
                       notes=judged + list(dict.fromkeys([*(n for p in prepared for t in p.tables for n in t.excluded),
                                                          *unscheduled])),
                       decomposed=found.decomposed, own_cost_per_hour=None if refused or any(
                           p.own_cost is None for p in prepared) else round(sum(p.own_cost for p in prepared), 4),
                       candidates_evaluated=found.evaluated,
                       sweep_bounded=list(found.swept) if found.swept else None,
                       unproven=None if plans or refused or status != "UNKNOWN" else _unproven(found),
                       seconds=round(time.perf_counter() - start, 3),
                       nodes=laid.nodes, placement_notes=laid.notes, schedules=schedules, over_the_day=over,
                       peak_gpus=over.peak_gpus if over else None,
                       sum_of_service_peaks=over.sum_of_service_peaks if over else None)
    result._day_pools = day_pools
    if result.feasible and result.own_cost_per_hour is not None:
        extra = result.cost_per_hour - result.own_cost_per_hour
        result.inventory_dearer = price_units(extra, defaults_of(services)) > 0
    return result
