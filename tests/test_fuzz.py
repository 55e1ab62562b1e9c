"""Hostile input, generated (issue 39): config.json files, scenario files, registry overlays, start-up logs and command
lines drawn by hypothesis, each run in this process (click's CliRunner isolation) under a time bound.
Whatever is drawn, the tool answers: exit status 0, 1 or 2, never a traceback, never a hang; an exit 2
is one line (a scenario file's errors: one line each, every line naming the file)."""

from __future__ import annotations

import json
import os
import signal
from contextlib import contextmanager
from pathlib import Path

import click
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT.parent / "shared" / "models"
if not MODELS.is_dir():  # CI lays shared/ beside the clone
    MODELS = Path("/work/shared/models")
QWEN = json.loads((MODELS / "Qwen--Qwen3-8B.json").read_text())
BOUND_S = 60  # no single run may take longer: a hang fails the example, it does not stall the suite
# CI: a fixed sample of 100 examples a test; FUZZ_EXAMPLES=500 FUZZ_RANDOM=1 explores further
FUZZ = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", 100)), deadline=None,
                derandomize=not os.environ.get("FUZZ_RANDOM"), database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


class Hang(Exception):
    pass


@contextmanager
def bounded(seconds: int):
    def alarm(*_):
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def answer(argv: list[str], several: str | None = None) -> tuple[int, str, str]:
    """`plan argv` in this process, isolated as CliRunner isolates a command (its own stdin, stdout
    and stderr), within BOUND_S; asserts the tool's promises about what it printed. `several`: what
    begins each line of an exit 2 that reports every error at once (a scenario file's errors name the
    file; a compare sweep's, the flag)."""
    from planner.cli import main

    runner = CliRunner()
    with runner.isolation(input="") as (out, err, _), bounded(BOUND_S):
        code = main(argv)
        click.utils.echo("", nl=False)  # flush
        stdout, stderr = out.getvalue().decode(), err.getvalue().decode()
    assert code in (0, 1, 2), (argv, code, stderr[-2000:])
    assert "Traceback" not in stderr, (argv, stderr[-2000:])
    if code == 2:
        lines = stderr.splitlines()
        assert stderr.startswith("plan: error: ") and stderr.endswith("\n"), (argv, stderr)
        if several is not None:  # every error at once, one line each
            assert all(line.startswith(several) for line in lines[1:]), (argv, stderr)
        else:
            assert len(lines) == 1, (argv, stderr)
    return code, stdout, stderr


# values a careless or hostile file holds where a number or a word belongs
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.sampled_from([0, -1, 1, 2**31, 2**63]),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6),
                    st.sampled_from(["4096", "", "bfloat16", "auto", "h200", "1e400"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                      max_leaves=6)


# -- config.json -----------------------------------------------------------------------------------
CONFIG_KEYS = ["num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
               "vocab_size", "intermediate_size", "max_position_embeddings", "torch_dtype", "rope_theta",
               "rms_norm_eps", "tie_word_embeddings", "model_type", "rope_scaling", "sliding_window",
               "architectures", "quantization_config", "text_config", "num_experts", "num_experts_per_tok",
               "moe_intermediate_size", "layer_types", "max_window_layers", "use_sliding_window"]


@FUZZ
@given(changes=st.dictionaries(st.sampled_from(CONFIG_KEYS), VALUES, min_size=1, max_size=3),
       dropped=st.lists(st.sampled_from(CONFIG_KEYS), max_size=2))
def test_any_config_json_is_answered(tmp_path_factory, changes, dropped):
    cfg = {**{k: v for k, v in QWEN.items() if k not in dropped}, **changes}
    path = tmp_path_factory.mktemp("cfg") / "config.json"
    path.write_text(json.dumps(cfg))  # NaN and Infinity as Python writes them
    answer(["memory", "--model", str(path), "--chip", "h100"])


# -- registry overlays ------------------------------------------------------------------------------
def registry_names() -> list[str]:
    from pricing.registry import shipped

    reg = shipped()
    return [n for n in reg.names() if not n.startswith(("chips.", "chip_rates.", "chip_network."))]


NAMES = registry_names()


def nested(name: str, leaf) -> dict:
    out = leaf
    for part in reversed(name.split(".")):
        out = {part: out}
    return out


@FUZZ
@given(name=st.sampled_from(NAMES), value=VALUES, shape=st.sampled_from(["leaf", "bare", "partial"]))
def test_any_registry_overlay_is_answered(tmp_path_factory, name, value, shape):
    leaf = {"leaf": {"value": value, "source": "fuzz", "how": "drawn"}, "bare": value,
            "partial": {"value": value}}[shape]
    path = tmp_path_factory.mktemp("overlay") / "overlay.yaml"
    path.write_text(yaml.safe_dump(nested(name, leaf)))
    answer(["memory", "--model", "llama-3.1-8b", "--chip", "h100", "--registry", str(path)])


# -- scenario files ---------------------------------------------------------------------------------
SERVICE_KEYS = ["concurrency", "context_length", "headroom", "chips", "kv_cache_dtype", "tp", "pp", "dp",
                "num_speculative_tokens", "gpu_memory_utilization", "max_num_batched_tokens", "max_gpus", "tpot_ms",
                "ttft_ms", "workload", "serving", "slo", "model", "quantization", "name", "vllm_version"]
TOP_KEYS = ["spare", "grid", "variants", "defaults", "inventory", "review"]


@FUZZ
@given(service=st.dictionaries(st.sampled_from(SERVICE_KEYS), VALUES, max_size=2),
       top=st.dictionaries(st.sampled_from(TOP_KEYS), VALUES, max_size=2))
def test_any_scenario_file_is_answered(tmp_path_factory, service, top):
    scenario = {"services": [{"name": "chat", "model": "qwen2.5-7b", "chips": ["h100"], "concurrency": 4,
                              **service}], **top}
    path = tmp_path_factory.mktemp("review") / "review.yaml"
    path.write_text(yaml.safe_dump(scenario))  # .nan and .inf as YAML writes them
    answer(["scenario", str(path), "--time-limit", "2"], several=str(path))


# -- the command line -----------------------------------------------------------------------------------
WORDS = st.sampled_from(["", " ", "0", "-1", "1", "2", "8", "4096", "1e400", "nan", "inf", "-inf", "1.5", "x",
                         "h200", "h200=3", "h1000=3", "a=b", "a=b,c", "--tp", "-", "9" * 40, "auto", "fp8",
                         "0.5,0.5", "ü", "none"])
NOT_DRAWN = {"output_dir", "chart_path", "out_path", "emit", "show_schema", "show_file_schema", "help", "version"}


def options(command: str) -> list[click.Option]:
    from planner.cli import cli

    group = cli if not command else cli.get_command(click.Context(cli), command)
    return [p for p in group.params if isinstance(p, click.Option) and p.name not in NOT_DRAWN]


BASES = {"memory": ["memory", "--model", "qwen2.5-7b", "--chip", "h100"],
         "": ["--model", "qwen2.5-7b", "--chip", "h100", "--concurrency", "4", "--time-limit", "2"],
         "compare": ["compare", "--model", "qwen2.5-7b", "--chip", "h100", "--concurrency", "4", "--time-limit", "2"],
         "check-log": ["check-log", str(ROOT / "tests" / "fixtures" / "startup_logs" /
                                        "v0.10.1.1-dennislee22-a100-40gb-qwen2-7b-tp2-native.log")]}


@FUZZ
@given(data=st.data(), command=st.sampled_from(sorted(BASES)))
def test_any_command_line_is_answered(tmp_path_factory, monkeypatch, data, command):
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))  # nothing drawn writes into the checkout
    drawn = data.draw(st.lists(st.sampled_from(options(command)), min_size=1, max_size=3), label="options")
    argv = list(BASES[command])
    for option in drawn:
        flag = option.opts[0]
        argv += [flag] if option.is_flag else [flag, data.draw(WORDS, label=flag)]
    answer(argv, several="--" if command == "compare" else None)


# -- start-up logs --------------------------------------------------------------------------------------
LOG_LINES = sorted({line for path in sorted((ROOT / "tests" / "fixtures" / "startup_logs").glob("*.log"))[:8]
                    for line in path.read_text(errors="replace").splitlines() if line.strip()})


@FUZZ
@given(lines=st.lists(st.one_of(st.sampled_from(LOG_LINES), st.text(max_size=40),
                                st.sampled_from(LOG_LINES).map(lambda s: s.replace("0", "9" * 30))),
                      min_size=1, max_size=40),
       flags=st.lists(st.sampled_from([["--chip", "h100"], ["--model", "llama-3.1-8b"], ["--tp", "2"],
                                       ["--vllm-version", "0.19.0"], ["--json"]]), max_size=3, unique_by=str))
def test_any_startup_log_is_answered(tmp_path_factory, lines, flags):
    path = tmp_path_factory.mktemp("log") / "vllm.log"
    path.write_text("\n".join(lines) + "\n")
    answer(["check-log", str(path), *[word for flag in flags for word in flag]], several=str(path))  # the
    # options the log leaves unstated, at once: the GPU's line first (--chip), then the log's (model, release)


WHOLE_LOGS = sorted(p for p in (ROOT / "tests" / "fixtures" / "startup_logs").glob("*.log"))
NUMBER_WORDS = st.sampled_from(["0", "-1", "nan", "inf", "1e400", "9" * 40, "", "x", "0.0", "-0.5"])


@FUZZ
@given(log=st.sampled_from(WHOLE_LOGS), data=st.data())
def test_any_edit_of_a_real_startup_log_is_answered(tmp_path_factory, log, data):
    """A real log with a few of its numbers replaced (a hostile or corrupted copy)."""
    import re

    text = log.read_text(errors="replace")
    numbers = [m.span() for m in re.finditer(r"\d+(?:\.\d+)?", text)]
    for start, end in sorted(data.draw(st.lists(st.sampled_from(numbers), min_size=1, max_size=4, unique=True)),
                             reverse=True):
        text = text[:start] + data.draw(NUMBER_WORDS) + text[end:]
    path = tmp_path_factory.mktemp("log") / log.name
    path.write_text(text)
    answer(["check-log", str(path), "--chip", data.draw(st.sampled_from(["h100", "a100-40gb", "h200"]))],
           several=str(path))
