"""`plan check-log` on real published start-up logs (tests/fixtures/startup_logs, INDEX.yaml
names each one's source and release). Expected figures are read off the logs' own lines."""

import json
from pathlib import Path

import pytest
import yaml

from planner.cli import main
from pricing.calibration.startup_log import parse

LOGS = Path(__file__).parent / "fixtures" / "startup_logs"
INDEX = yaml.safe_load((LOGS / "INDEX.yaml").read_text())


def read(name: str):
    return parse((LOGS / name).read_text())


def test_every_fixture_is_indexed_with_its_source():
    files = {p.name for p in LOGS.glob("*.log")}
    assert files == set(INDEX) and len(files) >= 10
    assert all(INDEX[f]["source"].startswith("https://github.com/") for f in files)
    releases = {INDEX[f]["release"].split(" ")[0].rsplit(".", 1)[0] if INDEX[f]["release"][0].isdigit()
                else INDEX[f]["release"].split(" ")[1] for f in files}
    assert len(releases) >= 5  # 0.6, 0.7, 0.8, 0.9/0.10, 0.19, ≥ 0.21


@pytest.mark.parametrize("name, expected", [
    ("v0.6-issue10517-rtx3090-llama31-8b-29k.log",
     {"weights_gib": 14.9888, "non_torch_gib": 0.35, "available_kv_gib": 2.89, "total_gpu_memory_gib": 23.58,
      "kv_cache_blocks": 1478, "max_concurrency": 0.82, "max_concurrency_tokens": 29000}),
    ("v0.6.5-pr10511-h100-llama3-8b-tp1.log",
     {"weights_gib": 14.96, "non_torch_gib": 1.79, "activation_peak_gib": 1.26, "available_kv_gib": 53.29,
      "total_gpu_memory_gib": 79.22, "requested_memory_gib": 71.29}),
    ("v0.6.5-pr10511-h100-llama3-8b-tp2.log", {"weights_gib": 7.48, "non_torch_gib": 3.58}),
    ("v0.7-pr12126-h100-llama32-11b-vision-eager.log",
     {"weights_gib": 19.86, "non_torch_gib": 0.16, "activation_peak_gib": 36.63, "available_kv_gib": 14.65,
      "total_gpu_memory_gib": 79.22, "kv_cache_blocks": 6001}),
    ("v0.8-pr14447-24gb-moe-wna16.log",
     {"weights_gib": 21.21, "non_torch_gib": 0.2, "activation_peak_gib": 0.37, "available_kv_gib": 1.57,
      "total_gpu_memory_gib": 23.58, "requested_memory_gib": 23.35}),
    ("v0.7.3-issue14286-v1-llama31-8b-int8.log", {"cuda_graph_gib": 2.02, "max_concurrency": 1.46}),
    ("v0.8.4-pr17122-l40s-llama31-8b.log", {"weights_gib": 14.9889, "kv_cache_tokens": 158656}),
    ("v0.10.1-pr20707-llama31-8b-40k-eager.log",
     {"available_kv_gib": 112.61, "kv_cache_tokens": 922496, "max_concurrency": 23.06, "kv_cache_blocks": 57656}),
    ("v0.10-issue25350-fp8-kv-100k.log", {"available_kv_gib": 10.55, "kv_cache_tokens": 230528}),
    ("v0.10-issue21348-h100-qwen3-235b-fp8-tp4.log", {"available_kv_gib": 8.11, "kv_cache_tokens": 178880}),
    ("v0.2x-club3090-issue127-tp4-graph-estimate.log", {"cuda_graph_estimated_gib": 0.17, "available_kv_gib": 15.72}),
    ("v0.2x-issue53013-gb300-graph-estimate-refusal.log", {"cuda_graph_estimated_gib": 118.65}),
    ("v0.2x-miaai-pr25-gb10-graph-pool.log", {"cuda_graph_gib": -0.19, "cuda_graph_estimated_gib": 2.43}),
])
def test_memory_lines_of_each_era(name, expected):
    observed = read(name).observed
    for key, value in expected.items():
        assert observed[key] == pytest.approx(value), key


def test_engine_arguments_lines():
    args = read("v0.10.2-pr24162-qwen25-05b-tp2-args.log")
    assert args.release == "0.10.2.dev378+g4d7fe40fc.d20250829"
    assert args.deployment["tp"] == 2 and args.deployment["max_model_len"] == 32768
    assert args.deployment["max_num_batched_tokens"] == 2048
    config = read("v0.19.1-pr-ranklm426-engine-config.log")
    assert config.release == "0.19.1"
    assert config.deployment == {"model": "castorini/rank_vicuna_7b_v1", "tp": 1, "pp": 1, "dp": 1,
                                 "max_model_len": 4096, "quantization": None, "enforce_eager": False,
                                 "kv_cache_dtype": "auto", "dtype": "float16"}
    assert read("v0.6.5-pr10511-h100-llama3-8b-tp1.log").engine == "v0"
    assert read("v0.10.1-pr20707-llama31-8b-40k-eager.log").deployment["enforce_eager"] is True


def test_refusals_in_vllms_words():
    assert read("v0.10-issue25350-fp8-kv-refusal.log").refusal.startswith(
        "To serve at least one request with the models's max seq len (221000)")
    assert read("v0.2x-issue53013-gb300-graph-estimate-refusal.log").refusal.startswith(
        "No available memory for the cache blocks")
    assert read("v0.6-issue10517-rtx3090-llama31-8b-29k.log").refusal.startswith("The model's max seq len (29000)")


def test_several_workers_keep_the_smallest_pool():
    log = parse("(Worker_TP0) Available KV cache memory: 15.72 GiB\n"
                "(Worker_TP1) Available KV cache memory: 15.60 GiB\n")
    assert log.observed["available_kv_gib"] == 15.60


def test_check_log_rebuilds_and_the_kv_rules_match_exactly(capsys):
    # 112.61 GiB of 2 MiB blocks = 57,656 blocks; 40,000-token requests take 2,500 blocks: 922,496 tokens
    code = main(["check-log", str(LOGS / "v0.10.1-pr20707-llama31-8b-40k-eager.log"), "--chip", "h200",
                 "--model", "llama-3.1-8b", "--vllm-version", "0.10.1", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    exact = next(c for c in out["components"] if c["name"] == "GPU KV cache size from the logged pool")
    assert exact["predicted"] == exact["observed"] == 922496
    assert out["deployment"]["max_model_len"] == 40000  # from "Maximum concurrency for 40,000 tokens"
    assert out["deployment"]["cudagraph_mode"] == "NONE"  # "Cudagraph is disabled under eager mode"
    kv = next(c for c in out["components"] if c["name"] == "available KV cache memory")
    assert kv["observed"] == round(112.61 * 2**30) and kv["explained_by"]


def test_check_log_text_names_the_registry_value(capsys):
    code = main(["check-log", str(LOGS / "v0.6.5-pr10511-h100-llama3-8b-tp1.log"), "--chip", "h100", "--model",
                 "llama-3.1-8b", "--vllm-version", "0.6.5"])
    text = capsys.readouterr().out
    assert code == 0
    assert "cost_model_primitives.non_torch_in_budget" in text and "sampler_bytes_per_logit" in text
    assert "14.96 GiB" in text  # the logged weights, beside the kernel's


def test_check_log_reads_standard_input(capsys, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO((LOGS / "v0.10-issue25350-fp8-kv-100k.log").read_text()))
    code = main(["check-log", "-", "--chip", "h100", "--model", "llama-3.1-8b", "--vllm-version", "0.10.2"])
    assert code == 0 and "<stdin>" in capsys.readouterr().out


@pytest.mark.parametrize("args, says", [
    (["v0.8.4-pr17122-l40s-llama31-8b.log", "--chip", "l40s", "--model", "llama-3.1-8b"],
     "no 'Available KV cache memory' line"),
    (["v0.10-issue25350-fp8-kv-100k.log", "--chip", "h100", "--vllm-version", "0.10.2"], "the log names no model"),
    (["v0.10-issue25350-fp8-kv-100k.log", "--model", "llama-3.1-8b", "--vllm-version", "0.10.2"],
     "--chip: the log does not name the GPU"),
    (["v0.10-issue25350-fp8-kv-100k.log", "--chip", "h100", "--model", "llama-3.1-8b"], "states no release"),
])
def test_missing_lines_are_one_line_and_exit_2(capsys, args, says):
    assert main(["check-log", str(LOGS / args[0]), *args[1:]]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1


def test_foreign_and_truncated_files_exit_2(tmp_path, capsys):
    foreign = tmp_path / "notes.txt"
    foreign.write_text("shopping list\neggs\n")
    assert main(["check-log", str(foreign), "--chip", "h100"]) == 2
    assert "is not a vLLM start-up log" in capsys.readouterr().err
    truncated = tmp_path / "cut.log"
    truncated.write_text((LOGS / "v0.10.2-pr24162-qwen25-05b-tp2-args.log").read_text())  # ends before profiling
    assert main(["check-log", str(truncated), "--chip", "h100"]) == 2
    assert "no 'Available KV cache memory' line" in capsys.readouterr().err
    assert main(["check-log", str(tmp_path / "absent.log"), "--chip", "h100"]) == 2


FLASHINFER_LOG = "v0.10.1.1-dennislee22-a100-qwen2-7b-tp2-flashinfer.log"
NATIVE_LOG = "v0.10.1.1-dennislee22-a100-40gb-qwen2-7b-tp2-native.log"
QWEN2_ROWS_X_VOCAB = 256 * 152064  # A100 default max_num_seqs 256 (< 2048 tokens) × Qwen2's vocabulary
HIDDEN_TERM = 2048 * 3584  # max_num_batched_tokens × hidden size


def test_sampler_path_line_is_read():
    fi = read(FLASHINFER_LOG)
    assert fi.sampler == "flashinfer" and fi.evidence["sampler"] == 10  # first of the two workers' lines
    native = read(NATIVE_LOG)
    assert native.sampler == "native" and native.evidence["sampler"] == 7  # the wrapped second half of the line
    assert read("v0.10.1-pr20707-llama31-8b-40k-eager.log").sampler is None  # a log that says nothing
    # 0.19 at DEBUG: FlashInfer installed but its sampler opt-in (vLLM PR #26859): the native path
    assert read("v0.19.0-llmd-planner-h100-llama31-8b-tp4-sampler-debug.log").sampler == "native"


def _check(name: str, capsys, *args) -> dict:
    assert main(["check-log", str(LOGS / name), *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_check_log_takes_flashinfers_warm_up_when_the_log_says_so(capsys):
    """vLLM 0.10.1.1 with FlashInfer's top-k/top-p kernel holds 14 bytes a logit in the sampler
    warm-up (bf16 logits, their fp32 copy, FlashInfer's masked logits and softmax), not the native
    path's ~39: the A100 log that prints the FlashInfer line is predicted within 7 %, where the
    native law would be 13 % short."""
    from pricing.registry import shipped

    per_hidden = shipped().value("cost_model_memory.sampler_hidden_bytes")
    r = _check(FLASHINFER_LOG, capsys, "--chip", "a100-80gb")
    assert r["sampler_path"] == "flashinfer" and "sampler line" in r["sampler_path_from"]
    parts = {c["name"]: c for c in r["components"]}
    assert parts["activation peak"]["predicted"] == int(QWEN2_ROWS_X_VOCAB * 14 + HIDDEN_TERM * per_hidden)
    kv = parts["available KV cache memory"]
    native = kv["predicted"] - QWEN2_ROWS_X_VOCAB * (38.762 - 14)  # the same start-up on the native path, by hand
    assert abs(kv["error"]) < 0.07 and abs(native - kv["observed"]) / kv["observed"] > 0.13


def test_check_log_keeps_the_native_warm_up_when_flashinfer_is_absent(capsys):
    from pricing.registry import shipped

    per_hidden = shipped().value("cost_model_memory.sampler_hidden_bytes")
    r = _check(NATIVE_LOG, capsys, "--chip", "a100-40gb", "--model", "qwen2.5-7b")  # tp 2 and 0.5: the wrapped line
    assert r["sampler_path"] == "native"
    parts = {c["name"]: c for c in r["components"]}
    assert parts["activation peak"]["predicted"] == int(QWEN2_ROWS_X_VOCAB * 38.762 + HIDDEN_TERM * per_hidden)


def test_a_hard_wrapped_arguments_line_is_read_whole():
    """The A100 40GB log was copied at a fixed width: its "non-default args: {…}" line runs over two
    lines (the model's name is cut in two). It is joined back to its closing brace."""
    log = read(NATIVE_LOG)
    assert log.deployment["model"] == "Qwen2-7B-Instruct"
    assert log.deployment["tp"] == 2 and log.deployment["gpu_memory_utilization"] == 0.5
    assert log.evidence["engine arguments"] == 2  # numbered by its first line; later lines keep their numbers
    assert log.evidence["sampler"] == 7


def test_an_arguments_line_that_never_closes_is_left_as_it_is():
    from pricing.calibration.startup_log import parse

    log = parse("INFO non-default args: {'model': 'x', 'tensor_parallel_size': 2,\n"
                "INFO 09-03 [gpu_worker.py:276] Available KV cache memory: 11.03 GiB\n")
    assert "tp" not in log.deployment and log.observed["available_kv_gib"] == 11.03


def test_what_the_log_does_not_state_is_said_not_silently_assumed(capsys, tmp_path):
    """A log without its arguments line is checked at vLLM's defaults, and the report says which."""
    lines = [line for line in (LOGS / NATIVE_LOG).read_text().splitlines()[:3] if "non-default" not in line]
    rest = (LOGS / NATIVE_LOG).read_text().splitlines()[3:]
    bare = tmp_path / "no-args.log"
    bare.write_text("\n".join([lines[0], *rest]) + "\n")
    r = _check(str(bare), capsys, "--chip", "a100-40gb", "--model", "qwen2.5-7b", "--max-num-seqs", "256")
    said = " ".join(r["assumed"])
    assert "tp 1 (give --tp" in said and "utilization 0.9 (give --gpu-memory-utilization" in said
    assert "max_num_seqs" not in said  # given on the command line
    assert "max_model_len" not in said  # "Maximum concurrency for 16,384 tokens per request" states it
    assert main(["check-log", str(bare), "--chip", "a100-40gb", "--model", "qwen2.5-7b"]) == 0
    assert "not in the log, taken at vLLM's default: tp 1" in capsys.readouterr().out
    r = _check(NATIVE_LOG, capsys, "--chip", "a100-40gb", "--model", "qwen2.5-7b")
    assert [a.split(" (")[0] for a in r["assumed"]] == ["max_num_seqs 256"]


FP8_DYNAMIC_LOG = (
    "INFO 04-01 12:00:00 [api_server.py:1] vLLM API server version 0.19.0\n"
    "INFO 04-01 12:00:00 [utils.py:1] non-default args: {'model': 'RedHatAI/Qwen2.5-7B-Instruct-FP8-dynamic', "
    "'max_model_len': 8192, 'gpu_memory_utilization': 0.95, 'enable_prefix_caching': False}\n"
    "INFO 04-01 12:00:30 [gpu_worker.py:1] Available KV cache memory: 64.64 GiB\n")


def test_check_log_sizes_a_quantized_checkpoint_as_the_calibration_does(capsys, tmp_path):
    """record_models.yaml sizes RedHatAI's FP8-dynamic Qwen2.5-7B as vLLM's FP8 of the card: check-log
    predicts the weights the calibration's path does (one byte a linear weight, ~8.1 GiB; the 16-bit
    card would be 14.2 GiB), not the 16-bit card's."""
    from pricing.calibration.predict import predict

    log = tmp_path / "fp8.log"
    log.write_text(FP8_DYNAMIC_LOG)
    r = _check(str(log), capsys, "--chip", "h100")
    weights = next(c for c in r["components"] if c["name"] == "weights")["predicted"]
    calibrated = predict(parse(FP8_DYNAMIC_LOG).record(gpu="h100"), weights="kernel").predicted["weights"]
    assert weights == calibrated and weights < 9 * 2**30


def test_the_share_of_fact_lines_a_log_needs_is_the_registrys_and_sits_between_the_logs_and_readme():
    from pricing.registry import overlay_from, shipped

    entry = shipped()["startup_logs.fact_share"]
    readme_text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    readme = parse(readme_text)
    excerpts = [parse(p.read_text()) for p in LOGS.glob("*.log")]
    excerpts = [r for r in excerpts if r.release is None and not r.deployment]  # read as logs by their share alone
    shares = [len(set(r.evidence.values())) / r.lines for r in excerpts]
    assert excerpts and all(r.startup_log for r in excerpts) and not readme.startup_log
    assert len(set(readme.evidence.values())) / readme.lines < entry.value < min(shares)
    assert "0.375" in entry.source and "README.md" in entry.source  # the lowest excerpt's share, as measured here
    assert round(min(shares), 3) == 0.375
    # the value is read from the registry: an overlay that lowers it below README's share makes README a log
    low = overlay_from({"startup_logs": {"fact_share": {"value": 0.001, "source": "test", "how": "test"}}})
    assert parse(readme_text, low).startup_log
