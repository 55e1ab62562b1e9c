"""The library's errors name a field (`tensor_parallel_size`, `context_length`); the commands name
their flag for it, here and only here: `plan memory` takes vLLM's flags, `plan` and `plan compare`
their own shorter ones where those differ."""

from __future__ import annotations

import functools
import re

import click

from planner.applies import Needs, dense_without
from pricing.errors import InputError, render

PLAN_FLAGS = {"tensor_parallel_size": "--tp", "context_length": "--context-length"}  # `plan`'s own names
MEMORY_FIELDS = ("batch", "isl", "osl")  # `plan memory`'s fields beside the deployment's
PARAMS = {"registry": "registry_overlay", "vllm_version": "release", "variant": "variant_names",
          "provenance": "show_provenance", "json": "as_json"}  # fields a
# command's option stores under another name (`--registry` everywhere, check-log's `--vllm-version`, `--variant`)


def option_flag(field: str) -> str:
    """The flag spelling of a field: `tensor_parallel_size` -> `--tensor-parallel-size`."""
    return "--" + field.replace("_", "-")


def memory_flag(field: str) -> str | None:
    """`plan memory`'s flag for a field (vLLM's own for a deployment's), None for no flag."""
    from pricing.kernel import Deployment  # here: `plan --help` and the light commands import no kernel

    return option_flag(field) if field in Deployment.model_fields or field in MEMORY_FIELDS else own_flag(field)


def plan_flag(field: str) -> str | None:
    """`plan`'s flag for a field: its own name, else vLLM's for a deployment's; None for no flag."""
    from pricing.kernel import Deployment

    return PLAN_FLAGS.get(field) or (option_flag(field) if field in Deployment.model_fields else own_flag(field))


def own_flag(field: str, ctx: click.Context | None = None) -> str | None:
    """The flag of the running command (or `ctx`'s) whose option holds `field` (`model` -> `--model`,
    `output_dir` -> `-o`); None when the command takes no such option."""
    ctx = ctx or click.get_current_context(silent=True)
    for param in ctx.command.params if ctx else ():
        if isinstance(param, click.Option) and param.name in (field, PARAMS.get(field)):
            return param.opts[0]
    return None


def file_flag(field: str) -> str | None:
    """`plan scenario`'s name for a field: its own flag, else the scenario file's key (`isl` ->
    `workload.isl`), None for the field itself (a service's key)."""
    from planner.scenario import file_key

    return own_flag(field) or file_key(field)


def service_flag(path: str) -> str:
    """`plan compare`'s flag for a scenario path of its one service: `services[0].context_length`
    -> `--context-length`."""
    return path.replace("services[0].", "--").replace("_", "-")


def in_flags(err: InputError, flag) -> InputError:
    """The error with its field and the fields its text mentions named as the command's flags
    (`flag`: field -> flag, or None to keep the field)."""
    return err.as_named(flag) if flag(err.field) is not None or err.mentions else err


def names_flags(flag=own_flag):
    """A command whose errors name its flags (`flag`: field -> flag, or None to keep the field)."""
    def wrap(command):
        @functools.wraps(command)
        def run(*args, **kwargs):
            try:
                return command(*args, **kwargs)
            except InputError as err:
                raise in_flags(err, flag) from None
            except OverflowError as err:  # the solver's integer range: its text mentions the fields to lower
                raise OverflowError(render(str(err), flag)) from None
        return run
    return wrap


# -- options that cannot apply: one declarative table, checked once per command ----------------------
SERVICE_TARGETS = tuple(f"p{p}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2e") for p in (50, 90, 99)) + ("goodput",)
K8S = "add --emit k8s -o DIR, or drop it"


def _targets(o: dict) -> bool:
    return any(o.get(k) is not None for k in SERVICE_TARGETS)


def _not_disagg(o: dict) -> bool:
    """Not a disaggregated plan, or one without its workload yet (that is said first: add --isl and --osl)."""
    return o.get("serving") != "disagg" or o.get("isl") is None or o.get("osl") is None


def _no_max_rate(o: dict) -> bool:
    return not o.get("max_rate")


MAX_RATE_REFUSES = ("requests_per_second", "concurrency", "headroom", "chart_path", "brief",
                    "show_provenance")  # what a plan at a given load takes (--emit writes the pool at the rate found)


def _max_rate_disagg(o: dict) -> bool:
    return bool(o.get("max_rate")) and o.get("serving") == "disagg"


def _max_rate_agg(o: dict) -> bool:
    return bool(o.get("max_rate")) and o.get("serving", "agg") == "agg"


NEEDS = (
    Needs("range_ratio", "service targets (the lengths are drawn only for the serving simulator)", _targets,
          "add --p99-ttft-ms or another target with --requests-per-second, --isl and --osl, or drop it"),
    Needs("speculative_acceptance", "speculative decoding (--num-speculative-tokens 0)",
          lambda o: bool(o.get("num_speculative_tokens")), "add --num-speculative-tokens N, or drop it"),
    *(Needs(name, "--emit (nothing is written)", lambda o: bool(o.get("emit")), K8S)
      for name in ("image", "model_source", "hf_token_secret", "model_cache_claim", "namespace", "node_selector",
                   "router_script", "k8s_target", "rdma", "toleration", "run_as_user", "model_cache_size",
                   "router_image", "router_fetch")),
    *(Needs(name, "--emit (nothing is written)", lambda o: bool(o.get("emit")), K8S)
      for name in ("autoscaler", "prometheus_address")),
    Needs("prometheus_address", "--autoscaler keda (a HorizontalPodAutoscaler reads the Prometheus adapter)",
          lambda o: o.get("autoscaler") == "keda", "add --autoscaler keda, or drop it"),
    Needs("model_cache_size", "--model-cache-claim (the claim it writes)", lambda o: bool(o.get("model_cache_claim")),
          "add --model-cache-claim NAME, or drop it"),
    *(Needs(name, "a disaggregated plan (only a disaggregated service has a router)",
            lambda o: o.get("serving", "disagg") in ("disagg", "auto"),  # a scenario's services say their own
            "add --serving disagg, or drop it") for name in ("router_script", "router_image", "router_fetch")),
    *(Needs(name, "the plain target's router (Dynamo's frontend and llm-d's scheduler route on their own)",
            lambda o: o.get("k8s_target") in (None, "plain"), "drop it with --k8s-target dynamo or llm-d")
      for name in ("router_image", "router_fetch", "router_script")),
    Needs("router_script", "--router-fetch (the router downloads nothing unless opted in)",
          lambda o: bool(o.get("router_fetch")), "add --router-fetch SHA256, or drop it"),
    Needs("router_fetch", "a router built without --router-image (it runs from that image)",
          lambda o: not o.get("router_image"), "give --router-image or --router-fetch, not both"),
    Needs("ray_address", "--executor ray", lambda o: o.get("executor") == "ray", "add --executor ray, or drop it"),
    Needs("brief", "a table (--json prints every field)", lambda o: not o.get("as_json"), "drop --brief or --json"),
    Needs("fmt", "a table (--json is the format)", lambda o: not o.get("as_json"), "drop --format or --json"),
    Needs("max_rate", "service targets (the rate is the most that meets them)",
          lambda o: _targets(o) or o.get("serving") == "disagg",
          "add --p99-ttft-ms, --p90-tpot-ms or another target, with --isl and --osl"),
    Needs("max_rate", "--ttft-ms (--serving disagg sizes the prefill pool by it, queueing included)",
          lambda o: o.get("serving") != "disagg" or o.get("ttft_ms") is not None,
          "add --ttft-ms 1500 and --tpot-ms 30"),
    Needs("max_rate", "--max-gpus (the pool whose rate is asked)", lambda o: o.get("max_gpus") is not None,
          "add --max-gpus 8, the GPUs of the pool"),
    *(Needs(name, "a plan at a given load (--max-rate finds the rate the --max-gpus pool serves)", _no_max_rate,
            "drop it, or drop --max-rate") for name in MAX_RATE_REFUSES),
    Needs("fmt", "a plan at a given load (--max-rate prints its table, or --json)",
          lambda o: _no_max_rate(o) or o.get("fmt") != "csv", "drop it, or drop --max-rate"),
    Needs("serving", "one kind of pool (--max-rate finds the most of an aggregated pool or of a disaggregated fleet)",
          lambda o: _no_max_rate(o) or o.get("serving") != "auto", "give --serving agg or disagg"),
    Needs("time_limit", "a solve (--max-rate simulates an aggregated pool's shapes; --serving disagg solves)",
          lambda o: not _max_rate_agg(o), "drop --time-limit, or add --serving disagg"),
    *(Needs(name, "a disaggregated fleet (--max-rate judges an aggregated pool by percentile targets)",
            lambda o: not _max_rate_agg(o), "give --p90-tpot-ms or --p99-ttft-ms, or add --serving disagg")
      for name in ("tpot_ms", "ttft_ms", "prefill_chip", "decode_chip")),
    *(Needs(name, "an aggregated plan (--serving disagg sizes both pools by the rate and the latency targets)",
            _not_disagg, "drop it, or use --serving agg or auto")
      for name in ("concurrency", "headroom", "range_ratio", "brief")),
    Needs("fmt", "an aggregated plan (--serving disagg sizes both pools by the rate and the latency targets; "
          "--format html draws its page)", lambda o: _not_disagg(o) or o.get("fmt") == "html",
          "drop it, use --format html, or use --serving agg or auto"),
)


def given(ctx: click.Context, name: str) -> bool:
    """Whether the user gave option `name` (on the command line or from the environment)."""
    from click.core import ParameterSource

    return ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


def check_options(ctx: click.Context) -> None:
    """Refuse the first option given that cannot apply (NEEDS), a key given twice in a KEY=VALUE
    option, and a sweep larger than a scenario grid may be; one line each, before any work."""
    options = ctx.params
    for row in NEEDS:
        if row.option in options and given(ctx, row.option) and not row.holds(options):
            raise InputError(own_flag(row.option, ctx) or option_flag(row.option),
                             f"has no effect without {row.without}", row.fix)
    keys = [str(v).partition("=")[0].strip() for v in options.get("node_selector") or ()]
    if twice := sorted({k for k in keys if keys.count(k) > 1}):
        raise InputError(own_flag("node_selector", ctx) or "--node-selector", f"gives {twice[0]!r} twice",
                         "give each key once")
    from planner.commands.ranges import check_sweep

    check_sweep(ctx)


# -- the command line as typed: a single-valued option given twice, an empty value ---------------------
def check_argv(group: click.Group, argv: list[str]) -> None:
    """Before click parses `argv` (where the last of a repeated option would win silently and an empty
    value would fall back to a default): a single-valued option given twice, or any option given an
    empty value, is one line naming the flag."""
    ctx = click.Context(group)
    command, args = group, list(argv)
    if args and args[0] in group.list_commands(ctx):
        command, args = group.get_command(ctx, args[0]), args[1:]
    spelled = {}
    for param in command.params:
        if isinstance(param, click.Option):
            for opt in param.opts + param.secondary_opts:
                spelled[opt] = param
    seen: dict[str, str] = {}
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if word == "--":
            break
        name, eq, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        param = spelled.get(name)
        if param is None:
            continue
        value = None
        if not param.is_flag and param.nargs == 1:
            value = inline if eq else (args[i] if i < len(args) else None)
            i += 0 if eq else 1
        if value is not None and not value.strip():
            raise InputError(name, "is empty", f"give a value, or leave {name} out for its default")
        if not param.multiple and not param.count:
            if param.name in seen:
                raise InputError(name, f"is given twice ({seen[param.name]} first)",
                                 "give it once: a single-valued option takes one value")
            seen[param.name] = word if eq or value is None else f"{name} {value}"


# what str.splitlines breaks a line at, and the other control characters: never printed raw in an error
UNPRINTABLE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def one_line_each(lines: list[str]) -> str:
    """Error lines joined by newlines, each kept one line: a control character or a line separator a
    user's file or flag held (a key `\\x85`, a newline in a value) shown escaped, as Python writes it."""
    return "\n".join(UNPRINTABLE.sub(lambda m: repr(m.group(0))[1:-1], line) for line in lines)


class InputErrors(InputError):
    """Several bad inputs found at once, one line each (`lines`, as planner/cli.py main prints
    them), each named as the command calls its fields."""

    def __init__(self, errors: list[InputError]):
        self.errors = list(errors)
        super().__init__(self.errors[0].field, *self.errors[0].text)
        self.lines = [str(e) for e in self.errors]

    def __reduce__(self):
        return (type(self), (self.errors,))

    @property
    def mentions(self) -> list[str]:
        return [m for e in self.errors for m in e.mentions]

    def as_named(self, name) -> InputErrors:
        return InputErrors([e.as_named(name) for e in self.errors])


def check_model_options(ctx: click.Context, models) -> None:
    """Refuse an option the models cannot take (`models`: the graphs planned): --dp on dense models
    only (dp is 1 on them; replicas scale a dense model, planner/candidates/shapes.py)."""
    dp = ctx.params.get("dp")
    if dp and given(ctx, "dp") and any(d != 1 for d in dp) and models and not any(m.has_experts for m in models):
        raise InputError(own_flag("dp", ctx) or "--dp", dense_without(", ".join(m.name for m in models)), "drop it")
