"""Hand-checked cases of the memory kernel (issue: the memory kernel, Done when)."""

from fractions import Fraction

import pytest

from pricing.chips import get_chip
from pricing.graph import load_model
from pricing.kernel import Capacity, Deployment, Kernel, Startup
from pricing.kernel.cudagraphs import capture_ceilings
from pricing.registry import shipped
from pricing.units import GiB, MiB
from tests.helpers import kernel


def test_llama_8b_bf16_holds_131072_bytes_per_token():
    k = kernel("llama-3.1-8b", tensor_parallel_size=1)
    # 32 layers × 2 tensors × 8 KV heads × 128 × 2 bytes
    assert k.cache_bytes_per_token() == 32 * 2 * 8 * 128 * 2 == 131072
    assert k.sequence_variable_bytes(4096) == 4096 * 131072


def test_llama_70b_one_kv_head_per_rank_at_tp8_and_tp16():
    for tp in (8, 16):
        k = kernel("llama-3.1-70b", tensor_parallel_size=tp)
        assert k.cache_bytes_per_token() == 80 * 2 * 1 * 128 * 2  # 8 KV heads: never fewer than one per rank
    assert kernel("llama-3.1-70b", tensor_parallel_size=4).cache_bytes_per_token() == 80 * 2 * 2 * 128 * 2


def test_latent_cache_does_not_shrink_with_tp():
    per_token = {tp: kernel("dsv3", tensor_parallel_size=tp).cache_bytes_per_token() for tp in (1, 2, 8, 16)}
    assert set(per_token.values()) == {61 * 576 * 2}  # bf16 latent: one head, 576 wide


def test_fp8_halves_a_bf16_cache():
    bf16 = kernel("llama-3.1-8b").sequence_variable_bytes(10_000)
    fp8 = kernel("llama-3.1-8b", kv_cache_dtype="fp8").sequence_variable_bytes(10_000)
    assert fp8 * 2 == bf16


def test_pages_round_up():
    k = kernel("llama-3.1-8b")
    page = 16 * 131072  # block_size 16
    assert k.sequence_variable_bytes(1) == page
    assert k.sequence_variable_bytes(16) == page
    assert k.sequence_variable_bytes(17) == 2 * page
    assert kernel("llama-3.1-8b", block_size=32).sequence_variable_bytes(17) == 2 * page


def test_dcp_halves_tokens_per_rank_pcp_does_not():
    # tp 16 over 8 KV heads: dcp may be at most tp / KV heads = 2
    def held(**flags):
        return kernel("llama-3.1-70b", tensor_parallel_size=16, **flags).sequence_variable_bytes(8192)

    one, dcp, pcp = held(), held(decode_context_parallel_size=2), held(prefill_context_parallel_size=2)
    assert dcp * 2 == one
    assert pcp == one
    latent = kernel("dsv3", tensor_parallel_size=8, decode_context_parallel_size=8).sequence_variable_bytes(8192)
    assert latent * 8 == kernel("dsv3", tensor_parallel_size=8).sequence_variable_bytes(8192)


def test_gpt_oss_window_layers_stop_growing_past_the_window():
    k = kernel("gpt-oss-20b", tensor_parallel_size=1, max_num_batched_tokens=8192)
    # 24 layers alternate sliding (window 128) and full; 8 KV heads × 64 wide, bf16, 16-token pages
    page = 16 * 8 * (64 + 64) * 2
    assert page == 32768
    groups = k.layout().groups
    assert [g.vllm_class for g in groups] == ["SlidingWindowSpec", "FullAttentionSpec"]  # vLLM's order
    assert k.layout().bytes_per_block == 12 * page
    # the window layers are bounded state: the same at any length
    assert k.sequence_fixed_bytes() == 12 * page * (-(-(127 + 1) // 16) + 1)  # 9 blocks in steady decode
    # admission: window - 1 + 2 steps × 8,192 tokens, plus one page (vLLM reserves 1,033 blocks)
    assert k.sequence_admission_bytes() == 12 * page * 1033
    # the growing part is the full-attention layers only
    per_token_full = 12 * 8 * 128 * 2
    assert k.sequence_variable_bytes(128_000) - k.sequence_variable_bytes(64_000) == per_token_full * 64_000
    assert kernel("gpt-oss-20b", max_num_batched_tokens=8192, async_scheduling=False).sequence_admission_bytes() == (
        12 * page * 521)


def test_expert_parallel_reports_the_fuller_rank():
    k = kernel("dsv3", tensor_parallel_size=1, data_parallel_size=7, enable_expert_parallel=True)
    w = k.weight_bytes()
    assert w.experts_per_rank == 37  # 256 = 4 × 37 + 3 × 36: ranks 0..3 hold 37
    k8 = kernel("dsv3", tensor_parallel_size=1, data_parallel_size=8, enable_expert_parallel=True)
    assert k8.weight_bytes().experts_per_rank == 32
    # 5 more experts in each of 58 MoE layers: gate_up 4096 × 7168 and down 7168 × 2048 in FP8 plus 128-block scales
    expert = 4096 * 7168 + 32 * 56 * 4 + 7168 * 2048 + 56 * 16 * 4
    assert w.weights - k8.weight_bytes().weights == 5 * 58 * expert


def test_without_expert_parallel_every_rank_holds_a_slice_of_every_expert():
    k = kernel("dsv3", tensor_parallel_size=8)
    assert k.weight_bytes().experts_per_rank == 256


def test_eplb_moves_bytes_from_weights_to_replicas():
    base = dict(tensor_parallel_size=1, data_parallel_size=8, enable_expert_parallel=True)
    plain = kernel("dsv3", **base).weight_bytes()
    eplb = kernel("dsv3", enable_eplb=True, num_redundant_experts=32, **base)
    w = eplb.weight_bytes()
    assert w.experts_per_rank == 36
    expert = 4096 * 7168 + 32 * 56 * 4 + 7168 * 2048 + 56 * 16 * 4
    buffer = w.expert_layer_bytes  # EPLB's expert_buffer: one MoE layer of local experts
    assert buffer == 36 * expert
    # the physical slots are counted once: weights + replicas = 36 experts a layer, plus the buffer
    assert w.weights + w.eplb_redundant == plain.weights + 4 * 58 * expert + buffer
    assert w.eplb_redundant - buffer == (36 * 58 * expert) * 32 // 288
    f = eplb.fixed_bytes()
    assert f.total == f.weights + f.activation_peak + f.cuda_graph + f.eplb_redundant + f.non_torch


def test_engine_figures_match_vllm_worked_example():
    # vllm-0.33-memory.md §10: Llama-3.1-8B, 50 GiB available, 131,072-token requests
    k = kernel("llama-3.1-8b", kv_cache_memory_bytes=50 * GiB, max_model_len=131072)
    assert k.layout().bytes_per_block == 2 * MiB
    assert k.instance.num_blocks() == 25600
    assert k.blocks_per_request() == 8192
    assert k.instance.max_concurrency() == pytest.approx(3.125)
    assert k.instance.kv_cache_tokens() == 409_600
    assert k.instance.fits_one_request()
    # appendix: 8 GiB logs 65,536 tokens, 1.00x, yet one 65,536-token request does not fit (null block)
    small = kernel("llama-3.1-8b", kv_cache_memory_bytes=8 * GiB, max_model_len=65536)
    assert small.instance.kv_cache_tokens() == 65536 and small.instance.max_concurrency() == 1.0
    assert not small.instance.fits_one_request() and Capacity(small).requests_held() == 0
    assert "65536" in Startup(small).message


def test_budget_and_pool():
    k = kernel("llama-3.1-8b", gpu_memory_utilization=0.9)
    assert k.budget() == -(-int(k.chip.memory_bytes * 9) // 10) or k.budget() == int(k.chip.memory_bytes * 0.9) + 1
    assert k.kv_pool() == k.budget() - k.fixed_bytes().total
    assert k.instance.num_blocks() == k.kv_pool() // (2 * MiB)


def test_vllm_defaults_by_chip():
    h200 = kernel("llama-3.1-8b", "h200").engine
    assert (h200.max_num_batched_tokens, h200.max_num_seqs, h200.gpu_memory_utilization) == (8192, 1024, 0.92)
    b200 = kernel("llama-3.1-8b", "b200").engine
    assert (b200.max_num_batched_tokens, b200.max_num_seqs) == (16384, 1024)
    a100 = kernel("llama-3.1-8b", "a100").engine
    assert (a100.max_num_batched_tokens, a100.max_num_seqs) == (2048, 256)
    assert kernel("llama-3.1-8b").engine.max_model_len == 131072


def test_capture_ceilings_h100_example():
    # vllm-0.33-memory.md §9.3: max_num_seqs 1024, no speculation: ceiling min(2048, 512) = 512, 51 sizes
    c = capture_ceilings(1024, 8192, 0, 512)
    assert c.mixed == 512 and len(c.sizes) == 51
    assert c.decode == 512
    spec = capture_ceilings(4, 8192, 3, 512)  # 4 requests of 1 + 3 tokens: decode ceiling 16
    assert spec.decode == 16 and spec.mixed == 32


def test_cuda_graph_law_when_the_registry_states_one():
    reg = shipped().with_overrides({"cost_model_memory.cuda_graph_laws.llama": {
        "mixed": {"floor": 100 * MiB, "per_token": 1000}, "decode": {"floor": 50 * MiB, "per_token": 2000}}})
    k = kernel("llama-3.1-8b", registry=reg, max_num_seqs=256, max_num_batched_tokens=8192)
    mixed, decode = k.cuda_graph()[1].mixed, k.cuda_graph()[1].decode
    assert (mixed, decode) == (512, 256)
    assert k.fixed_bytes().cuda_graph == 150 * MiB + 1000 * 512 + 2000 * 256
    assert kernel("llama-3.1-8b", enforce_eager=True).fixed_bytes().cuda_graph == 0


def test_before_the_budget_counts_each_collective_group():
    reg = shipped()
    work = reg.value("cost_model_primitives.engine_workspace")
    comm = reg.value("cost_model_primitives.communicator_reservation")
    assert kernel("llama-3.1-8b").pre_snapshot_bytes() == work
    assert kernel("llama-3.1-70b", tensor_parallel_size=2).pre_snapshot_bytes() == work + comm[2]
    ep = kernel("dsv3", tensor_parallel_size=4, data_parallel_size=2, enable_expert_parallel=True)
    assert ep.collective_groups() == {"tensor parallel": 4, "data parallel": 2, "expert parallel": 8}
    assert ep.pre_snapshot_bytes() == work + comm[4] + comm[2] + comm[8]
    # the non-torch growth inside the budget follows the largest group
    assert ep.fixed_bytes().non_torch == reg.value("cost_model_primitives.non_torch_in_budget")[2]
    assert kernel("llama-3.1-8b").fixed_bytes().non_torch == reg.value("cost_model_primitives.non_torch_in_budget")[1]


def test_sampler_wins_for_a_small_model_with_a_large_vocabulary():
    k = kernel("gemma-3-27b", tensor_parallel_size=8, max_num_seqs=1024, max_num_batched_tokens=8192)
    a = k.activation()
    reg = shipped()
    per_logit = Fraction(str(reg.value("cost_model_memory.sampler_bytes_per_logit")))
    per_hidden = Fraction(str(reg.value("cost_model_memory.sampler_hidden_bytes")))
    assert a.sampler == int(1024 * 262208 * per_logit + 8192 * 5376 * per_hidden) and a.sampler > a.forward
    assert k.fixed_bytes().activation_peak == a.sampler


def test_gemma3_window_groups():
    k = kernel("gemma-3-27b", tensor_parallel_size=8)
    kinds = [g.vllm_class for g in k.layout().groups]
    # 62 layers, every 6th global: 10 full, 52 sliding; group size 10 -> 1 full group, 6 window groups
    assert kinds.count("FullAttentionSpec") == 1 and kinds.count("SlidingWindowSpec") == 6
    assert k.layout().padding_layers == 60 - 52


def test_mtp_layer_only_while_speculating():
    plain = kernel("dsv3", tensor_parallel_size=8)
    mtp = kernel("dsv3", tensor_parallel_size=8, num_speculative_tokens=1)
    assert mtp.engine.speculative_method == "mtp"
    assert mtp.cache_bytes_per_token() == plain.cache_bytes_per_token() * 62 // 61
    assert mtp.fixed_bytes().weights > plain.fixed_bytes().weights


def test_sparse_mla_records():
    k = kernel("dsv3.2", tensor_parallel_size=8, kv_cache_dtype="fp8")
    assert k.cache_bytes_per_token() == 61 * (656 + 132)
    assert len(k.layout().groups) == 1  # one group of summed pages (UniformTypeKVCacheSpecs)


def test_dcp_beyond_tp_over_kv_heads_and_budget_below_seqs_are_refused():
    from pricing.errors import InputError

    with pytest.raises(InputError, match="at most 1"):
        kernel("llama-3.1-70b", tensor_parallel_size=8, decode_context_parallel_size=2)
    with pytest.raises(InputError, match="max_num_seqs"):
        kernel("llama-3.1-8b", max_num_batched_tokens=64, max_num_seqs=128)


def test_dcp_is_refused_for_models_with_sliding_windows():
    from pricing.errors import InputError

    for model in ("gpt-oss-20b", "dsv4.1-flash"):
        with pytest.raises(InputError, match="decode_context_parallel_size"):
            kernel(model, tensor_parallel_size=2, decode_context_parallel_size=2)


def test_largest_such_bisects_a_monotone_predicate():
    from pricing.units import largest_such

    assert largest_such(lambda n: n * n <= 1000, 1, 100) == 31
    assert largest_such(lambda n: True, 1, 7) == 7
    assert largest_such(lambda n: False, 1, 7) == 0  # holds nowhere: lo - 1
    assert largest_such(lambda n: n <= 5, 3, 2) == 2  # an empty range


@pytest.mark.parametrize(("name", "flags"), [
    ("dsv4.1-flash", dict(tensor_parallel_size=4, enable_expert_parallel=True)),
    ("dsv3", dict(tensor_parallel_size=8)),
    ("llama-3.1-70b", dict(tensor_parallel_size=4)),
    ("gpt-oss-120b", dict(tensor_parallel_size=2)),
])
def test_weights_sized_per_distinct_tensor_equal_the_sum_over_every_node(name, flags):
    """weight_bytes takes identical tensors once with their count (weights.tensor_groups);
    node_weight_bytes sizes every tensor of every node: the totals must agree to the byte."""
    from pricing.kernel.weights import node_weight_bytes

    k = kernel(name, **flags)
    per_node = node_weight_bytes(k.graph, k.engine, k.chip.generation, k.reg)
    assert k.weight_bytes().weights == sum(per_node.values())


def test_tensor_groups_are_dropped_when_the_graph_gains_a_node():
    from dataclasses import replace

    from pricing.graph.nodes import Tensor
    from pricing.kernel.weights import tensor_groups

    base = kernel("llama-3.1-8b").graph
    graph = replace(base, g=base.g.copy(), extras=dict(base.extras))  # the shared graph stays as it is
    groups, _ = tensor_groups(graph, None)
    first = groups[0][0]
    graph.add("extra", "dense", tensors=[Tensor("extra.w", first.rows, first.cols, first.fmt, first.split)])
    again, _ = tensor_groups(graph, None)
    assert sum(n for _, n in again) == sum(n for _, n in groups) + 1


@pytest.mark.parametrize("card, accepted", [
    # 64 attention heads, 8 KV heads: tp divides 64; below 8 it divides the KV heads, above it is a multiple
    ("llama-3.1-70b", {1, 2, 4, 8, 16, 32, 64}),
    # 28 heads, 4 KV heads: of the divisors of 28, 7 and 14 are neither divisors nor multiples of 4
    ("qwen2.5-7b", {1, 2, 4, 28}),
    # MLA: one latent KV shared by every head, so only the 128 attention heads constrain tp
    ("dsv3", {1, 2, 4, 8, 16, 32, 64, 128}),
])
def test_tensor_parallel_sizes_vllm_accepts(card, accepted):
    from pricing.kernel.deployment import allows_tensor_parallel

    model = load_model(card)
    assert {tp for tp in range(1, 129) if allows_tensor_parallel(model, tp)} == accepted


def test_a_refused_tensor_parallel_size_names_the_field_not_a_flag():
    """Asked of the search, a tp the heads refuse is bad input on the field; a deployment's kernel meets
    it as vLLM does, a refusal of its release's load checks (pricing/rules/load_checks.py)."""
    from pricing.errors import InputError
    from pricing.graph import load_model
    from pricing.kernel import Startup
    from pricing.kernel.deployment import check_tensor_parallel

    with pytest.raises(InputError) as err:
        check_tensor_parallel(load_model("llama-3.1-70b"), 3)
    assert (err.value.field, err.value.problem) == ("tensor_parallel_size",
                                                    "3 does not divide the 64 attention heads of llama-3.1-70b")
    with pytest.raises(InputError, match="^tensor_parallel_size: 7 is not a multiple of the 4 KV heads"):
        check_tensor_parallel(load_model("qwen2.5-7b"), 7)
    kernel = Kernel.of(load_model("llama-3.1-70b"), Deployment(tensor_parallel_size=3), get_chip("h200"))
    assert Startup(kernel).failed_check() == "load"

