"""The rotary embeddings' cos/sin caches (vLLM rotary_embedding/): rows per rope type, the rotary
width, the dtype, one buffer per distinct rope configuration, all derived here from the published
configs and vLLM's classes, never read from the program."""

import pytest

from pricing.config import ModelSource, decoder_config
from pricing.graph import build_graph
from pricing.kernel.weights import buffer_bytes, rotary_caches
from pricing.registry import shipped
from tests.helpers import kernel

BF16, FP32 = 2, 4


def cache_bytes(name: str, chip: str = "h100", **flags) -> int:
    k = kernel(name, chip, **flags)
    return buffer_bytes(k.graph, k.engine, k.reg)


@pytest.mark.parametrize(("name", "expected"), [
    # llama3 rope: max_position rows (llama3_rope.py scales inv_freq only), head_dim 128
    ("llama-3.1-8b", 131072 * 128 * BF16),
    # default rope over 40,960 positions, head_dim 128
    ("qwen3-8b", 40960 * 128 * BF16),
    ("mixtral-8x7b", 32768 * 128 * BF16),
    # gpt_oss.py passes dtype=torch.float32; YaRN: original 4,096 × factor 32 rows, head_dim 64
    ("gpt-oss-20b", 4096 * 32 * 64 * FP32),
    # DeepSeek YaRN: original 4,096 × factor 40 rows of qk_rope_head_dim 64
    ("dsv3", 4096 * 40 * 64 * BF16),
    # V3.2: the attention's rope (GPT-J style) and the indexer's own (NeoX style): two caches
    ("dsv3.2", 2 * 4096 * 40 * 64 * BF16),
    # GLM-5 interleaves the indexer's rope, so get_rope returns the attention's instance: one cache
    ("glm-5", 202752 * 64 * BF16),
    # Qwen3-Next: partial_rotary_factor 0.25 of head_dim 256
    ("qwen3-next-80b-a3b", 262144 * 64 * BF16),
    # Qwen3.5: mrope over 262,144 positions, partial_rotary_factor 0.25 of head_dim 256
    ("qwen3.5-35b-a3b", 262144 * 64 * BF16),
    # Gemma 3: global layers linear ×8 (1,048,576 rows), sliding layers unscaled, head_dim 128
    ("gemma-3-27b", (131072 * 8 + 131072) * 128 * BF16),
    # NoPE attention: Nemotron-H and Kimi-Linear build no rotary embedding
    ("nemotron-h-56b", 0),
    ("kimi-linear-48b-a3b", 0),
])
def test_rotary_cache_bytes_by_hand(name, expected):
    assert cache_bytes(name) == expected


def test_deepseek_v4_keeps_two_fp32_caches_over_the_whole_window():
    # plain (window-only layers) and YaRN (compressed: 65,536 × 16 rows), rope dim 64, fp32
    assert cache_bytes("dsv4-flash", "b200", tensor_parallel_size=4) == 2 * 1048576 * 64 * FP32


def test_the_cache_is_whole_on_every_tensor_parallel_rank():
    assert cache_bytes("llama-3.1-70b", tensor_parallel_size=8) == cache_bytes("llama-3.1-70b") == 131072 * 128 * 2


def test_a_stage_holds_the_caches_its_layers_use():
    """gemma-3 at pp 12: 62 layers split 5 or 6 a stage; a stage without a global layer (every
    6th, layers 5, 11, ...) holds only the sliding layers' 32 MiB cache."""
    k = kernel("gemma-3-27b", "h100", pipeline_parallel_size=12)
    held = []
    for stage in k.instance.ranks:
        layers = range(stage.stage.first_layer, stage.stage.end_layer)
        has_global = any((i + 1) % 6 == 0 for i in layers)
        held.append((131072 * 8 * has_global + 131072) * 128 * BF16)
        assert buffer_bytes(stage.graph, stage.engine, stage.reg) == held[-1]
    assert 131072 * 128 * BF16 in held and (131072 * 9) * 128 * BF16 in held


def test_the_dtype_rule_is_sourced_and_said():
    rule = shipped()["rotary.cache_dtype"]
    assert rule.value["gpt_oss"] == "fp32" and rule.value["default"] == "model"
    said = kernel("gpt-oss-20b", "h100").provenance()
    assert "rotary.cache_dtype" in {p.name for p in said}
    assert any("rotary cos/sin caches" in str(p.value) for p in said)


def test_the_kernels_registry_decides_the_dtype():
    """An override of rotary.cache_dtype, which provenance lists, sizes the buffer: the graph (built
    once per process) states the rope configuration only, the kernel's registry its dtype."""
    base = shipped()
    rule = base["rotary.cache_dtype"].value
    fp32_llama = base.with_overrides({"rotary.cache_dtype": {**rule, "llama": "fp32"}})
    k = kernel("llama-3.1-8b", "h100", registry=fp32_llama)
    assert buffer_bytes(k.graph, k.engine, k.reg) == 131072 * 128 * FP32
    said = {p.name: p for p in k.provenance()}
    assert said["rotary.cache_dtype"].value["llama"] == "fp32"
    # the weights carry the wider buffer: 2 more bytes for each of 131,072 × 128 elements
    assert k.fixed_bytes().weights - kernel("llama-3.1-8b", "h100").fixed_bytes().weights == 131072 * 128 * 2
    bf16_gpt_oss = base.with_overrides({"rotary.cache_dtype": {**rule, "gpt_oss": "model"}})
    k = kernel("gpt-oss-20b", "h100", registry=bf16_gpt_oss)
    assert buffer_bytes(k.graph, k.engine, k.reg) == 4096 * 32 * 64 * BF16
    assert cache_bytes("llama-3.1-8b") == 131072 * 128 * BF16  # the shipped figure, the same graph


def test_an_unknown_rope_type_is_said_not_silently_sized():
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1024,
           "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "longrope", "short_factor": [1.0],
                                                             "long_factor": [2.0]}}
    g = build_graph(ModelSource("tiny", "tiny", decoder_config(cfg), None, "test config"))
    assert rotary_caches(g, None) == ()
    assert any("'longrope' not sized" in c for c in g.conventions)


def test_rope_parameters_per_layer_type_are_read():
    """transformers 5 writes Gemma 3's ropes per layer type: the global layers' linear ×8 is still found."""
    cfg = {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 256,
           "intermediate_size": 512, "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2,
           "head_dim": 64, "vocab_size": 1024, "max_position_embeddings": 4096, "sliding_window": 512,
           "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                               "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}
    g = build_graph(ModelSource("tiny", "tiny", decoder_config(cfg), None, "test config"))
    assert sorted(c.rows for c in rotary_caches(g, None)) == [4096, 4096 * 8]
