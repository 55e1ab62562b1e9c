"""Properties of the kernel that hold for every deployment (hypothesis)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from pricing.kernel import Capacity, Startup
from tests.helpers import kernel

MODELS = st.sampled_from([
    ("llama-3.1-8b", {"tensor_parallel_size": 1}),
    ("gpt-oss-20b", {"tensor_parallel_size": 1}),
    ("qwen3-30b-a3b", {"tensor_parallel_size": 2}),
    ("dsv3", {"tensor_parallel_size": 8}),
    ("dsv4.1-flash", {"tensor_parallel_size": 8, "kv_cache_dtype": "fp8"}),
    ("gemma-3-27b", {"tensor_parallel_size": 4}),
])
CHIPS = st.sampled_from(["h200", "b200", "h100", "mi300x"])
FAST = settings(max_examples=40, deadline=None)


@FAST
@given(MODELS, CHIPS, st.integers(0, 2_000_000), st.integers(0, 2_000_000))
def test_more_tokens_never_cost_fewer_bytes(model, chip, a, b):
    name, flags = model
    k = kernel(name, chip, **flags)
    lo, hi = sorted((a, b))
    assert k.sequence_variable_bytes(lo) <= k.sequence_variable_bytes(hi)


@FAST
@given(MODELS, CHIPS, st.integers(50, 99), st.integers(50, 99), st.sampled_from([2048, 8192, 16384]),
       st.sampled_from([4096, 32768, 131072]))
def test_more_memory_never_fits_fewer_requests(model, chip, u1, u2, tokens, max_len):
    from pricing.graph import load_model

    name, flags = model
    lo, hi = sorted((u1, u2))
    common = dict(flags, max_num_batched_tokens=tokens, max_model_len=min(max_len, load_model(name).max_position))
    small = kernel(name, chip, gpu_memory_utilization=lo / 100, **common)
    large = kernel(name, chip, gpu_memory_utilization=hi / 100, **common)
    if Startup(large).starts:  # a budget that does not fit the chip is refused whatever it could hold
        assert Capacity(small).requests_held() <= Capacity(large).requests_held()
    assert small.kv_pool() <= large.kv_pool()
    assert small.instance.kv_cache_tokens() <= large.instance.kv_cache_tokens()


@FAST
@given(MODELS, CHIPS, st.sampled_from([2048, 8192, 32768]), st.sampled_from([1, 64, 1024]), st.integers(0, 300_000))
def test_parts_sum_to_the_total_and_every_figure_is_a_non_negative_integer(model, chip, tokens, seqs, length):
    name, flags = model
    k = kernel(name, chip, max_num_batched_tokens=tokens, max_num_seqs=seqs, **flags)
    f = k.fixed_bytes()
    parts = (f.weights, f.activation_peak, f.cuda_graph, f.comm_buffers, f.eplb_redundant, f.non_torch)
    assert f.total == sum(parts)
    a = k.activation()
    assert f.activation_peak == max(a.forward, a.sampler) + a.model_buffers == max(a.forward, a.sampler) + sum(
        a.buffers.values())
    figures = parts + (f.total, k.pre_snapshot_bytes(), k.budget(), k.sequence_variable_bytes(length),
                       k.sequence_fixed_bytes(), k.sequence_admission_bytes(), k.instance.num_blocks(),
                       k.instance.kv_cache_tokens(),
                       Capacity(k).requests_held())
    for value in figures:
        assert isinstance(value, int) and value >= 0
    assert k.sequence_fixed_bytes() <= k.sequence_admission_bytes()


@FAST
@given(MODELS, st.integers(1, 1_048_576), st.integers(1, 1_048_576))
def test_a_longer_context_never_costs_fewer_bytes_per_request(model, a, b):
    name, flags = model
    from pricing.graph import load_model

    cap = min(131072, load_model(name).max_position)
    lo, hi = sorted((min(a, cap), min(b, cap)))
    short = kernel(name, "b200", max_model_len=lo, **flags)
    long = kernel(name, "b200", max_model_len=hi, **flags)
    assert short.request_bytes() <= long.request_bytes()
