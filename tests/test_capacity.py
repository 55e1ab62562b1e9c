"""What a planner counts on (pricing/kernel/capacity.py): the requests at max_model_len one rank's
pool holds, in whole blocks, the null block held back, 0 when vLLM would not start."""

from pricing.chips import get_chip
from pricing.graph import load_model
from pricing.kernel import Capacity, Deployment, Kernel


def test_requests_held_leave_the_null_block_out():
    """vLLM's block pool keeps block 0 as the null block (block_pool.py: null_block = free queue's
    first, never handed to a request): a pool of exactly n requests' blocks holds n − 1 of them.
    Llama-3.1-8B at 8,192 tokens: 512 blocks of 16 tokens per request, each block 32 layers ×
    16 tokens × 8 KV heads × 128 × 2 (K, V) × 2 bytes = 2 MiB."""
    block, per_request = 32 * 16 * 8 * 128 * 2 * 2, 8192 // 16
    assert block == 2 << 20
    d = Deployment(max_model_len=8192, max_num_seqs=64, kv_cache_memory_bytes=3 * per_request * block)
    k = Kernel.of(load_model("llama-3.1-8b"), d, get_chip("h200"))
    assert (k.layout().bytes_per_block, k.blocks_per_request(), k.instance.num_blocks()) == (block, per_request,
                                                                                      3 * per_request)
    assert Capacity(k).requests_held() == 2
    one_more = Deployment(**{**d.model_dump(), "kv_cache_memory_bytes": (3 * per_request + 1) * block})
    assert Capacity(Kernel.of(load_model("llama-3.1-8b"), one_more, get_chip("h200"))).requests_held() == 3


# -- the tensor-parallel rule (vllm/config/model.py verify_with_parallel_config; QKVParallelLinear) --
