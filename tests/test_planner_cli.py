"""The `plan` command: JSON shape, exit statuses, and byte-for-byte determinism across processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from planner.cli import main

ROOT = Path(__file__).resolve().parents[1]
HEADLINE = ["--model", "dsv4.1-flash", "--chip", "h200", "--concurrency", "64"]
POOL_KEYS = {"chip", "gpus", "replicas", "gpus_per_replica", "tensor_parallel_size", "data_parallel_size",
             "enable_expert_parallel", "decode_context_parallel_size", "gpu_memory_utilization",
             "max_num_batched_tokens", "max_num_seqs", "max_model_len", "kv_cache_dtype", "held",
             "headroom_percent", "binds", "model", "cost_per_hour", "price_per_gpu_hour", "price_estimate",
             "price_as_of", "vllm_serve", "step", "pipeline_parallel_size", "nodes_per_replica",
             "vllm_serve_nodes", "serving", "cost_per_million_output_tokens", "cost_per_million_input_tokens",
             "instances", "nodes", "memory"}


def run(args, seed: str = "0") -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONHASHSEED=seed, COLUMNS="140")
    return subprocess.run([sys.executable, "-m", "planner.cli", *args], capture_output=True, env=env, cwd=ROOT,
                          timeout=60)


def test_same_input_same_bytes_across_processes():
    first, second = run(HEADLINE, seed="1"), run(HEADLINE, seed="2")
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    text = first.stdout.decode()
    assert "dsv4.1-flash: 64 concurrent requests at 1,048,576 tokens" in text
    assert "solver OPTIMAL (optimum proven)" in text
    assert "vllm serve deepseek-ai/DeepSeek-V4.1-Flash --host 0.0.0.0 --port 8000 --tensor-parallel-size" in text
    assert "GPU KV cache size" in text  # the winner's per-rank memory breakdown


def test_json_shape(capsys):
    assert main([*HEADLINE, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"kind", "feasible", "target", "best", "alternatives", "search", "model", "hf_id", "origin",
                        "explanations", "notes", "provenance", "margin"}
    from pricing.registry import shipped

    assert out["margin"]["fraction"] == shipped().value("cost_model_memory.kv_pool_margin") > 0
    assert "kv_pool_margin" in out["margin"]["source"]
    assert out["feasible"] is True
    assert out["target"] == {"asked": 64, "context_length": 1048576, "headroom_percent": 0.0, "required": 64,
                             "tpot_ms": None, "ttft_ms": None, "isl": None, "osl": None, "requests_per_second": None,
                             "service_targets": []}
    # $/M output tokens at the step figures' throughput (no workload: no input-token figure)
    best = out["best"]
    assert best["cost_per_million_output_tokens"] == pytest.approx(
        best["cost_per_hour"] / (best["step"]["pool_output_tokens_per_second"] * 3600) * 1e6, rel=1e-3)
    assert best["cost_per_million_input_tokens"] is None and best["serving"] is None
    assert set(out["best"]) == POOL_KEYS
    assert len(out["alternatives"]) == 5 and all(set(a) == POOL_KEYS for a in out["alternatives"])
    assert set(out["search"]) == {"candidates_evaluated", "solver_status", "solver_stages", "seconds",
                                  "shapes_skipped"}
    assert [s["status"] for s in out["search"]["solver_stages"]] == ["OPTIMAL", "OPTIMAL"]
    assert out["search"]["solver_status"] == "OPTIMAL" and out["search"]["candidates_evaluated"] > 100
    again = main([*HEADLINE, "--json"])
    second = json.loads(capsys.readouterr().out)
    assert again == 0
    out["search"].pop("seconds")
    second["search"].pop("seconds")
    assert out == second


def test_infeasible_exit_1_with_explanation(capsys):
    assert main(["--model", "dsv3", "--chip", "l40s", "--concurrency", "8", "--max-gpus", "8"]) == 1
    text = capsys.readouterr().out
    assert "no pool fits dsv3: 8 concurrent requests at 163,840 tokens" in text
    assert "weights alone need 626.94 GiB per rank at tp 1" in text
    assert main(["--model", "dsv3", "--chip", "l40s", "--concurrency", "8", "--max-gpus", "8", "--json"]) == 1
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["feasible"] is False and out["best"] is None and out["alternatives"] == []
    assert "weights alone need" in captured.err


@pytest.mark.parametrize("args,message", [
    (["--concurrency", "0"], "plan: error: --concurrency: must be in [1, 1,000,000], got 0"),
    (["--concurrency", "8", "--price", "cheap"], "plan: error: --price: 'cheap' is not a price"),
    (["--concurrency", "8", "--context-length", "200000"], "plan: error: --context-length: 200000 exceeds"),
    (["--concurrency", "8", "--chip", "tpu"], "plan: error: --chip: unknown chip 'tpu'"),
    (["--concurrency", "8", "--headroom", "-5"], "plan: error: --headroom: must be at least 0, got -5"),
])
def test_bad_input_exit_2_one_line(capsys, args, message):
    base = ["--model", "llama-3.1-70b", "--chip", "h200"]
    assert main([*base, *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


def test_price_and_limits_flags(capsys):
    args = ["--model", "llama-3.1-70b", "--chip", "h200", "--chip", "b200", "--concurrency", "64",
            "--context-length", "131072", "--price", "b200=4", "--max-gpus", "24", "--json"]
    assert main(args) == 0
    best = json.loads(capsys.readouterr().out)["best"]
    assert (best["chip"], best["gpus"], best["cost_per_hour"]) == ("b200", 20, 80.0)


def test_margin_holds_back_part_of_the_pool(capsys):
    """--margin 0 plans on the predicted pool; a margin never holds more, and the plan says it."""
    flags = ["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "200", "--context-length", "32768",
             "--tp", "1", "--json"]
    assert main([*flags, "--margin", "0"]) == 0
    bare = json.loads(capsys.readouterr().out)
    assert main([*flags, "--margin", "20"]) == 0
    kept = json.loads(capsys.readouterr().out)
    assert kept["margin"] == {"fraction": 0.2, "source": "--margin"}
    per_gpu_bare = bare["best"]["held"] / bare["best"]["gpus"]
    per_gpu_kept = kept["best"]["held"] / kept["best"]["gpus"]
    assert per_gpu_kept < per_gpu_bare and kept["best"]["gpus"] >= bare["best"]["gpus"]
    assert main(flags[:-1]) == 0
    assert "margin: 0.9% of each rank's KV pool not counted on" in capsys.readouterr().out
    assert main([*flags, "--margin", "100"]) == 2
