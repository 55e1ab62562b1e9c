"""Hostile and careless inputs (issue 39): each is one line naming the file, key or flag and the fix,
exit status 2, before any arithmetic; or a true answer. Every case here broke the tool before."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers import cli as run

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT.parent / "shared" / "models"
if not MODELS.is_dir():  # CI lays shared/ beside the clone
    MODELS = Path("/work/shared/models")
QWEN = json.loads((MODELS / "Qwen--Qwen3-8B.json").read_text())
PLAN = ["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "4"]


def one_line_error(argv: list[str], *needles: str) -> str:
    code, out, err = run(argv)
    assert code == 2, (argv, code, out[-500:], err[-2000:])
    assert out == "" and err.count("\n") == 1 and err.startswith("plan: error: "), (argv, err)
    for needle in needles:
        assert needle in err, (argv, err)
    return err


def config(tmp_path: Path, **changes) -> str:
    path = tmp_path / "m" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({**QWEN, **changes}))
    return str(path)


# -- config.json: every value the graph sizes a model by, checked before any arithmetic -----------
@pytest.mark.parametrize("key,value,needle", [
    ("hidden_size", 4096.5, "hidden_size: 4096.5 is not a whole number"),
    ("hidden_size", "4096", "hidden_size: '4096' is not a whole number"),
    ("num_hidden_layers", True, "num_hidden_layers: True is not a whole number"),
    ("hidden_size", -4096, "hidden_size: -4,096 is outside 1 … 131,072"),
    ("num_attention_heads", 0, "num_attention_heads: 0 is outside 1 … 1,024"),
    ("vocab_size", 0, "vocab_size: 0 is outside 1 … 2,097,152"),
    ("intermediate_size", -1, "intermediate_size: -1 is outside 1 … 524,288"),
    ("num_hidden_layers", 10**9, "num_hidden_layers: 1,000,000,000 is outside 1 … 1,024"),
    ("max_position_embeddings", 0, "max_position_embeddings: 0 is outside 1 … 67,108,864"),
    ("torch_dtype", "float7", "torch_dtype: unknown dtype 'float7' (give one of bfloat16"),
])
def test_a_config_value_out_of_type_or_range_is_one_line_naming_file_and_key(tmp_path, key, value, needle):
    path = config(tmp_path, **{key: value})
    for argv in (["memory", "--model", path, "--chip", "h100"], ["--model", path, "--chip", "h100",
                                                                  "--concurrency", "4"]):
        err = one_line_error(argv, f"--model: {path}: {needle}")
        assert "use at most 0" not in err


def test_every_shipped_card_and_published_config_is_inside_the_ranges():
    """The ranges (registry input_limits.yaml) refuse no model the project ships or was published."""
    from pricing.config import list_cards, resolve

    for card in list_cards():
        resolve(card["name"])
    for path in MODELS.glob("*.json"):
        if "hf_quant" not in path.name:
            resolve(str(path))


# -- files: special files refused before reading, a size cap, what was expected said -----------
def test_a_device_or_fifo_given_as_a_file_is_refused_before_it_is_read(tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)  # reading it would block for ever
    one_line_error(["memory", "--model", str(fifo), "--chip", "h100"], f"--model: {fifo} is a FIFO, not a regular")
    one_line_error(["memory", "--model", "/dev/zero", "--chip", "h100"], "--model: /dev/zero is a device")
    one_line_error(["check-log", "/dev/zero"], "/dev/zero is a device")
    one_line_error([*PLAN, "--registry", "/dev/zero"], "--registry: /dev/zero is a device")
    one_line_error(["scenario", str(fifo)], f"{fifo} is a FIFO")


def test_a_file_over_the_cap_is_refused_without_reading_it_whole(tmp_path, monkeypatch):
    from pricing.registry import shipped

    cap = shipped().value("input_limits.file_bytes")
    big = tmp_path / "config.json"
    with open(big, "wb") as f:  # sparse: no disk used
        f.truncate(cap + 1)
    one_line_error(["memory", "--model", str(big), "--chip", "h100"], f"larger than the {cap:,} bytes")


CARD = {"name": "mine", "hf_id": "me/mine", "config": QWEN}


@pytest.mark.parametrize("text,needle", [
    ("services:\n  - {name: chat, model: llama-3.1-8b, concurrency: 4}\n", "is a scenario file, not a model card"),
    ("hello\n", "holds str, not a model card"),
    ("a: [\n", "is not valid YAML (line 2)"),
    (json.dumps({k: v for k, v in CARD.items() if k != "hf_id"}), "hf_id: missing"),
    (json.dumps({**CARD, "hf_id": ""}), "hf_id: is empty"),
    ("name: a\nname: b\n", ":2: name: the key 'name' is given twice (first on line 1)"),
    (json.dumps({**CARD, "config": {**QWEN, "hidden_size": -1}}), "hidden_size: -1 is outside"),
])
def test_a_yaml_given_to_model_that_is_no_card_says_what_was_expected(tmp_path, text, needle):
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    one_line_error(["memory", "--model", str(path), "--chip", "h100"], "--model: ", needle)


def test_a_user_file_with_a_key_twice_or_a_number_not_finite_names_file_line_and_key(tmp_path):
    base = "services:\n  - {name: chat, model: llama-3.1-8b, chips: [h200], concurrency: 4}\n"
    cases = {"review: a\nreview: b\n" + base: ":2: review: the key 'review' is given twice (first on line 1)",
             base + "grid:\n  growth: [1, .nan]\n": ":4: grid.growth[1]: .nan is not a finite number",
             base + "variants:\n  big: {growth: .inf}\n": ":4: variants.big.growth: .inf is not a finite number"}
    for text, needle in cases.items():
        path = tmp_path / "review.yaml"
        path.write_text(text)
        one_line_error(["scenario", str(path), "--variants"], f"{path}{needle}")


SERVICE = "  - {name: chat, model: llama-3.1-8b, chips: [h200], concurrency: 4%s}\n"


@pytest.mark.parametrize("extra,needle", [
    ("", "spare: Input should be less than or equal to 1000"),  # spare: 100000 below
    (", tp: []", "services.chat.tp: List should have at least 1 item"),
    (", max_num_batched_tokens: []", "services.chat.max_num_batched_tokens: List should have at least 1 item"),
    (", num_speculative_tokens: 1000000", "services.chat.num_speculative_tokens: Input should be less than"),
])
def test_a_scenario_value_out_of_range_or_empty_is_refused(tmp_path, extra, needle):
    path = tmp_path / "review.yaml"
    path.write_text("services:\n" + SERVICE % extra + ("spare: 100000\n" if not extra else ""))
    code, out, err = run(["scenario", str(path), "--time-limit", "2"])
    assert code == 2 and needle in err and "Traceback" not in err, err


def test_a_scenario_count_that_is_a_bool_is_no_count(tmp_path):
    path = tmp_path / "review.yaml"
    path.write_text("services:\n" + SERVICE.replace("concurrency: 4", "concurrency: true") % "")
    code, _, err = run(["scenario", str(path)])
    assert code == 2 and "services.chat.concurrency: Input should be a valid integer" in err, err


# -- registry overlays: blamed on the file, line and key ------------------------------------------
LEAF = "vllm_0_33:\n  %s: %s\n"


@pytest.mark.parametrize("key,leaf,needle", [
    ("gpu_memory_utilization", "{value: abc, source: s, how: h}", ":2: vllm_0_33.gpu_memory_utilization: 'abc' is "
     "not a number"),
    ("gpu_memory_utilization", "{value: null, source: s, how: h}", "None is not a number"),
    ("gpu_memory_utilization", "{value: .nan, source: s, how: h}", ".nan is not a finite number"),
    ("gpu_memory_utilization", "{value: -5, source: s, how: h}", "gpu_memory_utilization: -5 must be positive"),
    ("block_size", "{value: 0, source: s, how: h}", "block_size: 0 is not a table"),
    ("block_size", "{value: {gqa: {default: 0}}, source: s, how: h}", "0 at gqa.default must be positive"),
    ("scheduler_defaults", "{value: [], source: s, how: h}", "scheduler_defaults: the list is empty"),
    ("scheduler_defaults", "{value: [{min_memory_gib: 0}], source: s, how: h}", "entry 0 lacks max_num_batched"),
    ("gpu_memory_utilization", "0.5", "gpu_memory_utilization: is not a registry value {value, source, how}"),
    ("gpu_memory_utilization", "{value: 0.5, source: s}", "is not a registry value {value, source, how}"),
])
def test_a_bad_overlay_value_is_blamed_on_the_file_and_key_not_a_flag(tmp_path, key, leaf, needle):
    path = tmp_path / "overlay.yaml"
    path.write_text(LEAF % (key, leaf))
    for argv in (PLAN, ["memory", "--model", "llama-3.1-8b", "--chip", "h100"]):
        err = one_line_error([*argv, "--registry", str(path)], f"plan: error: {path}:2: vllm_0_33.{key}", needle)
        assert "--gpu-memory-utilization" not in err


def test_an_overlay_that_is_not_utf8_or_repeats_a_key(tmp_path):
    path = tmp_path / "overlay.yaml"
    path.write_bytes(b"vllm_0_33:\n  \xff: 1\n")
    one_line_error([*PLAN, "--registry", str(path)], "--registry: ", "is not UTF-8")
    path.write_text(LEAF % ("gpu_memory_utilization", "{value: 0.5, source: s, how: h}") * 1
                    + "  gpu_memory_utilization: {value: 0.6, source: s, how: h}\n")
    one_line_error([*PLAN, "--registry", str(path)], ":3: vllm_0_33.gpu_memory_utilization: the key")


def test_every_shipped_value_restated_is_a_valid_overlay():
    """An overlay that restates a shipped value is the shipped value: never refused (issue 40: scheduler_defaults'
    second row has exclude_generations, the first has not; an operator table's ln_ratio list holds negatives
    after positives), over every value of every registry file."""
    from pricing.registry import _positive_keys, overlay_problem, shipped

    reg = shipped()
    names = list(reg.names(""))
    assert len(names) > 1000 and "vllm_0_33.scheduler_defaults" in names
    for name in names:
        value = reg.value(name)
        assert overlay_problem(value, value, positive=name.rsplit(".", 1)[-1] in _positive_keys()) is None, name


def test_the_shipped_scheduler_defaults_restated_through_the_cli(tmp_path):
    """Each release's scheduler_defaults, as the package ships it, read back from an overlay file: accepted, and
    the plan the same as without it; a row with a key no shipped row has, or a list where a word is, refused."""
    import yaml

    from pricing.registry import read_overlay, shipped

    reg = shipped()
    for stem in ("vllm_0_10", "vllm_0_11", "vllm_0_19", "vllm_0_21", "vllm_0_26", "vllm_0_33"):
        path = tmp_path / f"{stem}.yaml"
        path.write_text(yaml.safe_dump({stem: {"scheduler_defaults": {
            "value": reg.value(f"{stem}.scheduler_defaults"), "source": "s", "how": "h"}}}))
        assert read_overlay(path).value(f"{stem}.scheduler_defaults") == reg.value(f"{stem}.scheduler_defaults")
    rows = reg.value("vllm_0_33.scheduler_defaults")
    assert "exclude_generations" not in rows[0] and rows[1]["exclude_generations"] == ["sm80"]
    path = tmp_path / "vllm_0_33.yaml"
    argv = ["memory", "--model", "llama-3.1-8b", "--chip", "h100", "--json"]
    code, laid, err = run([*argv, "--registry", str(path)])
    code0, bare, _ = run(argv)
    assert (code, code0, err) == (0, 0, "")
    laid, bare = json.loads(laid), json.loads(bare)
    assert (laid["deployment"]["max_num_batched_tokens"], laid["deployment"]["max_num_seqs"]) == (8192, 1024)
    assert (laid["deployment"], laid["num_blocks"]) == (bare["deployment"], bare["num_blocks"])
    for row, needle in (({**rows[1], "exclude_generation": ["sm80"]}, "entry 1 has exclude_generation, which no "
                         "shipped entry has"), ({**rows[1], "exclude_generations": "sm80"},
                                                "'sm80' at [1].exclude_generations is not a list")):
        path.write_text(yaml.safe_dump({"vllm_0_33": {"scheduler_defaults": {
            "value": [rows[0], row, rows[2]], "source": "s", "how": "h"}}}))
        one_line_error([*PLAN, "--registry", str(path)], "vllm_0_33.scheduler_defaults: ", needle)


def test_the_shipped_overlay_is_a_valid_overlay():
    from pricing.registry import read_overlay

    read_overlay(ROOT / "pricing" / "registry" / "overlays" / "spec-reference.yaml")


# -- options that cannot apply, repeated, empty ----------------------------------------------------
DISAGG = ["--model", "llama-3.1-8b", "--chip", "h100", "--isl", "1000", "--osl", "100", "--requests-per-second", "1",
          "--ttft-ms", "1000", "--serving", "disagg"]
OUT = "OUT"  # the test's own folder, never written


@pytest.mark.parametrize("argv,needle", [
    ([*PLAN, "--range-ratio", "0.5"], "--range-ratio: has no effect without service targets"),
    ([*PLAN, "--acceptance", "0.8"], "--speculative-acceptance: has no effect without speculative decoding"),
    (["memory", "--model", "llama-3.1-8b", "--chip", "h100", "--acceptance", "0.8"], "--speculative-acceptance"),
    ([*PLAN, "--image", "x"], "--image: has no effect without --emit"),
    ([*PLAN, "--namespace", "x"], "--namespace: has no effect without --emit"),
    ([*PLAN, "--k8s-target", "llm-d"], "--k8s-target: has no effect without --emit"),
    ([*PLAN, "--emit", "k8s", "-o", OUT, "--router-script", "http://x"], "--router-script: has no effect without a "
     "disaggregated plan"),
    (["scenario", "scenarios/mixed-fleet-shared-inventory.yaml", "--ray-address", "x", "--executor", "pool"],
     "--ray-address: has no effect without --executor ray"),
    ([*PLAN, "--json", "--brief"], "--brief: has no effect without a table"),
    ([*PLAN, "--json", "--format", "csv"], "--format: has no effect without a table"),
    (["compare", *PLAN, "--json", "--format", "markdown"], "--format: has no effect without a table"),
    ([*DISAGG, "--concurrency", "4"], "--concurrency: has no effect without an aggregated plan"),
    ([*DISAGG, "--headroom", "10"], "--headroom: has no effect without an aggregated plan"),
    ([*DISAGG, "--brief"], "--brief: has no effect without an aggregated plan"),
    ([*DISAGG, "--format", "csv"], "--format: has no effect without an aggregated plan"),
    ([*PLAN, "--vllm-version", ""], "--vllm-version: is empty"),
    ([*PLAN, "--emit", "k8s", "-o", OUT, "--image", ""], "--image: is empty"),
    ([*PLAN, "--emit", "k8s", "-o", OUT, "--model-source="], "--model-source: is empty"),
    ([*PLAN, "--concurrency", "8"], "--concurrency: is given twice (--concurrency 4 first)"),
    (["memory", "--model", "llama-3.1-8b", "--chip", "h100", "-tp", "2", "--tp=4"], "--tp: is given twice"),
    ([*PLAN, "--emit", "k8s", "-o", OUT, "--node-selector", "a=1", "--node-selector", "a=2"],
     "--node-selector: gives 'a' twice"),
])
def test_an_option_that_cannot_apply_or_is_repeated_or_empty_is_refused(tmp_path, argv, needle):
    out = tmp_path / "manifests"
    one_line_error([str(out) if a == OUT else a for a in argv], needle)
    assert not out.exists()


def test_several_values_where_an_option_takes_several_are_still_taken():
    code, _, err = run(["compare", "--model", "llama-3.1-8b", "--chip", "h100", "--chip", "h200", "--concurrency",
                        "4", "--concurrency", "8", "--context-length", "8192", "--time-limit", "5"])
    assert code == 0, err


# -- bounds: every count with its range stated -----------------------------------------------------
@pytest.mark.parametrize("argv,needle", [
    ([*PLAN, "--spare", "100000"], "--spare: must be in [0, 1,000], got 100,000"),
    (["memory", "--model", "dsv3", "--chip", "h200", "-tp", "8", "--num-speculative-tokens", "1000000"],
     "--num-speculative-tokens: must be in [0, 64]"),
    ([*PLAN, "--gpus-per-node", "1000"], "--gpus-per-node: must be in [1, 72]"),
    (["memory", "--model", "llama-3.1-8b", "--chip", "h100", "--memory-bytes", "1"], "--memory-bytes: must be in "
     "[1,073,741,824, 4,398,046,511,104], got 1"),
    (["memory", "--model", "llama-3.1-8b", "--chip", "h100", "--memory-bytes", str(10**21)], "--memory-bytes"),
    (["compare", "--model", "llama-3.1-8b", "--chip", "h100", *[a for n in range(1, 202) for a in ("--concurrency",
      str(n))], *[a for n in range(1, 52) for a in ("--context-length", str(1024 * n))]],
     "the sweep has 10,251 points (201 x 51); at most 10,000"),
    ([*PLAN, "--price", "h1000=3"], "--price: h1000: unknown chip 'h1000'"),
    ([*PLAN, "--price", "nan"], "--price: nan is not a price from 0 to 100"),
])
def test_every_count_is_bounded_with_its_range_stated(argv, needle):
    one_line_error(argv, needle)


# -- untrue output ------------------------------------------------------------------------------
MEMORY = ["memory", "--model", "llama-3.1-8b", "--chip", "h100"]


def test_a_workload_longer_than_the_context_gets_no_speed():
    """vLLM rejects a prompt beyond max_model_len: no speed is priced for 10,100-token requests at 8,192."""
    one_line_error([*MEMORY, "--max-model-len", "8192", "--isl", "10000", "--osl", "100"],
                   "--isl: a request of 10,100 tokens (10,000 input and 100 output) does not fit the 8,192-token "
                   "context (lower --isl/--osl or raise --max-model-len to at least 10,100)")
    code, out, err = run([*MEMORY, "--max-model-len", "8192", "--isl", "8000", "--osl", "192"])
    assert code == 0 and "speed (step model)" in out, err


def test_max_num_seqs_beyond_the_token_budget_is_vllms_scheduler_refusal():
    """vLLM 0.33 config/scheduler.py: max_num_batched_tokens must be >= max_num_seqs, on the values the
    defaults resolve to (H100: a budget of 8,192 tokens when not given)."""
    one_line_error([*MEMORY, "--max-num-seqs", "10000"], "--max-num-seqs: max_num_batched_tokens (8192) must be "
                   "greater than or equal to max_num_seqs (10000)", "raise --max-num-batched-tokens to at least 10000")
    one_line_error([*MEMORY, "--max-num-seqs", "1000", "--max-num-batched-tokens", "512"],
                   "--max-num-batched-tokens: max_num_batched_tokens (512) must be greater than or equal to "
                   "max_num_seqs (1000)")


def test_a_token_budget_that_fills_the_chip_is_named_not_the_weights():
    code, _, err = run([*MEMORY, "--max-num-batched-tokens", str(10**9)])
    assert code == 1 and "activation peak of max_num_batched_tokens 1,000,000,000: lower max_num_batched_tokens" \
        in err and "quantize" not in err, err
    code, _, err = run(["memory", "--model", "llama-3.1-405b", "--chip", "h100"])  # the weights: as before
    assert code == 1 and "quantize, or use a chip with more memory" in err, err


LOGS = ROOT / "tests" / "fixtures" / "startup_logs"
A100_LOG = LOGS / "v0.10.1.1-dennislee22-a100-40gb-qwen2-7b-tp2-native.log"


def test_check_log_refuses_a_release_the_log_contradicts_and_a_file_of_two_startups(tmp_path):
    one_line_error(["check-log", str(A100_LOG), "--chip", "a100-40gb", "--vllm-version", "0.9.2"],
                   "--vllm-version: 0.9.2 contradicts the log, which states vLLM 0.10.1.1 (line 1)")
    one_line_error(["check-log", str(A100_LOG), "--chip", "a100-40gb", "--vllm-version", "abc"],
                   "--vllm-version: 'abc' names no vLLM release")
    code, out, err = run(["check-log", str(A100_LOG), "--chip", "a100-40gb", "--vllm-version", "0.10.1"])
    assert code == 0 and "logged: started" in out, err
    two = tmp_path / "two.log"
    two.write_text(A100_LOG.read_text() * 2)
    lines = len(A100_LOG.read_text().splitlines())
    one_line_error(["check-log", str(two), "--chip", "a100-40gb"], f"holds 2 start-ups (from lines 1, {lines + 1})")


def test_calibrate_refuses_records_that_are_not_utf8_and_an_out_that_is_a_folder(tmp_path):
    records = tmp_path / "records.jsonl"
    records.write_bytes(b"\xff\xfe{}\n")
    one_line_error(["calibrate", str(records), "--out", str(tmp_path / "ours.yaml")], "RECORDS: ", "is not UTF-8")
    records.write_text('{"id": "x", "observed": {"weights_gib": NaN}}\n')
    one_line_error(["calibrate", str(records), "--out", str(tmp_path / "ours.yaml")], "NaN is not a finite number")
    one_line_error(["calibrate", str(records), "--out", str(tmp_path)], f"--out: {tmp_path} is a folder")


def test_a_chip_too_small_for_what_is_held_before_the_budget_gets_no_negative_utilization():
    """--memory-bytes 1 GiB at tp 8: the collective buffers and workspace held before the budget
    (1.73 GiB) exceed the device; no utilization fits, and free memory is never printed below 0."""
    code, _, err = run([*MEMORY, "--memory-bytes", str(2**30), "-tp", "8"])
    assert code == 1 and "(0.0/1.0 GiB)" in err and "no utilization: the 1.73 GiB held before the budget" in err, err
    assert "utilization -" not in err
    code, _, err = run([*MEMORY, "--memory-bytes", str(2**30)])
    assert code == 1 and "--gpu-memory-utilization 0.46 is the highest" in err, err


def test_a_router_script_is_refused_only_where_no_disaggregated_service_can_be(tmp_path):
    """`plan` knows from --serving; a scenario's services state their own serving, so `plan scenario`
    takes --router-script with --emit (the file may hold a disaggregated service)."""
    import click

    from planner.cli import cli
    from planner.commands.flags import check_options

    scenario = cli.get_command(click.Context(cli), "scenario")
    ctx = scenario.make_context("scenario", [str(ROOT / "scenarios" / "disaggregated-chat-h200-b200.yaml"), "--emit",
                                             "k8s", "-o", str(tmp_path / "out"), "--router-script", "http://x/p.py",
                                             "--router-fetch", "0" * 64])
    check_options(ctx)  # no refusal
    one_line_error([*PLAN, "--emit", "k8s", "-o", str(tmp_path / "out"), "--router-script", "http://x/p.py"],
                   "--router-script: has no effect without a disaggregated plan")


# -- fields and options that cannot apply: refused in one line (planner/applies.py, flags.NEEDS) ---------------
@pytest.mark.parametrize("service,needle", [
    ("{name: a, model: llama-3.1-8b, concurrency: 4, speculative_acceptance: [0.5]}",
     ":5: services.a.speculative_acceptance: has no effect without speculative decoding"),
    ("{name: a, model: llama-3.1-8b, concurrency: 4, dp: [1, 2]}",
     ":5: services.a.dp: has no effect on llama-3.1-8b, a dense model"),
])
def test_a_scenario_field_that_cannot_apply_is_refused(tmp_path, service, needle):
    """Each was taken silently before (exit 0): the acceptance with no drafter, dp on a dense model."""
    path = tmp_path / "t.yaml"
    path.write_text(f"review: t\ninventory:\n  h100: {{gpus: 16}}\nservices:\n  - {service}\n")
    one_line_error(["scenario", str(path)], f"{path}{needle}")


def test_a_default_that_applies_elsewhere_is_not_refused(tmp_path):
    """A `defaults:` dp serves the MoE service; the dense one does not write it."""
    path = tmp_path / "t.yaml"
    path.write_text("review: t\ninventory:\n  h100: {gpus: 16}\ndefaults: {concurrency: 4, dp: [1, 2]}\nservices:\n"
                    "  - {name: a, model: llama-3.1-8b}\n  - {name: b, model: qwen3-30b-a3b}\n")
    code, out, err = run(["scenario", str(path), "--format", "json"])
    assert code in (0, 1) and "has no effect" not in err, (code, err[-500:])


def test_dp_on_a_dense_model_is_refused_by_plan_and_kept_by_compare_across_kinds():
    one_line_error([*PLAN, "--dp", "2"], "--dp: has no effect on llama-3.1-8b, a dense model: dp is 1 and replicas "
                   "scale it (drop it)")
    code, _, err = run(["compare", "--model", "llama-3.1-8b", "--model", "qwen3-30b-a3b", "--chip", "h100",
                        "--concurrency", "4", "--dp", "2", "--format", "json"])
    assert code == 0, err[-500:]  # --dp applies to the MoE model's points
