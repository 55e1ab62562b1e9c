"""A plan for one service, as the user reads it: the search's picks (planner/search/cpsat.py)
made into pools, each verified by the kernel, with what binds it, its step figures, its launch
commands, and, when nothing fits, why; plus the provenance of the best plan."""

from __future__ import annotations

from planner.app.binds import binding, default_max_num_seqs, latency_binding
from planner.app.explain import explain
from planner.app.result import Explanation, Margin, PlanResult, PoolPlan, SearchInfo, Target
from planner.app.serve import own_nodes, served_model
from planner.app.targets import binds_words, met_words, narrower_words, target_words
from planner.candidates import latency
from planner.candidates.service import ResolvedService
from planner.candidates.shapes import ChipTable
from planner.candidates.store import TableStore
from planner.candidates.table import verify
from planner.defaults import Reads, View, read_by
from planner.numbers import count
from planner.request import PlanRequest, ServiceSpec
from planner.search.cpsat import Option, no_plan_in_time, search
from pricing.errors import mention, named_all, render
from pricing.kernel import Kernel
from pricing.kernel.report import memory_report
from pricing.registry import Registry


def plan(request: PlanRequest, named=None, by_rate: bool = False, registry: Registry | None = None,
         tables: TableStore | None = None) -> PlanResult:
    """The cheapest pool for one service, the next alternatives, and, when nothing fits, why (a
    rejected flag named as `named` calls its field: the command's flag; None: the field).
    `by_rate`: no concurrency was asked (the rate sizes the pool), so none is quoted as asked.
    `registry`: the command's (its --registry overlay; None: the shipped one); `tables`: the
    command's store of graphs and candidate tables (None: none kept)."""
    return plan_pool(ResolvedService.of(request.service, request.limits, registry=registry, tables=tables),
                     request.alternatives,
                     named, by_rate)


def plan_pool(resolved: ResolvedService, alternatives: int | None = None, named=None,
              by_rate: bool = False) -> PlanResult:
    """`plan` of a service resolved once by the command (planner/candidates/service.py)."""
    service, limits, reads = resolved.spec, resolved.limits, resolved.defaults
    found = search(resolved, alternatives)
    model, length = resolved.graph, resolved.context_length  # the graph the search's tables were built on
    by_chip = {t.chip.id: t for t in found.tables}
    prices = {t.chip.id: t.chip.price_per_gpu_hour for t in found.tables}
    pools = [pool_plan(model, service, by_chip[o.row.chip], o, n, found.sized.get((o.row.chip, o.row)),
                   (found.sized, prices), limits.spare, asked=not by_rate, reads=reads) for o, n in found.ranked]
    if pools:
        explanations = []
    elif found.status == "UNKNOWN":  # candidates exist: the time limit ended the search before any plan
        text = (f"{no_plan_in_time(limits.time_limit, reads.unrecorded)} ({count(found.evaluated)} candidates; "
                f"{mention('time_limit')} raises it)")
        explanations = [Explanation(chip="", constraint="time_limit", text=render(text, named))]
    else:
        explanations = [explain(t, service, limits, named, found.sized) for t in found.tables]
    notes = list(dict.fromkeys(n for t in found.tables for n in t.excluded))
    hours = reads.value("report.hours_per_month")
    provenance = []
    if pools:  # the best pool's kernel: its provenance and its per-rank memory, as the text prints them
        kernel = pools[0].kernel
        provenance = _provenance(kernel, reads, *(t.defaults for t in found.tables))
        memory = memory_report(kernel, length).model_copy(update={"provenance": []})  # the plan's own, above
        pools[0] = pools[0].model_copy(update={"memory": memory})
    return named_all(PlanResult(
        feasible=bool(pools), target=Target.of(service, length, target_words(service)),
        best=pools[0] if pools else None, alternatives=pools[1:],
        search=SearchInfo(candidates_evaluated=found.evaluated, solver_status=found.status,
                          solver_stages=found.stages, seconds=round(found.seconds, 3),
                          shapes_skipped=sum(t.skipped for t in found.tables)),
        margin=margin_of(service, resolved.registry),
        model=model.name, hf_id=model.hf_id, origin=model.origin, required=service.required,
        headroom_percent=service.headroom, hours_per_month=hours,
        explanations=explanations, notes=notes, provenance=provenance), named)


def step_provenance(kernel: Kernel) -> tuple:
    """The registry values the plan's step figures are priced with (none where the chip has no peak rates)."""
    from pricing.step import StepModel, has_rates

    return StepModel(kernel).provenance if has_rates(kernel.chip, kernel.reg) else ()


def _provenance(kernel: Kernel, *reads: Reads) -> list[dict]:
    """Every registry value the best plan's kernel read and its step figures were priced with, and the
    planner defaults the plan read (recorded by `reads`: its service's and its tables', sorted by name)."""
    rows = [{"name": p.name, "value": p.value, "source": p.source, "how": p.how}
            for p in (*kernel.provenance(), *step_provenance(kernel))]
    rows += [{"name": f"planner.{p.name}", "value": p.value, "source": p.source, "how": p.how}
             for p in read_by(*reads)]
    return rows


def margin_of(service: ServiceSpec, registry: Registry) -> Margin:
    """The KV margin a plan keeps, and where it comes from (`registry`: the plan's)."""
    if service.margin is not None:
        return Margin(fraction=service.margin / 100, source=mention("margin"))  # the reader names it
    entry = registry["cost_model_memory.kv_pool_margin"]
    return Margin(fraction=float(entry.value), source=f"registry cost_model_memory.kv_pool_margin: {entry.how}")


def pool_plan(model, service: ServiceSpec, table: ChipTable, option: Option, replicas: int, sizing=None,
              every=None, spare: int = 0, asked: bool = True, *, reads: View) -> PoolPlan:
    """One chosen row at `replicas`, verified by the kernel, with what binds it, its step and serving
    figures, its costs per token and its launch (`asked`: the service's concurrency was asked)."""
    row = option.row
    kernel = verify(model, table, service, row)
    d = row.deployment.model_copy(
        update={"speculative_method": kernel.engine.speculative_method})
    held = row.concurrency * replicas
    binds = binding(table, latency.memory_row(table, row), replicas, service.required, kernel,
                    default_max_num_seqs(model, table.chip, kernel.engine.max_model_len, table.registry,
                                         service.vllm_version), asked)
    step = latency.figures(model, table, service, row, replicas)
    binds = latency_binding(table, row, replicas, service, step, binds)
    served, binds = serving_figures(service, sizing, replicas, binds, every)
    cost = round(option.price * row.gpus * replicas, 4)
    per_output, per_input = token_costs(service, step, cost)
    return PoolPlan(
        deployment=d,
        model=service.model, chip=row.chip, gpus=row.gpus * replicas, replicas=replicas, gpus_per_replica=row.gpus,
        tensor_parallel_size=row.shape.tp, pipeline_parallel_size=row.shape.pp, data_parallel_size=row.shape.dp,
        nodes_per_replica=row.shape.nodes(table.gpus_per_node), enable_expert_parallel=row.shape.ep,
        decode_context_parallel_size=row.shape.dcp, gpu_memory_utilization=row.gpu_memory_utilization,
        max_num_batched_tokens=row.max_num_batched_tokens, max_num_seqs=row.max_num_seqs,
        max_model_len=kernel.engine.max_model_len, kv_cache_dtype=row.shape.kv_cache_dtype, held=held,
        headroom=held / service.concurrency - 1, headroom_percent=round((held / service.concurrency - 1) * 100, 2),
        binds=binds, cost_per_hour=cost, price_per_gpu_hour=option.price,
        price_estimate=table.chip.price_estimate, price_as_of=table.chip.price_as_of, step=step,
        serving=served, cost_per_million_output_tokens=per_output, cost_per_million_input_tokens=per_input,
        **own_nodes(served_model(service.model, service.quantization, service.vllm_version, table.registry), d,
                    table.chip, table.gpus_per_node, service.model, replicas, spare, reads)).with_kernel(kernel)


def serving_figures(service: ServiceSpec, sizing, replicas: int, binds: str, every=None):
    """The simulated benchmark of a pool sized to service targets (None without them), with the
    Pareto front of every pool simulated (`every`: the sizings by row and the chips' prices), and
    the binds phrase: the target that sets the replica count when one does."""
    if sizing is None:
        return None, binds
    from planner.candidates import slo

    sized, prices = every or (None, None)
    said = (binds_words(service, sizing) or narrower_words(service, sizing, replicas, sized)
            if replicas == sizing.replicas else None)
    if said is None and replicas == sizing.replicas and service.implicit_concurrency:
        said = met_words(service, sizing, replicas)
    return slo.figures(service, sizing, replicas, target_words(service), sized, prices), said or binds


def token_costs(service: ServiceSpec, step, cost_per_hour: float) -> tuple[float | None, float | None]:
    """USD per million output and input tokens: the pool's cost over the tokens it serves an hour,
    at the workload's rate (rate × osl, rate × isl), else at the step figures' throughput."""
    w = service.workload
    if w is not None and w.requests_per_second is not None:
        out, inp = w.requests_per_second * w.osl, w.requests_per_second * w.isl
    elif step is not None:
        out = step.pool_output_tokens_per_second
        inp = step.pool_requests_per_second * w.isl if w is not None and step.pool_requests_per_second else None
    else:
        return None, None

    def per_million(tokens_per_second):
        return round(cost_per_hour / (tokens_per_second * 3600) * 1e6, 4) if tokens_per_second else None

    return per_million(out), per_million(inp)
