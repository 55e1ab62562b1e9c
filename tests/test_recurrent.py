"""Recurrent state in hybrid models (issue 4): every figure derived by hand from the published
config in ../shared/models, with vLLM 0.33's laws (vllm-0.33-memory.md §4), and the kernel agrees.

Laws used by hand below:
  state page (one request, one layer, one rank) = conv_dim/tp × (kernel − 1 + K) × 2 + heads/tp × d × n × ssm bytes
  attention block = align × cdiv(state page, align × attention bytes per token)   (modes none, align)
                  = c × cdiv(cdiv(state page, a1), c), c = lcm(chunk, align)      (mode all)
  groups: every layer of a kind in groups of the attention layer count; pool block = group size × page
  pages a request holds per state group: none 1 + K, align 2 + K (vLLM 0.33's capacity line, as its
  oracle prints it: the prefill checkpoint page is not counted), all cdiv(T, block) + K
"""

from __future__ import annotations

import json
from math import lcm

import pytest
from click.testing import CliRunner

from planner.cli import cli
from pricing.chips import get_chip
from pricing.graph import load_model
from pricing.kernel import Deployment, Kernel
from pricing.specs import FullAttentionSpec, MambaSpec
from pricing.units import cdiv

H200 = get_chip("h200")
FILES = {
    "qwen3-next-80b-a3b": "Qwen--Qwen3-Next-80B-A3B-Instruct.json",
    "qwen3.5-35b-a3b": "Qwen--Qwen3.5-35B-A3B.json",
    "qwen3.5-397b-a17b": "Qwen--Qwen3.5-397B-A17B.json",
    "nemotron-3-nano-30b-a3b": "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json",
    "nemotron-h-56b": "nvidia--Nemotron-H-56B-Base-8K.json",
    "kimi-linear-48b-a3b": "moonshotai--Kimi-Linear-48B-A3B-Instruct.json",
}
BF16 = 2
FP32 = 4


def config(shared_models, card: str) -> dict:
    raw = json.loads((shared_models / FILES[card]).read_text())
    return raw.get("text_config", raw)


def hand(c: dict, tp: int, k: int = 0) -> dict:
    """The hybrid's facts on one rank, derived from the config by hand."""
    if c["model_type"] == "nemotron_h":
        heads, d, n, groups = c["mamba_num_heads"], c["mamba_head_dim"], c["ssm_state_size"], c["n_groups"]
        groups += tp - groups if groups % tp else 0
        conv_dim = heads * d + 2 * groups * n
        # vLLM 0.33's NemotronH config hook makes an unset mamba_ssm_cache_dtype float32
        ssm = BF16 if c.get("mamba_ssm_cache_dtype") in ("bfloat16", "float16") else FP32
        state = conv_dim // tp * (c["conv_kernel"] - 1 + k) * BF16 + heads // tp * d * n * ssm
        pattern = c["hybrid_override_pattern"]
        n_state, n_attn = pattern.count("M"), pattern.count("*")
        hd = c.get("head_dim") or c["attention_head_dim"]
        a1 = max(1, c["num_key_value_heads"] // tp) * hd * 2 * BF16
        align, checkpoint, chunk = 16, 1, c["chunk_size"]
    elif c["model_type"] == "kimi_linear":
        lin = c["linear_attn_config"]
        heads, d = lin["num_heads"], lin["head_dim"]
        state = 3 * heads * d // tp * (lin["short_conv_kernel_size"] - 1 + k) * BF16 + heads // tp * d * d * FP32
        n_state, n_attn = len(lin["kda_layers"]), len(lin["full_attn_layers"])
        a1 = (c["kv_lora_rank"] + c["qk_rope_head_dim"]) * BF16  # one latent head, never divided by tp
        align, checkpoint, chunk = 128, 0, 2048  # FlashMLA's 64 raised to 128 for MLA; KDA exports no checkpoint
    else:  # gated delta networks
        nk, nv, hk, hv = (c["linear_num_key_heads"], c["linear_num_value_heads"], c["linear_key_head_dim"],
                          c["linear_value_head_dim"])
        ssm = FP32 if c.get("mamba_ssm_dtype") == "float32" else BF16
        state = (2 * hk * nk + hv * nv) // tp * (c["linear_conv_kernel_dim"] - 1 + k) * BF16 + nv // tp * hv * hk * ssm
        n_attn = c["num_hidden_layers"] // c["full_attention_interval"]
        n_state = c["num_hidden_layers"] - n_attn
        a1 = max(1, c["num_key_value_heads"] // tp) * c["head_dim"] * 2 * BF16
        align, checkpoint, chunk = 16, 1, 2048
    group = n_attn if n_state >= 1.5 * n_attn else max(n_attn, n_state)
    return {"state": state, "a1": a1, "block": align * cdiv(state, align * a1), "n_attn": n_attn,
            "state_groups": cdiv(n_state, group), "group": group, "checkpoint": checkpoint,
            "block_all": lcm(chunk, align) * cdiv(cdiv(state, a1), lcm(chunk, align)), "n_state": n_state}


def kernel(card: str, **flags) -> Kernel:
    return Kernel.of(load_model(card), Deployment(**flags), H200)


def lengths(card: str) -> tuple[int, ...]:
    # Nemotron-H-56B-Base-8K serves at most 8,192 positions: 131,072 tokens is no request of it
    return (4096, 8192) if card == "nemotron-h-56b" else (4096, 131_072)


# the figures the hand derivation gives, written out: state bytes at tp 1 / tp 2, attention block
EXPECTED = {
    "qwen3-next-80b-a3b": (1_097_728, 548_864, 544, 544),  # the Appendix's 544 tokens
    "qwen3.5-35b-a3b": (2_146_304, 1_073_152, 1056, 1056),  # fp32 temporal state (mamba_ssm_dtype)
    "qwen3.5-397b-a17b": (4_268_032, 2_134_016, 2096, 2096),
    "nemotron-3-nano-30b-a3b": (2_134_016, 1_067_008, 2096, 2096),
    "nemotron-h-56b": (16_900_096, 8_450_048, 4128, 4128),  # fp32 SSM state (vLLM's NemotronH hook)
    "kimi-linear-48b-a3b": (2_170_880, 1_085_440, 1920, 1024),  # the MLA page does not shrink with tp
}


@pytest.mark.parametrize("card", sorted(FILES))
def test_hand_figures_are_the_ones_written_out(shared_models, card):
    c = config(shared_models, card)
    s1, s2, b1, b2 = EXPECTED[card]
    assert (hand(c, 1)["state"], hand(c, 2)["state"], hand(c, 1)["block"], hand(c, 2)["block"]) == (s1, s2, b1, b2)


@pytest.mark.parametrize("tp", [1, 2])
@pytest.mark.parametrize("card", sorted(FILES))
def test_state_bytes_and_attention_block(shared_models, card, tp):
    h = hand(config(shared_models, card), tp)
    k = kernel(card, tensor_parallel_size=tp)
    states = [s for s in k.specs() if isinstance(s, MambaSpec)]
    assert len(states) == h["n_state"]
    assert {s.raw_page_bytes for s in states} == {h["state"]}
    layout = k.layout()
    attention = [g for g in layout.groups if isinstance(g.spec, FullAttentionSpec)]
    assert [g.block_tokens for g in attention] == [h["block"]]
    # the state page is padded to the attention page; every group shares one pool block
    assert {s.page_bytes for g in layout.groups for s in g.members} == {h["block"] * h["a1"]}
    assert len(layout.groups) == 1 + h["state_groups"]
    assert layout.bytes_per_block == h["group"] * h["block"] * h["a1"]


@pytest.mark.parametrize("tp", [1, 2])
@pytest.mark.parametrize("card", sorted(FILES))
def test_bytes_a_request_holds_in_each_mode(shared_models, card, tp):
    h = hand(config(shared_models, card), tp)
    pool = h["group"] * h["block"] * h["a1"]
    pool_all = h["group"] * h["block_all"] * h["a1"]
    for tokens in lengths(card):
        none = kernel(card, tensor_parallel_size=tp, enable_prefix_caching=False)
        assert none.engine.mamba_cache_mode == "none"
        assert none.sequence_fixed_bytes() == h["state_groups"] * 1 * pool
        assert none.sequence_variable_bytes(tokens) == cdiv(tokens, h["block"]) * pool

        align = kernel(card, tensor_parallel_size=tp)  # prefix caching on (the default): align
        assert align.engine.mamba_cache_mode == "align"
        assert align.sequence_fixed_bytes() == h["state_groups"] * 2 * pool
        assert align.sequence_variable_bytes(tokens) == cdiv(tokens, h["block"]) * pool

        every = kernel(card, tensor_parallel_size=tp, mamba_cache_mode="all")
        assert every.sequence_fixed_bytes() == 0
        blocks = cdiv(tokens, h["block_all"])
        assert every.sequence_variable_bytes(tokens) == (1 + h["state_groups"]) * blocks * pool_all


def test_qwen3_next_at_tp2_written_out():
    """Qwen3-Next at tp 2, prefix caching on: 3 GDN groups × 2 pages of 12 layers × 544 tokens ×
    1,024 bytes; a 4,096-token request 8 attention blocks. The GDN groups come first (vLLM's order:
    layer 0 is a GDN layer)."""
    k = kernel("qwen3-next-80b-a3b", tensor_parallel_size=2)
    assert k.layout().bytes_per_block == 12 * 544 * 1024 == 6_684_672
    assert k.sequence_fixed_bytes() == 3 * 2 * 6_684_672 == 40_108_032
    assert k.sequence_variable_bytes(4096) == 53_477_376
    off = kernel("qwen3-next-80b-a3b", tensor_parallel_size=2, enable_prefix_caching=False)
    assert off.sequence_fixed_bytes() == 20_054_016
    assert [g.block_tokens for g in off.layout().groups] == [262_144] * 3 + [544]  # state block = max_model_len


def test_align_without_prefix_caching_resolves_to_none():
    """vLLM 0.33 resolves --mamba-cache-mode align to none when prefix caching is off
    (tests/golden/vllm-0.33/nemotron-3-nano-30b-a3b_h100_tp1_noprefix_align.json)."""
    k = kernel("nemotron-3-nano-30b-a3b", enable_prefix_caching=False, mamba_cache_mode="align")
    assert k.engine.mamba_cache_mode == "none"
    off = kernel("nemotron-3-nano-30b-a3b", enable_prefix_caching=False)
    assert k.sequence_fixed_bytes() == off.sequence_fixed_bytes()


def test_speculative_tokens_add_their_pages(shared_models):
    """Qwen3.5-35B with one MTP token: the conv state holds one more position, each GDN group one
    more page, and the MTP layer's attention joins the attention bucket (11 layers a group)."""
    c = config(shared_models, "qwen3.5-35b-a3b")
    h = hand(c, 1, k=1)
    assert h["state"] == 2_146_304 + 8192 * 1 * BF16
    k = kernel("qwen3.5-35b-a3b", num_speculative_tokens=1)
    assert k.engine.speculative_method == "mtp"
    layout = k.layout()
    assert {s.raw_page_bytes for s in k.specs() if isinstance(s, MambaSpec)} == {h["state"]}
    block = 16 * cdiv(h["state"], 16 * h["a1"])
    assert [len(g.members) for g in layout.groups] == [10, 10, 10, 11]
    pool = 11 * block * h["a1"]
    assert layout.bytes_per_block == pool
    assert k.sequence_fixed_bytes() == 3 * (2 + 1) * pool
    none = kernel("qwen3.5-35b-a3b", num_speculative_tokens=1, enable_prefix_caching=False)
    assert none.sequence_fixed_bytes() == 3 * (1 + 1) * pool


def test_a_model_without_recurrent_layers_holds_nothing_fixed():
    k = kernel("qwen3-8b")
    assert k.sequence_fixed_bytes() == 0
    assert not [s for s in k.specs() if isinstance(s, MambaSpec)]


def test_plan_memory_shows_the_recurrent_state_apart():
    result = CliRunner().invoke(cli, ["memory", "--model", "qwen3-next-80b-a3b", "--chip", "h200", "-tp", "2"])
    assert result.exit_code == 0, result.output
    assert "recurrent state (gated_delta, mode align" in result.output
    assert "36 layers × 548,864 bytes" in result.output
    report = json.loads(CliRunner().invoke(cli, ["memory", "--model", "qwen3-next-80b-a3b", "--chip", "h200",
                                                 "-tp", "2", "--json"]).output)
    r = report["recurrent_state"]
    assert (r["mode"], r["layers"], r["state_bytes"], r["pages"], r["attention_block_tokens"]) == (
        "align", 36, 548_864, 2, 544)
    assert r["held_bytes"] == report["sequence"]["fixed"] == 40_108_032
    plain = json.loads(CliRunner().invoke(cli, ["memory", "--model", "qwen3-8b", "--chip", "h200", "--json"]).output)
    assert plain["recurrent_state"] is None


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_kimi_linear_fused_kda_projection_holds_the_checkpoints_bytes(tp):
    """Kimi-Linear's in_proj_qkvgfab (vLLM 0.33 kimi_gdn_linear_attn.py) holds the checkpoint's q, k, v
    (32 heads × 128 = 4,096 rows each), b (32) and f_a (128) projections of 2,304 inputs: a rank holds q, k, v
    and b split tp ways and f_a whole (ReplicatedLinear before the fusion, the merged layer's replicated shard
    after), in BF16 2 bytes each; the checkpoint stores the five whole, 12,448 rows."""
    from pricing.config.quantization import Mags, Placement
    from pricing.kernel.weights import shard
    from pricing.registry import shipped

    g = load_model("kimi-linear-48b-a3b")
    fused = [t for _, d in g.nodes() for t in d["tensors"] if t.name.endswith(".in_proj_qkvgfab")]
    assert len(fused) == 20  # one per KDA layer (kda_layers)
    t = fused[0]
    rows, cols = shard(t, tp, 0, 64)
    assert (rows, cols) == (3 * 4096 // tp + 32 // tp + 128, 2304)
    mags = Mags(shipped())
    stored = t.fmt.params(Placement(t.rows, t.cols, t.cols, t.parts, g.dtype, "sm90", False, stored=True), mags)
    assert sum(p.nbytes(mags.dtype_bytes) for p in stored) == (3 * 4096 + 32 + 128) * 2304 * 2
