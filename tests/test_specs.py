"""The cache spec classes (pricing.specs), one per kind as vLLM 0.33's kv_cache_interface.py has
them: each law checked against figures derived by hand from vllm-0.33-memory.md §2.2."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from pricing.rules import vllm_0_33 as rules
from pricing.specs import (
    ChunkedLocalAttentionSpec,
    CircularBufferSpec,
    FullAttentionSpec,
    HybridAlignment,
    MambaSpec,
    MLAAttentionSpec,
    Request,
    SlidingWindowSpec,
)

M = 131072
STEADY = Request(tokens=M, max_model_len=M, in_flight=1)
ADMISSION = Request(tokens=M, max_model_len=M, in_flight=2 * 8192)


def full(layer="l0", block=16, per_token=4096, **kw):
    return FullAttentionSpec(layer, "kv", block, block * per_token, block * per_token, Fraction(per_token), **kw)


def test_full_attention_grows_and_dcp_shards_tokens():
    s = full()
    assert s.grows and s.blocks(STEADY) == M // 16 == 8192
    assert s.blocks(Request(M, M, 1, dcp=8)) == M // 8 // 16 == 1024
    assert full(dcp_sharded=False).blocks(Request(M, M, 1, dcp=8)) == 8192


def test_sliding_window_holds_window_less_one_plus_in_flight_plus_one():
    s = SlidingWindowSpec("l0", "kv", 16, 32768, 32768, window=128)
    assert not s.grows
    assert s.blocks(STEADY) == -(-(127 + 1) // 16) + 1 == 9
    assert s.blocks(ADMISSION) == -(-(127 + 16384) // 16) + 1 == 1033  # vLLM's gpt-oss figure
    assert s.blocks(Request(100, 100, 16384)) == -(-100 // 16) + 1  # capped at max_model_len


def test_chunked_local_has_no_extra_block():
    s = ChunkedLocalAttentionSpec("l0", "kv", 16, 1, 1, chunk=8192)
    assert s.blocks(ADMISSION) == (8192 + 16384) // 16 == 1536


def test_mamba_modes_and_circular_buffer():
    page = 1_000_000
    for mode, spec_tokens, blocks in (("none", 0, 1), ("none", 2, 3), ("align", 0, 2), ("align", 2, 4)):
        s = MambaSpec("l0", "state", 544, page, page, mode=mode, speculative_blocks=spec_tokens,
                      hybrid=HybridAlignment(16))
        assert s.blocks(STEADY) == blocks and not s.grows
    every = MambaSpec("l0", "state", 544, page, page, mode="all", hybrid=HybridAlignment(16))
    assert every.grows and every.blocks(Request(1088, M, 1)) == 2
    ring = CircularBufferSpec("l0", "compressor_state", 8, 32768, 32768)
    assert ring.blocks(ADMISSION) == 1 and ring.block_tokens == 8 and not ring.prefix_cacheable


def test_uniform_type_group_sums_pages_and_takes_the_most_blocks():
    a = MLAAttentionSpec("l2", "compressed", 64, 19008, 18688, Fraction(292), tokens_per_state=2)
    b = MLAAttentionSpec("l2", "indexer", 64, 4608, 4224, Fraction(66), tokens_per_state=2)
    layout = rules.group([a, b], M)
    (g,) = layout.groups
    assert g.vllm_class == "UniformTypeKVCacheSpecs" and g.page_bytes == 19008 + 4608
    assert g.blocks(STEADY) == M // 64


def test_groups_follow_first_appearance_and_a_merged_group_has_one_layers_page():
    window = [SlidingWindowSpec(f"l{i}", "kv", 16, 32768, 32768, Fraction(2048), window=128) for i in (0, 2)]
    dense = [full(f"l{i}", per_token=2048) for i in (1, 3)]
    layout = rules.group([window[0], dense[0], window[1], dense[1]], M)
    assert [g.vllm_class for g in layout.groups] == ["SlidingWindowSpec", "FullAttentionSpec"]
    assert [g.page_bytes for g in layout.groups] == [32768, 32768]  # vLLM's page_size_bytes: one layer's
    assert layout.bytes_per_block == 2 * 32768


def test_a_group_keeps_each_law_its_members_hold():
    """A group's blocks are the most any member needs: two specs of one class that differ in a law
    field (block tokens) are two laws, whichever comes first; specs differing only in their layer
    and page are one."""
    from pricing.rules.shared import Group

    coarse, fine = full("l0", block=32), full("l1", block=16)
    assert Group((coarse, fine), summed=True).blocks(STEADY) == M // 16
    assert Group((fine, coarse), summed=True).blocks(STEADY) == M // 16
    padded = replace(fine, layer="l2", name="indexer", page_bytes=70000, raw_page_bytes=65536)
    assert len(Group((fine, padded), summed=True)._laws) == 1


def test_a_spec_at_another_layer_changes_only_its_layer():
    s = SlidingWindowSpec("l0", "kv", 32, 65536, 60000, Fraction(2048), window=4096, drafter=True,
                          alignment=512, stride_alignment=256)
    moved = s.at_layer("l7")
    assert moved == SlidingWindowSpec("l7", "kv", 32, 65536, 60000, Fraction(2048), window=4096, drafter=True,
                                      alignment=512, stride_alignment=256)
    assert type(moved) is SlidingWindowSpec and s.layer == "l0"


def test_capture_ceilings_by_hand():
    """vLLM's capture sizes on a grid (1, 2, 4, then every 8 to 256, then every 16), derived by hand:
    64 sequences, 2 speculative tokens (q = 3), a 100-token budget: the ceiling is min(64 x 3 x 2,
    512, 100) = 100; the sizes 1, 2, 4, 8 .. 96 by 8, the budget 100, and the uniform-decode sizes
    3 x (1, 2, 4, 8, 16, 24, 32) = 3, 6, 12, 24, 48, 72, 96; the largest size rounded up to 3 within
    min(64 x 3, 100) is 96 (100 rounds up to 102). Without speculation and 10 sequences: the
    ceiling is 20, the sizes 1, 2, 4, 8, 16 and 10, and decode the largest within 10 x 1: 10."""
    from pricing.rules.shared import capture_ceilings

    grid = ((1, 2, 4), 8, 256, 16)
    ceilings = capture_ceilings(64, 100, 2, 512, grid)
    assert ceilings.sizes == (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 100)
    assert (ceilings.mixed, ceilings.decode) == (100, 96)
    plain = capture_ceilings(10, 8192, 0, 512, grid)
    assert (plain.sizes, plain.mixed, plain.decode) == ((1, 2, 4, 8, 10, 16), 16, 10)
