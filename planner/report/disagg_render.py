"""A disaggregated plan for people: the prefill and decode pools side by side, the hand-over, the
time to first token by part, each role's per-rank memory, and the commands that start the fleet."""

from __future__ import annotations

from rich.console import Console

from planner.app.serving import DisaggPlan, ServingChoice
from planner.kinds import Serving
from planner.numbers import amount, count, duration, number, per_million_tokens
from planner.report.memory import render_memory
from planner.report.render import command, render_notes, split, tcp_line
from planner.report.tables import Col, print_table, unwrapped

POOL_COLUMNS = (Col("role", "name"), Col("chip", "name"), Col("GPUs"), Col("replicas ×\n(tp,pp,dp,ep,dcp)", "name"),
                Col("util.", drop=4), Col("token\nbudget", drop=5), Col("max_num_seqs", drop=6),
                Col("kv_role", "name", drop=3), Col("$/hour"), Col("$/month", drop=1))


def pools_rows(plan: DisaggPlan, hours: int) -> list[list[str]]:
    """The prefill pool, the decode pool and their total, one row each (POOL_COLUMNS)."""
    rows = []
    for p in (plan.prefill, plan.decode):
        kv = "" if p.kv_cache_dtype == "auto" else f", kv {p.kv_cache_dtype}"
        rows.append([p.role, p.chip, count(p.gpus), split(p, names=False) + kv, number(p.gpu_memory_utilization),
                     count(p.max_num_batched_tokens), count(p.max_num_seqs), p.kv_role,
                     amount(p.cost_per_hour, p.price_estimate),
                     amount(p.cost_per_hour * hours, p.price_estimate, cents=False)])
    rows.append(["total", "", count(plan.gpus), "", "", "", "", "", amount(plan.cost_per_hour),
                 amount(plan.cost_per_hour * hours, cents=False)])
    return rows


ALTERNATIVE_COLUMNS = (Col("", "name"), Col("prefill: chip replicas ×\n(tp,pp,dp,ep,dcp)", "name"),
                       Col("decode: chip replicas ×\n(tp,pp,dp,ep,dcp)", "name"), Col("GPUs"),
                       Col("hand-over", "name", drop=2), Col("TTFT", drop=3), Col("$/hour"), Col("$/month", drop=1))


def alternatives_rows(plan: DisaggPlan, hours: int) -> list[list[str]]:
    """The chosen fleet and the best fleets of the next shapes, one row each."""
    rows = []
    for i, f in enumerate([plan, *plan.alternatives]):
        p, d, estimate = f.prefill, f.decode, f.prefill.price_estimate or f.decode.price_estimate
        rows.append(["best" if i == 0 else str(i), f"{p.chip} {split(p, names=False)}",
                     f"{d.chip} {split(d, names=False)}", count(f.gpus),
                     f"{duration(f.handover.transfer_ms)} over {f.handover.link}", duration(f.ttft.total_ms),
                     amount(f.cost_per_hour, estimate), amount(f.cost_per_hour * hours, estimate, cents=False)])
    return rows


def render_disagg(plan: DisaggPlan, console: Console, hours: int, workload: str, named=None) -> None:
    """The feasible disaggregated plan, each role's memory from the kernel its pool carries (a field
    its sentences mention named as `named` calls it)."""

    print_table(console, f"disaggregated: {workload}", POOL_COLUMNS, pools_rows(plan, hours), records=True)
    if plan.alternatives:
        print_table(console, "the chosen fleet and the best fleets of the next prefill × decode shapes",
                    ALTERNATIVE_COLUMNS, alternatives_rows(plan, hours))
    for line in detail_lines(plan, named):
        console.print(line, soft_wrap=unwrapped(console), markup=False)
    for p in (plan.prefill, plan.decode):
        console.print()
        render_role_memory(p, console, named)
    console.print()
    render_launches(plan, console)


def detail_lines(plan: DisaggPlan, named=None) -> list[str]:
    """The hand-over, the time to first token by part, the time per output token, the cost per
    token, and each role's binds and connector, a line each (the text's and the page's words)."""
    from planner.numbers import percent, size
    from pricing.errors import render

    h, t = plan.handover, plan.ttft
    lines = [f"hand-over: {size(h.request_bytes)} of KV cache per request ({size(h.decode_rank_bytes)} read by "
             f"each decode rank, {size(h.prefill_rank_bytes)} sent by the busiest prefill rank) over {h.link} at "
             f"{h.link_gbytes_per_second_per_gpu:g} GB/s per GPU: {duration(h.transfer_ms)}"]
    if not h.one_node:
        lines.append(render(tcp_line("the hand-over", "NIXL"), named))
    lines.append(f"time to first token: queue {duration(t.queue_ms)} (M/D/1 per prefill rank, "
                 f"{percent(t.prefill_utilization, 0)} utilized) + prefill {duration(t.prefill_ms)} + hand-over "
                 f"{duration(t.transfer_ms)} + first decode step {duration(t.first_step_ms)} = "
                 f"{duration(t.total_ms)}")
    if plan.tpot_ms is not None and plan.decode_batch_per_rank is not None:
        band = f" ({plan.tpot_band.words()})" if plan.tpot_band else ""
        lines.append(f"time per output token (step model): {duration(plan.tpot_ms)}{band} at "
                     f"{count(plan.decode_batch_per_rank)} running requests per decode rank")
    lines += token_cost_lines(plan)
    for p in (plan.prefill, plan.decode):
        lines.append(f"{p.role} binds: {p.binds_role}")
        lines.append(f"{p.role} connector: NixlConnector {p.kv_role}, {size(p.connector_gpu_bytes)} on the GPU "
                     f"beyond the {size(p.memory['kv_pool'])} KV pool it registers, "
                     f"{size(p.connector_host_bytes)} host buffer per rank (kv_buffer_device "
                     f"{'cpu' if p.connector_host_bytes else 'cuda'}); NIXL/UCX's own memory is outside vLLM's "
                     "accounting")
    return lines


def render_role_memory(p, console: Console, named=None) -> None:
    """One role's rank: its memory from the kernel its pool carries."""
    from pricing.kernel.report import memory_report

    gpus = f"{p.gpus} × {p.chip} GPU{'s' if p.gpus > 1 else ''}"
    console.print(f"[bold]{p.role}[/bold]: {gpus} as {split(p)}, one rank:")
    kernel = p.kernel
    render_memory(memory_report(kernel, kernel.engine.max_model_len), kernel, console, named=named)


def render_launches(plan: DisaggPlan, console: Console) -> None:
    """Every process of both pools, one command a line, then the router."""
    for p in (plan.prefill, plan.decode):
        console.print(f"start {p.replicas} {p.role} instance{'s' if p.replicas > 1 else ''} of {p.gpus_per_replica} "
                      f"GPU{'s' if p.gpus_per_replica > 1 else ''} each, one line per process ($<NODE>_IP: the "
                      "address of that node, which the NIXL side channel listens on):", soft_wrap=unwrapped(console))
        for launch in p.launches:
            command(console, launch.line)
    console.print("then the router in front of both pools (vLLM's documented proxy; llm-d's inference scheduler or "
                  "Dynamo's router serve the same role in production):", soft_wrap=unwrapped(console))
    command(console, plan.router.line)


def disagg_answer(plan: DisaggPlan, console: Console, named=None) -> None:
    """The disaggregated plan's answer, its last lines: both pools, their cost, what the search proved."""
    console.print()
    for line in answer_lines(plan, named):
        console.print(line, soft_wrap=unwrapped(console), markup=False)


def answer_lines(plan: DisaggPlan, named=None) -> list[str]:
    """Both pools and their cost ("best: ..."), then what the search proved ("search: ...")."""
    from planner.numbers import money, plural
    from planner.report.words import solver_phrase
    from pricing.errors import render

    p, d = plan.prefill, plan.decode
    return [f"best: {plural(p.gpus, f'prefill {p.chip} GPU')} as {split(p)} + "
            f"{plural(d.gpus, f'decode {d.chip} GPU')} as {split(d)}, "
            f"{money(plan.cost_per_hour, p.price_estimate or d.price_estimate)}/hour",
            f"search: {plan.candidates_evaluated:,} kernel evaluations, {plan.pairs:,} prefill × decode pairs, "
            + render(solver_phrase(plan.solver_status), named)]


def token_cost_lines(plan: DisaggPlan) -> list[str]:
    """$/M tokens at the workload, as an aggregated pool's (planner/report/render.py cost_lines): both
    pools' whole cost charged to each kind of token."""
    if plan.cost_per_million_output_tokens is None:
        return []
    estimate = plan.prefill.price_estimate or plan.decode.price_estimate
    return [f"cost per token: {per_million_tokens(plan.cost_per_million_output_tokens, estimate)} per million output "
            f"tokens, {per_million_tokens(plan.cost_per_million_input_tokens, estimate)} per million input tokens "
            "(each both pools' whole cost over that kind of token at the workload)"]


def render_disagg_infeasible(plan: DisaggPlan, console: Console, workload: str) -> None:
    console.print(f"[bold red]no disaggregated fleet fits[/bold red] {workload}:")
    for e in plan.explanations:
        console.print(f"- {e.text}", soft_wrap=unwrapped(console), markup=False)


def render_choice(choice: ServingChoice, console: Console) -> None:
    console.print()
    label = {Serving.AGG: "aggregated", Serving.DISAGG: "disaggregated"}[choice.chosen]
    console.print(f"[bold]serving {choice.mode}:[/bold] {label}. {choice.why}", soft_wrap=unwrapped(console))
    if choice.aggregated is not None:
        render_notes([], console)

