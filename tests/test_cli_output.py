"""What `plan`, `plan scenario` and `plan compare` print, take and draw (issue 13): quiet output
with provenance on request, unwrapped launch commands, the same flags everywhere, every scenario
error at once, one-line errors before any work, a safe utilization grid, charts for a deck."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from planner import defaults
from planner.app.plan import plan
from planner.cli import cli, main
from planner.request import PlanRequest, PoolLimits, ServiceSpec
from pricing.chips import get_chip
from pricing.config import card_index, load_card
from pricing.graph import load_model
from pricing.kernel import Capacity
from pricing.units import GiB, MiB
from tests.helpers import coupled_review

ROOT = Path(__file__).resolve().parents[1]
HEADLINE = ["--model", "dsv4.1-flash", "--chip", "h200", "--concurrency", "64"]


def piped(*args) -> subprocess.CompletedProcess:
    """`plan ARGS` as a fresh process writing to a pipe (not a terminal)."""
    env = dict(os.environ, COLUMNS="80")
    return subprocess.run([sys.executable, "-m", "planner.cli", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)


# -- output ---------------------------------------------------------------------------------------
def test_plan_prints_provenance_only_on_request_and_json_always_carries_it(capsys):
    assert main(HEADLINE) == 0
    brief = capsys.readouterr().out
    # the provenance table (its title), not the word: the memory block names where a scheme's rules are listed
    assert "provenance (every registry value used" not in brief and len(brief.splitlines()) < 80
    assert "vllm serve deepseek-ai/DeepSeek-V4.1-Flash" in brief and "GPU KV cache size" in brief
    assert main([*HEADLINE, "--provenance"]) == 0
    full = capsys.readouterr().out
    assert "provenance (every registry value used" in full and "planner.grids.spare_memory_bytes" in full
    assert main([*HEADLINE, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    names = {p["name"] for p in out["provenance"]}
    assert "planner.grids.spare_memory_bytes" in names and any(n.startswith("vllm_0_33.") for n in names)
    assert out["best"]["model"] == "dsv4.1-flash" and out["model"] == "dsv4.1-flash"
    assert out["best"]["headroom_percent"] == round((out["best"]["held"] / 64 - 1) * 100, 2)


def test_the_provenance_table_prints_registry_numbers_in_the_one_style(capsys, monkeypatch):
    """`--provenance` prints a registry's byte count as GiB/MiB beside its exact integer and other
    numbers with thousands separators, entries of a table apart by '; ' (a comma is a separator);
    `--json` keeps the stored values. The H100's memory_bytes, 84,986,036,224 = 81,049 MiB × 2^20,
    is 79.15 GiB; the activation floor, 73,400,320 = 70 × 2^20, is 70.0 MiB."""
    monkeypatch.setenv("COLUMNS", "240")  # wide enough that no value wraps
    argv = ["memory", "--model", "llama-3.1-8b", "--chip", "h100"]
    assert main([*argv, "--provenance"]) == 0
    table = capsys.readouterr().out
    row = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in table.splitlines()
           if line.count("│") >= 3 and line.split("│")[1].strip()}
    assert row["chips.chips.h100.memory_bytes"] == "79.15 GiB (84,986,036,224 bytes)"
    assert row["cost_model_memory.activation_floor_bytes"] == "70.0 MiB (73,400,320 bytes)"
    assert row["cost_model_memory.activation_element_bytes"] == "2 bytes"
    assert "84986036224" not in table
    assert main([*argv, "--json"]) == 0
    stored = {p["name"]: p["value"] for p in json.loads(capsys.readouterr().out)["provenance"]}
    assert stored["chips.chips.h100.memory_bytes"] == 81_049 * MiB == 84986036224
    # a rate in bytes is no byte count; a table's entries; text and flags as stored
    from planner.report.memory import registry_value

    assert registry_value(15.578, False) == "15.578" and registry_value(16384, False) == "16,384"
    assert registry_value({1: 0, 2: 1110328582}, False) == "{1: 0; 2: 1,110,328,582}"
    assert registry_value({"fp8": 1, "bf16": 2}, True) == "{'fp8': 1 byte; 'bf16': 2 bytes}"
    assert registry_value(True, False) == "True" and registry_value("model", False) == "model"


def test_version():
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0 and re.match(r"plan \d+\.\d+\.\d+", result.output)


def test_one_unit_family_in_the_memory_block(capsys):
    assert main(["memory", "--model", "dsv4.1-flash", "--chip", "h200", "-tp", "4", "--enable-expert-parallel"]) == 0
    text = capsys.readouterr().out
    assert not re.search(r"\d MB\b", text)  # no decimal megabytes beside GiB
    for value in re.findall(r"([\d,.]+) MiB", text):
        assert float(value.replace(",", "")) < 1024  # MiB only under 1 GiB
    start = text.index("\nweights") + 1
    block = text[start:text.index("\n", text.index("before the budget"))].splitlines()
    assert len(block) == 8 and len({line.split()[-1] for line in block}) == 1, block  # one unit for the block


def test_launch_commands_are_never_wrapped_even_piped(tmp_path):
    # a long command: speculative config, fp8 KV cache, several splits
    path = ROOT / "scenarios" / "speculative-decoding-on-off.yaml"
    result = piped("scenario", str(path), "--variants")
    assert result.returncode == 0, result.stderr
    commands = [line for line in result.stdout.splitlines() if "vllm serve" in line and not line.startswith("#")]
    assert commands and all("--max-model-len" in line for line in commands)
    assert any(len(line) > 80 for line in commands)


def test_launch_command_names_the_model_as_given(tmp_path):
    card = load_card(card_index()["llama-3.1-8b"])
    folder = tmp_path / "my-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(card.config))
    result = piped("--model", str(folder), "--chip", "h200", "--concurrency", "8", "--context-length", "8192")
    assert result.returncode == 0, result.stderr
    assert f"vllm serve {folder} --host 0.0.0.0 --port 8000 --tensor-parallel-size" in result.stdout
    assert f"folder {folder}" in result.stdout  # says which source was used


def test_binds_names_the_weights_when_they_force_the_split():
    request = PlanRequest(service=ServiceSpec(model="dsv4.1-flash", concurrency=64), limits=PoolLimits(chips=("h200",)))
    result = plan(request)
    b = result.best
    assert b.replicas == 1 and b.gpus > 1
    assert b.binds.startswith("weights force the split")
    k = b.kernel
    assert f"{k.fixed_bytes().weights / GiB:.2f} GiB of weights per rank" in b.binds


def test_binds_names_the_kv_cache_with_its_numbers():
    request = PlanRequest(service=ServiceSpec(model="llama-3.1-8b", concurrency=256, context_length=131072),
                          limits=PoolLimits(chips=("h100",)))
    result = plan(request)
    b = result.best
    assert b.replicas > 1
    k = b.kernel
    assert b.binds == (f"KV cache: {Capacity(k).requests_held()} requests of 131,072 tokens per rank "
                       f"({k.kv_pool() / GiB:.2f} GiB pool, {k.request_bytes() / GiB:.2f} GiB each; vLLM's maximum "
                       f"concurrency, {k.instance.max_concurrency():.2f}×, is before the KV margin and whole blocks "
                       "per group)")


def test_infeasible_json_explains(capsys):
    assert main(["--model", "dsv3", "--chip", "l40s", "--concurrency", "8", "--max-gpus", "8", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["feasible"] is False and out["explanations"] and "L40S" in out["explanations"][0]["text"]


# -- input ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--tp", "-tp", "--tensor-parallel-size"])
def test_the_same_parallel_flags_on_plan_and_plan_memory(capsys, flag):
    assert main(["--model", "llama-3.1-70b", "--chip", "h200", "--concurrency", "8", flag, "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {p["tensor_parallel_size"] for p in [out["best"], *out["alternatives"]]} == {4}
    assert main(["memory", "--model", "llama-3.1-70b", "--chip", "h200", flag, "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["deployment"]["tp"] == 4


def test_compare_takes_plans_options_and_several_values_per_axis(capsys):
    code = main(["compare", "--model", "llama-3.1-8b", "--chip", "h200", "--concurrency", "16", "--concurrency", "64",
                 "--context-length", "32768", "--price", "h200=2.5", "--max-gpus", "8", "--quantization", "fp8",
                 "--tp", "1", "--format", "json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    results = [out["base"], *out["variants"]]
    assert [r["variant"] for r in results] == ["× 16", "× 64"]
    for r in results:
        [s] = r["services"]
        assert s["tensor_parallel_size"] == 1 and s["price_per_gpu_hour"] == 2.5 and r["gpus"] <= 8
        assert "--quantization fp8" in s["vllm_serve"]
    assert results[0]["gpus"] <= results[1]["gpus"]


def test_a_value_with_no_effect_says_so(capsys):
    args = ["--model", "llama-3.1-70b", "--chip", "h200", "--concurrency", "8", "--price", "b200=3"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "note: --price b200=3 has no effect: b200 is not among the chips planned (h200)" in text
    # --dp on a dense model is refused, not noted (tests/test_hostile_inputs.py)


def test_a_scenario_file_is_checked_whole_before_planning(tmp_path):
    path = tmp_path / "review.yaml"
    path.write_text("""
review: broken
services:
  - {name: a, model: dsv41-flash, concurrency: 8, chips: [h200]}
  - {name: b, model: qwen3-32b, concurrency: 8, context_length: 131072, chips: [h20o]}
  - {name: c, model: qwen3-32b, concurrency: 8, chips: [h200], tp: [3]}
  - {name: d, model: llama-3.1-8b, concurrency: 100000000, chips: [h200], colour: red}
variants:
  long: {context_length: 1000000}
""")
    result = piped("scenario", str(path))
    assert result.returncode == 2 and result.stdout == ""
    err = result.stderr
    assert "Traceback" not in err
    # each error with its line and the service by name (the file's first line is blank)
    for expected in (f"{path}:4: services.a.model: unknown model 'dsv41-flash'; did you mean 'dsv4.1-flash'",
                     f"{path}:5: services.b.chips: unknown chip 'h20o'; did you mean",
                     f"{path}:7: services.d.concurrency: Input should be less than or equal to 1000000",
                     f"{path}:7: services.d.colour: unknown key"):
        assert expected in err, err
    fixed = path.read_text().replace("dsv41-flash", "dsv4.1-flash").replace("h20o", "h200").replace(
        "100000000", "8").replace(", colour: red", "")
    path.write_text(fixed)
    result = piped("scenario", str(path))
    assert result.returncode == 2 and result.stdout == ""
    positions = load_model("qwen3-32b").max_position
    for expected in (f"{path}:5: services.b.context_length: 131072 exceeds the {positions} positions of qwen3-32b",
                     f"{path}:6: services.c.tp: 3 does not divide the 64 attention heads of qwen3-32b"):
        assert expected in result.stderr, result.stderr
    assert "--context-length" not in result.stderr
    # a variant beyond a model's positions is a what-if the review answers (infeasible, with vLLM's reason)
    assert "variants.long" not in result.stderr


def test_overflow_is_a_one_line_error_before_any_work(capsys):
    assert main(["--model", "llama-3.1-8b", "--chip", "h200", "--concurrency", str(10**8)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert "--concurrency" in captured.err and f"{defaults.value('limits.max_concurrency'):,}" in captured.err


@pytest.mark.parametrize("target", ["missing/folder/chart.png", "chart.gif"])
def test_an_unwritable_chart_is_a_one_line_error_before_any_work(tmp_path, target):
    path = ROOT / "scenarios" / "chat-dsv4.1-flash-h200-vs-b200.yaml"
    result = piped("scenario", str(path), "--chart", str(tmp_path / target))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("plan: error: --chart:") and len(result.stderr.strip().splitlines()) == 1
    result = piped("compare", "--model", "llama-3.1-8b", "--chip", "h200", "--concurrency", "8", "--chart",
                   str(tmp_path / target))
    assert result.returncode == 2 and result.stdout == ""


# -- safe defaults --------------------------------------------------------------------------------
def test_the_utilization_grid_keeps_a_margin_beside_the_budget():
    spare = defaults.value("grids.spare_memory_bytes")
    assert spare >= 150 * MiB  # at least vLLM's own redundancy buffer (gpu_worker.py)
    request = PlanRequest(service=ServiceSpec(model="dsv4.1-flash", concurrency=64), limits=PoolLimits(chips=("h200",)))
    result = plan(request)
    chip = get_chip("h200")
    for p in [result.best, *result.alternatives]:
        k = p.kernel
        assert chip.memory_bytes - k.pre_snapshot_bytes() - k.budget() >= spare
    # the user widens it by naming the utilization
    wide = plan(request.model_copy(update={"service": request.service.model_copy(
        update={"gpu_memory_utilization": (0.97,)})}))
    assert wide.best.gpu_memory_utilization == 0.97


# -- charts ---------------------------------------------------------------------------------------
def _texts(svg: str) -> list[str]:
    return re.findall(r"<!-- (.*?) -->", svg)


def test_a_context_sweep_is_drawn_as_lines_with_token_labels_and_marked_infeasible_points(tmp_path):
    out = tmp_path / "sweep.svg"
    result = piped("compare", "--model", "llama-3.1-70b", "--chip", "h200", "--chip", "b200", "--concurrency", "32",
                   "--context-length", "32768", "--context-length", "131072", "--max-gpus", "8", "--chart", str(out))
    assert result.returncode == 1  # 128k does not fit in 8 GPUs
    svg = out.read_text()
    texts = _texts(svg)
    assert "32k" in texts and "128k" in texts and "32768" not in " ".join(texts)
    assert "infeasible" in texts and any(t.startswith("needs ") for t in texts) and 'id="infeasible-h200"' in svg
    assert any("llama-3.1-70b" in t and "context length" in t for t in texts)  # the title says what was compared
    assert 'id="line-h200"' in svg and 'id="line-b200"' in svg
    ticks = [t for t in texts if re.fullmatch(r"\d+(\.\d+)?", t)]
    assert ticks and all("." not in t for t in ticks)  # integer GPU ticks


def test_categorical_sweeps_are_bars_with_cost(tmp_path):
    out = tmp_path / "models.svg"
    result = piped("compare", "--model", "qwen3-32b", "--model", "llama-3.1-8b", "--chip", "h200", "--concurrency",
                   "32", "--context-length", "32768", "--chart", str(out))
    assert result.returncode == 0, result.stderr
    svg = out.read_text()
    assert 'id="bars-h200-0"' in svg and 'id="bars-h200-1"' in svg and 'id="line-' not in svg
    assert any(t.startswith("$/month") for t in _texts(svg))


def test_a_mistyped_variant_gets_the_nearest_name(tmp_path):
    path = ROOT / "scenarios" / "mixed-fleet-shared-inventory.yaml"
    result = piped("scenario", str(path), "--variant", "cheaper-h20")
    assert result.returncode == 2 and result.stdout == ""
    assert "no variant named 'cheaper-h20'; did you mean 'cheaper-h200'?" in result.stderr


# -- what-ifs beyond a model's positions ----------------------------------------------------------
QWEN_SWEEP = ["compare", "--model", "qwen3-32b", "--chip", "h100", "--concurrency", "16", "--context-length", "32768",
              "--context-length", "131072"]


def _beyond(model: str, tokens: int) -> str:
    return f"max_model_len {tokens} exceeds the {load_model(model).max_position} positions of {model}"


def test_a_context_sweep_answers_a_point_beyond_the_models_positions_as_infeasible(tmp_path):
    chart = tmp_path / "sweep.svg"
    result = CliRunner().invoke(cli, [*QWEN_SWEEP, "--json", "--chart", str(chart)])
    assert result.exit_code == 1, result.output  # as a compare with a memory-infeasible point: answered, exit 1
    out = json.loads(result.stdout)
    short, long = out["base"], out["variants"][0]
    assert short["feasible"] and short["services"][0]["max_model_len"] == 32768
    assert not long["feasible"] and [s["service"] for s in long["short"]] == ["what-if"]
    assert long["short"][0]["reason"].startswith(f"vLLM would not start: {_beyond('qwen3-32b', 131072)}")
    positions = f"{load_model('qwen3-32b').max_position:,}"
    assert long["short"][0]["brief"] == f"beyond {positions} positions"
    svg = chart.read_text()
    assert 'id="infeasible-h100"' in svg and {"infeasible", f"beyond {positions} positions"} <= set(_texts(svg))
    table = CliRunner().invoke(cli, QWEN_SWEEP, env={"COLUMNS": "400"})
    assert table.exit_code == 1 and "@ 128k" in table.output and _beyond("qwen3-32b", 131072) in table.output
    md = CliRunner().invoke(cli, [*QWEN_SWEEP, "--format", "markdown"])
    assert md.exit_code == 1
    [row] = [line for line in md.output.splitlines() if line.startswith("| @ 128k |")]
    assert "| infeasible |" in row and _beyond("qwen3-32b", 131072) in row


@pytest.mark.parametrize("args, field", [(["--model", "qwen3-23b"], "--model"),
                                         (["--context-length", "-5"], "--context-length"),
                                         (["--concurrency", "-1"], "--concurrency")])
def test_input_wrong_in_itself_stays_a_one_line_error_in_a_sweep(capsys, args, field):
    base = dict(zip(QWEN_SWEEP[1::2], QWEN_SWEEP[2::2], strict=False))
    argv = ["compare"] + [x for k, v in base.items() if k not in args for x in (k, v)] + args
    assert main([*argv, "--context-length", "131072"]) == 2
    _one_line_error(capsys, field)


def test_a_compare_file_answers_a_variant_beyond_a_models_positions(tmp_path, capsys):
    path = tmp_path / "long.yaml"
    path.write_text("""
review: long-context what-if
services:
  - {name: chat, model: llama-3.1-8b, concurrency: 16, context_length: 32768, chips: [h100]}
  - {name: code, model: qwen3-32b, concurrency: 16, context_length: 32768, chips: [h100]}
variants:
  long: {context_length: 131072}
""")
    assert main(["compare", str(path), "--format", "json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["base"]["feasible"] and not out["variants"][0]["feasible"]
    [short] = out["variants"][0]["short"]  # llama-3.1-8b serves 131072 positions: only code is short
    assert short["service"] == "code" and _beyond("qwen3-32b", 131072) in short["reason"]
    assert main(["scenario", str(path)]) == 0  # the base alone is served; the variant is no error of the file
    capsys.readouterr()
    # the services as written beyond a model's positions are an error of the file, with where it is
    path.write_text(path.read_text().replace("context_length: 32768, chips: [h100]}\nvariants",
                                             "context_length: 65536, chips: [h100]}\nvariants"))
    assert main(["compare", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:5: services.code.context_length: 65536 exceeds the" in err


def test_a_categorical_sweep_over_chips_marks_each_chips_infeasible_point(tmp_path):
    out = tmp_path / "models.svg"
    result = CliRunner().invoke(cli, ["compare", "--model", "qwen3-32b", "--model", "llama-3.1-8b", "--chip", "h100",
                                      "--chip", "h200", "--concurrency", "8", "--context-length", "40960",
                                      "--max-gpus", "1", "--json", "--chart", str(out)])
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    results = {r["variant"]: r for r in [data["base"], *data["variants"]]}
    assert not results["qwen3-32b on h100"]["feasible"] and not results["qwen3-32b on h200"]["feasible"]
    assert results["llama-3.1-8b on h100"]["feasible"] and results["llama-3.1-8b on h200"]["feasible"]
    svg = out.read_text()
    # one chip's point that nothing serves is a stub in that chip's place with why, not a blank
    assert 'id="infeasible-h100-0"' in svg and 'id="infeasible-h200-0"' in svg
    assert 'id="infeasible-h100-1"' not in svg
    texts = _texts(svg)
    for chip in ("h100", "h200"):
        brief = results[f"qwen3-32b on {chip}"]["short"][0]["brief"]
        assert brief.startswith("needs ") and "infeasible" in texts and brief in texts


# -- the solver's time limit ----------------------------------------------------------------------
MIXED = ROOT / "scenarios" / "mixed-fleet-shared-inventory.yaml"


@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_time_limit_is_one_option_with_one_validation_on_plan_compare_and_scenario(capsys, value):
    errors = []
    for argv in (["--model", "qwen3-8b", "--chip", "h100", "--concurrency", "8"],
                 ["compare", "--model", "qwen3-8b", "--chip", "h100", "--concurrency", "8"],
                 ["compare", str(MIXED)], ["scenario", str(MIXED)]):
        assert main([*argv, "--time-limit", value]) == 2, argv
        captured = capsys.readouterr()
        assert captured.out == ""
        errors.append(captured.err)
    assert errors[0].startswith("plan: error: --time-limit: ") and len(set(errors)) == 1, errors
    helps = {" ".join(re.search(r"--time-limit NUMBER\s+(.*?\))", CliRunner().invoke(cli, [*sub, "--help"]).output,
                                re.DOTALL).group(1).split()) for sub in ([], ["compare"], ["scenario"])}
    assert len(helps) == 1 and "solver time limit in seconds, counted as deterministic work" in helps.pop()


def coupled(tmp_path) -> str:
    """The coupled three-service review (tests/helpers.py), with one variant: 24 h200 GPUs."""
    return coupled_review(tmp_path, "variants:\n  more-h200: {gpus.h200: 24}\n")


def test_a_review_passes_its_time_limit_to_the_solver_and_reports_the_status(monkeypatch, capsys, tmp_path):
    from planner.search.staged import Budget

    limits = []
    solver = Budget.solver

    def recording(self):
        limits.append(self.limit if self.given else None)
        return solver(self)

    monkeypatch.setattr(Budget, "solver", recording)
    assert main(["scenario", coupled(tmp_path), "--time-limit", "7.5", "--format", "markdown"]) == 0
    text = capsys.readouterr().out
    # the sweep's share first (planner/search/sweep_time.py): 3 tables (a and c share theirs), tp 1, 2, 4, 8 and
    # tp 8 in pp 2 on h200 (16 GPUs), the same and pp 4, 8 on h100 (no stock): 17 shapes at 1,000 a second
    assert limits and limits == [pytest.approx(7.5 - 17 / defaults.value("sweep.shapes_per_second"))] * len(limits)
    # a binding review (the inventory couples its services) says how it was found, as `plan` does
    assert re.search(r"solver OPTIMAL \(optimum proven\), [\d,]+ candidates in [\d,]+(\.\d)? m?s\n", text), text
    limits.clear()
    # one after another, so that every solve runs in this process, where the recording sees it
    assert main(["compare", coupled(tmp_path), "--time-limit", "7.5", "--format", "json", "--executor",
                 "sequential"]) == 0
    # each variant's solver has the limit less the shapes of the tables it sweeps (those no variant before it swept)
    assert limits and all(7.45 < t < 7.5 for t in limits if t is not None), limits


def test_a_solve_the_time_limit_ends_without_a_plan_says_so(monkeypatch, capsys, tmp_path):
    from planner.search import cpsat

    monkeypatch.setattr(cpsat, "solve", lambda pm, time_limit=None, deadline=None: cpsat.Solution("UNKNOWN", []))
    assert main(["--model", "qwen3-8b", "--chip", "h100", "--concurrency", "8", "--context-length", "8192",
                 "--time-limit", "0.5", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["search"]["solver_status"] == "UNKNOWN"
    assert [e["text"] for e in out["explanations"]] == [f"the solver found no plan within its 0.5 s time limit "
                                   f"({out['search']['candidates_evaluated']:,} candidates; --time-limit raises it)"]
    assert main(["scenario", coupled(tmp_path), "--time-limit", "0.5"]) == 1
    text = capsys.readouterr().out
    # nothing proven: not "not every service can be served" (issue 39)
    assert "not every service" not in text
    assert "inventory" not in text.split("no plan found within --time-limit; a longer limit may find one", 1)[1].split(
        "solver UNKNOWN")[0]
    assert text.count("the solver found no plan within its 0.5 s time limit (--time-limit raises it)") == 3
    assert "solver UNKNOWN (no plan found within the time limit; --time-limit raises it)" in text


def test_a_compare_file_refuses_options_it_would_ignore(capsys):
    assert main(["compare", str(MIXED), "--tp", "4", "--price", "1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "takes a scenario FILE or --tp, --price, not both" in captured.err


# -- overflow: every way a number can leave the solver's integer range ----------------------------
@pytest.mark.parametrize("args, field", [(["--headroom", "1e12"], "--headroom"), (["--price", "1e300"], "--price"),
                                         (["--price", "h100=1e300"], "--price")])
@pytest.mark.parametrize("command", [[], ["compare"]])
def test_a_headroom_or_price_beyond_the_solvers_range_is_a_one_line_error(capsys, command, args, field):
    assert main([*command, "--model", "qwen3-8b", "--chip", "h100", "--concurrency", "8", *args]) == 2
    _one_line_error(capsys, f"{field}: ")


def test_a_scenarios_headroom_or_price_beyond_the_solvers_range_is_a_file_error(tmp_path, capsys):
    path = tmp_path / "huge.yaml"
    path.write_text("""
inventory:
  h100: {price: 1.0e300}
services:
  - {name: a, model: qwen3-8b, concurrency: 1000, headroom: 1.0e12, context_length: 8192}
""")
    assert main(["scenario", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and f"{path}:3: inventory.h100.price: " in captured.err
    path.write_text(path.read_text().replace("1.0e300", "3.0"))
    assert main(["scenario", str(path)]) == 2
    captured = capsys.readouterr()
    limit = defaults.value("limits.max_concurrency")
    assert captured.err.strip() == (f"plan: error: {path}:5: services.a.headroom: 1,000 requests with 1e+12% headroom "
                                    f"exceed the {limit:,} the solver counts (planner/defaults.yaml "
                                    "limits.max_concurrency)")


def test_binds_says_a_narrower_split_whose_pool_is_short_of_one_request_is_not_over_its_budget():
    # llama-3.1-70b on one H200: the fixed memory fits the budget, but the pool left holds no 8k request
    request = PlanRequest(service=ServiceSpec(model="llama-3.1-70b", concurrency=2, context_length=8192),
                          limits=PoolLimits(chips=("h200",)))
    b = plan(request).best
    assert b.gpus == 2 and b.binds.startswith("weights force the split")
    unit = {"GiB": GiB, "MiB": MiB}
    found = re.search(r"at 1 GPU \(tp 1\) the fixed memory \(([\d.]+) (GiB) per rank\) leaves a ([\d.]+) (GiB|MiB) KV "
                      r"pool of the ([\d.]+) (GiB) budget, short of one ([\d.]+) (GiB|MiB) request", b.binds)
    assert found, b.binds
    fixed, pool, budget, one = (float(found[i]) * unit[found[i + 1]] for i in (1, 3, 5, 7))
    assert fixed < budget and pool < one and abs(fixed + pool - budget) < 0.02 * GiB
    # one request of 8,192 tokens: 80 layers x 8 KV heads x 128 x 2 (K and V) x 2 bytes per token
    assert abs(one - 8192 * 80 * 8 * 128 * 2 * 2) < 0.01 * GiB


def test_every_error_of_a_scenario_file_comes_in_one_round(tmp_path, capsys):
    path = tmp_path / "review.yaml"
    path.write_text("""
services:
  - {name: a, model: dsv41-flash, concurrency: 8, chips: [h200]}
  - {name: b, model: qwen3-32b, concurrency: 100000000, context_length: 131072, chips: [h20o]}
  - {name: c, model: qwen3-32b, concurrency: 8, chips: [h200], tp: [3], colour: red}
""")
    assert main(["scenario", str(path)]) == 2
    err = capsys.readouterr().err
    positions = load_model("qwen3-32b").max_position
    # schema, names and the limits that depend on the model, each field checked on its own
    for expected in (f"{path}:4: services.b.concurrency: Input should be less than or equal to",
                     f"{path}:5: services.c.colour: unknown key",
                     f"{path}:3: services.a.model: unknown model 'dsv41-flash'",
                     f"{path}:4: services.b.chips: unknown chip 'h20o'",
                     f"{path}:4: services.b.context_length: 131072 exceeds the {positions} positions of qwen3-32b",
                     f"{path}:5: services.c.tp: 3 does not divide the 64 attention heads of qwen3-32b"):
        assert expected in err, err


def test_the_inventory_binds_only_where_it_raises_the_cost(tmp_path):
    from planner.app.review import compare
    from planner.report.review import binding
    from planner.scenario import load_scenario

    path = tmp_path / "tight.yaml"
    path.write_text("""
review: tight
inventory:
  h100: {gpus: 2}
  h200: {}
services:
  - {name: a, model: llama-3.1-8b, concurrency: 50, context_length: 8192}
  - {name: b, model: llama-3.1-8b, concurrency: 50, context_length: 8192}
  - {name: c, model: llama-3.1-8b, concurrency: 50, context_length: 8192}
variants:
  more-h100: {gpus.h100: 3}
""")
    c = compare(load_scenario(path))
    # one H100 holds 50 requests of 8k (an H200 too, dearer): two H100s serve two services, the third takes an H200
    assert [(p.chip, p.gpus) for p in c.base.services].count(("h100", 1)) == 2
    extra = get_chip("h200").price_per_gpu_hour - get_chip("h100").price_per_gpu_hour
    assert binding(c.base).startswith(f"inventory: 2 of 2 h100 GPUs in use, ${extra:,.2f}/hour over each service's "
                                      "cheapest pool on its own; a: ")
    [more] = c.variants  # three H100s: every GPU in use, but each service has its cheapest pool: no inventory binds
    assert {p.chip for p in more.services} == {"h100"} and more.chips[0].gpus == more.chips[0].available == 3
    assert "inventory" not in binding(more) and binding(more).startswith("a: one GPU is the smallest pool")


def _one_line_error(capsys, field: str) -> None:
    """Nothing on standard output, and one line on standard error naming `field`."""
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith(f"plan: error: {field}")
    assert len(captured.err.strip().splitlines()) == 1


def test_an_infeasible_mark_stands_clear_of_the_axis_and_the_highest_point_of_the_top(tmp_path, monkeypatch):
    """The ✕ of an infeasible point stands above the x axis (not on the tick labels), and the y axis
    runs from zero to the highest point and some more, whatever the lowest point is."""
    import planner.report.charts as charts

    figures = []
    monkeypatch.setattr(charts, "save", lambda fig, path: figures.append(fig))
    result = CliRunner().invoke(cli, [*QWEN_SWEEP, "--chart", str(tmp_path / "sweep.png")])
    assert result.exit_code == 1, result.output
    (fig,) = figures
    for ax in fig.axes:
        (mark,) = [line for line in ax.lines if (line.get_gid() or "").startswith("infeasible-")]
        (feasible,) = [line for line in ax.lines if (line.get_gid() or "").startswith(("line-", "cost-"))]
        highest = max(y for y in feasible.get_ydata() if y == y)  # NaN marks the infeasible point
        bottom, top = ax.get_ylim()
        assert bottom == 0 and top >= highest * 1.1
        x, y = mark.get_transform().transform((mark.get_xdata()[0], mark.get_ydata()[0]))
        _, floor = ax.transData.transform((0, 0))
        assert y - floor >= 0.03 * ax.bbox.height  # clear of the axis line and the tick labels below it


def test_a_short_service_says_what_it_needs_on_its_own_in_the_right_number(tmp_path, capsys):
    """Two qwen3-8b services, one H100 in the inventory: the one left out needs 1 H100 on its own
    (its weights, ~16 GB, fit one 80 GB GPU at tp 1), said as '1 h100 GPU', not '1 h100 GPUs'."""
    path = tmp_path / "short.yaml"
    path.write_text("""
review: two small services on one GPU
inventory:
  h100: {gpus: 1, gpus_per_node: 8}
services:
  - {name: a, model: qwen3-8b, concurrency: 8, context_length: 8192, chips: [h100]}
  - {name: b, model: qwen3-8b, concurrency: 8, context_length: 8192, chips: [h100]}
""")
    assert main(["scenario", str(path)]) == 1
    out = capsys.readouterr().out
    assert "it needs 1 h100 GPU on its own (1 × (tp 1, dp 1)" in out and "1 h100 GPUs" not in out
