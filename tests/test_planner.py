"""The planner against a brute-force enumeration of the same candidate space through the kernel,
and one test per constraint (issue 5, "Done when")."""

from __future__ import annotations

import itertools
import math
import re

import pytest

from planner import defaults
from planner.app.plan import plan
from planner.candidates.shapes import replica_cap
from planner.request import PlanRequest, PoolLimits, ServiceSpec
from planner.search.cpsat import Option, build, solve
from pricing.chips import get_chip
from pricing.errors import InputError
from pricing.graph import load_model
from pricing.kernel import Capacity, Deployment, Kernel
from pricing.registry import shipped


def request(model: str, chips=("h200",), concurrency: int = 64, **kw) -> PlanRequest:
    limit_keys = ("price", "prices", "max_gpus", "gpus_per_node")
    limits = {k: kw.pop(k) for k in limit_keys if k in kw}
    return PlanRequest(service=ServiceSpec(model=model, concurrency=concurrency, **kw),
                       limits=PoolLimits(chips=tuple(chips), **limits))


def brute_force(model_name: str, chip_id: str, need: int, context: int | None = None):
    """Every candidate of the planner's space, evaluated one by one with vLLM's default
    max_num_seqs: (cost per hour of the fewest replicas reaching `need`, candidate)."""
    model = load_model(model_name)
    chip = get_chip(chip_id)
    length = context or model.max_position
    kv_heads = model.num_kv_heads if model.attention_backend == "gqa" else 1
    grid = defaults.value("grids.gpu_memory_utilization")
    budgets = defaults.value("grids.max_num_batched_tokens")
    dps = defaults.value("grids.data_parallel_size") if model.has_experts else [1]
    margin = shipped().value("cost_model_memory.kv_pool_margin")
    out = []
    for tp in [t for t in range(1, chip.nvlink_domain + 1) if model.num_attention_heads % t == 0]:
        for dp, ep in itertools.product(dps, (False, True) if model.has_experts else (False,)):
            if tp * dp > defaults.value("grids.max_gpus_per_instance") or (ep and tp * dp == 1):
                continue
            for dcp in [d for d in range(1, tp + 1) if tp % d == 0 and d <= max(1, tp // kv_heads)]:
                flags = dict(tensor_parallel_size=tp, data_parallel_size=dp, enable_expert_parallel=ep,
                             decode_context_parallel_size=dcp, max_model_len=length)
                try:
                    pre = Kernel.of(model, Deployment(**flags), chip).pre_snapshot_bytes()
                except InputError:
                    continue
                cap = math.floor((chip.memory_bytes - pre) * 100 / chip.memory_bytes) / 100
                utils = sorted({u for u in grid if u <= cap} | ({cap} if cap < max(grid) else set()))
                for util, mbt in itertools.product(utils, budgets):
                    k = Kernel.of(model, Deployment(**flags, gpu_memory_utilization=util,
                                                    max_num_batched_tokens=mbt), chip)
                    held = min(Capacity(k).requests_held(margin), mbt)  # the planner's KV margin, as it keeps it
                    if held:
                        replicas = -(-need // (dp * held))
                        cost = replicas * tp * dp * chip.price_per_gpu_hour
                        out.append((cost, replicas, dp * held, flags, util, mbt))
    return out


CASES = [
    ("dsv4.1-flash", "h200", None),
    ("dsv4.1-flash", "b200", None),
    ("dsv4-flash", "h200", None),
    ("llama-3.1-70b", "h200", 131072),
    ("qwen3-235b-a22b", "h200", None),
]


@pytest.mark.parametrize("model,chip,context", CASES)
def test_plan_matches_brute_force(model, chip, context):
    result = plan(request(model, (chip,), 64, context_length=context))
    assert result.feasible and result.search.solver_status == "OPTIMAL"
    best = result.best
    everything = brute_force(model, chip, 64, context)
    assert best.cost_per_hour == pytest.approx(min(c[0] for c in everything))
    # every cheaper (candidate, replicas) holds fewer requests than the target
    for cost, replicas, per_instance, *_ in everything:
        for r in range(1, replicas):
            assert r * per_instance < 64
        assert cost >= best.cost_per_hour - 1e-9
    assert best.held >= 64 and best.held == best.replicas * (best.held // best.replicas)
    # the reported plan is what the kernel says at its own max_num_seqs
    k = Kernel.of(load_model(model), Deployment(
        tensor_parallel_size=best.tensor_parallel_size, data_parallel_size=best.data_parallel_size,
        enable_expert_parallel=best.enable_expert_parallel,
        decode_context_parallel_size=best.decode_context_parallel_size,
        gpu_memory_utilization=best.gpu_memory_utilization, max_num_batched_tokens=best.max_num_batched_tokens,
        max_num_seqs=best.max_num_seqs, max_model_len=best.max_model_len), get_chip(chip))
    assert best.replicas * best.data_parallel_size * Capacity(k).requests_held() == best.held
    assert Capacity(k).requests_held() == best.max_num_seqs


def test_headline_answer():
    """dsv4.1-flash on H200 at its full 1,048,576-token context: 4 GPUs, one instance."""
    result = plan(request("dsv4.1-flash", ("h200",), 64))
    b = result.best
    assert result.target.context_length == 1_048_576
    assert (b.chip, b.gpus, b.replicas, b.gpus_per_replica) == ("h200", 4, 1, 4)
    assert b.cost_per_hour == pytest.approx(4 * 4.54)
    assert b.held >= 64 and b.headroom == pytest.approx(b.held / 64 - 1)
    assert b.vllm_serve.startswith(f"CUDA_VISIBLE_DEVICES=0,1,2,3 vllm serve deepseek-ai/DeepSeek-V4.1-Flash --host "
                                   f"0.0.0.0 --port 8000 --tensor-parallel-size {b.tensor_parallel_size} ")
    assert (f"--gpu-memory-utilization {b.gpu_memory_utilization:g} --max-num-batched-tokens "
            f"{b.max_num_batched_tokens} --max-num-seqs {b.max_num_seqs} --max-model-len 1048576") in b.vllm_serve
    assert len(result.alternatives) == 5


def test_alternatives_are_ranked_and_distinct():
    result = plan(request("llama-3.1-70b", ("h200", "b200", "h100"), 64, context_length=131072))
    plans = [result.best, *result.alternatives]
    keys = [(p.cost_per_hour, p.gpus, -p.held, -p.max_num_batched_tokens) for p in plans]
    assert keys == sorted(keys)  # cost, then fewer GPUs, then more headroom, then the larger token budget
    shapes = {(p.chip, p.tensor_parallel_size, p.pipeline_parallel_size, p.data_parallel_size,
               p.enable_expert_parallel, p.decode_context_parallel_size) for p in plans}
    assert len(shapes) == len(plans) == 6


def test_several_chips_pick_the_cheapest_single_chip_answer():
    chips = ("h200", "b200", "h100")
    singles = [plan(request("llama-3.1-70b", (c,), 64, context_length=131072)).best for c in chips]
    both = plan(request("llama-3.1-70b", chips, 64, context_length=131072)).best
    assert both.cost_per_hour == pytest.approx(min(p.cost_per_hour for p in singles))
    assert (both.chip, both.gpus) == ("h200", 24)


def test_price_override_changes_the_winner():
    result = plan(request("llama-3.1-70b", ("h200", "b200"), 64, context_length=131072, prices={"b200": 4.0}))
    assert (result.best.chip, result.best.gpus, result.best.cost_per_hour) == ("b200", 20, pytest.approx(80.0))
    every = plan(request("llama-3.1-70b", ("h200",), 64, context_length=131072, price=3.1))
    assert every.best.cost_per_hour == pytest.approx(24 * 3.1)


def test_max_gpus():
    free = plan(request("llama-3.1-70b", ("h200", "b200"), 64, context_length=131072))
    assert (free.best.chip, free.best.gpus) == ("h200", 24)
    capped = plan(request("llama-3.1-70b", ("h200", "b200"), 64, context_length=131072, max_gpus=20))
    assert (capped.best.chip, capped.best.gpus, capped.best.replicas) == ("b200", 20, 5)
    assert all(p.gpus <= 20 for p in [capped.best, *capped.alternatives])


def test_node_packing(spec_registry):
    assert replica_cap(4, 8, 12) == 3  # one full node holds 2, the partial node of 4 holds 1
    assert replica_cap(3, 8, 16) == 4  # 2 per node, 2 GPUs stranded per node
    assert replica_cap(16, 8, 40) == 2  # larger than a node: whole nodes, 5 nodes hold 2
    assert replica_cap(8, 8, None) is None
    # 4-GPU nodes shrink the NVLink domain of an HGX H200: tp at most 4
    result = plan(request("llama-3.1-70b", ("h200",), 64, context_length=131072, gpus_per_node=4, pp=(1,)),
                  registry=spec_registry)
    assert max(p.tensor_parallel_size for p in [result.best, *result.alternatives]) == 4
    # at utilization 0.97 (above the default grid's safe top, so given explicitly) tp 4 holds 10: 7 replicas
    wider = plan(request("llama-3.1-70b", ("h200",), 64, context_length=131072, gpus_per_node=4,
                         gpu_memory_utilization=(0.97,), pp=(1,)), registry=spec_registry)
    assert (wider.best.gpus, wider.best.replicas) == (28, 7)
    # an instance larger than a node takes whole nodes, and its serve command says how many ranks each runs
    wide = plan(request("qwen3-235b-a22b", ("h200",), 64, tp=(4,), dp=(4,), pp=(1,), gpus_per_node=8),
                registry=spec_registry)
    assert wide.best.gpus_per_replica == 16
    assert "--data-parallel-size 4 " in wide.best.vllm_serve and "--data-parallel-size-local 2 " in wide.best.vllm_serve


def test_allowed_splits():
    result = plan(request("qwen3-235b-a22b", ("h200",), 64, tp=(4,), dcp=(1,), dp=(1, 2)))
    for p in [result.best, *result.alternatives]:
        assert p.tensor_parallel_size == 4 and p.decode_context_parallel_size == 1 and p.data_parallel_size in (1, 2)
    dense = plan(request("llama-3.1-70b", ("h200",), 64, context_length=131072))
    assert all(p.data_parallel_size == 1 and not p.enable_expert_parallel for p in [dense.best, *dense.alternatives])
    # dcp stays within tp / KV heads: Llama's 8 KV heads at tp 8 leave no room for dcp
    assert all(p.decode_context_parallel_size == 1 for p in [dense.best, *dense.alternatives])


def test_headroom(spec_registry):
    plain = plan(request("qwen3-235b-a22b", ("h200",), 64), registry=spec_registry)
    assert plain.best.held == 84
    more = plan(request("qwen3-235b-a22b", ("h200",), 64, headroom=50), registry=spec_registry)
    assert more.best.held >= 96
    assert more.best.headroom == pytest.approx(more.best.held / 64 - 1)
    assert more.best.cost_per_hour > plain.best.cost_per_hour


def test_kv_cache_dtype_choice():
    auto = plan(request("llama-3.1-70b", ("h200",), 64, context_length=131072))
    both = plan(request("llama-3.1-70b", ("h200",), 64, context_length=131072, kv_cache_dtypes=("auto", "fp8")))
    assert both.best.kv_cache_dtype == "fp8"
    assert both.best.cost_per_hour < auto.best.cost_per_hour
    assert "--kv-cache-dtype fp8" in both.best.vllm_serve


def test_infeasible_weights_explained():
    result = plan(request("dsv3", ("l40s",), 8, max_gpus=8))  # one node: tp 8 over PCIe is the widest
    assert not result.feasible and result.best is None and result.alternatives == []
    [line] = [e.text for e in result.explanations]
    assert line.startswith("NVIDIA L40S 48GB: weights alone need 626.94 GiB per rank at tp 1")
    assert "more per rank is needed" in line


def test_infeasible_context_explained_with_the_longest_that_fits(spec_registry):
    result = plan(request("llama-3.1-70b", ("h100",), 8, context_length=131072, tp=(2,), pp=(1,)),
                  registry=spec_registry)
    [line] = [e.text for e in result.explanations]
    assert "one request at 131,072 tokens needs 20.00 GiB of KV cache per rank at tp 2" in line
    fits = int(line.rsplit("(context_length ", 1)[1].rstrip(").")) if "(context_length " in line else 0  # the field
    # (the library's words; `plan` says --context-length)
    assert fits > 0
    model, chip = load_model("llama-3.1-70b"), get_chip("h100")

    utilization = float(re.search(r"at utilization (\d+\.\d+)", line).group(1))

    def held(length):
        return Capacity(Kernel.of(model, Deployment(tensor_parallel_size=2, gpu_memory_utilization=utilization,
                                                    max_num_batched_tokens=2048, max_model_len=length), chip,
                                   spec_registry)
                        ).requests_held()

    assert held(fits) >= 1 and held(fits + 1) == 0


def test_infeasible_max_gpus_names_the_nearest_fit(spec_registry):
    result = plan(request("llama-3.1-70b", ("h200", "b200"), 64, context_length=131072, max_gpus=16, pp=(1,)),
                  registry=spec_registry)
    assert [e.text for e in result.explanations] == [
        "NVIDIA H200 SXM 141GB: within max_gpus 16 on 8-GPU nodes the most concurrency reachable is 46 "
        "(2 × tp 8, 23 requests each) against 64 required. Nearest fit: max_gpus 24 (3 × tp 8).",
        "NVIDIA B200 (HGX) 180GB: within max_gpus 16 on 8-GPU nodes the most concurrency reachable is 62 "
        "(2 × tp 8, 31 requests each) against 64 required. Nearest fit: max_gpus 20 (5 × tp 4).",
    ]


def test_disallowed_splits_explained():
    """The sentence mentions tp and pp: the fields themselves, or as the reader names them (`plan`'s flags)."""
    result = plan(request("llama-3.1-70b", ("h200",), 8, tp=(16,)))
    assert [e.text for e in result.explanations] == [
        "NVIDIA H200 SXM 141GB: no instance shape is allowed (tp 16 exceeds the NVLink domain of 8 GPUs: span nodes "
        "with pipeline stages instead (tp 8 pp 2, or leave tp and pp out))."]
    assert [e.constraint for e in result.explanations] == ["no_shape"]
    named = plan(request("llama-3.1-70b", ("h200",), 8, tp=(16,)), {"tp": "--tp", "pp": "--pp"}.get)
    assert named.explanations[0].text.endswith("instead (--tp 8 --pp 2, or leave --tp and --pp out)).")


def test_a_tp_that_does_not_divide_the_heads_is_bad_input():
    """The kernel's rule, raised on the deployment's field (the command line names its flag)."""
    with pytest.raises(InputError, match="^tensor_parallel_size: 3 does not divide the 64 attention heads"):
        plan(request("llama-3.1-70b", ("h200",), 8, tp=(3, 8)))


def test_builder_shares_inventory_between_services():
    """Two services, two chips: alone both pick the cheap chip; sharing its 10 GPUs, the solver
    moves the service that loses least (the scenario use of `build`)."""
    from planner.candidates.shapes import Row, Shape

    def option(chip, price, gpus, rank):
        row = Row(chip, Shape(gpus, 1, False, 1, "auto"), 0.9, 8192, 10, 10)
        return Option(row, price, round(price * 10_000), 1, 1, rank)

    a = [option("h200", 1.0, 8, 0), option("b200", 2.0, 8, 1)]  # $8 or $16
    b = [option("h200", 1.0, 4, 0), option("b200", 2.0, 4, 1)]  # $4 or $8
    alone = solve(build([a, b], [10, 10], reads=defaults.load()))
    assert [(o.row.chip, n) for _, o, n in alone.picks] == [("h200", 1), ("h200", 1)]
    shared = solve(build([a, b], [10, 10], inventory={"h200": 10}, reads=defaults.load()))
    assert shared.status == "OPTIMAL"
    assert [(o.row.chip, n) for _, o, n in shared.picks] == [("h200", 1), ("b200", 1)]


@pytest.fixture
def spec_registry():
    """Figures these tests derive were set with the spec's registry values (the overlay
    pricing/registry/overlays/spec-reference.yaml), not the refitted laws."""
    from pathlib import Path

    from pricing.registry import read_overlay

    return read_overlay(Path(__file__).resolve().parents[1] / "pricing/registry/overlays/spec-reference.yaml")


def test_a_split_is_described_once_factors_of_one_left_out():
    from planner.candidates.shapes import Shape

    assert Shape(tp=2, dp=4, ep=True, dcp=2, kv_cache_dtype="fp8", pp=2).split() == \
        "tp 2 × pp 2 × dp 4 with expert parallel, dcp 2"
    assert Shape(tp=8, dp=1, ep=False, dcp=1, kv_cache_dtype="auto").split() == "tp 8"
