"""Release packs as compositions: each pack (pricing/rules/vllm_*.py) names the steps of
pricing/rules/shared.py it takes and imports no other pack; and the two vLLM 0.19 rules that no
other test told apart from their neighbours' (the group-size ratio and the start-up check without
a null block), with figures derived by hand from the 0.19.0 wheel's v1/core/kv_cache_utils.py."""

from __future__ import annotations

import ast
from fractions import Fraction
from pathlib import Path

import pytest

from pricing.rules import PACKS, vllm_0_19, vllm_0_33
from pricing.rules.release import RulesPack
from pricing.specs import FullAttentionSpec, SlidingWindowSpec
from pricing.units import cdiv

RULES = Path(__file__).resolve().parents[1] / "pricing" / "rules"
PACK_FILES = sorted(RULES.glob("vllm_*.py"))
M = 131072
PAGE = 32768  # 16 tokens × 2,048 bytes, for both kinds: the pages agree, so no unification


def imported(path: Path) -> set[str]:
    """The modules `path` imports (absolute names; `from pricing.rules import vllm_0_19` names both)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_there_are_packs_to_walk():
    assert len(PACK_FILES) == len(PACKS) == 6


@pytest.mark.parametrize("path", PACK_FILES, ids=lambda p: p.stem)
def test_no_pack_imports_another_pack(path):
    packs = {f"pricing.rules.{p.stem}" for p in PACK_FILES}
    assert not (imported(path) & packs), f"{path.name} imports a pack: take the step from pricing/rules/shared.py"


@pytest.mark.parametrize("pack", PACKS, ids=lambda r: r.name)
def test_every_pack_provides_what_a_rules_pack_lists(pack):
    assert isinstance(pack.rules, RulesPack)


def layers(windows: int, fulls: int):
    specs = [SlidingWindowSpec(f"w{i}", "kv", 16, PAGE, PAGE, Fraction(2048), window=128) for i in range(windows)]
    specs += [FullAttentionSpec(f"f{i}", "kv", 16, PAGE, PAGE, Fraction(2048)) for i in range(fulls)]
    return specs


# kv_cache_utils.py:1043-1054 (0.19.0): group_size = min; if max_num_layers < min_num_layers * 1.5: max.
# Each case is one where a ratio of 1.25 (vLLM 0.12–0.17) gives the smallest count instead.
@pytest.mark.parametrize("windows, fulls, group_size", [
    (4, 5, 5),  # 5 < 6 (1.25 × 4 = 5: not below)
    (8, 11, 11),  # 11 < 12 (10 under 1.25)
    (10, 14, 14),  # 14 < 15 (12.5 under 1.25)
])
def test_vllm_0_19_takes_the_largest_count_below_one_and_a_half_times_the_smallest(windows, fulls, group_size):
    layout = vllm_0_19.group(layers(windows, fulls), M)
    groups = cdiv(windows, group_size) + cdiv(fulls, group_size)  # layers[i::num_groups], num_groups = cdiv
    assert len(layout.groups) == groups
    assert layout.bytes_per_block == group_size * PAGE
    assert layout.padding_layers == groups * group_size - windows - fulls


# _check_enough_kv_cache_memory (0.19.0 kv_cache_utils.py:619) raises only when needed_memory >
# available_memory, where _max_memory_usage_bytes_from_groups (:1332) is group_size × page_size ×
# Σ blocks over the groups: no block is held back for the null block (vLLM 0.29 on holds one).
BLOCKS = cdiv(M, 16) + cdiv(127 + 8192, 16)  # a full-attention group's blocks and a window group's


def test_vllm_0_19_starts_when_the_pool_holds_exactly_one_request():
    layout = vllm_0_19.group(layers(2, 2), M)  # two groups of 2 layers: the pool block is 2 pages
    assert len(layout.groups) == 2 and layout.bytes_per_block == 2 * PAGE
    needed = 2 * PAGE * BLOCKS
    assert vllm_0_19.fits_one_request(needed, layout, BLOCKS, 0)
    assert not vllm_0_19.fits_one_request(needed - 1, layout, BLOCKS, 0)


def test_vllm_0_33_holds_the_null_block_back_where_0_19_does_not():
    layout = vllm_0_33.group(layers(2, 2), M)
    assert layout.bytes_per_block == 2 * PAGE
    needed = 2 * PAGE * BLOCKS
    assert not vllm_0_33.fits_one_request(needed, layout, BLOCKS, 0)
    assert not vllm_0_33.fits_one_request(needed + 2 * PAGE - 1, layout, BLOCKS, 0)
    assert vllm_0_33.fits_one_request(needed + 2 * PAGE, layout, BLOCKS, 0)
