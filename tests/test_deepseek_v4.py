"""The DeepSeek-V4 family's stated caches (issue: stated caches and the DeepSeek-V4 family).

Every expected figure is derived here by hand from the reference facts
(shared/reference/deepseek-v4-family.md): record bytes, page tokens, alignment, window 128.
"""

import json
import math

import pytest
from click.testing import CliRunner

from planner.cli import cli
from pricing.kernel import Capacity
from pricing.units import MB, GiB, cdiv, round_up
from tests.helpers import kernel

WINDOW = 128
B_FLAGS = dict(tensor_parallel_size=8, kv_cache_dtype="fp8", num_speculative_tokens=5, speculative_method="dspark",
               max_num_batched_tokens=8192)


def rings(k):
    """The groups of window rings (the layers' own `swa` caches)."""
    return [g for g in k.layout().groups if g.spec.name == "swa"]


def ring_groups(rings: int, per_block: int) -> int:
    return cdiv(rings, per_block)


# -- reference deployment B: DeepSeek-V4.1-Flash on H200 -------------------------------------------

@pytest.fixture(scope="module")
def b():
    return kernel("dsv4.1-flash", "h200", **B_FLAGS)


def test_b_bytes_per_token(b):
    # owners 2, 8, 14 (ratio 2) and 20 (ratio 1): 584-byte records, 132-byte indexer records
    by_hand = 3 * (584 / 2 + 132 / 2) + (584 + 132)
    assert by_hand == 1790
    assert b.cache_bytes_per_token() == 1790
    assert 512 * 40 == 20480  # one 512-wide record charged on each of 40 layers


def test_b_pool_block(b):
    block = 3 * round_up(32 * 584, 576) + round_up(64 * 584, 576) + 3 * round_up(32 * 132, 576) + round_up(
        64 * 132, 576)
    assert block == 116928
    assert b.layout().bytes_per_block == block
    assert b.sequence_variable_bytes(64) == block and b.sequence_variable_bytes(65) == 2 * block


def test_b_window_rings(b):
    ring_page = round_up(32 * 584, 576)
    assert ring_page == 19008 and 116928 // ring_page == 6
    windows = rings(b)
    assert sum(len(g.members) for g in windows) == 43  # 40 layers + 3 DSpark layers
    assert len(windows) == ring_groups(43, 6) == 8
    assert max(len(g.members) for g in windows) == 6


def test_b_steady_decode(b):
    steady_ring = cdiv(WINDOW - 1 + 1 + 5, 32) + 1
    assert steady_ring == 6
    blocks = 8 * steady_ring + 1  # plus the block of the 3 compressor-state rings
    assert blocks == 49
    assert b.sequence_fixed_bytes() == 49 * 116928
    assert f"{b.sequence_fixed_bytes() / MB:.2f}" == "5.73"
    own = 43 * 6 * 19008 + 3 * 8 * 4096
    assert b.own_page_bytes_steady() == own
    assert f"{own / MB:.2f}" == "5.00"


def test_b_admission(b):
    per_group = cdiv(WINDOW - 1 + 2 * 8192, 32) + 1
    assert per_group == 517
    windows = rings(b)
    assert all(b._blocks(g, b.engine.max_model_len, b.engine.max_in_flight_tokens) == 517 for g in windows)
    assert b.sequence_admission_bytes() == (8 * 517 + 1) * 116928
    assert f"{8 * 517 * 116928 / MB:.0f}" == "484"
    assert f"{b.sequence_admission_bytes() / MB:.0f}" == "484"


def test_b_workspaces():
    def buffers(max_len, tokens):
        return kernel("dsv4.1-flash", "h200", **{**B_FLAGS, "max_num_batched_tokens": tokens,
                                                 "max_model_len": max_len}).activation()

    big = buffers(1048576, 32768)
    # indexer lane at ratio 1: 40 × 1M entries of 132 bytes, larger than the attention's gather
    assert big.buffers["prefill gather (target lane)"] == 40 * 1048576 * 132
    assert big.buffers["drafter hidden states"] == 32768 * 4 * 5120 * 2
    assert big.buffers["candidate blocks"] == 32768 * 2048 * 4
    assert big.buffers["top-k indices"] == 2 * 32768 * 512 * 4
    # the spec's figures count the plain and YaRN rotary caches (fp32, rope dim 64, 1M rows each)
    # among these buffers; vLLM builds them at model init, so the kernel holds them with the weights
    rotary = 2 * 1048576 * 64 * 4
    assert "rotary caches (plain + YaRN)" not in big.buffers
    assert f"{(big.model_buffers + rotary) / GiB:.1f}" == "7.9"
    assert f"{(buffers(131072, 8192).model_buffers + rotary) / GiB:.1f}" == "2.1"


def test_b_rotary_caches_are_held_with_the_weights():
    """Window-only layers (and the drafter's) use the plain rope, compressed layers the YaRN one:
    two fp32 caches of 1,048,576 × 64, whole on every rank; a stage builds those its layers use."""
    k = kernel("dsv4.1-flash", "h200", **B_FLAGS)
    attn = [d for _, d in k.model.nodes(k.engine.speculative_method) if d["kind"] == "attention"]
    assert len({b for d in attn for b in d["buffers"]}) == 2
    rows = {b.rows for d in attn for b in d["buffers"]}
    assert rows == {1048576}  # plain over max_position; YaRN 65,536 × factor 16
    from pricing.kernel.weights import buffer_bytes
    assert buffer_bytes(k.graph, k.engine, k.reg) == 2 * 1048576 * 64 * 4


def test_engine_sizes_with_the_admission_figure(b):
    per_request = b.blocks_per_request()
    assert per_request == cdiv(b.engine.max_model_len, 64) + 8 * 517 + 1
    assert b.instance.kv_cache_tokens() == int(b.instance.num_blocks() / per_request * b.engine.max_model_len)


# -- speculation and scheduling switches ---------------------------------------------------------

def test_speculation_off_removes_the_drafter():
    off = kernel("dsv4.1-flash", "h200", tensor_parallel_size=8, kv_cache_dtype="fp8", max_num_batched_tokens=8192)
    windows = rings(off)
    assert sum(len(g.members) for g in windows) == 40 and len(windows) == ring_groups(40, 6) == 7
    steady_ring = cdiv(WINDOW - 1 + 1, 32) + 1  # one token in flight, no speculative tokens
    assert steady_ring == 5
    assert off.sequence_fixed_bytes() == (7 * steady_ring + 1) * 116928
    names = off.activation().buffers
    assert "prefill gather (DSpark lane)" not in names and "drafter hidden states" not in names
    assert names["top-k indices"] == 8192 * 512 * 4
    on = kernel("dsv4.1-flash", "h200", **B_FLAGS)
    assert on.fixed_bytes().weights > off.fixed_bytes().weights  # the DSpark stages' weights


def test_async_scheduling_off_halves_in_flight_tokens():
    k = kernel("dsv4.1-flash", "h200", async_scheduling=False, **B_FLAGS)
    per_group = cdiv(WINDOW - 1 + 8192, 32) + 1
    assert per_group == 261
    assert k.sequence_admission_bytes() == (8 * 261 + 1) * 116928


# -- V4-Flash and V4-Pro on H200 (stock vLLM geometry: 256-token blocks, 64-token rings) ------------

def v4_block(ratio4: int, ratio128: int) -> int:
    compressed4 = round_up(256 // 4 * 584, 576)
    indexer4 = round_up(256 // 4 * 132, 576)
    compressed128 = round_up(256 // 128 * 584, 576)
    assert (compressed4, indexer4, compressed128) == (37440, 8640, 1728)
    return ratio4 * (compressed4 + indexer4) + ratio128 * compressed128


def test_v4_flash_on_h200():
    k = kernel("dsv4-flash", "h200", tensor_parallel_size=8, max_num_batched_tokens=8192)
    block = v4_block(21, 20)
    assert block == 1002240
    assert k.layout().bytes_per_block == block
    assert k.cache_bytes_per_token() * 4 == 21 * (584 + 132) + 20 * 584 * 4 // 128
    ring = round_up(64 * 584, 576)
    windows = rings(k)
    assert sum(len(g.members) for g in windows) == 43 and len(windows) == cdiv(43, block // ring) == 2
    # vLLM 0.33 sizes the compressor states as sliding windows of 4- and 8-token blocks (vllm-oracle
    # README, DeepSeek-V4-Flash): C4 + indexer states (block 4, window 8), C128 states (block 8, window 128)
    state4 = 21 * round_up(4 * 8192, 576) + 21 * round_up(4 * 2048, 576)
    state8 = 20 * round_up(8 * 4096, 576)
    assert (state4, state8) == (870912, 656640)
    groups = k.layout().groups
    assert [g.layer_bytes for g in groups] == [22 * ring, 21 * ring, block, state4, state8]  # vLLM's order
    assert [g.block_tokens for g in groups] == [64, 64, 256, 4, 8]
    steady = cdiv(WINDOW - 1 + 1, 64) + 1
    admission = cdiv(WINDOW - 1 + 2 * 8192, 64) + 1
    assert (steady, admission) == (3, 259)
    steady4, admission4 = cdiv(8 - 1 + 1, 4) + 1, cdiv(8 - 1 + 2 * 8192, 4) + 1
    steady8, admission8 = cdiv(128 - 1 + 1, 8) + 1, cdiv(128 - 1 + 2 * 8192, 8) + 1
    assert (admission4, admission8) == (4099, 2065)
    assert k.sequence_fixed_bytes() == (2 * steady + steady4 + steady8) * block
    assert k.sequence_admission_bytes() == (2 * admission + admission4 + admission8) * block
    assert k.blocks_per_request() == 2 * 259 + 4096 + 4099 + 2065 == 10778  # at 1M tokens, as vLLM plans it


def test_v4_pro_on_h200():
    k = kernel("dsv4-pro", "h200", tensor_parallel_size=8, max_num_batched_tokens=8192)
    block = v4_block(30, 31)  # layers 0 and 1 ratio 128, then 4 / 128 alternating
    assert block == 1435968
    assert k.layout().bytes_per_block == block
    windows = rings(k)
    assert sum(len(g.members) for g in windows) == 61
    assert len(windows) == cdiv(61, block // round_up(64 * 584, 576))


# -- V4.1-Flash on B200 (SM100) -------------------------------------------------------------------

def test_v41_on_b200_with_mega_attention():
    k = kernel("dsv4.1-flash", "b200", tensor_parallel_size=8, max_num_batched_tokens=8192)
    # 64 heads / tp 8 = 8 local heads, 64 / 8 groups = 8 per group: mega attention, nvfp4 compressed records
    block = (3 * round_up(64 * 288, 512) + round_up(128 * 288, 512) + 3 * round_up(64 * 132, 512)
             + round_up(128 * 132, 512))
    assert block == 135168
    # the window rings' block stride is aligned to lcm(528, 288) = 3,168 (vLLM 0.33, V41.md): 136,224
    assert round_up(block, math.lcm(528, 288)) == 136224
    assert k.layout().bytes_per_block == 136224
    assert k.cache_bytes_per_token() == 3 * (288 / 2 + 132 / 2) + 288 + 132
    ring = round_up(32 * 528, 512)
    windows = rings(k)
    assert len(windows) == cdiv(40, block // ring) == 5
    assert len(k.layout().groups) == 7  # 5 window groups, the latent group, the compressor rings
    assert any("nvfp4_ds_mla" in str(p.value) for p in k.provenance())


def test_v41_on_b200_without_mega_attention():
    block = (3 * round_up(64 * 528, 512) + round_up(128 * 528, 512) + 3 * round_up(64 * 132, 512)
             + round_up(128 * 132, 512))
    assert block == 211968
    assert round_up(block, 528) == 212256  # block stride aligned to lcm(528, 528) (vLLM 0.33, V41.md)
    off = kernel("dsv4.1-flash", "b200", tensor_parallel_size=8, mega_attention=False)
    wide = kernel("dsv4.1-flash", "b200", tensor_parallel_size=16)  # 4 local heads: mega does not serve tp 16
    for k in (off, wide):
        assert k.layout().bytes_per_block == 212256
        assert k.cache_bytes_per_token() == 3 * (528 / 2 + 132 / 2) + 528 + 132
    reasons = " ".join(str(p.value) for p in wide.provenance())
    assert "does not serve this width" in reasons
    # under mega attention vLLM 0.33 serves an explicit --kv-cache-dtype fp8 as nvfp4_ds_mla too (V41.md)
    explicit = kernel("dsv4.1-flash", "b200", tensor_parallel_size=8, kv_cache_dtype="fp8")
    assert explicit.layout().bytes_per_block == 136224


def test_v41_rejects_formats_the_chip_cannot_serve():
    from pricing.errors import InputError

    with pytest.raises(InputError, match="SM100"):
        kernel("dsv4.1-flash", "h200", tensor_parallel_size=8, kv_cache_dtype="nvfp4_ds_mla").layout()
    with pytest.raises(InputError, match="kv_cache_dtype"):
        kernel("dsv4.1-flash", "h200", tensor_parallel_size=8, kv_cache_dtype="bf16").layout()


# -- reading another layer's cache ---------------------------------------------------------------

def test_readers_hold_nothing_and_point_at_their_owner():
    from pricing.graph import load_model

    g = load_model("dsv4.1-flash").g
    reads = {(u, v) for u, v, d in g.edges(data=True) if d["flow"] == "reads_cache" and d["cache"] == "compressed"}
    assert ("layers.2.attn", "layers.7.attn") in reads and ("layers.20.attn", "layers.39.attn") in reads
    owners = [n for n, d in g.nodes(data=True) if any(c.name == "compressed" for c in d["caches"])]
    assert owners == ["layers.2.attn", "layers.8.attn", "layers.14.attn", "layers.20.attn"]


# -- the fallback when the rules pack cannot group ----------------------------------------------------

def test_ungroupable_caches_price_at_their_own_pages():
    from pricing.rules import vllm_0_33 as rules
    from pricing.specs import MLAAttentionSpec, SlidingWindowMLASpec

    context = MLAAttentionSpec("l0", "compressed", 64, 1000, 1000, packed=True)
    huge_ring = SlidingWindowMLASpec("l0", "swa", 32, 5000, 5000, window=128, packed=True)
    layout = rules.group([context, huge_ring], 131072)
    assert not layout.grouped and "cannot group" in layout.rule
    assert [g.page_bytes for g in layout.groups] == [1000, 5000]


# -- the command line ------------------------------------------------------------------------------

def test_plan_memory_shows_the_groups_and_json_extras():
    args = ["memory", "--model", "dsv4.1-flash", "--chip", "h200", "-tp", "8", "--kv-cache-dtype", "fp8",
            "--num-speculative-tokens", "5", "--max-num-batched-tokens", "8192"]
    text = CliRunner().invoke(cli, args)
    assert text.exit_code == 0, text.output
    assert "KV cache groups" in text.output and "116,928" in text.output
    assert "1,790 bytes per token" in text.output
    data = json.loads(CliRunner().invoke(cli, args + ["--json"]).output)
    assert data["cache_bytes_per_token"] == 1790
    assert data["block_bytes"] == 116928
    assert data["activation"]["model_buffers"] == sum(data["activation"]["buffers"].values())
    assert data["sequence"]["fixed"] == 49 * 116928


def test_a_model_the_pack_cannot_group_still_prices():
    from pricing.registry import shipped

    # 512-token window pages (299,008 bytes) do not fit the 116,928-byte pool block: no packing
    reg = shipped().with_overrides({"deepseek_v4.page_tokens.v41_window": {"default": 512}})
    k = kernel("dsv4.1-flash", "h200", registry=reg, **B_FLAGS)
    layout = k.layout()
    assert not layout.grouped
    assert len(layout.groups) == len(k.specs())  # each cache at its own page
    ring = round_up(512 * 584, 576)
    steady = cdiv(WINDOW - 1 + 6, 512) + 1
    assert k.sequence_fixed_bytes() == 43 * steady * ring + 3 * 8 * 4096
    assert Capacity(k).requests_held() > 0 and k.instance.kv_cache_tokens() > 0
    grouping = {p.name: p for p in k.provenance()}["rules.grouping"]
    assert "cannot group" in grouping.value


# -- SM120 (RTX PRO 6000 Blackwell): the layouts vLLM 0.33 builds there ------------------------------

def test_v41_on_rtx_pro_6000():
    """DeepseekV4FlashInferSM120Attention keeps the 584-byte fp8_ds_mla record and 576-byte
    alignment, with 128-token latent blocks and 32-token window rings (vLLM 0.33.0 with capability
    12.0; tests/golden/vllm-0.33/dsv4.1-flash_rtx-pro-6000_tp2_fp8.json)."""
    from pricing.chips import get_chip

    chip = get_chip("rtx-pro-6000")
    assert chip.generation == "sm120" and round(chip.memory_bytes / GiB, 2) == 94.97
    k = kernel("dsv4.1-flash", "rtx-pro-6000", tensor_parallel_size=2, kv_cache_dtype="fp8",
               max_num_batched_tokens=8192, max_model_len=131072)
    block = (3 * round_up(64 * 584, 576) + round_up(128 * 584, 576) + 3 * round_up(64 * 132, 576)
             + round_up(128 * 132, 576))
    assert block == 230400 and k.layout().bytes_per_block == block
    ring = round_up(32 * 584, 576)
    assert [len(g.members) for g in rings(k)] == [10, 10, 10, 10] and block // ring == 12
    assert [g.block_tokens for g in k.layout().groups][-2:] == [128, 8]


def test_v4_flash_on_rtx_pro_6000_keeps_the_fp8_ds_mla_layout():
    h200 = kernel("dsv4-flash", "h200", tensor_parallel_size=4, max_model_len=131072, max_num_batched_tokens=8192)
    sm120 = kernel("dsv4-flash", "rtx-pro-6000", tensor_parallel_size=4, max_model_len=131072,
                   max_num_batched_tokens=8192)
    assert sm120.layout().bytes_per_block == h200.layout().bytes_per_block == v4_block(21, 20)


def test_record_notes_read_the_registry():
    """The cache notes state the record sizes the registry holds (deepseek_v4.records), not copies:
    an overlay that changes them changes the notes."""
    from pricing.registry import overlay_from

    def notes(model, chip, registry=None):
        k = kernel(model, chip, registry=registry, max_model_len=8192)
        return " ".join(p.value for p in k.provenance() if p.name.startswith("rules.note."))

    assert "fp8_ds_mla (584-byte records)" in notes("dsv4-flash", "h200")
    assert "(288-byte compressed records, 528-byte window records)" in notes("dsv4.1-flash", "b200")
    changed = overlay_from({"deepseek_v4": {"records": {
        name: {"value": value, "source": "test", "how": "test"}
        for name, value in (("fp8_ds_mla_v4", 600), ("nvfp4_ds_mla_v41", 296), ("mxfp8_v41", 544))}}})
    assert "fp8_ds_mla (600-byte records)" in notes("dsv4-flash", "h200", changed)
    assert "(296-byte compressed records, 544-byte window records)" in notes("dsv4.1-flash", "b200", changed)
    assert "as fp8_ds_mla (600-byte records, FlashMLA sparse)" in notes("dsv4.1-flash", "h200", changed)
