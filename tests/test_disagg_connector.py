"""The KV connector's memory and a request's hand-over time, derived by hand on small models
(vLLM 0.33 NixlConnector: nixl/base_worker.py, nixl/tp_mapping.py; registry kv_transfer.yaml)."""

from __future__ import annotations

import pytest

from pricing.chips import get_chip
from pricing.errors import InputError
from pricing.graph import load_model
from pricing.kernel import Deployment, Kernel
from pricing.step.transfer import handover, link_between

LLAMA_8B_TOKEN = 2 * 8 * 128 * 2 * 32  # K and V, 8 KV heads of 128, bf16, 32 layers: 131,072 bytes
LLAMA_8B_BLOCK = 16 * LLAMA_8B_TOKEN  # vLLM's 16-token block: 2 MiB over the 32 layers
DSV3_TOKEN = (512 + 64) * 2 * 61  # the MLA latent and rope key, bf16, 61 layers: 70,272 bytes
NIC_H100 = 400e9 / 8 * 0.85  # one ConnectX-7 per GPU at the registry's achieved fraction


def _kernel(model: str, chip: str, **flags) -> Kernel:
    return Kernel.of(load_model(model), Deployment(max_model_len=8192, **flags), get_chip(chip))


def test_connector_adds_nothing_on_the_gpu_and_stages_the_pool_on_the_host_only_with_a_cpu_buffer():
    k = _kernel("llama-3.1-8b", "h100", kv_role="kv_consumer")
    assert k.layout().bytes_per_block == LLAMA_8B_BLOCK
    mem = k.connector()
    assert mem.gpu_bytes == 0 and mem.host_bytes == 0
    assert mem.registered_bytes == k.rank_blocks() * LLAMA_8B_BLOCK
    host = _kernel("llama-3.1-8b", "h100", kv_role="kv_consumer", kv_buffer_device="cpu").connector()
    assert host.host_bytes == k.rank_blocks() * 32 * (16 * 2 * 8 * 128 * 2)  # one tensor per layer
    assert _kernel("llama-3.1-8b", "h100").connector() is None  # no kv_role, no connector
    names = {p.name for p in k.provenance()}
    assert "kv_transfer.nixl.gpu_bytes_beyond_pool" in names


def test_a_connector_leaves_the_pool_and_the_requests_held_as_they_are():
    plain, role = _kernel("llama-3.1-8b", "h100"), _kernel("llama-3.1-8b", "h100", kv_role="kv_producer")
    from pricing.kernel.capacity import Capacity

    assert role.kv_pool() == plain.kv_pool() and Capacity(role).requests_held() == Capacity(plain).requests_held()


def test_request_bytes_are_whole_blocks_of_the_prompt():
    assert _kernel("llama-3.1-8b", "h100").request_kv_bytes(1000) == 63 * LLAMA_8B_BLOCK  # ceil(1000 / 16)
    assert _kernel("llama-3.1-8b", "h100", tensor_parallel_size=2).request_kv_bytes(1000) == 63 * LLAMA_8B_BLOCK // 2
    # the latent cache is whole on every rank: 64-token blocks on Hopper, 16 of them for 1,000 tokens
    assert _kernel("dsv3", "h200", tensor_parallel_size=8).request_kv_bytes(1000) == 16 * 64 * DSV3_TOKEN


def test_handover_time_over_the_nic_by_hand():
    link = link_between(get_chip("h100"), get_chip("h100"))
    assert link.bandwidth == pytest.approx(NIC_H100)
    one = handover(63 * LLAMA_8B_BLOCK, prefill_tp=1, decode_tp=1, latent=False, kv_heads=8, link=link)
    assert one.seconds == pytest.approx(63 * LLAMA_8B_BLOCK / NIC_H100)  # 3.11 ms
    assert one.seconds * 1000 == pytest.approx(3.1087, abs=1e-4)
    # decode tp 2 reads half each, but both halves come from the one prefill rank: its NIC binds
    split = handover(63 * LLAMA_8B_BLOCK // 2, prefill_tp=1, decode_tp=2, latent=False, kv_heads=8, link=link)
    assert split.prefill_rank_bytes == 63 * LLAMA_8B_BLOCK and split.seconds == pytest.approx(one.seconds)
    # MLA: 4 decode ranks each read a full copy from 2 prefill ranks, 2 copies each
    mla = handover(16 * 64 * DSV3_TOKEN, prefill_tp=2, decode_tp=4, latent=True, kv_heads=1, link=link)
    assert mla.prefill_rank_bytes == 2 * 16 * 64 * DSV3_TOKEN
    assert mla.seconds == pytest.approx(2 * 16 * 64 * DSV3_TOKEN / NIC_H100)
    assert mla.prefill_rate(dp=1) == pytest.approx(NIC_H100 / (2 * 16 * 64 * DSV3_TOKEN))
    # 2 decode ranks read from ranks 0 and 2 of a tp-4 prefill: one copy each, two prefill ranks idle
    wide = handover(16 * 64 * DSV3_TOKEN, prefill_tp=4, decode_tp=2, latent=True, kv_heads=1, link=link)
    assert wide.prefill_rank_bytes == 16 * 64 * DSV3_TOKEN


def test_nvl72_pools_hand_over_on_nvlink_and_mixed_chips_on_the_slower_nic():
    gb = link_between(get_chip("gb200"), get_chip("gb200"))
    assert gb.name.startswith("NVLink") and gb.peak == 900e9
    mixed = link_between(get_chip("b300"), get_chip("h200"))
    assert mixed.peak == 400e9 / 8
    assert "no scale-out network" in link_between(get_chip("l4"), get_chip("h100"))


def test_vllm_refuses_what_the_connector_cannot_serve():
    with pytest.raises(InputError, match="must be 1 or the transfer"):
        _kernel("dsv3", "h200", tensor_parallel_size=8, decode_context_parallel_size=2, kv_role="kv_consumer")
    with pytest.raises(InputError, match="pipeline_parallel_size > 1"):
        _kernel("llama-3.1-8b", "h100", pipeline_parallel_size=2, kv_role="kv_consumer")
    _kernel("dsv3", "h200", tensor_parallel_size=8, decode_context_parallel_size=8, kv_role="kv_consumer")


def test_a_prefill_instance_runs_pipeline_stages_only_on_full_attention_caches():
    """vLLM 0.33 nixl/base_worker.py: a kv_producer with pp > 1 is refused when any layer's cache is
    not full attention (hybrid layouts, HMA); MLA is full attention (MLAAttentionSpec subclasses
    FullAttentionSpec)."""
    from pricing.kernel.connector import pipeline_refusal

    assert pipeline_refusal(_kernel("llama-3.1-8b", "h100", pipeline_parallel_size=2, kv_role="kv_producer")) is None
    assert pipeline_refusal(_kernel("dsv3", "h200", tensor_parallel_size=8, pipeline_parallel_size=2,
                                    kv_role="kv_producer")) is None
    for model in ("gpt-oss-120b", "dsv4-flash", "qwen3-next-80b-a3b"):  # sliding windows; Mamba state
        k = _kernel(model, "h200", tensor_parallel_size=8, pipeline_parallel_size=2, kv_role="kv_producer")
        assert "does not support pipeline_parallel_size > 1 with hybrid KV cache layouts" in pipeline_refusal(k)
    assert pipeline_refusal(_kernel("gpt-oss-120b", "h200", tensor_parallel_size=8, kv_role="kv_producer")) is None


def test_pipeline_stages_each_send_their_own_layers():
    """Llama-3.1-8B's 32 layers in two stages of 16: each stage's rank sends half of a request's
    blocks (1,000 tokens: 63 blocks of 2 MiB over the 32 layers), so over the NIC the decode rank's
    whole read binds: 63 × 2 MiB / 42.5 GB/s = 3.11 ms."""
    from fractions import Fraction

    link = link_between(get_chip("h100"), get_chip("h100"))
    staged = handover(63 * LLAMA_8B_BLOCK, prefill_tp=1, decode_tp=1, latent=False, kv_heads=8, link=link,
                      stage_share=Fraction(16, 32))
    assert staged.prefill_rank_bytes == 63 * LLAMA_8B_BLOCK // 2
    assert staged.seconds == pytest.approx(63 * LLAMA_8B_BLOCK / NIC_H100)
    assert staged.prefill_rate(dp=1) == pytest.approx(2 * NIC_H100 / (63 * LLAMA_8B_BLOCK))
