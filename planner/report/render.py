"""The plan for people: the table of the best pool and its alternatives, the winner's per-rank
memory (the kernel's own printout), and the command that starts one instance; a scenario's pools
and its variants side by side."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.text import Text

from planner.app.result import PlanResult, PoolPlan
from planner.kinds import Role
from planner.numbers import (
    amount,
    count,
    duration,
    durations,
    given,
    money,
    number,
    per_million_tokens,
    percent,
    percent_value,
    plural,
    tokens,
    with_article,
)
from planner.report.memory import render_memory, render_provenance
from planner.report.tables import Col, print_table, unwrapped
from planner.report.words import no_plan_cell, price_footnotes, solver_phrase, unserved_words
from pricing.errors import mention, render
from pricing.kernel.report import memory_report

if TYPE_CHECKING:  # pragma: no cover
    from planner.app.fleet import FleetResult
    from planner.app.review import Comparison


def split(p: PoolPlan, names: bool = True) -> str:
    """'2 × (tp 8, pp 1, dp 1, ep off, dcp 1)', or '2 × (8, 1, 1, off, 1)' under a header that names them."""
    parts = (("tp", p.tensor_parallel_size), ("pp", p.pipeline_parallel_size), ("dp", p.data_parallel_size),
             ("ep", "on" if p.enable_expert_parallel else "off"), ("dcp", p.decode_context_parallel_size))
    inner = (", " if names else ",").join(f"{k} {v}" if names else str(v) for k, v in parts)
    return f"{count(p.replicas)} × ({inner})"


def _nodes(p: PoolPlan) -> str:
    """Nodes a pool takes: '2 × 2' for two instances of two nodes each, '-' within one node."""
    return f"{p.replicas} × {p.nodes_per_replica}" if p.nodes_per_replica > 1 else "-"


PLAN_COLUMNS = (Col("", "name"), Col("chip", "name"), Col("GPUs"), Col("nodes", drop=3),
                Col("replicas ×\n(tp,pp,dp,ep,dcp)", "name"), Col("util.", drop=4), Col("token\nbudget", drop=5),
                Col("max_num_seqs", drop=6), Col("held"), Col("headroom", drop=2), Col("$/hour"),
                Col("$/month", drop=1))


def target_phrase(result: PlanResult) -> str:
    """What was asked, every target restated: '64 concurrent requests at 1,048,576 tokens, TPOT ≤
    30 ms, ... (+20% headroom: 77 required)'."""
    t = result.target
    text = f"{plural(t.asked, 'concurrent request')} at {count(t.context_length)} tokens"
    if t.sized_by_rate:  # no concurrency asked: the rate and the mean targets size the pool
        text = f"{given(t.requests_per_second)} requests/s at {count(t.context_length)} tokens"
    if t.service_targets:  # a rate with percentile targets: the concurrency is what the rate holds
        held = f", {count(t.asked)} concurrent held" if t.asked > 1 else ""
        text = (f"{given(t.requests_per_second)} requests/s at "
                f"{count(t.context_length)} tokens{held}, " + ", ".join(t.service_targets))
    if t.tpot_ms is not None:
        text += f", TPOT ≤ {duration(t.tpot_ms)}"
    if t.ttft_ms is not None:
        text += f", TTFT ≤ {duration(t.ttft_ms)}"
    if t.requests_per_second is not None and not t.service_targets and not t.sized_by_rate:
        text += f", {given(t.requests_per_second)} requests/s"
    if t.isl is not None:
        text += f" (prompts of {count(t.isl)}, outputs of {count(t.osl)} tokens)"
    if t.headroom_percent:
        text += f" (+{percent_value(t.headroom_percent)} headroom: {count(t.required)} required)"
    return text


def plan_rows(result: PlanResult) -> list[list[str]]:
    """The best pool and its alternatives, one row each in PLAN_COLUMNS' order."""
    rows = []
    implicit = result.target.implicit_concurrency
    for i, p in enumerate([result.best, *result.alternatives]):
        kv = "" if p.kv_cache_dtype == "auto" else f", kv {p.kv_cache_dtype}"
        rows.append(["best" if i == 0 else str(i), p.chip, count(p.gpus), _nodes(p), split(p, names=False) + kv,
                     f"{p.gpu_memory_utilization:.2f}", count(p.max_num_batched_tokens), count(p.max_num_seqs),
                     count(p.held), "-" if implicit else percent(p.headroom),
                     amount(p.cost_per_hour, p.price_estimate),
                     amount(p.cost_per_hour * result.hours_per_month, p.price_estimate, cents=False)])
    return rows


def plans_table(result: PlanResult, console: Console) -> None:
    """The plan table, fitted to the console (planner/report/tables.py)."""
    print_table(console, f"{result.model}: {target_phrase(result)}", PLAN_COLUMNS, plan_rows(result), csv_hint=True)


def margin_line(result: PlanResult) -> str:
    """'margin: 0.9% of each rank's predicted KV pool is not counted on (--margin sets it; --provenance
    says where it comes from)': short; the source is in the provenance and the JSON. It mentions
    margin and provenance: the printer names them."""
    given = not result.margin.source.startswith("registry ")  # the margin asked for (planner/app/plan.py)
    margin = mention("margin")
    return (f"margin: {percent(result.margin.fraction)} of each rank's KV pool not counted on ("
            + (result.margin.source if given else f"the calibration's; {margin} sets it, {mention('provenance')} "
               "says why") + ")")


def best_line(best: PoolPlan) -> str:
    """'best: 4 × h200 GPUs as 1 × (tp 1, ...), 100 requests held, $18.16*/hour'."""
    return f"best: {pool_phrase(best)}"


def pool_phrase(p) -> str:
    """'4 × h200 GPUs as 1 × (tp 1, ...), 100 requests held, $18.16*/hour' (a plan's or a review's pool)."""
    gpus = f"{count(p.gpus)} × {p.chip} GPU{'s' if p.gpus > 1 else ''}"
    return f"{gpus} as {split(p)}, {count(p.held)} requests held, {money(p.cost_per_hour, p.price_estimate)}/hour"


def render_plan(result: PlanResult, console: Console, provenance: bool = False, named=None) -> None:
    """The feasible plan: table, winner's memory per rank, `vllm serve` and the replica count; a
    field its sentences mention named as `named` calls it (the command's flag)."""
    best = result.best
    plans_table(result, console)
    for note in price_footnotes([best, *result.alternatives], named):
        console.print(note)
    console.print(f"context length {count(result.target.context_length)} tokens (max_model_len); cost is GPUs × "
                  f"$/GPU-hour, {result.hours_per_month} hours a month; ties go to fewer GPUs, then more headroom, "
                  "then the larger token budget")
    if result.margin is not None:
        console.print(render(margin_line(result), named), markup=False)
    console.print()
    for line in speed_lines(best) + serving_lines(best) + cost_lines(best):
        console.print(line, soft_wrap=unwrapped(console), markup=False)
    console.print()
    render_memory(best.memory or memory_report(best.kernel, result.target.context_length), best.kernel, console,
                  named=named)
    if provenance:
        render_provenance(result.provenance, console, named)
    console.print()
    print_node_map(console, best.nodes, [(best.model, best.instances)],
                   f"node map: {best.chip} nodes of {best.nodes[0].gpus} GPUs" if best.nodes else "node map")
    spare = [n for n in best.nodes if n.spare]
    if spare:
        gpus = sum(n.gpus for n in spare)
        console.print(f"spare: {len(spare)} {best.chip} node{'s' if len(spare) > 1 else ''} ({gpus} GPUs) kept free "
                      f"({render(mention('spare'), named)}), ${gpus * best.price_per_gpu_hour:,.2f}/hour beyond the "
                      "pool's cost")
    render_launch(best, console, named=named)
    render_notes(result.notes, console)
    render_answer(result, console, named)


def render_answer(result: PlanResult, console: Console, named=None) -> None:
    """The answer, last, so that a terminal's last screen shows it: the best pool and its cost, what
    binds it, and what the search proved."""
    console.print()
    console.print(best_line(result.best), soft_wrap=unwrapped(console), markup=False)
    console.print(f"binds: {result.best.binds}", soft_wrap=unwrapped(console), markup=False)
    console.print(f"search: {result.search.candidates_evaluated:,} kernel evaluations, "
                  + render(solver_phrase(result.search.solver_status, result.search.solver_stages), named),
                  soft_wrap=unwrapped(console), markup=False)


def render_brief(result: PlanResult, console: Console, named=None) -> None:
    """`plan --brief`: the plan line, what binds, the launch commands."""
    best = result.best
    console.print(f"{result.model}: {target_phrase(result)}", soft_wrap=unwrapped(console), markup=False)
    console.print(best_line(best), soft_wrap=unwrapped(console), markup=False)
    console.print(f"binds: {best.binds}", soft_wrap=unwrapped(console), markup=False)
    render_launch(best, console, named=named)
    render_notes(result.notes, console)


NODE_MAP_COLUMNS = (Col("node", "name"), Col("GPUs", "name"), Col("serves", "name"), Col("role", "name"), Col("port"))


def node_map_rows(nodes, pools) -> list[list[str]]:
    """One row per instance part on a node (its GPUs, what it serves, its port), then each node's
    idle GPUs and the spare nodes (NODE_MAP_COLUMNS). `pools`: (name, instances) pairs."""
    rows = []
    for name, instances in pools:
        for inst in instances:
            for rank, slot in enumerate(inst.slots):
                part = "" if len(inst.slots) == 1 else (", head" if rank == 0 else f", node {rank}")
                rows.append((slot.node, slot.gpus, f"{name} #{inst.replica}", inst.role + part,
                             str(slot.port) if slot.port is not None else "-"))
    order = {n.node: i for i, n in enumerate(nodes)}
    for n in nodes:
        idle = [g for g, u in enumerate(n.used_by) if not u]
        if n.spare:
            rows.append((n.node, list(range(n.gpus)), "spare (kept free)", "", "-"))
        elif idle:
            rows.append((n.node, idle, "idle", "", "-"))
    return [[node, gpu_ranges(gpus), serves, role, port]
            for node, gpus, serves, role, port in sorted(rows, key=lambda r: (order.get(r[0], 0), r[1][0]))]


def print_node_map(console: Console, nodes, pools, title: str = "node map") -> None:
    """The node map fitted to the console: a table, or one node's part a block where it is too wide."""
    print_table(console, title, NODE_MAP_COLUMNS, node_map_rows(nodes, pools), records=True,
                title_justify="center")  # as it was printed before it was fitted (README's headline)


def gpu_ranges(gpus: list[int]) -> str:
    """[0, 1, 2, 3, 6] -> '0-3,6'."""
    out, start = [], None
    for i, g in enumerate(gpus):
        if start is None:
            start = g
        if i + 1 == len(gpus) or gpus[i + 1] != g + 1:
            out.append(str(start) if start == g else f"{start}-{g}")
            start = None
    return ",".join(out)


def render_launch(p: PoolPlan, console: Console, label: str = "", named=None) -> None:
    """Where every instance of the pool runs and the commands that start it, by node: one
    `vllm serve` per instance within a node (its CUDA_VISIBLE_DEVICES and port), one per node of
    an instance that spans nodes (the head first), and the Ray form of such an instance once."""
    from planner.app.serve import WEIGHTS, across_nodes

    many = p.replicas > 1
    head = f"{label}: " if label else ""
    if p.nodes_per_replica > 1:
        per_node = p.gpus_per_replica // p.nodes_per_replica
        console.print(f"{head}start {p.replicas} replica{'s' if many else ''} of {p.gpus_per_replica} GPUs each; one "
                      f"instance takes {p.nodes_per_replica} nodes of {per_node} GPUs "
                      f"({across_nodes(p.deployment, per_node)}). "
                      "On each node of an instance, with HEAD_IP the head node's address:",
                      soft_wrap=unwrapped(console))
        console.print(render(tcp_line("the traffic between an instance's nodes", "NCCL"), named),
                      soft_wrap=unwrapped(console), markup=False)
    else:
        console.print(f"{head}start {p.replicas} replica{'s' if many else ''} of {p.gpus_per_replica} "
                      f"GPU{'s' if p.gpus_per_replica > 1 else ''} each, one command per instance, on the node "
                      "named in the comment above it (each in its own shell, or end it with &):",
                      soft_wrap=unwrapped(console))
    if any(c.launch.serve.model.placeholder for i in p.instances for c in i.commands
           if c.launch is not None and c.launch.serve is not None):  # a bare config.json: no weights named
        console.print(f"{WEIGHTS[1:]}: the weights' folder or Hugging Face id is needed ("
                      + render(mention("model"), named) + " named a config file with no weights beside it); set it "
                      "before the commands", soft_wrap=unwrapped(console), markup=False)
    for inst in p.instances:
        for c in inst.commands:
            where = f"# {c.node}: replica {inst.replica}" + (f", {c.what}" if len(inst.commands) > 1 else "")
            command(console, where)
            command(console, c.command)
    first = p.instances[0] if p.instances else None
    if first is not None and first.ray:
        command(console, "# or with Ray, for each instance (replica 0 shown; the others likewise on their nodes):")
        for c in first.ray:
            command(console, f"# {c.node}: {c.what}")
            command(console, c.command)


def tcp_line(what: str, library: str) -> str:
    """What crosses the network between pods or hosts runs at the NIC's speed only over its RDMA device
    (NIXL through UCX, NCCL through its IB/RoCE transport); without one they fall back to TCP. One line,
    the --emit k8s flag that asks for the device mentioned."""
    return (f"network: {what} runs at the NIC's speed only over RDMA; without an RDMA device {library} falls back to "
            f"TCP (with {mention('emit')} k8s, {mention('rdma')} RESOURCE=N asks for the cluster's)")


def command(console: Console, text: str) -> None:
    """A launch command as one line, never wrapped or marked up, so it pastes as is."""
    console.out(text, highlight=False)


def render_notes(notes: list[str], console: Console) -> None:
    """Input that had no effect, one line each (never a silent fallback)."""
    for note in notes:
        console.print(f"note: {note}", soft_wrap=unwrapped(console), markup=False, style="yellow")


def infeasible_line(result: PlanResult) -> str:
    """`plan`'s answer when nothing fits, as the one line on stderr before the reasons."""
    why = ", ".join(f"{e.chip}: {e.constraint.replace('_', ' ')}" if e.chip else e.constraint.replace("_", " ")
                    for e in result.explanations)
    return f"plan: no pool fits {result.model}: {target_phrase(result)}" + (f" ({why}; the reasons follow)"
                                                                            if why else "")


def short_line(r: FleetResult) -> str:
    """A review's answer when not every service is served, as the one line on stderr."""
    return (f"plan: {r.review or 'scenario'} — {r.variant}: {unserved_words(r)}: "
            + "; ".join(f"{s.service} ({s.brief})" for s in r.short))


def render_infeasible(result: PlanResult, console: Console) -> None:
    console.print(f"[bold red]no pool fits[/bold red] {result.model}: {target_phrase(result)}",
                  soft_wrap=unwrapped(console))
    for e in result.explanations:
        console.print(f"- {e.text}", soft_wrap=unwrapped(console), markup=False)
    render_notes(result.notes, console)


def serving_lines(p: PoolPlan) -> list[str]:
    """The simulated benchmark of a pool sized to service targets."""
    s = p.serving
    if s is None:
        return []

    def spread(d):
        return durations([d[k] for k in ("p50", "p90", "p99")])

    return [f"service targets ({', '.join(s.targets)}) at {given(s.requests_per_second)} requests/s, "
            f"{number(s.requests_per_second_per_instance)} per instance (vLLM 0.33's scheduler simulated on the step "
            f"model, {count(s.requests_simulated)} Poisson requests): p50/p90/p99 TTFT {spread(s.ttft_ms)}, TPOT "
            f"{spread(s.tpot_ms)}, ITL {spread(s.itl_ms)}, E2E {spread(s.e2e_ms)}; goodput {percent(s.goodput)} "
            "of requests meet every bound" + (f"; {plural(s.preemptions, 'preemption')}" if s.preemptions else "")]


def cost_lines(p: PoolPlan) -> list[str]:
    """$/M tokens at the workload (each charges the pool's whole cost to that kind of token)."""
    if p.cost_per_million_output_tokens is None:
        return []
    line = (f"cost per token: {per_million_tokens(p.cost_per_million_output_tokens, p.price_estimate)} per million "
            "output tokens")
    if p.cost_per_million_input_tokens is None:
        return [line + " (the pool's whole cost over the output of the speed figures above)"]
    line += f", {per_million_tokens(p.cost_per_million_input_tokens, p.price_estimate)} per million input tokens"
    return [line + " (each the pool's whole cost over that kind of token at the workload)"]


def speed_lines(p: PoolPlan) -> list[str]:
    """How fast the pool serves (the step model, pricing/step): at its planned concurrency."""
    s = p.step
    if s is None:
        from pricing.step import missing_rates

        return [f"speed: unknown ({missing_rates(p.kernel.chip, p.kernel.reg)})"]  # the plan's registry
    rate = f", {number(s.pool_requests_per_second)} requests/s" if s.pool_requests_per_second else ""
    ranks = p.replicas * p.data_parallel_size
    holds = p.held // ranks  # what binds counts: each rank's held requests
    load = "" if s.batch_per_rank == holds else (f"; the load asked over the pool's {plural(ranks, 'rank')}, each "
                                                  f"holding up to {count(holds)}")
    tpot_band = f" ({s.tpot_band.words()})" if s.tpot_band else ""
    ttft_band = f" ({s.ttft_band.words()})" if s.ttft_band else ""
    model = f"step model from {s.step_composition}" if s.step_composition else "step model"
    return [f"speed ({model}): {duration(s.tpot_ms)} per output token{tpot_band} at {count(s.batch_per_rank)} "
            f"requests per rank ({count(s.context_tokens)} tokens of context{load}), first token of "
            f"{with_article(tokens(s.prompt_tokens))} prompt in {duration(s.ttft_ms)}{ttft_band}; "
            f"{count(s.output_tokens_per_second)} output tokens/s per instance, "
            f"{count(s.output_tokens_per_second_per_gpu)} per GPU, {count(s.pool_output_tokens_per_second)} for the "
            f"pool{rate}; the step is {s.step_bound}-bound"] + ([f"speculative decoding: {s.speculative}"]
                                                                if s.speculative else [])


def fleet_columns(hours: int) -> list[Col]:
    """The columns of one review's table of services."""
    return [Col("service", "name"), Col("model", "name", drop=7), Col("chip", "name"), Col("GPUs"),
            Col("replicas ×\n(tp,pp,dp,ep,dcp)", "name"), Col("util.", drop=4), Col("token\nbudget", drop=5),
            Col("max_num_seqs", drop=6), Col("held /\nasked"), Col("headroom", drop=2), Col("$/hour"),
            Col(f"$/month\n({hours} h)", drop=1)]


def fleet_rows(r: FleetResult, hours: int) -> list[list[str]]:
    """A review's pools, one row each in fleet_columns' order."""
    return [[p.service, p.model, p.chip, count(p.gpus), split(p, names=False), f"{p.gpu_memory_utilization:.2f}",
             count(p.max_num_batched_tokens), count(p.max_num_seqs),
             f"{count(p.held)} / {'-' if p.target.implicit_concurrency else count(p.asked)}",
             "-" if p.target.implicit_concurrency else percent(p.headroom, 0),
             amount(p.cost_per_hour, p.price_estimate),
             amount(p.cost_per_hour * hours, p.price_estimate, cents=False)] for p in r.services]


def render_fleet(r: FleetResult, console: Console, named=None) -> None:
    """A review's result; the fields its sentences mention named as `named` calls them."""
    hours = r.hours_per_month
    title = f"{r.review or 'scenario'} — {r.variant}"
    from planner.report.review import search_line

    if not r.feasible:
        console.print(Text(f"{title}: {render(unserved_words(r), named)}", style="bold red"),
                      soft_wrap=unwrapped(console))
        for s in r.short:
            console.print(f"  {s.service} is short: {s.reason}", markup=False)
        console.print(search_line(r, named), soft_wrap=unwrapped(console))
        if r.over_the_day is not None:  # the inventory may hold the fleet over the day though not every peak at once
            from planner.report.fleet_schedule import render_over_the_day

            render_over_the_day(r.over_the_day, console)
        return
    print_table(console, title, fleet_columns(hours), fleet_rows(r, hours), box=box.SIMPLE_HEAD)
    for note in price_footnotes(r.services, named):
        console.print(note)
    for s in r.schedules:  # a service with traffic: its autoscaled schedule against its static pool
        from planner.report.schedule import render_schedule

        render_schedule(s, console)
    if r.over_the_day is not None:  # services with traffic on one inventory: the peak of the sum
        from planner.report.fleet_schedule import render_over_the_day

        render_over_the_day(r.over_the_day, console)
    for p in r.services:  # a disaggregated service's pools say what sets each (their speed is the fleet's)
        for line in (speed_lines(p) + serving_lines(p) + cost_lines(p) if p.role == Role.AGGREGATED
                     else [f"binds: {p.binds}"]):
            console.print(f"{p.service}: {line}", soft_wrap=unwrapped(console), markup=False)
        if p.role == Role.DECODE and p.handover is not None and not p.handover.one_node:  # once per service
            console.print(f"{p.served}: " + render(tcp_line("the hand-over", "NIXL"), named),
                          soft_wrap=unwrapped(console), markup=False)
    print_node_map(console, r.nodes, [(p.service, p.instances) for p in r.services],
                   f"node map: {sum(1 for n in r.nodes if any(n.used_by))} of the {len(r.nodes)} nodes in use")
    for note in r.placement_notes:
        console.print(f"note: {note}", soft_wrap=unwrapped(console), markup=False, style="yellow")
    for p in r.services:
        if p.instance_commands:  # a role's pool: one line per process, the decode pool's then the router
            command(console, f"# {p.service}, one line per process" + (", then the router" if p.role == Role.DECODE
                                                                       else ""))
            for line in p.instance_commands:
                command(console, line)
            continue
        render_launch(p, console, p.service, named)
    console.print()
    for line in fleet_answer(r, named):
        console.print(line, soft_wrap=unwrapped(console), markup=False)


def fleet_answer(r: FleetResult, named=None) -> list[str]:
    """A review's answer, the last lines of its text: each service's pool (a disaggregated service's
    role beside its name), then the total, its cost and what the search proved."""
    from planner.report.review import search_line

    lines = [f"{p.service}{'' if p.role == Role.AGGREGATED else f' ({p.role})'}: {pool_phrase(p)}"
             for p in r.services]
    used = ", ".join(f"{u.chip} {count(u.gpus)}" + (f" of {count(u.available)}" if u.available is not None else "")
                     for u in r.chips)
    estimate = any(p.price_estimate for p in r.services)
    return [*lines, f"total: {plural(r.gpus, 'GPU')} ({used}), {money(r.cost_per_hour, estimate)}/hour, "
            f"{money(r.cost_per_month, estimate, cents=False)}/month; {search_line(r, named)}"]


def comparison_answer(c: Comparison, named=None) -> list[str]:
    """A comparison's answer, its last lines: the cheapest point that serves every service, its pools,
    cost and solver status (fleet_answer), or that none does."""
    feasible = [r for r in c.results if r.feasible]
    if not feasible:
        return [f"none of the {plural(len(c.results), 'variant')} serves every service"]
    best = min(feasible, key=lambda r: r.cost_per_hour)
    return [f"cheapest: {best.variant}", *(f"  {line}" for line in fleet_answer(best, named))]


def render_comparison(c: Comparison, console: Console, named=None) -> None:
    from planner.report.review import binding_head, chips_of, delta, gpus_by_chip
    from planner.scenario import point_word

    hours = c.base.hours_per_month
    chips = chips_of(c)
    columns = ([Col("variant", "name")] + [Col(f"{chip}\nGPUs") for chip in chips]
               + [Col("$/hour"), Col(f"$/month\n({hours} h)", drop=2), Col("vs base", drop=1), Col("binds", "text")])
    rows = []
    for r in c.results:
        estimate = any(p.price_estimate for p in r.services)
        figures = ([amount(r.cost_per_hour, estimate), amount(r.cost_per_month, estimate, cents=False),
                    "—" if r is c.base else delta(r.cost_per_hour, c.base.cost_per_hour)]
                   if r.feasible else [no_plan_cell(r), no_plan_cell(r), "—"])
        rows.append([r.variant, *[count(gpus_by_chip(r, chip)) if r.feasible else "—" for chip in chips], *figures,
                     binding_head(r)])
    print_table(console, f"{c.review or 'scenario'}: variants", columns, rows, box=box.SIMPLE_HEAD)
    for note in price_footnotes([p for r in c.results for p in r.services], named):
        console.print(note, soft_wrap=unwrapped(console), markup=False)
    if c.ranking:
        columns = [Col("rank"), *[Col(a, "name") for a in c.grid], Col(f"$/month ({hours} h)"), Col("GPUs")]
        marked = {r.variant for r in c.results if any(p.price_estimate for p in r.services)}
        rows = [[count(g.rank), *[point_word(g.values[a], a) for a in c.grid],  # as the variants' names write them
                 amount(g.cost_per_month, g.variant in marked, cents=False) if g.feasible else "infeasible",
                 count(g.gpus) if g.feasible else "—"] for g in c.ranking]
        print_table(console, f"{c.review or 'scenario'}: grid points by cost", columns, rows, box=box.HEAVY_HEAD)
    console.print()
    for line in comparison_answer(c, named):
        console.print(line, soft_wrap=unwrapped(console), markup=False)
