"""Bad input is one line on stderr naming the field and the fix, exit status 2, before any work;
a property feeds every numeric option of every command values outside its range."""

from __future__ import annotations

import json
import math
import re
import tempfile
from pathlib import Path

import click
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.candidates.service import ResolvedService
from planner.cli import cli
from planner.commands.ranges import Bounded
from tests.helpers import cli as run

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT.parent / "shared" / "models"
if not MODELS.is_dir():  # CI lays shared/ beside the clone
    MODELS = Path("/work/shared/models")
MIXED = ROOT / "scenarios" / "mixed-fleet-shared-inventory.yaml"
# the arguments each command needs besides the option under test (the range is checked as click parses it)
BASE = {"": ["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "4"],
        "memory": ["--model", "llama-3.1-8b", "--chip", "h100"],
        "compare": ["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "4"],
        "scenario": [str(MIXED)], "check-log": [str(ROOT / "README.md")],
        "calibrate": ["x.jsonl", "--out", "x.yaml"], "models": [], "chips": []}


def one_line_error(argv: list[str], *needles: str) -> str:
    code, out, err = run(argv)
    assert code == 2, (argv, code, out[-500:], err)
    assert out == "" and err.count("\n") == 1 and err.startswith("plan: error: "), (argv, err)
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, (argv, err)
    return err


def commands() -> dict[str, click.Command]:
    ctx = click.Context(cli)
    found = {"": cli}
    for name in cli.list_commands(ctx):
        found[name] = cli.get_command(ctx, name)
    return found


def numeric_options() -> list[tuple[str, click.Option]]:
    return [(name, p) for name, command in commands().items() for p in command.params
            if isinstance(p, click.Option) and isinstance(p.type, Bounded)]


def test_every_numeric_option_of_every_command_has_its_range():
    plain = [(name or "plan", p.opts[0]) for name, command in commands().items() for p in command.params
             if isinstance(p, click.Option) and isinstance(p.type, (click.types.IntParamType,
                                                                     click.types.FloatParamType))]
    assert plain == []  # an int or float option without a range is not checked (planner/commands/ranges.py)
    assert len(numeric_options()) >= 40


def outside(b: Bounded):
    """Values outside a Bounded range (and, for floats, not finite)."""
    options = []
    if b.low is not None:
        options.append(st.integers(max_value=math.ceil(b.low) - (0 if b.low_open else 1), min_value=-10**12)
                       if b.kind is int else st.floats(max_value=b.low, exclude_max=not b.low_open,
                                                       min_value=-1e12))
    if b.high is not None:
        options.append(st.integers(min_value=math.floor(b.high) + (0 if b.high_open else 1), max_value=10**15)
                       if b.kind is int else st.floats(min_value=b.high, exclude_min=not b.high_open, max_value=1e18))
    if b.kind is float:
        options.append(st.sampled_from([math.nan, math.inf, -math.inf]))
    options.append(st.sampled_from(["x", "1.5.2", ""]) if b.kind is float else st.sampled_from(["x", "1.5"]))
    return st.one_of(options)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_numeric_option_refuses_values_outside_its_range(data):
    name, option = data.draw(st.sampled_from(numeric_options()), label="option")
    value = data.draw(outside(option.type), label="value")
    flag = next(o for o in option.opts if o.startswith("--"))
    base = BASE[name]
    if flag in base:  # the option under test replaces the base's own value (a single-valued option is given once)
        at = base.index(flag)
        base = base[:at] + base[at + 2:]
    argv = ([name] if name else []) + base + [f"{flag}={value}"]
    err = one_line_error(argv, flag)
    assert "is given twice" not in err


# -- the list, one by one -----------------------------------------------------------------
MEMORY = ["memory", "--model", "llama-3.1-8b", "--chip", "h100"]
PLAN = ["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "4"]


@pytest.mark.parametrize("flags,field", [
    (["-tp", "0"], "--tensor-parallel-size"), (["-tp", "-2"], "--tensor-parallel-size"),
    (["-pp", "-1"], "--pipeline-parallel-size"), (["-dp", "0"], "--data-parallel-size"),
    (["-dcp", "0"], "--decode-context-parallel-size"), (["--num-speculative-tokens", "-1"], "--num-speculative-tokens"),
    (["--num-redundant-experts", "-3"], "--num-redundant-experts"), (["--isl", "-1", "--osl", "10"], "--isl"),
    (["--block-size", "7"], "--block-size"), (["--mamba-cache-mode", "align"], "--mamba-cache-mode"),
])
def test_plan_memory_bad_flags(flags, field):
    one_line_error(MEMORY + flags, field)


def test_mega_attention_needs_sm100_and_v41():
    one_line_error(["memory", "--model", "dsv4.1-flash", "--chip", "h100", "-tp", "8", "--mega-attention"],
                   "--mega-attention", "SM100")
    one_line_error(MEMORY + ["--mega-attention"], "--mega-attention", "not DeepSeek-V4.1")


def test_the_library_names_fields_and_the_commands_name_flags():
    """The library's errors (every module of pricing/ and of planner/ but its commands) name the
    field, never a flag (read from the syntax tree: no InputError there is raised with a flag word);
    each command names its flag for the field, in planner/commands/flags.py alone."""
    import ast

    from pricing.chips import get_chip
    from pricing.errors import InputError
    from pricing.graph import load_model
    from pricing.kernel import Deployment, Kernel

    flagged = []
    library = [p for folder in ("pricing", "planner") for p in sorted((ROOT / folder).rglob("*.py"))
               if "commands" not in p.parts and p.name != "cli.py"]
    for path in library:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "InputError" and node.args:
                first = node.args[0]
                first = first.values[0] if isinstance(first, ast.JoinedStr) and first.values else first
                if isinstance(first, ast.Constant) and str(first.value).startswith("-"):
                    flagged.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert len(library) > 100 and flagged == []
    graph, chip = load_model("llama-3.1-8b"), get_chip("h200")
    for flags, field in (({"tensor_parallel_size": 2, "decode_context_parallel_size": 3},
                          "decode_context_parallel_size"), ({"max_model_len": 10_000_000}, "max_model_len")):
        with pytest.raises(InputError) as err:
            Kernel.of(graph, Deployment(**flags), chip)
        assert err.value.field == field
    one_line_error(MEMORY + ["-tp", "2", "-dcp", "3"], "--decode-context-parallel-size: 3 does not divide")
    one_line_error(MEMORY + ["--max-model-len", "10000000"], "--max-model-len: 10000000 exceeds")
    one_line_error(["--model", "llama-3.1-8b", "--chip", "h200", "--concurrency", "1", "--context-length", "10000000"],
                   "--context-length: 10000000 exceeds")
    one_line_error(["--model", "llama-3.1-8b", "--chip", "h200", "--concurrency", "1", "--tp", "3"], "--tp: 3 does")


# -- fix texts name fields too: `mention(field)`, rendered by whoever shows the error -------------
FLAG_WORD = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
QUOTED_COMMAND = re.compile(r"`(?:plan|kubectl|vllm|pip|ray) [^`]*`")  # a command line to run, quoted whole
# vLLM's CLI, not ours: an argv element of a launch command is exactly one flag of vLLM's own parsers
# (`vllm serve`, and the NIXL proxy planner/app/disagg_launch.py starts), or of `ray start` (serve.py)
PARSERS = ROOT / "tests" / "fixtures" / "vllm-0.33"
VLLM_FLAGS = frozenset(json.loads((PARSERS / "serve_flags.json").read_text())["flags"])
PROXY_FLAGS = frozenset(json.loads((PARSERS / "proxy_flags.json").read_text())["flags"])
RAY_START_FLAGS = frozenset({"--head", "--port", "--address="})
DYNAMO_VLLM_FLAGS = frozenset({"--disaggregation-mode"})  # dynamo.vllm's own (ai-dynamo/dynamo's vLLM examples)
# llm-d's routing sidecar and endpoint picker (planner/report/k8s_llmd.py; llm-d-inference-scheduler v0.8.0
# pkg/sidecar/proxy/options.go, gateway-api-inference-extension v1.5.0 pkg/epp/server/options.go)
LLM_D_FLAGS = frozenset({"--port", "--vllm-port", "--kv-connector", "--secure-proxy", "--pool-name", "--pool-group",
                         "--zap-encoder", "--config-file", "--tracing", "--metrics-endpoint-auth"})
# Not yet moved to mentions; the set may only shrink. The JSON Schema's descriptions (result.py's Target and
# Margin, request.py's range ratio, search/status.py): one schema for every command, no reader to name a field.
# The tables' csv hint (tables.py): true of `plan`'s plan table alone, print_table knows no reader. vLLM's own
# flags in the kernel's start-up verdicts, the log reader and the vision note (startup.py, startup_log.py,
# graph/__init__.py); `plan memory`'s --no-mega-attention (deepseek_v4.py): a flag's negative form, no field.
NOT_YET = {
    "pricing/calibration/startup_log.py": {"--gpu-memory"},
    "pricing/graph/__init__.py": {"--limit-mm-per-prompt"}, "pricing/kernel/deepseek_v4.py": {"--no-mega-attention"},
    "pricing/kernel/startup.py": {"--gpu-memory-utilization", "--kv-cache-memory-bytes", "--enable-expert-parallel",
                                  "--max-model-len"},
    "planner/app/result.py": {"--headroom", "--tpot-ms", "--ttft-ms", "--isl", "--osl", "--margin"},
    "planner/report/tables.py": {"--format"}, "planner/request.py": {"--random-range-ratio"},
    "planner/search/status.py": {"--time-limit"},
}


def flag_words(text: str) -> set[str]:
    """The flag spellings of a text outside the command lines it quotes whole."""
    return set(FLAG_WORD.findall(QUOTED_COMMAND.sub("", text)))


def library_strings():
    """(module, the call it is in or None, string) for every string of pricing/ and planner/ outside
    the commands (planner/commands/, planner/cli.py), docstrings left out."""
    import ast

    for folder in ("pricing", "planner"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "commands" in path.parts or path.name == "cli.py":
                continue
            tree = ast.parse(path.read_text())
            docs = {id(n.body[0].value) for n in ast.walk(tree)
                    if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                    and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
            errors = {id(c) for n in ast.walk(tree) if isinstance(n, ast.Call)
                      and getattr(n.func, "id", None) == "InputError" for c in ast.walk(n)}
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                    yield str(path.relative_to(ROOT)), id(node) in errors, node.value


def test_no_library_text_spells_a_flag_of_ours():
    """An error's problem and fix name other fields as `mention(field)` (pricing/errors.py), never
    as a flag: `plan` shows each as its flag, `plan scenario` as the file's key. vLLM's own flags in
    a launch command are vLLM's CLI and stay: a string that is exactly one of its parsers' flags."""
    in_errors, elsewhere = [], {}
    for module, in_error, text in library_strings():
        if text in VLLM_FLAGS | PROXY_FLAGS | RAY_START_FLAGS | DYNAMO_VLLM_FLAGS | LLM_D_FLAGS:
            continue  # an argv element of a launch command (planner/app/serve.py, disagg_launch.py, k8s.py)
        words = flag_words(text)
        if words and in_error:
            in_errors.append((module, text))
        if words:
            elsewhere.setdefault(module, set()).update(words)
    assert in_errors == []
    grown = {m: w - NOT_YET.get(m, set()) for m, w in elsewhere.items() if w - NOT_YET.get(m, set())}
    assert grown == {}, grown  # a new flag spelling in the library: name the field (mention) instead
    done = {m: w - elsewhere.get(m, set()) for m, w in NOT_YET.items() if w - elsewhere.get(m, set())}
    assert done == {}, done  # moved to mentions: shrink NOT_YET


def test_a_mention_is_the_field_until_a_reader_names_it():
    import pickle

    from pricing.errors import InputError, Quoted, mention, quoted

    err = InputError("serving", "sized by a workload", f"add {mention('isl')} and {mention('osl')}")
    assert str(err) == "serving: sized by a workload (add isl and osl)" and err.fix == "add isl and osl"
    assert err.mentions == ["isl", "osl"]
    flags = {"serving": "--serving", "isl": "--isl"}.get
    assert err.named(flags) == "--serving: sized by a workload (add --isl and osl)"  # osl: no flag, the field
    assert pickle.loads(pickle.dumps(err)).named(flags) == err.named(flags)
    assert quoted(Quoted("h200: ", err), flags) == "h200: --serving: sized by a workload (add --isl and osl)"


def test_a_report_names_every_mention_it_holds_and_stays_itself_without_one():
    """`named_all` renders the mentions in every string of a report (nested models, lists, fields
    the JSON excludes), and hands back the very object where there is none to render."""
    from pydantic import BaseModel, Field

    from pricing.errors import mention, named_all

    class Inner(BaseModel):
        text: str
        hidden: str = Field("", exclude=True)

    class Outer(BaseModel):
        notes: list[str]
        inner: Inner
        count: int = 3

    flags = {"tp": "--tp", "max_gpus": "--max-gpus"}.get
    report = Outer(notes=[f"raise {mention('max_gpus')}", "plain"],
                   inner=Inner(text=f"{mention('tp')} 8", hidden=f"{mention('tp')} 2"))
    named = named_all(report, flags)
    assert named.notes == ["raise --max-gpus", "plain"] and named.inner.text == "--tp 8"
    assert named.inner.hidden == "--tp 2" and named.count == 3
    assert named_all(report).notes[0] == "raise max_gpus"  # no reader: the field
    plain = Outer(notes=["plain"], inner=Inner(text="x"))
    assert named_all(plain, flags) is plain and report.notes[0] == f"raise {mention('max_gpus')}"  # never in place


def scenario_file(tmp_path, **service) -> str:
    path = tmp_path / "review.yaml"
    path.write_text(yaml.safe_dump({"services": [{"name": "chat", "chips": ["h200"], "concurrency": 4, **service}]}))
    return str(path)


def test_one_error_names_the_flag_on_the_command_line_and_the_key_in_a_file(tmp_path):
    """The checkpoint's quantization and another asked for (pricing/config/quantization.py): `plan`,
    `plan memory` and `plan compare` say drop --quantization; a scenario file says drop quantization."""
    mismatch = "awq does not match the checkpoint's fp8"
    for argv in (["--model", "dsv3", "--chip", "h200", "--concurrency", "4"], ["memory", "--model", "dsv3", "--chip",
                 "h200"], ["compare", "--model", "dsv3", "--chip", "h200", "--concurrency", "4"]):
        one_line_error([*argv, "--quantization", "awq"], f"--quantization: {mismatch}",
                       "(drop --quantization or give the checkpoint's method)")
    code, _, err = run(["scenario", scenario_file(tmp_path, model="dsv3", quantization="awq")])
    assert code == 2 and f"services.chat.quantization: {mismatch}" in err, err
    assert "(drop quantization or give the checkpoint's method)" in err and "--" not in err, err


def test_a_mentioned_field_is_a_flag_of_plan_and_a_key_of_the_file(tmp_path):
    """planner/search/disagg.py mentions isl and osl: `plan` says --isl, a scenario file's service workload.isl."""
    one_line_error([*LLAMA, "--concurrency", "4", "--serving", "disagg"], "(add --isl and --osl)")
    err = one_line_error(["scenario", scenario_file(tmp_path, model="llama-3.1-8b", serving="disagg")],
                         "(add workload.isl and workload.osl)")
    assert "--" not in err


def test_a_report_sentence_names_the_flag_in_plan_and_the_key_in_a_scenario(tmp_path):
    """planner/candidates/shapes.py's note on a tp beyond the NVLink domain mentions tp and pp:
    `plan` says --tp and --pp, a scenario review the service's keys tp and pp (its JSON's notes)."""
    span = "tp 16 exceeds the NVLink domain of 8 GPUs: span nodes with pipeline stages instead"
    code, out, err = run(["--model", "llama-3.1-8b", "--chip", "h200", "--concurrency", "8", "--tp", "16", "--tp", "1",
                          "--json"])
    assert code == 0, err
    assert json.loads(out)["notes"] == [f"{span} (--tp 8 --pp 2, or leave --tp and --pp out)"]
    review = scenario_file(tmp_path, model="llama-3.1-8b", concurrency=8, tp=[16, 1])
    for argv in (["scenario", review, "--format", "json"], ["compare", review, "--json"]):
        code, out, err = run(argv)
        assert code == 0, err
        result = json.loads(out)
        notes = result["base"]["notes"] if argv[0] == "compare" else result["notes"]
        assert notes == [f"{span} (tp 8 pp 2, or leave tp and pp out)"]
        assert "\x02" not in out and "\\u0002" not in out


def test_the_estimate_footnote_names_plans_flag_and_the_files_key(tmp_path):
    """An estimated price's footnote (planner/app/result.py) mentions price: `plan` says give
    yours with --price, a scenario review (table and Markdown) with the inventory's key."""
    estimate = "* l40s: $0.93/GPU-hour is an estimate as of 2026-05-01, not a quote (give yours with "
    code, out, err = run(["--model", "llama-3.1-8b", "--chip", "l40s", "--concurrency", "4"])
    assert code == 0 and f"{estimate}--price)" in out, err
    review = scenario_file(tmp_path, model="llama-3.1-8b", chips=["l40s"])
    for fmt in ("table", "markdown"):
        code, out, err = run(["scenario", review, "--format", fmt])
        assert code == 0 and f"{estimate}inventory.<chip>.price)".replace("*", "\\*" if fmt == "markdown" else "*") \
            in " ".join(out.split()), (fmt, out)
        assert "--price" not in out


LLAMA = ["--model", "llama-3.1-8b", "--chip", "h100"]
SWEEP = ["compare", *LLAMA, "--concurrency", "4", "--context-length", "4096"]


@pytest.mark.parametrize("argv,needle", [
    (["--model", "nope", "--chip", "h100", "--concurrency", "4"], "--model: unknown model 'nope'"),  # pricing/config
    (["memory", "--model", "nope", "--chip", "h100"], "--model: unknown model 'nope'"),
    (["compare", "--model", "nope", "--chip", "h100", "--concurrency", "4", "--context-length", "4096"],
     "--model: unknown model 'nope'"),
    ([*LLAMA, "--concurrency", "4", "--quantization", "bogus"], "--quantization: unknown method 'bogus'"),
    (["memory", *LLAMA, "--quantization", "bogus"], "--quantization: unknown method 'bogus'"),
    (["--model", "llama-3.1-8b", "--chip", "nochip", "--concurrency", "4"], "--chip: unknown chip 'nochip'"),  # chips
    (["memory", "--model", "llama-3.1-8b", "--chip", "nochip"], "--chip: unknown chip 'nochip'"),
    ([*SWEEP[:4], "nochip", *SWEEP[5:]], "--chip: unknown chip 'nochip'"),
    ([*LLAMA, "--concurrency", "4", "--vllm-version", "9.9"], "--vllm-version: unknown vLLM release '9.9'"),  # rules
    (["memory", *LLAMA, "--vllm-version", "9.9"], "--vllm-version: unknown vLLM release '9.9'"),
    ([*SWEEP, "--vllm-version", "9.9"], "--vllm-version: unknown vLLM release '9.9'"),
    ([*LLAMA, "--concurrency", "4", "--registry", "/nonexistent/overlay.yaml"], "--registry: cannot read"),  # registry
    (["memory", *LLAMA, "--registry", "/nonexistent/overlay.yaml"], "--registry: cannot read"),
    (["scenario", str(MIXED), "--registry", "/nonexistent/overlay.yaml"], "--registry: cannot read"),
    ([*LLAMA, "--concurrency", "4", "--serving", "disagg"], "--serving: disaggregated serving is sized by a workload"),
    (["scenario", str(MIXED), "--variant", "nope"], "--variant: no variant named 'nope'"),  # planner/scenario
    ([*LLAMA, "--concurrency", "4", "--emit", "k8s", "-o", str(ROOT / "README.md")],
     "-o: " + str(ROOT / "README.md") + " is not a folder"),  # report/k8s, before any planning
    ([*LLAMA, "--concurrency", "4", "--emit", "k8s", "-o", str(Path(tempfile.gettempdir()) / "never-written"),
      "--node-selector", "gpu"],
     "--node-selector: 'gpu' is not KEY=VALUE"),
    (["check-log", str(ROOT / "tests" / "fixtures" / "startup_logs" / "v0.10-issue25350-fp8-kv-100k.log"), "--model",
      "llama-3.1-8b", "--vllm-version", "0.10.2"], "--chip: the log does not name the GPU"),  # pricing/calibration
])
def test_library_errors_name_the_flag_typed(argv, needle):
    """Each library error a command line reaches names the flag given (the library names the
    field: `model`, `chip`, `vllm_version`, `registry`, `serving`, `variant`, `output_dir`, ...)."""
    one_line_error(argv, needle)


def test_executor_errors_name_the_flag(monkeypatch):
    """planner/app/executors.py names `executor`; `plan scenario` says --executor."""
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    one_line_error(["scenario", str(MIXED), "--variants", "--executor", "ray"], "--executor: ray is not installed")


@pytest.mark.parametrize("flags,field", [
    (["--kv-cache-dtype", "int4"], "--kv-cache-dtype"), (["--num-speculative-tokens", "3"], "--num-speculative-tokens"),
    (["--isl", "8000", "--osl", "10", "--context-length", "4096"], "--isl"),
    (["--context-length", "1"], "--context-length"),
    (["--isl", "100", "--osl", "10", "--requests-per-second", "1e9"], "--requests-per-second"),
])
def test_plan_bad_flags(flags, field):
    one_line_error(PLAN + flags, field)


def test_percentile_targets_on_a_disaggregated_fleet_are_refused_not_dropped():
    """A disaggregated fleet is sized by mean TTFT and TPOT; percentile targets would be left out
    of it, so they are refused, naming --serving and the way out (auto takes them: it judges both
    plans by them on the same simulated arrivals, tests/test_same_arrivals.py)."""
    one_line_error(["--model", "llama-3.1-70b", "--chip", "h100", "--isl", "2000", "--osl", "500",
                    "--requests-per-second", "20", "--p99-ttft-ms", "2000", "--ttft-ms", "2000", "--tpot-ms", "50",
                    "--serving", "disagg"], "--serving: percentile service targets", "use --serving agg or auto")


def test_a_workload_beyond_the_models_positions_is_not_told_to_raise_the_context():
    """Llama-3.1-70B has 131,072 positions: a 200,000-token prompt cannot fit any --context-length,
    so the fix names the positions, not a context length vLLM would refuse; within them, it names
    the --context-length that fits."""
    llama = ["--model", "llama-3.1-70b", "--chip", "h100", "--requests-per-second", "1", "--p99-ttft-ms", "100"]
    err = one_line_error([*llama, "--isl", "200000", "--osl", "10"], "--isl")
    assert "has 131,072 positions" in err and "--context-length" not in err
    one_line_error([*llama, "--isl", "20000", "--osl", "10", "--context-length", "8192"],
                   "raise --context-length to at least 20,010")


@pytest.mark.parametrize("argv", [["--chip", "h100", "--concurrency", "4"],
                                  ["--model", "", "--chip", "h100", "--concurrency", "4"]])
def test_no_model_is_exit_2_not_help(argv):
    one_line_error(argv, "--model")


def test_a_config_that_is_not_utf8_or_whose_heads_do_not_group(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_bytes(b'\xff\xfe{"a": 1}')
    one_line_error(["memory", "--model", str(bad), "--chip", "h100"], "--model", "UTF-8")
    cfg = json.loads((MODELS / "Qwen--Qwen3-8B.json").read_text())
    cfg.update(num_attention_heads=30, num_key_value_heads=8)
    odd = tmp_path / "odd" / "config.json"
    odd.parent.mkdir()
    odd.write_text(json.dumps(cfg))
    one_line_error(["memory", "--model", str(odd), "--chip", "h100"], "num_key_value_heads", "30")


def test_a_scenario_that_is_not_utf8(tmp_path):
    bad = tmp_path / "review.yaml"
    bad.write_bytes(b"review: x\n\xff\n")
    one_line_error(["scenario", str(bad)], "UTF-8")


def test_an_unwritable_chart_is_refused_before_planning(monkeypatch):
    from planner.app import review

    monkeypatch.setattr(review, "compare", lambda *a, **k: pytest.fail("planned before checking --chart"))
    one_line_error(["scenario", str(MIXED), "--chart", "/proc/x.png"], "--chart", "/proc/x.png")


def test_check_log_of_a_document_is_not_a_startup_log():
    one_line_error(["check-log", str(ROOT / "README.md")], "not a vLLM start-up log")


SEVEN = """review: seven errors
inventory:
  h200: {gpus: 16}
  h999: {gpus: 8}
services:
  - {name: chat, model: llama-3.1-8b, concurrency: -4, context_length: 8192}
  - {name: batch, model: no-such-model, concurrency: 16}
  - {model: qwen3-32b, concurrency: 8, tp: [3], kv_cache_dtype: int4, colour: blue}
  - {name: lim, model: llama-3.1-8b, concurrency: 8, chips: [h100]}
variants:
  cheap: {price.h999: 1.0}
"""


def test_a_scenario_is_checked_whole_with_paths_as_written_and_lines(tmp_path):
    path = tmp_path / "review.yaml"
    path.write_text(SEVEN)
    code, out, err = run(["scenario", str(path)])
    assert code == 2 and out == "" and "Traceback" not in err
    lines = err.removeprefix("plan: error: ").splitlines()
    expected = [(4, "inventory.h999", "unknown chip 'h999'"), (6, "services.chat.concurrency", "greater than"),
                (7, "services.batch.model", "unknown model"), (8, "services[3].name", "Field required"),
                (8, "services[3].colour", "unknown key"), (8, "services[3].tp", "does not divide"),
                (8, "services[3].kv_cache_dtype", "unknown dtype 'int4'"),
                (9, "services.lim.chips", "h100 is not in the inventory"),
                (11, "variants.cheap.price.h999", "unknown chip 'h999'")]
    for line, where, what in expected:  # every error in one round, the service by its name or 1-based number
        assert any(x.startswith(f"{path}:{line}: {where}: ") and what in x for x in lines), (line, where, lines)


def test_an_infeasible_review_carries_null_not_zeros():
    code, out, _ = run(["scenario", str(ROOT / "scenarios" / "infeasible-review.yaml"), "--format", "json"])
    r = json.loads(out)
    assert code == 1 and r["feasible"] is False
    assert r["cost_per_hour"] is None and r["cost_per_month"] is None and r["gpus"] is None


def test_an_error_quoted_in_a_plan_names_the_flag():
    """An error a plan prints inside its answer (a shape vLLM rejects, a disaggregated role that
    cannot be priced) names the field in the library and the command's flag in `plan`'s output;
    the quoted error survives a worker process (pickled)."""
    import dataclasses
    import pickle

    from planner.app.disagg_plan import plan_disagg
    from planner.app.explain import explain
    from planner.candidates.table import candidate_table
    from planner.commands.flags import plan_flag
    from planner.request import PoolLimits, ServiceSpec, WorkloadSpec
    from pricing.chips import get_chip
    from pricing.errors import InputError, Quoted

    service, limits = ServiceSpec(model="llama-3.1-8b", concurrency=1, context_length=8192), PoolLimits(chips=("h200",))
    rejected = InputError("tensor_parallel_size", "3 does not divide 32 attention heads", "use 1, 2, 4 or 8")
    table = candidate_table(ResolvedService.of(service, limits), get_chip("h200"), limits)
    invalid = pickle.loads(pickle.dumps(Quoted("", rejected)))  # every shape rejected, as a worker returns it
    table = dataclasses.replace(table, verdicts=[dataclasses.replace(v, invalid=invalid) for v in table.verdicts])
    assert "e.g. tensor_parallel_size: 3 does not divide" in explain(table, service, limits).text
    assert "e.g. --tp: 3 does not divide 32 attention heads (use 1, 2, 4 or 8)." in explain(
        table, service, limits, plan_flag).text
    # a10g states no tensor rate: each disaggregated role's step time cannot be priced
    disagg = ServiceSpec(model="llama-3.1-8b", concurrency=1, ttft_ms=1000, serving="disagg", context_length=131072,
                         workload=WorkloadSpec(isl=1000, osl=100, requests_per_second=1))
    found = plan_disagg(ResolvedService.of(disagg, PoolLimits(chips=("a10g",))))
    assert "a10g tp 2 dcp 1: chip: a10g: no vendor-sourced bf16_flops" in found.explanations[0].text
    assert (found.explanations[0].chip, found.explanations[0].constraint) == ("a10g", "chip")
    code, out, err = run(["--model", "llama-3.1-8b", "--chip", "a10g", "--isl", "1000", "--osl", "100",
                          "--requests-per-second", "1", "--ttft-ms", "1000", "--serving", "disagg",
                          "--context-length", "131072"])
    assert code == 1 and "Traceback" not in err
    assert "- a10g tp 2 dcp 1: --chip: a10g: no vendor-sourced bf16_flops" in out + err
    assert "- prefill: no candidate instance (a10g tp 2 dcp 1: --chip: a10g: no vendor-sourced" in out + err
