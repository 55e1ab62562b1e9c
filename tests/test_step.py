"""The step-time model (issue 14): properties that hold for every deployment (hypothesis),
values derived by hand, and the chip rates' provenance."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pricing.chips import get_chip
from pricing.graph import load_model
from pricing.kernel import Deployment, Kernel
from pricing.step import Step, StepModel, chip_rates
from pricing.step.work import expected_experts

MODELS = st.sampled_from([
    ("llama-3.1-8b", 1), ("llama-3.1-70b", 4), ("gpt-oss-20b", 1), ("qwen3-30b-a3b", 2), ("dsv3", 8),
    ("dsv4.1-flash", 8), ("gemma-3-27b", 4), ("nemotron-h-56b", 4), ("mixtral-8x7b", 2),
])
CHIPS = st.sampled_from(["h200", "b200", "h100", "mi300x", "mi355x"])
FAST = settings(max_examples=40, deadline=None)


def step_model(name: str, chip: str, tp: int, quantization: str | None = None, **flags) -> StepModel:
    model = load_model(name, quantization)
    flags.setdefault("max_model_len", min(32768, model.max_position))
    return StepModel(Kernel.of(model, Deployment(tensor_parallel_size=tp, **flags), get_chip(chip)))


@FAST
@given(MODELS, CHIPS, st.integers(1, 512), st.integers(1, 512), st.integers(1, 32768))
def test_a_larger_batch_never_decodes_faster_per_request(model, chip, a, b, context):
    name, tp = model
    s = step_model(name, chip, tp)
    lo, hi = sorted((a, b))
    assert s.decode(lo, context).seconds <= s.decode(hi, context).seconds


@FAST
@given(st.sampled_from([("llama-3.1-70b", (1, 2, 4, 8)), ("llama-3.1-8b", (1, 2, 4, 8)),
                        ("qwen3-32b", (1, 2, 4, 8)), ("dsv3", (1, 2, 4, 8)), ("gemma-3-27b", (1, 2, 4, 8)),
                        ("mixtral-8x7b", (1, 2, 4, 8))]),
       CHIPS, st.integers(1, 256), st.integers(1, 32768), st.data())
def test_a_wider_tp_never_makes_a_memory_bound_decode_step_slower(model, chip, batch, context, data):
    name, tps = model
    narrow = data.draw(st.sampled_from(tps[:-1]))
    wide = data.draw(st.sampled_from([t for t in tps if t > narrow]))
    slow = step_model(name, chip, narrow).decode(batch, context)
    if slow.bound != "memory":
        return
    assert step_model(name, chip, wide).decode(batch, context).seconds <= slow.seconds


@FAST
@given(st.sampled_from([("llama-3.1-8b", 1), ("llama-3.1-70b", 4), ("qwen3-32b", 2), ("qwen3-30b-a3b", 1),
                        ("mixtral-8x7b", 2)]),
       st.sampled_from(["h100", "h200", "b200", "mi300x", "mi355x", "a100-80gb"]), st.integers(1, 512),
       st.integers(1, 32768))
def test_fp8_weights_never_make_a_memory_bound_step_slower_than_bf16(model, chip, batch, context):
    name, tp = model
    bf16 = step_model(name, chip, tp, "bf16").decode(batch, context)
    if bf16.bound != "memory":
        return
    assert step_model(name, chip, tp, "fp8").decode(batch, context).seconds <= bf16.seconds


@FAST
@given(MODELS, CHIPS, st.integers(0, 256), st.integers(1, 65536), st.integers(0, 8192), st.integers(0, 65536))
def test_parts_of_a_step_sum_to_the_step(model, chip, decode, context, chunk, offset):
    name, tp = model
    t = step_model(name, chip, tp).time(Step(decode=decode, context=context, chunk=chunk, chunk_offset=offset))
    assert math.isclose(sum(t.parts.values()), t.seconds, rel_tol=1e-9)
    by_bound = t.memory_seconds + t.compute_seconds + t.comm_seconds + t.overhead_seconds
    assert math.isclose(by_bound, t.seconds, rel_tol=1e-9)
    assert all(v >= 0 for v in t.parts.values())


def test_a_decode_step_reads_every_weight_once_and_one_embedding_row():
    """Llama-3.1-8B bf16 on one GPU, one request at context 1: the bytes a step moves are its
    weights but the embedding table (it gathers one row), by hand from the config: 32 layers of
    q 4096², k and v 1024×4096, o 4096², gate+up 2×14336×4096, down 4096×14336, two norms of
    4096; final norm; LM head 128256×4096; all 2 bytes. Activations add (rows + cols) × 2 bytes
    per matrix, and the one-token KV read adds 32 × 2 × 8 × 128 × 2 bytes."""
    per_layer = 4096 * 4096 * 2 + 2 * 1024 * 4096 + 2 * 14336 * 4096 + 4096 * 14336
    weights = (32 * (per_layer + 2 * 4096) + 4096 + 128256 * 4096) * 2
    acts = 32 * 2 * ((4096 + 4096) * 2 + (1024 + 4096) * 2 + (2 * 14336 + 4096) + (4096 + 14336)) + 2 * (128256 + 4096)
    kv = 32 * 2 * 8 * 128 * 2
    embedding_row = 4096 * 2
    t = step_model("llama-3.1-8b", "h100", 1, max_model_len=8192).decode(1, 1)
    assert t.bytes == pytest.approx(weights + acts + kv + embedding_row, rel=1e-12)


def test_expected_distinct_experts_by_hand():
    assert expected_experts(8, 2, 1) == pytest.approx(2.0)
    assert expected_experts(8, 2, 2) == pytest.approx(8 * (1 - (6 / 8) ** 2))  # 3.5
    assert expected_experts(128, 8, 10_000) == pytest.approx(128.0)
    assert expected_experts(0, 2, 5) == 0.0


def test_moe_decode_reads_only_the_experts_a_small_batch_routes_to():
    """Qwen3-30B-A3B picks 8 of 128 experts per token: one token reads 8/128 of the expert weights."""
    s = step_model("qwen3-30b-a3b", "h100", 1)
    moe = next(g for g in s.groups if g.moe_layers)
    one = s.decode(1, 1)
    everything = s.decode(4096, 1)
    assert moe.local_experts == 128
    assert one.bytes < everything.bytes / 5


def test_chip_rates_come_from_the_registry_with_sources():
    rates = chip_rates(get_chip("h100"))
    assert rates.bf16_flops == 989.4e12 and rates.fp8_flops == 1978.9e12 and rates.memory_bandwidth == 3.35e12
    assert all(p.source and p.how for p in rates.provenance)
    assert rates.flops_for("nvfp4") == rates.bf16_flops  # no native fp4 on Hopper: weight-only, bf16 math
    assert chip_rates(get_chip("b200")).flops_for("nvfp4") == 9.0e15


def test_pipeline_parallel_step_sums_its_stages_and_hands_off():
    """pp 2: a request's step is both stages' micro-batch steps plus one hand-off; per GPU the
    instance counts all tp × pp GPUs."""
    from pricing.step.serving import serving

    graph = load_model("llama-3.1-70b")
    kernel = Kernel.of(graph, Deployment(tensor_parallel_size=2, pipeline_parallel_size=2, max_model_len=8192),
                       get_chip("h100"))
    s = StepModel(kernel)
    t = s.decode(64, 4096)
    stages = [StepModel(k, _stage=True).decode(32, 4096).seconds for k in kernel.instance.ranks]
    assert t.parts["pipeline hand-off"] > 0
    assert math.isclose(t.seconds, sum(stages) + t.parts["pipeline hand-off"], rel_tol=1e-9)
    r = serving(s, 64, 4096)
    assert math.isclose(r.output_tokens_per_second_per_gpu, 64 / r.tpot_seconds / 4, rel_tol=1e-9)


def test_the_step_models_graph_facts_are_dropped_when_the_graph_gains_a_node():
    """pricing/step/work.py keeps what it reads off the graph in the graph's extras (derived
    extras): a node added afterwards is counted, not a stale walk."""
    from dataclasses import replace

    from pricing.step.work import collectives

    base = load_model("llama-3.1-8b")
    graph = replace(base, g=base.g.copy(), extras=dict(base.extras))  # the shared graph stays as it is
    k = Kernel.of(graph, Deployment(tensor_parallel_size=2, max_model_len=8192), get_chip("h200"))
    before = collectives(k)
    row = next(t for _, d in graph.nodes() for t in d["tensors"] if t.split == "row")
    graph.add("extra", "mlp", tensors=[replace(row, name="extra.down_proj")])
    assert collectives(k).all_reduces == before.all_reduces + 1  # one more row-parallel output summed


def test_an_engines_own_factors_can_be_replaced_and_say_so():
    """vLLM's own factors (step_model.yaml engines.vllm) take a what-if like the shared ones: the
    replaced value is read, its provenance says the fit, the rest keep their engine's source."""
    from pricing.step.rates import Efficiency

    own = Efficiency.from_registry(None, "vllm")
    trial = own.replaced(tensor_compute=0.5)
    assert trial.tensor_compute == 0.5 and trial.step_seconds == own.step_seconds
    by_name = {p.name: p for p in trial.provenance}
    assert by_name["step_model.engines.vllm.efficiency.tensor_compute"].source == "fit in progress"
    assert "vllm" in by_name["step_model.engines.vllm.overhead.step_seconds"].source


def test_deepseek_v32_attends_its_indexers_top_k():
    """DeepSeek-V3.2 at tp 8 on H200s (61 MLA layers, 128 heads: 16 a rank; the 576-wide latent
    read as K and as V, absorbed: 2 x 16 x 1,152 = 36,864 FLOPs a (query, attended token) pair a
    layer; its indexer, 64 heads of 128 on every rank, 2 x 64 x 128 = 16,384 FP8 FLOPs a scored
    token, at the H200's FP8 rate (1,978.9 TFLOP/s dense against 989.4 bf16): 8,192 bf16-rate
    FLOPs, rounded). A query attends only the 2,048 tokens the indexer picks (`index_topk`) but
    the indexer scores all of them: at 32,000 tokens of context one decode's attention is
    61 x (2,048 x 36,864 + 32,000 x 8,192) FLOPs, at 1,000 tokens 61 x 1,000 x (36,864 + 8,192);
    a 4,000-token prompt's chunk from its start, its queries seeing 2,000 tokens on average,
    61 x 4,000 x 2,000 x (36,864 + 8,192)."""
    kernel = Kernel.of(load_model("dsv3.2"), Deployment(tensor_parallel_size=8), get_chip("h200"))
    sm = StepModel(kernel)
    assert (sm.rates.bf16_flops, sm.rates.fp8_flops) == (989.4e12, 1978.9e12)
    assert round(16384 * 989.4 / 1978.9) == 8192
    assert sm.attention_work(Step(decode=1, context=32000))[0] == 61 * (2048 * 36864 + 32000 * 8192)
    assert sm.attention_work(Step(decode=1, context=1000))[0] == 61 * 1000 * (36864 + 8192)
    assert sm.attention_work(Step(chunk=4000))[0] == 61 * 4000 * 2000 * (36864 + 8192)


def test_a_pcie_only_chip_prices_each_all_reduce_at_pcies_latency_by_hand():
    """Llama-3.1-8B at tp 2, one request: 32 layers, two row-parallel outputs each, so 64
    all-reduces of 4,096 × 2 bytes a step, each latency + 2 (g − 1) / g × bytes / (scale-up
    bandwidth × interconnect efficiency). On an RTX 4090 (PCIe only, 64 GB/s a direction) the
    latency is NCCL's PCIe one (step_model.yaml, 42 us); on an H100 (NVLink) NCCL's NVLink one."""
    for chip, pcie in (("rtx-4090", True), ("h100", False)):
        model = step_model("llama-3.1-8b", chip, 2, max_model_len=8192)
        eff = model.eff
        latency = eff.pcie_collective_latency_seconds if pcie else eff.collective_latency_seconds
        one = latency + 2 * (2 - 1) / 2 * 4096 * 2 / (model.rates.scale_up_bandwidth * eff.interconnect)
        assert model.decode(1, 1).parts["tensor-parallel all-reduce"] == pytest.approx(64 * one, rel=1e-12)
    assert eff.pcie_collective_latency_seconds == 42e-6 and eff.collective_latency_seconds == 6e-6


def test_the_speed_lines_registry_values_are_in_the_provenance():
    """`plan memory --batch` and `plan` print step figures: their provenance lists what those were
    priced with, the chip's peak rates and vLLM's factors, with their values (on a PCIe-only chip,
    the PCIe collective latency among them)."""
    import json

    from tests.helpers import cli

    code, out, _ = cli(["memory", "--model", "llama-3.1-70b", "--chip", "rtx-pro-6000", "--tp", "4",
                        "--batch", "8", "--json"])
    assert code == 0
    rows = {p["name"]: p for p in json.loads(out)["provenance"]}
    model = step_model("llama-3.1-70b", "rtx-pro-6000", 4)
    pcie = rows["step_model.overhead.pcie_collective_latency_seconds"]["value"]
    assert float(pcie) == model.eff.pcie_collective_latency_seconds
    assert float(rows["chip_rates.chip_rates.rtx-pro-6000.memory_bandwidth"]["value"]) == model.rates.memory_bandwidth
    assert rows["step_model.engines.vllm.efficiency.expert_bandwidth"]["source"]
    code, out, _ = cli(["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "--json"])
    assert code == 0
    names = {p["name"] for p in json.loads(out)["provenance"]}
    assert {"chip_rates.chip_rates.h100.bf16_flops", "step_model.engines.vllm.overhead.step_seconds"} <= names


def test_experts_are_read_at_their_fused_moe_kernels_own_efficiency():
    """gpt-oss-20b on one H100 (sm90) serves its routed experts as MXFP4, whose kernel vLLM's CUDA
    factors fit apart (moe_kernels.sm90.mxfp4); the same model with that entry removed reads them at
    the engine's expert_bandwidth. At 64 requests, the MoE part's byte time scales by the ratio of
    the two efficiencies (the expert bytes are the same), and nothing else in the step moves. An
    AMD chip's step is priced at vLLM's ROCm factors, which fit no kernel apart."""
    from dataclasses import replace

    from pricing.step.step import factor_set

    sm = step_model("gpt-oss-20b", "h100", 1)
    eff = sm.eff
    own = eff.moe_kernel("sm90", "mxfp4")
    assert own.provenance and own.expert_bandwidth != eff.expert_bandwidth
    assert eff.moe_kernel("sm90", "bf16").expert_bandwidth == eff.expert_bandwidth  # no entry: the default
    assert eff.moe_kernel("sm80", "mxfp4").expert_bandwidth == eff.expert_bandwidth
    bare = StepModel(sm.kernel, efficiency=replace(eff, moe_kernels=()))
    step = Step(decode=64, context=2048)
    with_kernel, without = sm.time(step), bare.time(step)
    (moe,) = [g for g in sm.groups if g.moe_layers and g.fmt == "mxfp4"]
    _, expert_bytes = moe.routed_work(64)
    rate = sm.rates.memory_bandwidth
    saved = expert_bytes / (rate * eff.expert_bandwidth) - expert_bytes / (rate * own.expert_bandwidth)
    assert without.seconds - with_kernel.seconds == pytest.approx(saved, rel=1e-9)
    assert with_kernel.parts["attention projections"] == without.parts["attention projections"]
    assert {p.name for p in own.provenance} <= {p.name for p in sm.provenance}
    assert factor_set(sm.kernel) == "vllm" and factor_set(step_model("gpt-oss-20b", "mi300x", 1).kernel) == "vllm-rocm"
    assert not step_model("gpt-oss-20b", "mi300x", 1).eff.moe_kernels


def test_ue8m0_block_fp8_runs_the_block_fp8_kernels():
    """DeepSeek-V3.2's block-FP8 weights carry UE8M0 scales (its scale_fmt): a format of their own for the
    bytes (one-byte scales), the block-FP8 kernels for the time (vLLM 0.33 picks the block-scaled kernel by
    the layer's block shape). On an H200 its experts and its prompt's GEMMs are priced at the sm90
    fp8_block entries the MiniMax-M2.5 rows fitted, not at the engine's defaults."""
    sm = step_model("dsv3.2", "h200", 8)
    eff = sm.eff
    flops = sm.prompt_flops_by_format()
    assert max(flops, key=flops.get) == "fp8_block_ue8m0"
    block = eff.gemm_kernel("sm90", "fp8_block")
    assert block.provenance and block.tensor_compute != eff.tensor_compute
    assert eff.gemm_kernel("sm90", "fp8_block_ue8m0") == block
    assert sm.expert_kernel() == eff.moe_kernel("sm90", "fp8_block")
    assert sm.expert_kernel().expert_bandwidth != eff.expert_bandwidth


def test_an_mla_layer_pays_its_backends_floor_beside_the_shared_one():
    """Kimi-K2.5 runs 61 MLA decoder layers; on an H200 (sm90) each pays vLLM's shared per-layer floor
    plus MLA's own (attention_kernels.sm90.mla): the step's overhead is step_seconds + 61 x (both) +
    per_request x requests. Llama-3.1-70B (GQA) pays the shared floor alone."""
    sm = step_model("kimi-k2.5", "h200", 8)
    eff = sm.eff
    mla = eff.attention_kernel("sm90", "mla")
    assert mla.layer_seconds > 0 and mla.provenance
    t = sm.decode(8, 4096)
    want = eff.step_seconds + 61 * (eff.layer_seconds + mla.layer_seconds) + 8 * eff.per_request_seconds
    assert t.parts["step overhead"] == pytest.approx(want, rel=1e-12)
    dense = step_model("llama-3.1-70b", "h200", 4)
    assert dense.layer_floor == dense.eff.layer_seconds
    assert dense.decode(8, 4096).parts["step overhead"] == pytest.approx(
        eff.step_seconds + 80 * eff.layer_seconds + 8 * eff.per_request_seconds, rel=1e-12)


def test_a_prompts_matrices_run_at_their_formats_fitted_gemm_efficiency():
    """Llama-3.1-70B FP8 on four H100s serves its weights as FP8 per tensor, whose GEMMs vLLM's CUDA
    factors fit apart (gemm_kernels.sm90.fp8_tensor): a 4,096-token prefill's dense MLP is
    compute-bound, its time the FLOPs at the FP8 peak times that efficiency; with the entry removed,
    at the engine's tensor_compute. BF16 weights there have no entry of their own."""
    from dataclasses import replace

    sm = step_model("llama-3.1-70b", "h100", 4, "fp8")
    own = sm.eff.gemm_kernel("sm90", "fp8_tensor")
    assert own.provenance and own.tensor_compute != sm.eff.tensor_compute
    assert sm.eff.gemm_kernel("sm90", "bf16").tensor_compute == sm.eff.tensor_compute  # no entry: the default
    bare = StepModel(sm.kernel, efficiency=replace(sm.eff, gemm_kernels=()))
    prefill = Step(chunk=4096)
    fitted, plain = sm.time(prefill).parts["dense MLP"], bare.time(prefill).parts["dense MLP"]
    assert fitted / plain == pytest.approx(sm.eff.tensor_compute / own.tensor_compute, rel=1e-9)
    (mlp,) = [g for g in sm.groups if g.kind == "mlp" and g.fmt == "fp8_tensor"]
    assert fitted == pytest.approx(mlp.flops_per_token * 4096 / (sm.rates.fp8_flops * own.tensor_compute), rel=1e-9)
    assert {p.name for p in own.provenance} <= {p.name for p in sm.provenance}


def test_the_first_token_waits_for_the_api_server_beside_the_prefill():
    """vLLM's time to a first token holds the API server's own (first_token_seconds: HTTP,
    tokenizing, hand-off, detokenizing, streaming) beside the prompt's prefill steps: a prompt of
    one chunk's TTFT is that plus the one step; the steady-state TPOT does not hold it."""
    from pricing.step.serving import step_seconds_per_token, ttft

    sm = step_model("llama-3.1-8b", "h100", 1)
    front = sm.eff.first_token_seconds
    assert front > 0 and any(p.name.endswith("first_token_seconds") for p in sm.provenance)
    assert ttft(sm, 1, 1000, 1000) == pytest.approx(front + sm.time(Step(chunk=1000)).seconds, rel=1e-12)
    assert step_seconds_per_token(sm, 8, 2000, None) == pytest.approx(sm.decode(8, 2000).seconds, rel=1e-12)
