"""A disaggregated plan as the user reads it: the search's pair and counts (planner/search/disagg.py)
made into a prefill pool and a decode pool, each in its role's kernel with its memory, connector,
binds and launches; the hand-over and the time to first token by part; and, with `--serving auto`,
the aggregated plan beside it and which is cheaper, and why."""

from __future__ import annotations

import math

from planner.app.result import Explanation
from planner.candidates.roles import DECODE, PREFILL
from planner.candidates.service import ResolvedService
from planner.candidates.table import ChipTable, Row, priced_chip
from planner.defaults import View
from planner.kinds import Serving
from planner.numbers import count, duration, given, money, number, percent, plural, size, tokens, with_article
from planner.request import ServiceSpec
from planner.search.disagg import RATE_UNITS, _table, search
from pricing.chips import Chip
from pricing.errors import named_all, quoted
from pricing.serving.queueing import md1_wait
from pricing.units import cdiv


def _role_pool(resolved: ResolvedService, role, chip: Chip, table: ChipTable, row: Row, replicas: int, binds: str,
               in_flight: int):
    """One role's pool as the report shows it: the row in its role, its memory, its connector and
    binds; its launch follows its placement (`launch_pools`). Also the role's deployment."""
    from planner.app.plan import token_costs
    from planner.app.serving import RolePool
    from pricing.kernel.report import memory_report

    service = resolved.spec
    kernel = role.kernel(resolved, chip, row)
    e = kernel.engine
    mem = memory_report(kernel, e.max_model_len)
    conn = kernel.connector()
    held = row.shape.dp * row.max_num_seqs * replicas
    d = e.as_deployment()
    cost = round(chip.price_per_gpu_hour * row.gpus * replicas, 4)
    per_output, per_input = token_costs(service, None, cost)  # this role's share: the two pools' sum the fleet's
    pool = RolePool(
        deployment=d,
        in_flight=in_flight, role=role.name, kv_role=role.kv_role, model=service.model, chip=chip.id,
        gpus=row.gpus * replicas, replicas=replicas, gpus_per_replica=row.gpus, tensor_parallel_size=row.shape.tp,
        pipeline_parallel_size=row.shape.pp, nodes_per_replica=row.shape.nodes(table.gpus_per_node),
        data_parallel_size=row.shape.dp, enable_expert_parallel=row.shape.ep,
        decode_context_parallel_size=row.shape.dcp, gpu_memory_utilization=row.gpu_memory_utilization,
        max_num_batched_tokens=row.max_num_batched_tokens, max_num_seqs=row.max_num_seqs,
        max_model_len=e.max_model_len, kv_cache_dtype=row.shape.kv_cache_dtype, held=held, headroom=0.0,
        binds=binds, binds_role=binds, cost_per_hour=cost, cost_per_million_output_tokens=per_output,
        cost_per_million_input_tokens=per_input,
        price_per_gpu_hour=chip.price_per_gpu_hour, price_estimate=chip.price_estimate, price_as_of=chip.price_as_of,
        vllm_serve="", memory={"fixed": mem.fixed.model_dump(), "budget": mem.budget, "kv_pool": mem.kv_pool,
                               "block_bytes": mem.block_bytes, "num_blocks": mem.num_blocks,
                               "requests_held": mem.requests_held},
        connector_gpu_bytes=conn.gpu_bytes, connector_host_bytes=conn.host_bytes).with_kernel(kernel)
    return pool, d, table.gpus_per_node


def launch_pools(service: ServiceSpec, pools: list, placed: list, first_side_port: int, registry, reads: View) -> list:
    """Each role pool (RolePool, its deployment, GPUs per node) with the launches of its placed
    instances (`placed`: planner/search/placement.py InstancePlacement of every pool, by role),
    side-channel ports disjoint over the fleet from `first_side_port`; the pools returned updated
    (`registry`: the command's, None: the shipped one; `reads`: its planner defaults)."""
    from planner.app.disagg_launch import role_instances
    from planner.app.serve import served_model

    served = served_model(service.model, service.quantization, service.vllm_version, registry)
    out, port = [], first_side_port
    for pool, d, per_node in pools:
        mine = [i for i in placed if i.role == pool.role]
        instances, data = role_instances(served, d, per_node, mine, port, reads)
        port += len(mine) * d.data_parallel_size
        first = instances[0].commands
        out.append(pool.model_copy(update={"instances": instances, "launches": data, "vllm_serve": first[0].command,
                                           "vllm_serve_nodes": [c.command for c in first] if len(first) > 1 else []}))
    return out


def role_pools(resolved: ResolvedService, pair, p: int, d: int, rate: float, node: dict[str, int] | None = None):
    """The prefill pool and the decode pool of `pair` at `p` and `d` instances, each with its binds."""
    service, limits = resolved.spec, resolved.limits
    w = service.workload
    pf, dec, h = pair.prefill, pair.decode, pair.handover
    ranks = p * pf.row.shape.dp
    util = rate / (ranks * pf.service_rate)
    wait = md1_wait(rate / ranks, pf.service_rate)
    p_binds = (f"ttft {duration(service.ttft_ms)} at {given(rate)} requests/s: {plural(ranks, 'prefill rank')} at "
               f"{percent(util, 0)} utilization wait {duration(wait * 1000)} (M/D/1), prefill "
               f"{with_article(tokens(w.isl))} prompt in {duration(pf.prompt_seconds * 1000)}, hand it over in "
               f"{duration(h.seconds * 1000)} over {h.link.name}")
    if cdiv(math.ceil(rate * RATE_UNITS), pair.prefill_link) > pair.prefill_min:
        p_binds = (f"link: {h.link.name} hands over {number(h.prefill_rate(pf.row.shape.dp), 1)} requests/s per "
                   f"instance ({size(h.prefill_rank_bytes)} from the busiest rank each)")
    d_binds = (f"{'tpot' if dec.binds == 'tpot' else 'memory'}: {count(dec.batch_per_rank)} running requests per "
               "rank " + (f"within {duration(service.tpot_ms)} per output token" if dec.binds == "tpot" else
                          f"(its pool holds {count(dec.memory_per_rank)} of {count(resolved.context_length)} "
                          f"tokens, {number(dec.arriving_per_rank)} more arriving)")
               + f", {number(dec.requests_per_second)} requests/s per instance at "
                 f"{duration(dec.tpot_seconds * 1000)} per output token")
    node = node or {}

    def table(chip):
        return _table(resolved, chip, limits.model_copy(update={"gpus_per_node": node.get(chip.id)}))

    prompts = math.ceil(rate * (wait + pf.prompt_seconds))  # Little's law in each pool
    running = math.ceil(rate * (w.osl * dec.tpot_seconds))
    return (_role_pool(resolved, PREFILL, pair.prefill_chip, table(pair.prefill_chip), pf.row, p, p_binds, prompts),
            _role_pool(resolved, DECODE, pair.decode_chip, table(pair.decode_chip), dec.row, d, d_binds, running))


def plan_disagg(resolved: ResolvedService, alternatives: int | None = None, named=None):
    """The disaggregated plan (planner/app/serving.py DisaggPlan) with the best fleets of the
    next shapes as its alternatives, or why none fits (a rejected flag named as `named` calls its
    field: the command's flag; None: the field)."""
    from planner.app.serving import DisaggPlan

    found = search(resolved, alternatives)
    hours = resolved.defaults.unrecorded.value("report.hours_per_month")  # for the rendering
    if found.chosen is None:
        return DisaggPlan(feasible=False, solver_status=found.status, hours_per_month=hours,
                          explanations=[Explanation(chip=e.chip, constraint=e.constraint, text=quoted(e.text, named))
                                        for e in found.explanations],
                          candidates_evaluated=found.evaluated, pairs=len(found.pairs),
                          requests_per_second=found.rate, seconds=round(found.seconds, 3))
    best, *rest = [_fleet(found, resolved, *choice) for choice in found.ranked]
    return named_all(best.model_copy(update={"alternatives": rest}), named)


def _fleet(found, resolved: ResolvedService, pair, p: int, d: int):
    """One chosen pair at its counts as a plan: both pools placed and launched, the hand-over and
    the time to first token by part."""
    from planner.app.disagg_launch import router, side_channel_base
    from planner.app.plan import token_costs
    from planner.app.serving import DisaggPlan, TimeToFirstToken
    from planner.candidates.speed_band import band
    from planner.search.placement import ChipNodes, PoolShape, place

    service, limits, rate = resolved.spec, resolved.limits, found.rate
    pf, dec, h = pair.prefill, pair.decode, pair.handover
    util = rate / (p * pf.row.shape.dp * pf.service_rate)
    spent = pair.queue_seconds + pf.prompt_seconds + h.seconds + dec.step_seconds
    roles = role_pools(resolved, pair, p, d, rate)
    shapes = [PoolShape(pool.role, pool.chip, pool.replicas, pool.gpus_per_replica, pool.tensor_parallel_size,
                        role=pool.role) for pool, _, _ in roles]
    chips = {pool.chip: ChipNodes(pool.chip, per_node, priced_chip(pool.chip, limits, resolved.registry).tp_domain)
             for pool, _, per_node in roles}
    laid = place(shapes, chips, limits.spare, resolved.defaults.unrecorded)  # a P/D result lists no planner defaults
    if pair.node_gpus is not None and len({s.node for i in laid.instances for s in i.slots}) != 1:
        raise AssertionError("a pair priced over one node's NVLink was laid over more than one node")
    prefill_pool, decode_pool = launch_pools(service, roles, laid.instances, side_channel_base(), resolved.registry,
                                             resolved.defaults.unrecorded)
    cost = prefill_pool.cost_per_hour + decode_pool.cost_per_hour
    per_output, per_input = token_costs(service, None, cost)  # as an aggregated pool's: the rate's tokens an hour
    return DisaggPlan(
        feasible=True, prefill=prefill_pool, decode=decode_pool,
        hours_per_month=resolved.defaults.unrecorded.value("report.hours_per_month"),
        handover=handover_of(pair),
        ttft=TimeToFirstToken(queue_ms=round(pair.queue_seconds * 1000, 1),
                              prefill_ms=round(pf.prompt_seconds * 1000, 1), transfer_ms=round(h.seconds * 1000, 3),
                              first_step_ms=round(dec.step_seconds * 1000, 2),
                              total_ms=round(spent * 1000, 1), prefill_utilization=round(util, 4)),
        requests_per_second=rate, tpot_ms=round(dec.tpot_seconds * 1000, 3), decode_batch_per_rank=dec.batch_per_rank,
        tpot_band=band("tpot", dec.batch_per_rank, service.workload.isl + service.workload.osl // 2,
                       decode_pool.kernel), gpus=prefill_pool.gpus + decode_pool.gpus,
        cost_per_hour=round(cost, 4), cost_per_million_output_tokens=per_output,
        cost_per_million_input_tokens=per_input,
        router=router(prefill_pool.instances, decode_pool.instances, resolved.defaults.unrecorded),
        nodes=laid.nodes,
        solver_status=found.status, candidates_evaluated=found.evaluated, pairs=len(found.pairs),
        seconds=round(found.seconds, 3))


def handover_of(pair):
    """A pair's hand-over as the report states it (planner/app/serving.py Handover)."""
    from planner.app.serving import Handover

    h = pair.handover
    return Handover(link=h.link.name, link_gbytes_per_second_per_gpu=round(h.link.bandwidth / 1e9, 2),
                    decode_rank_bytes=h.decode_rank_bytes, prefill_rank_bytes=h.prefill_rank_bytes,
                    request_bytes=h.request_bytes, transfer_ms=round(h.seconds * 1000, 3),
                    one_node=pair.node_gpus is not None)


def plan_serving(request, named=None, by_rate: bool = False, registry=None, tables=None):
    """`--serving agg|disagg|auto`: the aggregated plan, the disaggregated plan, or both and the
    cheaper (planner/app/serving.py ServingChoice; the aggregated plan wins a tie). `by_rate`: no
    concurrency was asked, the rate sizes the aggregated pool. `registry`: the command's (None: the shipped one);
    `tables`: its store (planner/candidates/service.py TableStore; None: none kept)."""
    return choose_serving(ResolvedService.of(request.service, request.limits, registry=registry, tables=tables),
                          request.alternatives, named, by_rate)


def choose_serving(resolved: ResolvedService, alternatives: int | None = None, named=None, by_rate: bool = False):
    """`plan_serving` for a service already resolved (a scenario's `serving: auto`, planner/app/fleet.py)."""
    from planner.app.plan import plan_pool
    from planner.app.serving import ServingChoice

    service = resolved.spec
    mode = Serving(service.serving)
    agg = plan_pool(resolved, alternatives, named, by_rate) if mode in (Serving.AGG, Serving.AUTO) else None
    dis = plan_disagg(resolved, alternatives, named) if mode in (Serving.DISAGG, Serving.AUTO) else None
    chosen, why = _cheaper(agg, dis)
    same = None
    if mode == Serving.AUTO and agg.feasible and dis.feasible:  # one queueing model for both: the same arrivals
        from planner.app.same_arrivals import judge

        same = judge(service, agg, dis, resolved.defaults.unrecorded)  # its result lists no planner defaults
        chosen, why = _on_same_arrivals(same, chosen, why)
    return ServingChoice(mode=mode, chosen=chosen, why=why, aggregated=agg, disaggregated=dis, same_arrivals=same)


def _on_same_arrivals(same, chosen: Serving, why: str) -> tuple[Serving, str]:
    """The cheaper plan, unless on the same simulated arrivals only the other meets the targets."""
    a, d = same.aggregated, same.disaggregated
    said = (f"on the same simulated arrivals ({count(same.requests)} Poisson requests at "
            f"{given(same.requests_per_second)} requests/s, vLLM 0.33's scheduler on the step model) mean TTFT/TPOT "
            f"aggregated {duration(a.ttft_ms)}/{duration(a.tpot_ms)}, disaggregated {duration(d.ttft_ms)}/"
            f"{duration(d.tpot_ms)}")
    missed = [f"the {label} plan misses {', '.join(x.misses)}" for label, x in (("aggregated", a),
                                                                               ("disaggregated", d)) if x.misses]
    if missed:
        said += f" ({'; '.join(missed)})"
    if a.meets != d.meets:
        kept = Serving.AGG if a.meets else Serving.DISAGG
        label = {Serving.AGG: "aggregated", Serving.DISAGG: "disaggregated"}
        if kept != chosen:
            return kept, (f"only the {label[kept]} plan meets the targets: {said}; the {label[chosen]} one, though "
                          f"cheaper, misses them. {why}")
        return chosen, f"{why}. Only it meets the targets {said}"
    return chosen, f"{why}. {'Both meet' if a.meets else 'Neither meets'} the targets {said}"


def _cheaper(agg, dis) -> tuple[Serving, str]:
    """Which plan is cheaper, and why, with the figures that make it so."""
    if dis is None:
        return Serving.AGG, "aggregated serving was asked for"
    if agg is None:
        return Serving.DISAGG, "disaggregated serving was asked for"
    if not agg.feasible and not dis.feasible:
        return Serving.AGG, "neither plan fits"
    if not dis.feasible:
        return Serving.AGG, "only the aggregated plan fits: " + "; ".join(e.text for e in dis.explanations)
    if not agg.feasible:
        return Serving.DISAGG, "only the disaggregated plan fits: " + "; ".join(e.text for e in agg.explanations)
    a, p, d = agg.best, dis.prefill, dis.decode
    delta = dis.cost_per_hour / a.cost_per_hour - 1
    speed = ""
    if a.step is not None and a.step.pool_requests_per_second:
        speed = (f"; {number(a.step.pool_requests_per_second)} requests/s at {duration(a.step.tpot_ms)} per output "
                 f"token, first token in {duration(a.step.ttft_ms)} of chunked prefill (no queueing for admission "
                 "modelled)")
    agg_phrase = (f"aggregated: {plural(a.gpus, f'{a.chip} GPU')} at {money(a.cost_per_hour, a.price_estimate)}/hour, "
                  "each "
                  f"instance prefilling beside its decodes ({a.binds}{speed})")
    estimate = p.price_estimate or d.price_estimate
    pools = f"{plural(p.gpus, f'prefill {p.chip} GPU')} + {plural(d.gpus, f'decode {d.chip} GPU')}"
    dis_phrase = (f"disaggregated: {pools} at "
                  f"{money(dis.cost_per_hour, estimate)}/hour (prefill {p.binds_role}; decode {d.binds_role}; the KV "
                  f"cache crosses {dis.handover.link} in {duration(dis.handover.transfer_ms)})")
    if dis.cost_per_hour < a.cost_per_hour:
        return Serving.DISAGG, f"disaggregated is {percent(-delta, 0)} cheaper. {dis_phrase}; {agg_phrase}"
    cheaper = f" by {percent(delta / (1 + delta), 0)}" if delta > 0 else " (a tie)"
    return Serving.AGG, f"aggregated is cheaper{cheaper}. {agg_phrase}; {dis_phrase}"
