"""Objects made once and handed down whole: a command reads its model's graph once per model
(planner/candidates/table.py `sweep_model`) and resolves a service's context length once for its
target and once per candidate table (which carries it: `ChipTable.context_length`); a plan's pools
carry the deployment and the kernel they were verified with, not fields to rebuild them from."""

from __future__ import annotations

import collections
import importlib
import json
import pkgutil

import pytest

import pricing.graph
from planner.candidates import shapes
from tests.helpers import cli

MIXED = "scenarios/mixed-fleet-shared-inventory.yaml"


@pytest.fixture
def calls(monkeypatch):
    """Every call of `load_model` and `context_length` from the planner's application, candidates
    and search (imported by name at the top of a module, or inside a function), counted by name."""
    counted = collections.Counter()

    def counting(name, fn):
        def call(*args, **kwargs):
            counted[name] += 1
            return fn(*args, **kwargs)
        return call

    modules = [importlib.import_module(f"{package}.{info.name}")  # all imported before any is patched
               for package in ("planner.app", "planner.candidates", "planner.search")
               for info in pkgutil.iter_modules(importlib.import_module(package).__path__)]
    originals = {"load_model": pricing.graph.load_model, "context_length": shapes.context_length}
    for module in [pricing.graph, shapes, *modules]:  # the functions' own modules, and those importing them by name
        for name, fn in originals.items():
            if getattr(module, name, None) is fn:
                monkeypatch.setattr(module, name, counting(name, fn))
    return counted


def test_a_plan_reads_its_model_once_and_resolves_its_context_per_table(calls):
    code, _, _ = cli(["--model", "llama-3.1-8b", "--chip", "h100", "--chip", "h200", "--concurrency", "64",
                      "--context-length", "8192", "--json"])
    assert code == 0
    assert calls["load_model"] == 1
    assert calls["context_length"] == 1 + 2  # the plan's target, and each chip's candidate table


def test_a_review_reads_each_model_once(calls, monkeypatch):
    monkeypatch.chdir(shapes.__file__.rsplit("/planner/", 1)[0])
    code, _, _ = cli(["scenario", MIXED, "--executor", "sequential", "--format", "json"])
    assert code == 0
    assert calls["load_model"] == 3  # three services of three models
    # each service's length checked against its positions before the search, then once per candidate table
    assert calls["context_length"] == 3 + 6


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
