"""`plan --model M --chip C --concurrency N`: the cheapest pool of GPUs, in which vLLM
configuration, that holds N concurrent requests at the context length.

Thin: parse the flags into a `PlanRequest`, call `planner.app.plan.plan`, render. Exit status 1
when nothing fits (with the reason per chip), 2 for bad input (one line)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from planner.commands import ranges
from planner.commands.flags import check_model_options, check_options, in_flags, names_flags, own_flag, plan_flag
from planner.commands.progress import progress
from planner.commands.registry_option import (
    command_console,
    command_defaults,
    command_registry,
    command_tables,
    registry_option,
    step_model_option,
)
from planner.limits import (
    MAX_CONCURRENCY,
    MAX_GPUS,
    MAX_GPUS_PER_NODE,
    MAX_RATE,
    MAX_SPARE,
    MAX_SPECULATIVE,
    MIN_CONTEXT,
)

if TYPE_CHECKING:  # pragma: no cover
    from planner.request import PlanRequest
from pricing.config.methods import methods_help
from pricing.errors import InputError


def _release(ctx, param, value: str) -> str:
    """Any release a rules pack serves ("0.19.1", "0.27"), as that release; else one line, exit 2."""
    from pricing.rules import get

    try:
        return get(value).full_version
    except InputError as err:
        raise in_flags(err, lambda field: own_flag(field, ctx)) from None


def _releases(ctx, param, values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(_release(ctx, param, v) for v in values)


def vllm_version_option(multiple: bool = False):
    """--vllm-version: the vLLM release whose rules, enumerations and defaults apply (its pack's);
    `multiple`: an axis `plan compare` sweeps (default: the default release alone)."""
    from pricing.rules import DEFAULT, served

    if multiple:
        return click.option("--vllm-version", multiple=True, callback=_releases,
                            help=f"the vLLM releases to compare, from {served()} (repeat; default {DEFAULT})")
    return click.option("--vllm-version", default=DEFAULT, show_default=True, callback=_release,
                        help=f"the vLLM release to plan for, from {served()}: its pack's KV grouping rules, "
                             "defaults and fitted memory laws")


def time_limit_option():
    """--time-limit, one option on `plan`, `plan compare` and `plan scenario`: the solver's time
    limit, as deterministic work (planner/search/staged.py Budget; planner/defaults.yaml
    solver.max_time_in_seconds when absent), less a review's sweep, which it may bound
    (planner/search/sweep_time.py)."""
    from planner import defaults

    return click.option("--time-limit", type=ranges.positive("for example 10"),
                        help="solver time limit in seconds, counted as deterministic work so that the answer does "
                             "not depend on the machine's load (default "
                             f"{defaults.value('solver.max_time_in_seconds'):g}, planner/defaults.yaml); a review "
                             "counts its candidate sweep against it first, at "
                             f"{defaults.value('sweep.shapes_per_second'):,} shapes a second; a limit too short "
                             "for the whole sweep prices only the shapes it buys, least bound first, in an order "
                             "that never depends on the clock (the plan is "
                             "then the best of those, said, never proven optimal), one that buys fewer than a "
                             "shape a candidate table is refused; it ends within the limit plus about "
                             f"{defaults.value('sweep.command_overhead_seconds'):g} s of start-up and reporting on "
                             "one idle core")


def options_list(axes: bool = False) -> list:
    """`plan`'s options; with `axes`, model, quantization, concurrency and context length take
    several values (`plan compare` sweeps them)."""
    many = {"multiple": True} if axes else {}
    repeat = " (repeat to compare)" if axes else ""
    return [
        click.option("--model", help="model card name, config.json path or cached HF id" + repeat, **many),
        click.option("--chip", multiple=True, help="chip id (" + (
            "repeat to compare: each chip is planned as its own point" if axes else "repeat to choose among chips")
            + "; see `plan chips`)"),
        click.option("--concurrency", type=ranges.at_least(1, high=MAX_CONCURRENCY),
                     help="concurrent requests the pool must hold" + repeat, **many),
        click.option("--context-length", "--max-model-len", "context_length",
                     type=ranges.at_least(MIN_CONTEXT, "give the tokens per request, e.g. 32768"),
                     help="tokens per request (max_model_len); default: at a rate (--requests-per-second or "
                          "--max-rate, every --serving) the workload's longest request, --isl + --osl (at the top of "
                          "--range-ratio), else the model's maximum" + repeat, **many),
        click.option("--headroom", type=ranges.percent(), default=0.0, show_default=True,
                     help="percent of extra concurrency the pool must hold"),
        click.option("--margin", type=ranges.percent(high=100, high_open=True),
                     help="percent of each rank's predicted KV pool not counted on; default: the calibration's "
                          "90th-percentile optimistic error (registry cost_model_memory.kv_pool_margin)"),
        click.option("--max-gpus", type=ranges.at_least(1, high=MAX_GPUS),
                     help="GPUs the pool may use (instances pack into whole nodes)"),
        click.option("--gpus-per-node", type=ranges.at_least(1, high=MAX_GPUS_PER_NODE),
                     help="GPUs per node (default: the chip's)"),
        click.option("--tp", "-tp", "--tensor-parallel-size", "tp", multiple=True, type=ranges.at_least(1),
                     help="allowed tensor parallel sizes (repeat)"),
        click.option("--pp", "-pp", "--pipeline-parallel-size", "pp", multiple=True, type=ranges.at_least(1),
                     help="allowed pipeline parallel sizes (repeat; stages across nodes)"),
        click.option("--dp", "-dp", "--data-parallel-size", "dp", multiple=True, type=ranges.at_least(1),
                     help="allowed data parallel sizes (repeat; MoE models)"),
        click.option("--dcp", "-dcp", "--decode-context-parallel-size", "dcp", multiple=True, type=ranges.at_least(1),
                     help="allowed decode context parallel sizes (repeat)"),
        click.option("--kv-cache-dtype", multiple=True, help="KV cache dtypes to choose among (repeat); default auto"),
        click.option("--gpu-memory-utilization", multiple=True, type=ranges.fraction(),
                     help="utilizations to search (repeat); default: planner/defaults.yaml, topped out 1 GiB below "
                          "what the chip holds beside the budget"),
        click.option("--max-num-batched-tokens", multiple=True, type=ranges.at_least(1),
                     help="token budgets to search (repeat); default 2048 … 32768"),
        click.option("--num-speculative-tokens", type=ranges.at_least(0, high=MAX_SPECULATIVE), default=0,
                     show_default=True),
        click.option("--speculative-method", help="mtp or dspark, where the model ships it"),
        acceptance_option(),
        click.option("--quantization", help=methods_help() + repeat, **many),
        click.option("--price", multiple=True, type=ranges.Price(),
                     help="USD per GPU-hour: 3.1 for every chip, or h200=3.1 for one (repeat)"),
        time_limit_option(),
        spare_option(),
        click.option("--tpot-ms", type=ranges.positive(), help="time per output token every request must get, in ms"),
        click.option("--ttft-ms", type=ranges.positive(), help="time to first token of a prompt (--isl tokens), in ms"),
        click.option("--isl", type=ranges.at_least(1),
                     help="mean input tokens of a request (with --osl: the workload)"),
        click.option("--osl", type=ranges.at_least(1), help="mean output tokens of a request (with --isl)"),
        click.option("--requests-per-second", type=ranges.positive(high=MAX_RATE),
                     help="requests the pool must serve each second (needs --isl and --osl)" + repeat, **many),
        click.option("--range-ratio", type=ranges.Bounded(float, 0, 1, high_open=True), default=0.0,
                     show_default=True, help="with service targets: lengths uniform in [isl (1 - r), isl (1 + r)], "
                     "as vllm bench serve --random-range-ratio"),
        *slo_options(),
        vllm_version_option(multiple=axes),
        click.option("--provenance", "show_provenance", is_flag=True,
                     help="also print every registry value and planner default used (always in --json)"),
        click.option("--json", "as_json", is_flag=True, help="one JSON object (see README for its shape)"),
    ] + ([] if axes else [click.option("--chart", "chart_path", help="with service targets: draw $/M output tokens "
                                       "against p99 TPOT over every pool simulated, the chosen one marked (.png or "
                                       ".svg)")])


def spare_option():
    """--spare N: whole nodes per chip kept free beside the pools (N+1 capacity: --spare 1)."""
    return click.option("--spare", type=ranges.at_least(0, high=MAX_SPARE), default=0, show_default=True,
                        help="whole nodes per chip kept free as spare capacity (1 for N+1), shown in the node map")


def slo_options() -> list:
    """--p50-ttft-ms ... --p99-e2e-ms and --goodput: service targets at --requests-per-second."""
    from planner.limits import METRIC_NAMES, METRICS, PERCENTILES

    out = [click.option(f"--p{p}-{m}-ms", f"p{p}_{m}_ms", type=ranges.positive(),
                        help=f"p{p} {METRIC_NAMES[m]} bound in ms at --requests-per-second" if (m, p) == ("ttft", 99)
                        else f"p{p} {METRIC_NAMES[m]} bound (ms)") for m in METRICS for p in PERCENTILES]
    out.append(click.option("--goodput", type=ranges.fraction("for example 0.99"),
                            help="fraction of requests that must meet every TTFT, TPOT and E2E bound given (as vllm "
                                 "bench serve --goodput counts them)"))
    return out


def slo_from(options: dict):
    """The service targets the flags give, or None."""
    from pydantic import ValidationError

    from planner.request import METRICS, PERCENTILES, SloSpec, validation_message

    given = {f"p{p}_{m}_ms": options.get(f"p{p}_{m}_ms") for m in METRICS for p in PERCENTILES}
    given = {k: v for k, v in given.items() if v is not None}
    if not given and options.get("goodput") is None:
        return None
    if options.get("requests_per_second") is None and not options.get("max_rate"):
        flag = "--" + next(iter(given), "goodput").replace("_", "-")
        raise InputError(flag, "a service target is met at a rate", "add --requests-per-second with --isl and --osl")
    try:
        return SloSpec(**given, goodput=options.get("goodput"))
    except ValidationError as err:
        first = err.errors()[0]
        field = str(first["loc"][-1]) if first["loc"] else "goodput"
        raise InputError(f"--{field.replace('_', '-')}", validation_message(first), "see `plan --help`") from None


def acceptance_option():
    return click.option("--speculative-acceptance", "--acceptance", "speculative_acceptance", metavar="RATES",
                        callback=_rates, help="the drafter's conditional acceptance by draft position, e.g. 0.85,0.68 "
                        "(a later position takes the last); default: the registry's, step_model.yaml")


def _rates(ctx, param, value: str | None) -> tuple[float, ...] | None:
    """`--speculative-acceptance 0.85,0.68`: rates in [0, 1], one per draft position."""
    if value is None:
        return None
    try:
        rates = tuple(float(v) for v in value.split(","))
    except ValueError:
        raise InputError("--speculative-acceptance", f"{value!r} is not a list of rates",
                         "give the acceptance of each draft position, e.g. 0.85,0.68") from None
    if any(not 0.0 <= r <= 1.0 for r in rates):
        raise InputError("--speculative-acceptance", f"every rate must be in [0, 1], got {value}",
                         "give the acceptance of each draft position, e.g. 0.85,0.68")
    return rates


def apply_options(options: list, f):
    for option in reversed(options):
        f = option(f)
    return registry_option(step_model_option(f))


def serving_options() -> list:
    """`plan`'s options of disaggregated serving (prefill and decode pools, vLLM's NixlConnector)."""
    return [
        click.option("--serving", type=click.Choice(["agg", "disagg", "auto"]), default="agg", show_default=True,
                     help="agg: one pool of aggregated instances; disagg: a prefill pool and a decode pool; auto: "
                          "plan both and keep the cheaper"),
        click.option("--prefill-chip", multiple=True, help="chips the prefill pool may use (repeat; default --chip)"),
        click.option("--decode-chip", multiple=True, help="chips the decode pool may use (repeat; default --chip)"),
    ]


def plan_options(f):
    """`plan`'s options: the shared ones, how the plan is printed, and the manifests it can emit."""
    from planner.commands.emit import k8s_options

    shown = [schema_option(),
             click.option("--brief", is_flag=True, help="only the plan line, what binds and the launch commands"),
             click.option("--format", "fmt", type=click.Choice(["table", "csv", "html"]), default="table",
                          show_default=True, help="csv: the plan table (the best pool and the alternatives), every "
                          "column; " + HTML_HELP)]
    return apply_options(options_list() + serving_options() + [max_rate_option()] + shown + k8s_options(), f)


HTML_HELP = ("html: the report as one self-contained page to share (no request leaves it; printable), written to "
             "-o FILE.html, never to standard output")


def html_output(ctx: click.Context, options: dict) -> str | None:
    """`--format html -o FILE`: the file the page goes to, checked before any work; None for another
    format. -o names one output, so --emit's folder is refused beside it."""
    if options.get("fmt") != "html":
        return None
    flag = own_flag("fmt", ctx) or "--format"
    if options.get("emit"):
        raise InputError("--emit", "writes a folder and --format html a file, and -o names only one",
                         "run twice: --format html -o FILE.html, then --emit k8s -o DIR")
    if options.get("brief"):
        raise InputError(own_flag("brief", ctx), "has no effect on --format html (the page is the whole plan)",
                         f"drop {own_flag('brief', ctx)} or {flag} html")
    path = options.get("output_dir")
    if not path:
        raise InputError(flag, "html is written to a file, never to the terminal", "add -o FILE.html")
    check_output_path(path, "-o", page=True)
    return path


def typed_command(ctx: click.Context) -> str:
    """The command as given (the options typed, not their defaults), for the page's footer."""
    import shlex

    from click.core import ParameterSource

    words = ctx.command_path.split()
    for param in ctx.command.params:
        if ctx.get_parameter_source(param.name) not in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT):
            continue
        value = ctx.params.get(param.name)
        if isinstance(param, click.Argument):
            words.append(str(value))
            continue
        flag = next((o for o in param.opts if o.startswith("--")), param.opts[0])
        if param.is_flag:
            words.append(flag if value else (param.secondary_opts or [flag])[0])
        else:  # a value a callback made a tuple (--speculative-acceptance 0.85,0.68) as it was typed
            words += [w for v in (value if param.multiple else [value])
                      for w in (flag, ",".join(map(str, v)) if isinstance(v, tuple) else str(v))]
    return shlex.join(words)


def write_html(page, path: str) -> None:
    """The page written whole or not at all, and where it went said on standard error."""
    from planner.report.html import write

    write(path, page)
    click.echo(f"plan: wrote {path} (the report as one self-contained HTML page)", err=True)


def max_rate_option(axes: bool = False):
    """--max-rate: instead of a plan at a load, the most requests per second the pool serves (on
    `plan compare`, at each point of the sweep)."""
    if axes:
        return click.option("--max-rate", is_flag=True, help="instead of a plan at a load: at each point, the most "
                            "requests per second --max-gpus GPUs of its chip serve within the service targets "
                            "(--p99-ttft-ms ..., with --isl and --osl), as `plan --max-rate` answers")
    return click.option("--max-rate", is_flag=True, help="instead of a plan at a load: the most requests per second "
                        "--max-gpus GPUs of --chip serve within the service targets (--p99-ttft-ms ..., with --isl "
                        "and --osl), each instance shape simulated as at --requests-per-second; with --serving "
                        "disagg: the most a prefill and a decode pool serve within --ttft-ms and --tpot-ms")


def schema_option():
    """--schema on `plan`, `plan scenario` and `plan compare`: the one JSON Schema of their JSON."""
    return click.option("--schema", "show_schema", is_flag=True, help="print the JSON Schema of this command's JSON "
                        "(one schema for plan, plan scenario and plan compare, the report told by `kind`) and exit")


def print_schema() -> None:
    from planner.report.schema import report_schema

    click.echo(json.dumps(report_schema(), indent=2, ensure_ascii=False))


def parse_prices(values: tuple[str, ...]) -> tuple[float | None, dict[str, float]]:
    """`--price 3.1` (every chip) and `--price h200=3.1` (one chip, by id or alias)."""
    from pricing.chips import get_chip

    every, by_chip = None, {}
    for text in values:
        key, _, number = text.rpartition("=")
        try:
            price = float(number)
        except ValueError:
            raise InputError("--price", f"{text!r} is not a price",
                             "give 3.1, or h200=3.1, in USD per GPU-hour") from None
        if key:
            by_chip[get_chip(key).id] = price
        else:
            every = price
    return every, by_chip


def workload_from(options: dict):
    """--isl and --osl (both or neither), and --requests-per-second on top of them."""
    from planner.request import WorkloadSpec

    isl, osl, rate = options.get("isl"), options.get("osl"), options.get("requests_per_second")
    if isl is None and osl is None:
        if rate is not None:
            raise InputError("--requests-per-second", "needs the workload's lengths", "add --isl and --osl")
        return None
    if isl is None or osl is None:
        missing = "--isl" if isl is None else "--osl"
        raise InputError(missing, "is required with " + ("--osl" if isl is None else "--isl"),
                         "give both the mean input and output tokens, e.g. --isl 1024 --osl 1024")
    for flag, value in (("--isl", isl), ("--osl", osl)):
        if value < 1:
            raise InputError(flag, f"must be at least 1, got {value}", "give tokens per request")
    if rate is not None and rate <= 0:
        raise InputError("--requests-per-second", f"must be positive, got {rate}", "for example 10")
    ratio = options.get("range_ratio") or 0.0
    if not 0 <= ratio < 1:
        raise InputError("--range-ratio", f"must be in [0, 1), got {ratio:g}", "for example 0.5")
    return WorkloadSpec(isl=isl, osl=osl, requests_per_second=rate, range_ratio=ratio)


def request_from(options: dict) -> PlanRequest:
    """The flags as a validated request; a pydantic error becomes one InputError line."""
    from pydantic import ValidationError

    from planner.request import PlanRequest, PoolLimits, ServiceSpec, validation_message

    prefill, decode = options.get("prefill_chip") or (), options.get("decode_chip") or ()
    if (prefill or decode) and options.get("serving", "agg") == "agg":
        raise InputError("--prefill-chip" if prefill else "--decode-chip", "has no effect on an aggregated plan",
                         "add --serving disagg or --serving auto")
    chips = options["chip"] or tuple(dict.fromkeys(prefill + decode))
    if not chips:
        raise InputError("--chip", "is required", "give a chip id such as h200 (see `plan chips`), repeat to compare")
    every, by_chip = parse_prices(options["price"])
    workload = workload_from(options)
    slo = None if options.get("max_rate") else slo_from(options)  # --max-rate: the targets judge every rate
    concurrency = options["concurrency"]
    if concurrency is None:  # a rate sizes the pool by its throughput within the targets (concurrency_note)
        concurrency = 1 if slo is not None or options.get("max_rate") else rate_only(options, workload)
    try:
        service = ServiceSpec(
            model=options["model"], quantization=options["quantization"], concurrency=concurrency,
            context_length=options["context_length"], headroom=options["headroom"], margin=options["margin"],
            num_speculative_tokens=options["num_speculative_tokens"], speculative_method=options["speculative_method"],
            speculative_acceptance=options.get("speculative_acceptance"),
            kv_cache_dtypes=tuple(dict.fromkeys(k.lower() for k in options["kv_cache_dtype"])) or ("auto",),
            tp=options["tp"] or None, pp=options["pp"] or None, dp=options["dp"] or None, dcp=options["dcp"] or None,
            gpu_memory_utilization=options["gpu_memory_utilization"] or None,
            max_num_batched_tokens=options["max_num_batched_tokens"] or None,
            vllm_version=options["vllm_version"], tpot_ms=options.get("tpot_ms"), ttft_ms=options.get("ttft_ms"),
            workload=workload, slo=slo, serving=options.get("serving", "agg"))
        limits = PoolLimits(chips=chips, price=every, prices=by_chip, max_gpus=options["max_gpus"],
                            gpus_per_node=options["gpus_per_node"], time_limit=options["time_limit"],
                            spare=options.get("spare", 0), prefill_chips=prefill or None, decode_chips=decode or None)
    except ValidationError as err:
        first = err.errors()[0]
        field = str(first["loc"][-1] if first["loc"] else "input")
        flag = {"kv_cache_dtypes": "kv-cache-dtype", "chips": "chip", "price": "price", "prices": "price"}.get(
            field, field.replace("_", "-"))
        message = validation_message(first)
        raise InputError(f"--{flag}", message[:1].lower() + message[1:], "see `plan --help`") from None
    return PlanRequest(service=service, limits=limits)


FLAGS = {"kv_cache_dtypes": "--kv-cache-dtype", "speculative_method": "--speculative-method",
         "num_speculative_tokens": "--num-speculative-tokens", "workload": "--isl", "serving": "--serving"}


def service_flag_of(field: str) -> str | None:
    """`plan`'s flag for a field of the service the API checks (planner/app/api.py `check_service`)."""
    return FLAGS.get(field) or plan_flag(field)


def _reasons_on_stderr(result) -> None:
    """Each chip's reason and each note on stderr, a line each (stdout holds JSON or CSV)."""
    for line in [e.text for e in result.explanations] + [f"note: {n}" for n in result.notes]:
        click.echo(line, err=True)


def check_output_path(path: str | None, flag: str = "--chart", page: bool = False) -> None:
    """An output file the tool can write (a chart's .png or .svg, or with `page` an .html page),
    checked before any work (never half-way)."""
    if not path:
        return
    target = Path(path)
    if page and target.suffix.lower() not in (".html", ".htm"):
        raise InputError(flag, f"{path} is not an .html file", "name the page's file, e.g. review.html")
    if not page and target.suffix.lower() not in (".png", ".svg"):
        raise InputError(flag, f"{path} is neither .png nor .svg", "name a .png or .svg file")
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(flag, f"folder {folder} does not exist", "create it first, or name a file in an existing "
                         "folder")
    if target.is_dir() or not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise InputError(flag, f"cannot write {path}", "name a file you can write")
    try:  # the permission bits do not tell (root, /proc, a read-only mount): create a file beside it
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{target.name}.", suffix=".probe"):
            pass
    except OSError as err:
        raise InputError(flag, f"cannot write {path} ({err.strerror})", "name a file in a folder you can write") \
            from None


def write_charts(draw, path: str, flag: str = "--chart") -> None:
    """Draw the charts (`draw` returns each file written and what it shows) and say where each
    went, on standard error; a file the system refuses half-way is one line, exit 2, and no file
    (planner/report/charts.py `save` writes whole or not at all)."""
    try:
        files = draw()
    except OSError as err:
        raise InputError(flag, f"cannot write {err.filename or path}: {err.strerror or err}",
                         "name a file on a disk with room, in a folder you can write") from None
    for name, what in files:
        click.echo(f"plan: wrote {name} ({what})", err=True)


def rate_only(options: dict, workload) -> int:
    """Without --concurrency, a request rate with its latency targets sizes the pool by itself (each
    candidate's replicas serve the rate at its throughput within the targets, as the disaggregated
    decode pool is sized): the concurrency floor is one request."""
    rate, ttft, tpot = options.get("requests_per_second"), options.get("ttft_ms"), options.get("tpot_ms")
    if rate is None or (ttft is None and tpot is None) or workload is None:
        raise InputError("--concurrency", "is required", "give the concurrent requests to serve, e.g. 64, or "
                         "--requests-per-second with --isl, --osl and --ttft-ms or --tpot-ms, or service targets at "
                         "a rate (--requests-per-second with --p99-ttft-ms ...)")
    return 1


@names_flags(plan_flag)
def run(ctx: click.Context, **options) -> None:
    """Parse → plan (planner/app/api.py) → render; exit status 1 when nothing fits."""
    if options.get("show_schema"):
        return print_schema()
    check_options(ctx)  # an option that cannot apply (planner/commands/flags.py NEEDS)
    if not options.get("model"):
        raise InputError("--model", "is required" if options.get("model") is None else "must not be empty",
                         "give a card name (see `plan models`), a config.json path or a cached Hugging Face id; "
                         "`plan --help` lists the options")
    from ortools.sat.python import cp_model  # noqa: F401  (every plan is solved: imported before the freeze)

    from planner.app import api
    from planner.commands import emit
    from planner.heap import freeze_imported

    freeze_imported()
    page_path = html_output(ctx, options)
    if options.get("max_rate"):
        return run_max_rate(ctx, options, page_path)
    to = emit.emit_of(options)
    request = request_from(options)
    try:  # an option the model cannot take (--dp on a dense model), before any sweep
        from planner.app.api import model_of

        check_model_options(ctx, [model_of(request.service, command_registry(ctx), command_tables(ctx))])
    except InputError as err:
        raise in_flags(err, service_flag_of) from None
    limits = request.limits
    emit.check_chips(to, limits.chips + (limits.prefill_chips or ()) + (limits.decode_chips or ()))
    emit.check_serving(to, [(request.service.model, request.service.serving)])
    by_rate = options["concurrency"] is None and request.service.slo is None
    if request.service.serving != api.Serving.AGG:
        return run_serving(ctx, request, options, by_rate, to, page_path)
    chart_path = options.get("chart_path")
    if chart_path:
        if request.service.slo is None:
            raise InputError("--chart", "draws the cost of service targets", "give --p99-ttft-ms or another "
                             "target with --requests-per-second, --isl and --osl")
        check_output_path(chart_path)
    try:
        with progress(command_tables(ctx), options["as_json"]):
            result = api.plan(request, named=plan_flag, sized_by_rate=by_rate, registry=command_registry(ctx),
                              tables=command_tables(ctx))
    except InputError as err:
        raise in_flags(err, service_flag_of) from None
    if chart_path and result.feasible:
        draw_pareto(result, chart_path)
    elif chart_path:
        result.notes.append(f"--chart wrote nothing: no pool fits ({chart_path} not written)")
    if page_path:
        from planner.report.html import About, plan_page
        from planner.report.render import infeasible_line

        about = About([request.service.vllm_version], typed_command(ctx), defaults=command_defaults(ctx))
        draw = pareto_drawing(result) if result.feasible and result.best.serving else None
        page = plan_page(result, about, draw, plan_flag)
        if not result.feasible:  # the answer first, then where the page went, each chip's reason and each note
            click.echo(infeasible_line(result), err=True)
        write_html(page, page_path)
        _reasons_on_stderr(result)
        if not result.feasible:
            ctx.exit(1)
        return
    print_plan(ctx, result, options)
    if not result.feasible:
        ctx.exit(1)
    if to is not None:
        for line in emit.emit([(result.best.model, result.best)], to=to):
            click.echo(line, err=data_on_stdout(options))


def data_on_stdout(options: dict) -> bool:
    """stdout carries data a program reads (--json, --format csv): what --emit wrote, and its notes,
    go to stderr so that the data stays whole."""
    return options["as_json"] or options["fmt"] == "csv"


def run_max_rate(ctx: click.Context, options: dict, page_path: str | None = None) -> None:
    """`--max-rate`: the most requests per second the pool serves within the targets (planner/app/
    max_rate.py), as text, --json or the page `page_path`; exit status 1 when no rate meets them."""
    from planner.app import api
    from planner.commands import emit
    from planner.report.max_rate import render_max_rate

    to = emit.emit_of(options)
    asked = request_from(options)
    limits = asked.limits
    emit.check_chips(to, limits.chips + (limits.prefill_chips or ()) + (limits.decode_chips or ()))
    emit.check_serving(to, [(asked.service.model, asked.service.serving)])
    try:
        request = api.max_rate_request(asked.service, slo_from(options), asked.limits)
        with progress(command_tables(ctx), options["as_json"]):
            result = api.max_rate(request, named=plan_flag, registry=command_registry(ctx), tables=command_tables(ctx))
    except InputError as err:
        raise in_flags(err, service_flag_of) from None
    if page_path:
        from planner.report.html import About, max_rate_page
        from planner.report.max_rate import max_rate_line

        about = About([asked.service.vllm_version], typed_command(ctx), defaults=command_defaults(ctx))
        page = max_rate_page(result, about, plan_flag)
        if not result.feasible:  # the answer first, then where the page went and each reason
            click.echo(f"plan: {max_rate_line(result, plan_flag)}", err=True)
        write_html(page, page_path)
        for line in [e.text for e in result.explanations] + [f"note: {n}" for n in result.notes]:
            click.echo(line, err=True)
    elif options["as_json"]:
        click.echo(result.model_dump_json(indent=2))
        for e in result.explanations:
            click.echo(e.text, err=True)
    else:
        render_max_rate(result, command_console(ctx), plan_flag)
    if not result.feasible:
        if to is not None:
            click.echo(f"plan: note: --emit k8s wrote nothing: no rate is served ({to.output_dir} not written)",
                       err=True)
        ctx.exit(1)
    if to is not None:  # the pool (or fleet) sized at the rate found, as `plan --requests-per-second` emits it
        written = (emit.emit([(result.best.model, result.best)], to=to) if result.fleet is None else
                   emit.emit(*emit.disaggregated(asked.service.model, result.fleet), to=to))
        for line in written:
            click.echo(line, err=options["as_json"])


def pareto_drawing(result):
    """What draws `--chart`'s figure at a path: $/M output tokens against p99 TPOT over every pool
    simulated, the chosen one marked; it returns [(path, what it shows)]."""
    from planner import numbers as fmt
    from planner.report.charts import pareto_chart
    from planner.report.words import price_footnotes

    t, pools = result.target, [result.best, *result.alternatives]
    chips = {p.chip for p in result.best.serving.pareto}
    drawn = [p for p in pools if p.chip in chips]

    def draw(path: str) -> list[tuple[str, str]]:
        return [(path, pareto_chart(
            result.best.serving, path, f"{result.model} at {fmt.given(t.requests_per_second)} requests/s: "
            f"{', '.join(t.service_targets)}", {p.chip for p in drawn if p.price_estimate},
            price_footnotes(drawn, plan_flag)))]
    return draw


def draw_pareto(result, chart_path: str) -> None:
    """--chart: $/M output tokens against p99 TPOT over every pool simulated, the chosen one marked."""
    draw = pareto_drawing(result)
    write_charts(lambda: draw(chart_path), chart_path)


def print_plan(ctx: click.Context, result, options: dict) -> None:
    """The aggregated plan as --json, --format csv, --brief or the full text asks."""
    from planner.report.render import PLAN_COLUMNS, plan_rows, render_brief, render_infeasible, render_plan
    from planner.report.tables import csv_text

    if not result.feasible:  # the answer first, one line on stderr; the reason per chip follows
        from planner.report.render import infeasible_line

        click.echo(infeasible_line(result), err=True)
    if options["as_json"]:
        click.echo(result.model_dump_json(indent=2))
        _reasons_on_stderr(result)
    elif not result.feasible and options.get("fmt") == "csv":  # stdout stays CSV: the header, no pool row
        click.echo(csv_text(PLAN_COLUMNS, []), nl=False)
        _reasons_on_stderr(result)
    elif not result.feasible:
        render_infeasible(result, command_console(ctx))
    elif options.get("fmt") == "csv":
        click.echo(csv_text(PLAN_COLUMNS, plan_rows(result)), nl=False)
    elif options.get("brief"):
        render_brief(result, command_console(ctx), plan_flag)
    else:
        render_plan(result, command_console(ctx), options["show_provenance"], plan_flag)


def run_serving(ctx: click.Context, request: PlanRequest, options: dict, by_rate: bool, to,
                page_path: str | None = None) -> None:
    """`--serving disagg|auto`: the disaggregated plan (and with auto the aggregated one), which is
    cheaper and why; `--json` carries both under `serving`, `--format html` the chosen plan's page.
    Exit status 1 when the chosen plan does not fit."""
    from planner.app import api
    from planner.commands import emit

    try:
        with progress(command_tables(ctx), options["as_json"]):
            out = api.plan_serving(request, named=plan_flag, sized_by_rate=by_rate, registry=command_registry(ctx),
                                   tables=command_tables(ctx))
    except InputError as err:
        raise in_flags(err, service_flag_of) from None
    choice = out.serving
    agg, dis = choice.aggregated, choice.disaggregated
    chosen = agg if choice.chosen == api.Serving.AGG else dis
    if page_path:
        write_serving_page(ctx, choice, request, page_path)
        if not chosen.feasible:
            ctx.exit(1)
        return
    if options["as_json"]:
        click.echo(out.model_dump_json(indent=2))
    else:
        print_serving(ctx, choice, request, options)
    if not chosen.feasible:
        ctx.exit(1)
    if to is not None:  # the chosen plan's manifests
        written = (emit.emit([(agg.best.model, agg.best)], to=to) if choice.chosen == api.Serving.AGG else
                   emit.emit(*emit.disaggregated(request.service.model, dis), to=to))
        for line in written:
            click.echo(line, err=data_on_stdout(options))


def serving_workload(s) -> str:
    """The service a disaggregated plan is sized for, in words: its model, rate, lengths and targets."""
    from planner import numbers as fmt

    return (f"{s.model} at {fmt.given(s.workload.requests_per_second)} requests/s of {fmt.count(s.workload.isl)} "
            f"input and {fmt.count(s.workload.osl)} output tokens, TTFT {fmt.duration(s.ttft_ms)}"
            + (f", TPOT {fmt.duration(s.tpot_ms)}" if s.tpot_ms is not None else ""))


def write_serving_page(ctx: click.Context, choice, request: PlanRequest, path: str) -> None:
    """`--serving disagg|auto --format html`: the chosen plan's page (with auto, why this one); what
    does not fit said on stderr, as the aggregated page says it."""
    from planner.app import api
    from planner.report.html import About, choice_of, disagg_page, plan_page

    about = About([request.service.vllm_version], typed_command(ctx), defaults=command_defaults(ctx))
    why = choice_of(choice) if choice.aggregated is not None else None
    agg, dis = choice.aggregated, choice.disaggregated
    if choice.chosen == api.Serving.AGG:
        draw = pareto_drawing(agg) if agg.feasible and agg.best.serving else None
        page = plan_page(agg, about, draw, plan_flag, why)
        if not agg.feasible:
            from planner.report.render import infeasible_line

            click.echo(infeasible_line(agg), err=True)
        write_html(page, path)
        _reasons_on_stderr(agg)
        return
    workload = serving_workload(request.service)
    page = disagg_page(dis, about, workload, dis.hours_per_month, plan_flag, choice.notes, why)
    if not dis.feasible:  # the answer first, then where the page went, each reason and each note
        click.echo(f"plan: no disaggregated fleet fits {workload}", err=True)
    write_html(page, path)
    for line in [e.text for e in dis.explanations] + [f"note: {n}" for n in choice.notes]:
        click.echo(line, err=True)


def print_serving(ctx: click.Context, choice, request: PlanRequest, options: dict) -> None:
    """Both plans as text (the aggregated one with auto), then which is cheaper and why."""
    from planner.report.disagg_render import disagg_answer, render_choice, render_disagg, render_disagg_infeasible
    from planner.report.render import render_infeasible, render_notes, render_plan

    agg, dis = choice.aggregated, choice.disaggregated
    workload = serving_workload(request.service)
    console = command_console(ctx)
    if agg is not None:
        console.print("[bold]aggregated[/bold]")
        if agg.feasible:
            render_plan(agg, console, options["show_provenance"], plan_flag)
        else:
            render_infeasible(agg, console)
        console.print()
        console.print("[bold]disaggregated[/bold]")
    if dis.feasible:
        render_disagg(dis, console, dis.hours_per_month, workload, plan_flag)
    else:
        render_disagg_infeasible(dis, console, workload)
    if agg is None:  # only the disaggregated plan was asked for: no choice to state; its answer last
        render_notes(choice.notes, console)
    if dis.feasible:
        disagg_answer(dis, console, plan_flag)
    if agg is not None:
        render_choice(choice, console)
