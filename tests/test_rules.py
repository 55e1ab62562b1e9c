"""The vLLM 0.33 rules pack's grouping of caches whose pages agree (kv_cache_planning.py
_get_kv_cache_groups_uniform_page_size, vllm-0.33-memory.md §3.2 step 9): the layers of each type
are dealt into groups of `group_size` layers, the smallest type's count, or the largest's when it
is below 1.5 × the smallest ("12 sw, 24 full": 1.5 avoids too much padding); each group is one
share of the pool block, and short groups are padded. Figures derived by hand from that rule."""

from __future__ import annotations

from fractions import Fraction

import pytest

from pricing.rules import vllm_0_33 as rules
from pricing.specs import FullAttentionSpec, SlidingWindowSpec
from pricing.units import cdiv

M = 131072
PAGE = 32768  # 16 tokens × 2,048 bytes, for both kinds: the pages agree, so no unification


def layers(windows: int, fulls: int):
    specs = [SlidingWindowSpec(f"w{i}", "kv", 16, PAGE, PAGE, Fraction(2048), window=128) for i in range(windows)]
    specs += [FullAttentionSpec(f"f{i}", "kv", 16, PAGE, PAGE, Fraction(2048)) for i in range(fulls)]
    return specs


@pytest.mark.parametrize("windows, fulls, group_size", [
    (4, 5, 5),  # 5 < 6: the largest
    (4, 6, 4),  # 6 is not below 1.5 × 4: the smallest
    (10, 14, 14),  # 14 < 15
    (10, 15, 10),  # 15 is not below 15
    (12, 24, 12),  # vLLM's own example: 24 is not below 18
    (7, 7, 7),
])
def test_the_group_size_is_the_largest_count_only_below_one_and_a_half_times_the_smallest(windows, fulls,
                                                                                           group_size):
    layout = rules.group(layers(windows, fulls), M)
    groups = cdiv(windows, group_size) + cdiv(fulls, group_size)
    assert len(layout.groups) == groups
    assert layout.bytes_per_block == group_size * PAGE
    assert layout.padding_layers == groups * group_size - windows - fulls
    assert max(len(g.members) for g in layout.groups) == group_size
