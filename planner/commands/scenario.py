"""`plan scenario FILE` and `plan compare`: capacity reviews from scenario files, and what-if
sweeps over chips, models and context lengths from the command line."""

from __future__ import annotations

import dataclasses
import itertools
import json
from contextlib import nullcontext
from typing import TYPE_CHECKING

import click
from click.core import ParameterSource
from pydantic import ValidationError
from rich.console import Console

from planner import defaults
from planner.commands import emit
from planner.commands.emit import apply_k8s_options, autoscaler_options
from planner.commands.flags import check_options, file_flag, names_flags, option_flag, own_flag, plan_flag, service_flag
from planner.commands.plan import (
    HTML_HELP,
    check_output_path,
    html_output,
    max_rate_option,
    options_list,
    print_schema,
    schema_option,
    spare_option,
    time_limit_option,
    typed_command,
    write_charts,
    write_html,
)
from planner.commands.progress import progress, wanted
from planner.commands.registry_option import (
    command_console,
    command_defaults,
    command_registry,
    command_tables,
    registry_option,
    step_model_option,
)
from planner.report.render import render_comparison, render_fleet, short_line
from planner.request import validation_message
from planner.scenario import Scenario, ScenarioErrors, check_scenario, schema
from pricing.errors import InputError
from pricing.units import tokens_label

if TYPE_CHECKING:  # pragma: no cover
    from planner.app.api import Comparison

FORMATS = click.Choice(["table", "json", "markdown", "html"])
FORMAT_HELP = ("markdown: a report to paste in; " + HTML_HELP)


def _console() -> Console:
    return command_console(None)


def _err_console() -> Console:
    return Console(stderr=True)


def _after(ctx) -> float:
    """Seconds a sweep takes before its progress bar shows (the command's report.progress_after)."""
    return float(command_defaults(ctx).value("report.progress_after"))


def executor_options() -> list:
    """--executor and --ray-address, on `plan scenario` and `plan compare` (planner/app/executors.py)."""
    return [click.option("--executor", type=click.Choice(defaults.value("parallel.executors")),
                         default=defaults.value("parallel.executor"),
                         show_default=True, help="where the variants are planned: one after another, a process "
                                                 "pool (one worker per CPU), or Ray (pip install '.[ray]')"),
            click.option("--ray-address", help="the Ray cluster to run on with --executor ray (ray.init's "
                                               "address, e.g. ray://head:10001); default: a local Ray runtime")]


def apply_options_to(options: list):
    def decorate(f):
        for option in reversed(options):
            f = option(f)
        return f
    return decorate


def check_concurrency(n: int, flag: str) -> None:
    limit = defaults.value("limits.max_concurrency")
    if n < 1 or n > limit:
        raise InputError(flag, f"{n:,} is outside 1 … {limit:,}", "give the concurrent requests one review plans for")


def unplanned(scenario) -> str | None:
    """Without --variants or --variant: the file's variants and grid points that are not planned, in
    one line (None when it has none)."""
    from planner.numbers import plural
    from planner.scenario import grid_points

    points = {name for name, _ in grid_points(scenario.grid)}
    named = [v for v in scenario.variants if v not in points]
    parts = ([f"{plural(len(named), 'variant')} ({', '.join(named)})"] if named else []) + (
        [f"{plural(len(points), 'grid point')} ({' × '.join(scenario.grid)})"] if points else [])
    if not parts:
        return None
    one = len(named) + len(points) == 1
    return (f"only the base is planned: the file's {' and '.join(parts)} {'is' if one else 'are'} planned with "
            "--variants (or --variant NAME)")


def _emit(c: Comparison, fmt: str, with_variants: bool, chart_path: str | None, named=file_flag,
          page: tuple[str, object, object] | None = None, notes: tuple[str, ...] = ()) -> int:
    """The review printed, the fields its sentences mention named as `named` calls them; with
    `page` (its file, its About, what draws its charts) written as one HTML page instead; `notes`:
    the command's own, said on stderr beside the review's."""
    from planner.report.review import markdown

    console = _console()
    for r in c.results if with_variants else [c.base]:  # the answer first, one line each on stderr
        if not r.feasible:
            click.echo(short_line(r), err=True)
    if fmt != "json":  # what the JSON carries as `notes`: input that had no effect, said on stderr, before the
        # review, whose answer ends it (a terminal's last screen)
        for note in dict.fromkeys([*notes, *(n for r in (c.results if with_variants else [c.base]) for n in r.notes)]):
            click.echo(f"plan: note: {note}", err=True)
    if fmt == "json":
        click.echo((c if with_variants else c.base).model_dump_json(indent=2))
    elif fmt == "markdown":
        alone = c.model_copy(update={"variants": [], "grid": {}, "ranking": []})  # the base by itself
        click.echo(markdown(c if with_variants else alone, named), nl=False)
    elif fmt == "html":
        from planner.report.html import review_page

        path, about, draw = page
        write_html(review_page(c, about, draw, named, with_variants), path)
    else:
        for r in c.results if with_variants else [c.base]:
            render_fleet(r, console, named)
        if with_variants:
            render_comparison(c, console, named)
    if chart_path:
        from planner.report.schedule_chart import review_charts

        write_charts(lambda: review_charts(c, chart_path, named), chart_path)
    return 0 if all(r.feasible for r in (c.results if with_variants else [c.base])) else 1


@click.command("scenario")
@registry_option
@step_model_option
@click.argument("file", required=False)
@click.option("--variants", "with_variants", is_flag=True, help="also plan every variant, side by side")
@click.option("--variant", "variant_names", multiple=True, help="plan these variants beside the base (repeat)")
@click.option("--format", "fmt", type=FORMATS, default="table", show_default=True, help=FORMAT_HELP)
@click.option("--chart", "chart_path", help="draw GPUs per chip and $/month, stacked by service, for the base and "
              "variants (.png or .svg), and the base's node map beside it (FILE-nodes.png)")
@click.option("--file-schema", "show_file_schema", is_flag=True, help="print the scenario file's JSON Schema")
@schema_option()
@time_limit_option()
@apply_options_to(executor_options())
@spare_option()
@apply_k8s_options
@apply_options_to(autoscaler_options())
@click.pass_context
@names_flags(file_flag)
def scenario_command(ctx, file, with_variants, variant_names, fmt, chart_path, show_file_schema, show_schema,
                     time_limit, executor, ray_address, spare, **k8s):
    """Plan every service of a scenario FILE together over its inventory."""
    if show_file_schema:
        click.echo(json.dumps(schema(), indent=2, ensure_ascii=False))
        return 0
    if show_schema:
        return print_schema()
    if not file:
        raise InputError("FILE", "missing", "give a scenario file, or --file-schema for its format")
    check_options(ctx)  # an option that cannot apply (planner/commands/flags.py NEEDS)
    check_output_path(chart_path)
    page_path = html_output(ctx, {"fmt": fmt, **k8s})
    to = emit.emit_of({"fmt": fmt, **k8s})
    from planner.app import api

    scenario = api.scenario_of(file, command_registry(ctx))
    if spare:
        scenario = scenario.model_copy(update={"spare": spare})
    if to is not None:  # the manifests' checks, before any planning (which merges each service once)
        emit.check_chips(to, [c for s in scenario.services for c in scenario.limits(s).chips])
        emit.check_serving(to, [(s.name, scenario.service_spec(s).serving) for s in scenario.services])
    if k8s.get("autoscaler") and not any(scenario.merged(s).traffic for s in scenario.services):
        raise InputError("--autoscaler", "has no effect without a service's traffic: (nothing is autoscaled)",
                         "give a service traffic:, or drop it")
    from planner.heap import freeze_imported
    from planner.report.charts import chart
    from planner.report.html import About
    from planner.report.review import Ticker

    freeze_imported()
    with_variants = with_variants or bool(variant_names)
    shown = wanted(fmt == "json")  # the variants' bar, or the base's stages alone (rich shows one live display)
    with nullcontext() if with_variants else progress(command_tables(ctx), fmt == "json"):
        c = api.review(scenario, list(variant_names) or with_variants, time_limit=time_limit, executor=executor,
                       ray_address=ray_address, progress=Ticker(_err_console(), shown and with_variants, _after(ctx)),
                       named=file_flag, registry=command_registry(ctx), tables=command_tables(ctx))
    about = About(releases([scenario, *(scenario.apply(r.variant) for r in c.variants)]), typed_command(ctx),
                  defaults=command_defaults(ctx))
    page = (page_path, about, lambda path: chart(c, path, file_flag)) if page_path else None
    note = None if with_variants else unplanned(scenario)
    code = _emit(c, fmt, with_variants, chart_path, page=page, notes=(note,) if note else ())
    if to is not None and (c.base.feasible or c.base.emitted_pools):  # the fleet over the day may fit alone
        from planner.report.autoscaler import autoscaled

        if not c.base.feasible:
            click.echo("note: --emit k8s writes the fleet over the day: its pools fit the inventory at every "
                       "interval, autoscaled, though the static plan does not", err=True)
        for line in emit.emit(*emit.fleet_pools(c.base.emitted_pools), to=to, autoscaled=autoscaled(c.base)):
            click.echo(line, err=fmt == "json")
    elif to is not None:
        click.echo("note: --emit k8s wrote nothing: the base cannot serve every service", err=True)
    ctx.exit(code)


AXES = ("model", "quantization", "concurrency", "context_length", "requests_per_second", "vllm_version", "chip")
FILE_OPTIONS = ("time_limit", "as_json", "show_provenance", "output_dir")  # what `plan compare FILE` takes beside it


def releases(scenarios: list[Scenario]) -> list[str]:
    """The vLLM releases the scenarios' services are planned for, each once (a page's footer)."""
    return list(dict.fromkeys(s.service_spec(service).vllm_version for s in scenarios for service in s.services))


def file_option(field: str) -> str | None:
    """`plan compare FILE`'s name for a field: its flag where it takes one beside the file
    (--time-limit), else the scenario file's key."""
    from planner.scenario import file_key

    return own_flag(field) if field in FILE_OPTIONS else file_key(field)


PROVENANCE_NOTE = "--provenance has no effect on compare: `plan --json` carries each plan's provenance"


def sweep_points(options: dict) -> list[dict]:
    """Every combination of the axes given several values, in the order given (chip last)."""
    values = {"model": list(options["model"]), "quantization": list(options["quantization"]) or [None],
              "concurrency": list(options["concurrency"]) or [None],
              "context_length": list(options["context_length"]) or [None],
              "requests_per_second": list(options["requests_per_second"]) or [None],
              "vllm_version": list(dict.fromkeys(options.get("vllm_version") or ())) or [None],
              "chip": list(dict.fromkeys(options["chip"]))}
    return [dict(zip(AXES, combo, strict=True)) for combo in itertools.product(*(values[a] for a in AXES))]


def _checkpoint(v) -> str:
    return str(v) if v is not None else "checkpoint"  # no --quantization: the checkpoint's own


# each axis's words: in a point's label (the axes that vary), and in the title (the values held fixed)
AXIS_WORDS = {
    "model": (_checkpoint, str),
    "quantization": (_checkpoint, str),
    "concurrency": (lambda v: f"× {v}", lambda v: f"{v:,} concurrent"),
    "context_length": (lambda v: f"@ {tokens_label(v) if v else 'max'}", lambda v: f"{tokens_label(v)} tokens"),
    "requests_per_second": (lambda v: f"{v:g}/s", lambda v: f"{v:g} requests/s"),
    "vllm_version": (lambda v: f"vLLM {v}", lambda v: f"vLLM {v}"),
    "chip": (lambda v: f"on {v}", lambda v: f"on {v}"),
}


def point_label(point: dict, varying: list[str]) -> str:
    parts = [AXIS_WORDS[axis][0](point[axis]) for axis in varying]
    return " ".join(parts) or f"{point['model']} on {point['chip']}"


def sweep_title(point: dict, varying: list[str]) -> str:
    """What was compared: the fixed values, then the axes that vary."""
    fixed = [AXIS_WORDS[axis][1](point[axis]) for axis in AXES if axis not in varying and point[axis] is not None]
    names = {"context_length": "context length", "quantization": "quantization",
             "requests_per_second": "requests per second", "vllm_version": "vLLM release"}
    axes = " and ".join(names.get(a, a) for a in varying)
    what = "$/M tokens" if "requests_per_second" in varying else "GPUs and $/month"
    return f"{', '.join(fixed)}: {what}" + (f" by {axes}" if axes else "")


def point_scenario(point: dict, options: dict, every: float | None, by_chip: dict[str, float]) -> Scenario:
    """One point of the sweep as a one-service scenario carrying every `plan` option."""
    from planner.commands.plan import slo_from, workload_from

    service = {"name": "what-if", "model": point["model"], "chips": [point["chip"]], "headroom": options["headroom"],
               "num_speculative_tokens": options["num_speculative_tokens"]}
    if point["concurrency"] is not None:
        service["concurrency"] = point["concurrency"]
    at_rate = {**options, "requests_per_second": point["requests_per_second"]}
    workload = workload_from(at_rate)
    if workload is not None:
        service["workload"] = workload.model_dump()
    slo = slo_from(at_rate)
    if slo is not None:
        service["slo"] = slo.model_dump(exclude_none=True)
    for key in ("tpot_ms", "ttft_ms"):
        if options.get(key) is not None:
            service[key] = options[key]
    for key, value in (("quantization", point["quantization"]), ("context_length", point["context_length"]),
                       ("speculative_method", options["speculative_method"]),
                       ("speculative_acceptance", list(options["speculative_acceptance"] or []) or None),
                       ("vllm_version", point["vllm_version"])):
        if value is not None:
            service[key] = value
    for key, flag in (("tp", "tp"), ("pp", "pp"), ("dp", "dp"), ("dcp", "dcp"), ("kv_cache_dtype", "kv_cache_dtype"),
                      ("gpu_memory_utilization", "gpu_memory_utilization"),
                      ("max_num_batched_tokens", "max_num_batched_tokens")):
        if options[flag]:
            service[key] = list(options[flag])
    stock = {}
    price = by_chip.get(get_chip_id(point["chip"]), every)
    if price is not None:
        stock["price"] = price
    if options["gpus_per_node"] is not None:
        stock["gpus_per_node"] = options["gpus_per_node"]
    if options["max_gpus"] is not None:  # as `plan --max-gpus`: the GPUs the pool may use
        stock["gpus"] = options["max_gpus"]
    inventory = {point["chip"]: stock} if stock else {}
    return Scenario(review="what-if sweep", services=[service], inventory=inventory, spare=options["spare"] or 0)


def get_chip_id(name: str) -> str:
    from pricing.chips import get_chip

    return get_chip(name).id


@click.command("compare")
@registry_option
@click.argument("file", required=False)
@apply_options_to(options_list(axes=True) + [max_rate_option(axes=True)])
@click.option("--format", "fmt", type=FORMATS, default="table", show_default=True, help=FORMAT_HELP)
@click.option("-o", "--output", "output_dir", metavar="FILE", help="with --format html: the page's .html file")
@schema_option()
@click.option("--chart", "chart_path", help="draw the comparison (.png or .svg): bars for categorical variants, "
                                            "markers against context length, concurrency or the rate")
@apply_options_to(executor_options())
@click.pass_context
@names_flags(plan_flag)
def compare_command(ctx, file, fmt, show_schema, chart_path, executor, ray_address, **options):
    """The same scenario under each variant (FILE), or a sweep given on the command line: every
    `plan` option, with several values for --model, --quantization, --concurrency,
    --context-length and --chip."""
    from ortools.sat.python import cp_model  # noqa: F401  (every point is solved: imported before the freeze)

    from planner.heap import freeze_imported
    from planner.report.html import About

    if show_schema:
        return print_schema()
    freeze_imported()
    check_options(ctx)  # an option that cannot apply, a sweep beyond the grid limit (planner/commands/flags.py)
    fmt = "json" if options["as_json"] else fmt
    check_output_path(chart_path)
    if options.get("output_dir") and fmt != "html":
        raise InputError("-o", "has nothing to write", "add --format html")
    page_path = html_output(ctx, {"fmt": fmt, **options})
    about = About([], typed_command(ctx), defaults=command_defaults(ctx)) if page_path else None
    if file:
        ctx.exit(compare_file(ctx, file, fmt, chart_path, executor, ray_address, options, (page_path, about)))
    if options["max_rate"]:
        ctx.exit(compare_max_rate(fmt, options, command_registry(ctx), command_tables(ctx)))
    ctx.exit(compare_sweep(fmt, chart_path, executor, ray_address, options, (page_path, about), command_registry(ctx),
                           command_tables(ctx)))


def compare_file(ctx, file: str, fmt: str, chart_path: str | None, executor: str, ray_address: str | None,
                 options: dict, page: tuple) -> int:
    """`plan compare FILE`: the file's base and every variant; a `plan` option beside it is refused."""
    from planner.app import api
    from planner.report.review import Ticker

    given = [p.opts[0] for p in ctx.command.params if p.name in options and p.name not in FILE_OPTIONS
             and ctx.get_parameter_source(p.name) is not ParameterSource.DEFAULT]
    if given:
        raise InputError("compare", f"takes a scenario FILE or {', '.join(given)}, not both",
                         "put the what-if in the file's services and variants, or drop FILE")
    c = api.compare(file, time_limit=options["time_limit"], executor=executor, ray_address=ray_address,
                    progress=Ticker(_err_console(), wanted(fmt == "json"), _after(ctx)), named=file_option,
                    registry=command_registry(ctx), tables=command_tables(ctx))
    if options["show_provenance"]:
        click.echo(f"plan: note: {PROVENANCE_NOTE}", err=True)
    path, about = page
    if path:
        from planner.report.charts import chart

        scenario = api.scenario_of(file, command_registry(ctx))
        about = dataclasses.replace(about, vllm_releases=releases([scenario, *map(scenario.apply, scenario.variants)]))
        page = (path, about, lambda out: chart(c, out, file_option))
    return _emit(c, fmt, True, chart_path, file_option, page if path else None)


def sweep_scenarios(options: dict,
                    registry=None) -> tuple[list[dict], list[str], list[tuple[str, Scenario]], list[str]]:
    """The sweep's points, the axes that vary, each point as a labelled one-service scenario, and
    the notes of input that had no effect; every problem of every point raised before any planning
    (models read against `registry`, the command's)."""
    from planner.commands.plan import parse_prices

    has_targets = any(options.get(k) is not None for k in options if k.endswith("_ms") and k[0] == "p")
    if not options["model"] or not options["chip"] or not (options["concurrency"] or has_targets):
        raise InputError("compare", "needs a scenario FILE, or --model, --chip and --concurrency",
                         "for example: plan compare --model dsv4.1-flash --chip h200 --chip b200 --concurrency 64")
    if options["margin"] is not None:  # a scenario's services have no margin of their own: never dropped silently
        raise InputError("margin", "is not carried into the compared points (a review's services plan with the "
                         "calibration's margin)", "drop it, or plan the point with `plan --margin`")
    for n in options["concurrency"]:
        check_concurrency(n, "--concurrency")
    every, by_chip = parse_prices(options["price"])
    points = sweep_points(options)
    varying = [a for a in AXES if len({p[a] for p in points}) > 1]
    try:
        scenarios = [(point_label(p, varying), point_scenario(p, options, every, by_chip)) for p in points]
    except ValidationError as err:
        e = err.errors()[0]
        field = str(e["loc"][-1]) if e["loc"] else "input"
        raise InputError(option_flag(field), validation_message(e).lower(),
                         "see `plan compare --help`") from None
    problems = []
    for _, s in scenarios:
        # a point beyond the model's positions is answered (infeasible, with vLLM's reason), not an error
        problems += [line.split(": ", 1)[1] for line in check_scenario(s, "compare", positions=False, name=plan_flag,
                                                                           applies=False, registry=registry)]
    if problems:
        flags = [line.split(": ", 1) for line in problems]  # services[0].context_length: ... -> --context-length: ...
        raise ScenarioErrors(list(dict.fromkeys(f"{service_flag(field)}: {text}" for field, text in flags)))
    notes = [f"--price {chip}={price:g} has no effect: {chip} is not compared"
             for chip, price in by_chip.items() if chip not in {get_chip_id(p["chip"]) for p in points}]
    if options["show_provenance"]:
        notes.append(PROVENANCE_NOTE)
    return points, varying, scenarios, notes


def compare_sweep(fmt: str, chart_path: str | None, executor: str, ray_address: str | None, options: dict,
                  page: tuple = (None, None), registry=None, tables=None) -> int:
    """`plan compare --model ... --chip ...`: every point of the sweep planned and set side by side."""
    from planner.app import api
    from planner.report.review import Ticker, markdown

    points, varying, scenarios, notes = sweep_scenarios(options, registry)
    ticker = Ticker(_err_console(), wanted(fmt == "json"), _after(None))
    done = [0]

    def tick(label: str) -> None:
        done[0] += 1
        ticker(done[0], len(scenarios), label)

    ticker(0, len(scenarios), scenarios[0][0])
    title = sweep_title(points[0], varying)
    comparison = api.compare_points(scenarios, title, time_limit=options["time_limit"], executor=executor,
                                    ray_address=ray_address, progress=tick, named=plan_flag, registry=registry,
                                    tables=tables)
    ticker(len(scenarios), len(scenarios), "done")
    results = comparison.results
    notes += [n for r in results for n in r.notes]
    for r in comparison.results:  # the answer first, one line each on stderr
        if not r.feasible:
            click.echo(short_line(r), err=True)
    if fmt == "json":
        click.echo(comparison.model_dump_json(indent=2))
    elif fmt == "markdown":
        click.echo(markdown(comparison, plan_flag), nl=False)
    elif fmt == "html":
        from planner.report.charts import axis_chart
        from planner.report.html import review_page

        path, about = page
        about = dataclasses.replace(about, vllm_releases=releases([s for _, s in scenarios]))
        write_html(review_page(comparison, about, lambda out: [
            (out, axis_chart(points, varying, results, out, title, plan_flag))], plan_flag), path)
    else:
        render_comparison(comparison, _console(), plan_flag)
    for note in dict.fromkeys(notes):
        click.echo(f"plan: note: {note}", err=True)
    if chart_path:
        from planner.report.charts import axis_chart

        write_charts(lambda: [(chart_path, axis_chart(points, varying, results, chart_path, title, plan_flag))],
                     chart_path)
    return 0 if all(r.feasible for r in results) else 1


def compare_max_rate(fmt: str, options: dict, registry=None, tables=None) -> int:
    """`plan compare --max-rate`: per point of the sweep, the most requests per second its pool of
    --max-gpus GPUs serves within the targets (`plan --max-rate` for each), set side by side; exit
    status 1 when some point serves no rate."""
    from planner.app import api
    from planner.commands.plan import parse_prices, request_from, slo_from
    from planner.report.max_rate import max_rate_markdown, render_max_rate_comparison
    from planner.report.review import Ticker
    from pricing.rules import DEFAULT

    if not options["model"] or not options["chip"]:
        raise InputError("compare", "--max-rate needs --model and --chip", "for example: plan compare --max-rate "
                         "--model llama-3.1-8b --chip h100 --chip h200 --max-gpus 8 --isl 1000 --osl 200 "
                         "--p99-ttft-ms 1000")
    points = sweep_points(options)
    varying = [a for a in AXES if len({p[a] for p in points}) > 1]
    _, by_chip = parse_prices(options["price"])
    notes = [f"--price {chip}={price:g} has no effect: {chip} is not compared"
             for chip, price in by_chip.items() if chip not in {get_chip_id(p["chip"]) for p in points}]
    asked = []  # every point's question checked before any is simulated
    for p in points:
        at = {**options, "model": p["model"], "chip": (p["chip"],), "quantization": p["quantization"],
              "context_length": p["context_length"], "vllm_version": p["vllm_version"] or DEFAULT, "concurrency": None,
              "requests_per_second": None}
        plan_request = request_from(at)
        asked.append((point_label(p, varying), {a: p[a] for a in AXES if p[a] is not None},
                      api.max_rate_request(plan_request.service, slo_from(at), plan_request.limits)))
    ticker = Ticker(_err_console(), True, _after(None))
    done = [0]

    def tick(label: str) -> None:
        done[0] += 1
        ticker(done[0], len(asked), label)

    ticker(0, len(asked), asked[0][0])
    title = sweep_title(points[0], varying).replace("GPUs and $/month", "the most requests/s")
    comparison = api.compare_max_rate(asked, title, progress=tick, named=plan_flag, registry=registry,
                                      tables=tables)
    if fmt == "json" or options["as_json"]:
        click.echo(comparison.model_dump_json(indent=2))
        for p in comparison.points:  # why a point serves no rate, one line each on stderr
            for e in p.result.explanations:
                click.echo(f"{p.label}: {e.text}", err=True)
    elif fmt == "markdown":
        click.echo(max_rate_markdown(comparison, plan_flag), nl=False)
    else:
        render_max_rate_comparison(comparison, _console(), plan_flag)
    for note in dict.fromkeys(notes):
        click.echo(f"plan: note: {note}", err=True)
    return 0 if all(p.result.feasible for p in comparison.points) else 1


def register(cli: click.Group) -> None:
    cli.add_command(scenario_command)
    cli.add_command(compare_command)
