"""Objects made once and handed down whole: a command resolves each service once
(planner/candidates/service.py `ResolvedService`: its context length settled once, its model's graph
read once per model, `sweep_model`), whatever the stages below read of it; a plan's pools carry the
deployment and the kernel they were verified with, not fields to rebuild them from."""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[1]
MIXED = str(ROOT / "scenarios" / "mixed-fleet-shared-inventory.yaml")  # three services, three models
KV = str(ROOT / "scenarios" / "kv-cache-fp8-vs-bf16.yaml")  # one service, a base and one variant


@pytest.fixture
def counts(monkeypatch) -> Counter:
    """Every reference to `context_length` and `load_model`, in every planner and pricing module
    that imported them by name, replaced by one that counts its calls (variants are planned one
    after another, `--executor sequential`: a worker process's calls would not be counted). Every
    module is imported first, so that none imports a counting function later and keeps it past the
    test."""
    import planner
    import pricing
    from planner.candidates import shapes
    from pricing import graph

    for package in (planner, pricing):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            importlib.import_module(info.name)

    found: Counter = Counter()
    for name, original in (("context_length", shapes.context_length), ("load_model", graph.load_model)):
        def counted(*args, _name=name, _original=original, **kwargs):
            found[_name] += 1
            return _original(*args, **kwargs)

        for module_name, module in list(sys.modules.items()):
            if module_name.split(".")[0] in ("planner", "pricing") and getattr(module, name, None) is original:
                monkeypatch.setattr(module, name, counted)
    return found


def _run(argv: list[str]) -> None:
    code, out, err = cli(argv)
    assert code == 0, out + err


def test_plan_resolves_its_service_once(counts):
    _run(["--model", "llama-3.1-8b", "--chip", "h100", "--chip", "h200", "--concurrency", "64", "--json"])
    assert dict(counts) == {"context_length": 1, "load_model": 1}, dict(counts)


def test_a_disaggregated_plan_resolves_its_service_once(counts):
    _run(["--model", "llama-3.1-8b", "--chip", "h100", "--serving", "disagg", "--isl", "2000", "--osl", "200",
          "--requests-per-second", "4", "--ttft-ms", "2000", "--tpot-ms", "50", "--json"])
    assert dict(counts) == {"context_length": 1, "load_model": 1}, dict(counts)


def test_a_scenario_resolves_each_service_once(counts):
    _run(["scenario", MIXED, "--format", "json", "--executor", "sequential"])
    assert dict(counts) == {"context_length": 3, "load_model": 3}, dict(counts)


def test_a_scenario_with_a_disaggregated_service_resolves_each_service_once(counts):
    _run(["scenario", str(ROOT / "scenarios" / "disaggregated-chat-h200-b200.yaml"), "--format", "json",
          "--executor", "sequential"])
    assert dict(counts) == {"context_length": 2, "load_model": 2}, dict(counts)  # two services of two models


def test_compare_resolves_each_service_of_each_variant_once(counts):
    _run(["compare", KV, "--format", "json", "--executor", "sequential"])
    assert dict(counts) == {"context_length": 2, "load_model": 1}, dict(counts)  # the base and fp8-kv: one model


def test_a_compare_sweep_resolves_each_point_once(counts):
    _run(["compare", "--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "16", "--context-length", "8192",
          "--context-length", "16384", "--format", "json", "--executor", "sequential"])
    assert dict(counts) == {"context_length": 2, "load_model": 1}, dict(counts)


def test_max_rate_resolves_its_service_once(counts):
    _run(["--model", "llama-3.1-8b", "--chip", "h100", "--max-gpus", "2", "--max-rate", "--isl", "1000", "--osl", "100",
          "--p99-ttft-ms", "2000", "--p99-tpot-ms", "50", "--json"])
    assert dict(counts) == {"context_length": 1, "load_model": 1}, dict(counts)


def test_the_best_pool_carries_its_deployment_and_kernel():
    import planner
    from pricing.kernel import Capacity

    result = planner.plan(model="llama-3.1-8b", chip="h100", concurrency=64, context_length=8192)
    for pool in [result.best, *result.alternatives]:
        d = pool.deployment
        assert (d.tensor_parallel_size, d.data_parallel_size, d.max_num_seqs, d.max_model_len,
                d.gpu_memory_utilization, d.max_num_batched_tokens) == (
            pool.tensor_parallel_size, pool.data_parallel_size, pool.max_num_seqs, pool.max_model_len,
            pool.gpu_memory_utilization, pool.max_num_batched_tokens)
        assert pool.kernel.engine.max_model_len == 8192
        # the kernel it carries holds what the pool says each rank holds (the held figure is the pool's)
        per_rank = Capacity(pool.kernel).requests_held(result.margin.fraction)
        assert min(per_rank, pool.max_num_seqs) * pool.data_parallel_size * pool.replicas == pool.held
    assert "deployment" not in json.loads(result.model_dump_json())["best"]  # whole for the code, not in the JSON


def test_each_role_pool_carries_its_role_kernel():
    import planner

    out = planner.plan_serving(model="llama-3.1-8b", chip="h100", context_length=8192, ttft_ms=1500, tpot_ms=30,
                               workload={"isl": 2000, "osl": 200, "requests_per_second": 5})
    d = out.serving.disaggregated
    assert (d.prefill.kernel.engine.kv_role, d.decode.kernel.engine.kv_role) == ("kv_producer", "kv_consumer")
    assert d.prefill.role == planner.app.api.Role.PREFILL and d.decode.role == "decode"


def test_a_bare_config_says_its_weights_are_needed_from_the_served_model(tmp_path, shared_models):
    """A config.json without weights is served as $MODEL_WEIGHTS (planner/app/serve.py ServedModel,
    its `placeholder`): the plan says the weights are needed, and a card's plan does not."""
    bare = tmp_path / "Qwen--Qwen3-8B.json"
    bare.write_text((shared_models / "Qwen--Qwen3-8B.json").read_text())
    said = "MODEL_WEIGHTS: the weights' folder or Hugging Face id is needed"
    code, out, _ = cli(["--model", str(bare), "--chip", "h100", "--concurrency", "4", "--context-length", "8192"])
    assert code == 0 and said in out and "vllm serve $MODEL_WEIGHTS " in out
    code, out, _ = cli(["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "4", "--context-length", "8192"])
    assert code == 0 and said not in out


def test_each_candidate_row_carries_its_deployment_and_keeps_it_through_a_worker():
    """A row's deployment is its shape's flags at its own settings, at the table's context length;
    a table sent back from a worker process (pickled) keeps them."""
    import pickle

    from planner.candidates.service import ResolvedService
    from planner.candidates.table import candidate_table
    from planner.request import PoolLimits, ServiceSpec
    from pricing.chips import get_chip

    limits = PoolLimits(chips=("h200",))
    spec = ServiceSpec(model="dsv4.1-flash", concurrency=8, context_length=8192, num_speculative_tokens=1,
                       speculative_method="dspark")
    built = candidate_table(ResolvedService.of(spec, limits), get_chip("h200"), limits)
    assert built.rows
    for table in (built, pickle.loads(pickle.dumps(built))):
        for row in table.rows:
            d = row.deployment
            assert (d.tensor_parallel_size, d.pipeline_parallel_size, d.data_parallel_size, d.enable_expert_parallel,
                    d.decode_context_parallel_size, d.kv_cache_dtype) == (
                row.shape.tp, row.shape.pp, row.shape.dp, row.shape.ep, row.shape.dcp, row.shape.kv_cache_dtype)
            assert (d.gpu_memory_utilization, d.max_num_batched_tokens, d.max_num_seqs) == (
                row.gpu_memory_utilization, row.max_num_batched_tokens, row.max_num_seqs)
            assert (d.max_model_len, d.num_speculative_tokens, d.speculative_method) == (8192, 1, "dspark")
