"""`plan scenario FILE` and `plan compare`: capacity reviews from scenario files, and what-if
sweeps over chips, models and context lengths from the command line."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from planner import defaults
from planner.commands.memory import console_for_output
from planner.commands.registry_option import registry_option
from planner.fleet import FleetResult
from planner.result import price_footnotes, star
from planner.review import (
    Comparison,
    Ticker,
    binding,
    chart,
    chips_of,
    compare,
    delta,
    gpus_by_chip,
    line_chart,
    markdown,
)
from planner.scenario import Scenario, load_scenario, schema
from pricing.errors import InputError

FORMATS = click.Choice(["table", "json", "markdown"])


def _console() -> Console:
    return console_for_output(160)


def _err_console() -> Console:
    return Console(stderr=True)


def _check_chart_path(path: str | None) -> None:
    if path and Path(path).suffix.lower() not in (".png", ".svg"):
        raise InputError("--chart", f"{path} is neither .png nor .svg", "name a .png or .svg file")


def render_fleet(r: FleetResult, console: Console) -> None:
    hours = defaults.value("report.hours_per_month")
    title = f"{r.review or 'scenario'} — {r.variant}"
    if not r.feasible:
        console.print(f"[bold red]{title}: the inventory cannot serve every service[/bold red]")
        for s in r.short:
            console.print(f"  {s.service} is short: {s.reason}")
        return
    table = Table(title=title)
    for col in ("service", "model", "chip", "GPUs", "replicas × (tp, pp, dp, ep, dcp)", "util", "token budget",
                "max_num_seqs", "concurrency", "headroom", "$/hour", f"$/month ({hours} h)"):
        table.add_column(col, justify="left" if col in ("service", "model", "chip") else "right")
    for p in r.services:
        split = (f"{p.replicas} × ({p.tensor_parallel_size}, {p.pipeline_parallel_size}, {p.data_parallel_size}, "
                 f"{'on' if p.enable_expert_parallel else 'off'}, {p.decode_context_parallel_size})")
        table.add_row(p.service, p.model, p.chip, str(p.gpus), split, f"{p.gpu_memory_utilization:.2f}",
                      f"{p.max_num_batched_tokens:,}", str(p.max_num_seqs), f"{p.concurrency} / {p.target}",
                      f"{p.headroom * 100:.0f} %", f"{p.cost_per_hour:,.2f}{star(p)}",
                      f"{p.cost_per_hour * hours:,.0f}{star(p)}")
    console.print(table)
    for note in price_footnotes(r.services):
        console.print(note)
    used = ", ".join(f"{u.chip} {u.gpus}" + (f" of {u.available}" if u.available is not None else "")
                     for u in r.chips)
    console.print(f"total: {r.gpus} GPUs ({used}), ${r.cost_per_hour:,.2f}/hour, ${r.cost_per_month:,.0f}/month; "
                  f"solver {r.solver_status}, {r.candidates_evaluated:,} candidates in {r.seconds:.2f} s")
    for p in r.services:
        console.print(f"[dim]{p.service}:[/dim] {p.vllm_serve}" + (f"   # × {p.replicas} replicas"
                                                                  if p.replicas > 1 else ""))


def render_comparison(c: Comparison, console: Console) -> None:
    hours = defaults.value("report.hours_per_month")
    chips = chips_of(c)
    table = Table(title=f"{c.review or 'scenario'}: variants")
    for col in ["variant"] + [f"{chip} GPUs" for chip in chips] + ["$/hour", f"$/month ({hours} h)", "vs base",
                                                                     "binds"]:
        table.add_column(col, justify="left" if col in ("variant", "binds") else "right")
    for r in c.results:
        money = ([f"{r.cost_per_hour:,.2f}", f"{r.cost_per_month:,.0f}",
                  "—" if r is c.base else delta(r.cost_per_hour, c.base.cost_per_hour)]
                 if r.feasible else ["infeasible", "infeasible", "—"])
        table.add_row(r.variant, *[str(gpus_by_chip(r, chip)) for chip in chips], *money, binding(r))
    console.print(table)


def _emit(c: Comparison, fmt: str, with_variants: bool, chart_path: str | None) -> int:
    console = _console()
    if fmt == "json":
        payload = c.model_dump() if with_variants else c.base.model_dump()
        click.echo(json.dumps(payload, indent=2))
    elif fmt == "markdown":
        click.echo(markdown(c if with_variants else Comparison(review=c.review, base=c.base, variants=[])), nl=False)
    else:
        for r in c.results if with_variants else [c.base]:
            render_fleet(r, console)
        if with_variants:
            render_comparison(c, console)
    if chart_path:
        chart(c, chart_path)
    return 0 if all(r.feasible for r in (c.results if with_variants else [c.base])) else 1


@click.command("scenario")
@registry_option
@click.argument("file", required=False)
@click.option("--variants", "with_variants", is_flag=True, help="also plan every variant, side by side")
@click.option("--format", "fmt", type=FORMATS, default="table", show_default=True)
@click.option("--chart", "chart_path", help="draw GPUs per chip against the variants (.png or .svg)")
@click.option("--schema", "show_schema", is_flag=True, help="print the scenario file's JSON Schema")
@click.pass_context
def scenario_command(ctx, file, with_variants, fmt, chart_path, show_schema):
    """Plan every service of a scenario FILE together over its inventory."""
    if show_schema:
        click.echo(json.dumps(schema(), indent=2))
        return 0
    if not file:
        raise InputError("FILE", "missing", "give a scenario file, or --schema for its format")
    _check_chart_path(chart_path)
    scenario = load_scenario(file)
    ticker = Ticker(_err_console())
    c = compare(scenario, None if with_variants else [], progress=ticker)
    code = _emit(c, fmt, with_variants, chart_path)
    ctx.exit(code)


@click.command("compare")
@registry_option
@click.argument("file", required=False)
@click.option("--model", multiple=True, help="model (repeat to compare models)")
@click.option("--chip", multiple=True, help="chip (repeat to compare chips)")
@click.option("--concurrency", type=int, help="concurrent requests")
@click.option("--context-length", "--max-model-len", "context_length", type=int, multiple=True,
              help="context length (repeat to compare)")
@click.option("--kv-cache-dtype", default="auto", show_default=True)
@click.option("--headroom", type=float, default=0.0, show_default=True)
@click.option("--format", "fmt", type=FORMATS, default="table", show_default=True)
@click.option("--chart", "chart_path", help="draw GPUs against the axis, one line per chip (.png or .svg)")
@click.pass_context
def compare_command(ctx, file, model, chip, concurrency, context_length, kv_cache_dtype, headroom, fmt, chart_path):
    """The same scenario under each variant (FILE), or a sweep over models, chips and context
    lengths given on the command line."""
    _check_chart_path(chart_path)
    if file:
        scenario = load_scenario(file)
        c = compare(scenario, progress=Ticker(_err_console()))
        ctx.exit(_emit(c, fmt, True, chart_path))
    if not model or not chip or concurrency is None:
        raise InputError("compare", "needs a scenario FILE, or --model, --chip and --concurrency",
                         "for example: plan compare --model dsv4.1-flash --chip h200 --chip b200 --concurrency 64")
    if concurrency < 1:
        raise InputError("--concurrency", f"must be at least 1, got {concurrency}", "give the concurrent requests")
    lengths = list(context_length) or [None]
    points = list(itertools.product(model, lengths, chip))
    scenarios = []
    for m, length, c_id in points:
        service = {"name": m, "model": m, "concurrency": concurrency, "chips": [c_id], "headroom": headroom,
                   "kv_cache_dtype": [kv_cache_dtype]}
        if length:
            service["context_length"] = length
        label = f"{m} @ {length:,} on {c_id}" if length else f"{m} on {c_id}"
        scenarios.append((label, Scenario(review="what-if sweep", services=[service])))
    from planner.fleet import plan_scenario
    from planner.scenario import check_references

    for _, s in scenarios:
        problems = check_references(s, "compare")
        if problems:
            raise InputError("compare", problems[0].split(": ", 1)[1], "fix the option")
    ticker = Ticker(_err_console())
    results = []
    for i, (label, s) in enumerate(scenarios):
        ticker(i, len(scenarios), label)
        results.append(plan_scenario(s, label))
    ticker(len(scenarios), len(scenarios), "done")
    comparison = Comparison(review="what-if sweep", base=results[0], variants=results[1:])
    if fmt == "json":
        click.echo(json.dumps(comparison.model_dump(), indent=2))
    elif fmt == "markdown":
        click.echo(markdown(comparison), nl=False)
    else:
        render_comparison(comparison, _console())
    if chart_path:
        _axis_chart(points, results, chart_path)
    ctx.exit(0 if all(r.feasible for r in results) else 1)


def _axis_chart(points, results, path: str) -> None:
    """GPUs against context length, one line per chip (and model, when several)."""
    models = {m for m, _, _ in points}
    series: dict[str, list[tuple[float, float]]] = {}
    for (m, length, c_id), r in zip(points, results, strict=True):
        label = c_id if len(models) == 1 else f"{c_id} · {m}"
        series.setdefault(label, []).append((length or 0, r.gpus if r.feasible else float("nan")))
    line_chart({label: sorted(v) for label, v in series.items()}, path, "context length (tokens)", "what-if sweep",
               log_x=True)


def register(cli: click.Group) -> None:
    cli.add_command(scenario_command)
    cli.add_command(compare_command)
