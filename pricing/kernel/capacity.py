"""What a planner counts on from one engine: the requests at max_model_len one rank's pool holds
at once (vLLM's block pool, kv_cache_utils / block_pool.py), when vLLM starts.

Whole blocks per group, the null block held back (block_pool.py: block 0 is the null block, never
handed to a request), capped by max_num_seqs; 0 when vLLM would refuse to start. With a `margin`
(a fraction), the pool is taken that much smaller than predicted: the planner's allowance for the
fixed-memory laws' measured error (registry cost_model_memory.kv_pool_margin).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from pricing.kernel.kernel import Kernel
from pricing.kernel.startup import Startup, failed_check_at


@dataclass(frozen=True)
class Capacity:
    """The requests one rank of `kernel`'s engine holds (kept on the kernel, per margin)."""

    kernel: Kernel

    def requests_held(self, margin: float = 0.0) -> int:
        k = self.kernel
        return k.once(("capacity.requests_held", margin), lambda: self._held(margin))

    def _held(self, margin: float) -> int:
        k = self.kernel
        if not Startup(k).starts:
            return 0
        return self._within(k.instance.num_blocks(), [s.kv_pool() for s in k.instance.ranks], margin)

    def held_at(self, budget: int, margin: float = 0.0) -> int:
        """`requests_held` at `budget`, every other setting held: the pool is affine in the budget
        and nothing else a rank holds depends on it, so a sweep over utilizations asks this of one
        kernel instead of building one per utilization (the start-up checks at that budget too)."""
        ranks = self.kernel.instance.ranks
        for s in ranks:
            if failed_check_at(s, budget) is not None:
                return 0
        return self._within(min(s.blocks_at(budget) for s in ranks), [s.pool_at(budget) for s in ranks], margin)

    def _within(self, blocks: int, pools: list[int], margin: float) -> int:
        k = self.kernel
        layout = k.layout()
        if not layout.groups:
            return k.engine.max_num_seqs
        keep = k.once(("kept share", margin), lambda: _kept(margin))  # asked at every grid point
        if layout.grouped:
            held = (_counted(blocks, keep) - 1) // k.blocks_per_request()  # less the null block
        else:
            held = min(_counted(pool, keep) // s.request_bytes()
                       for pool, s in zip(pools, k.instance.ranks, strict=True))
        return max(0, min(k.engine.max_num_seqs, held))


def _kept(margin: float) -> tuple[int, int]:
    """The share of a pool counted on with a `margin` held back, exactly (the margin as written),
    as a fraction's numerator and denominator."""
    keep = Fraction(1) - Fraction(str(margin))
    return keep.numerator, keep.denominator


def _counted(n: int, keep: tuple[int, int]) -> int:
    """int(n × keep), exactly, in integers (truncated toward zero, as int() of a Fraction is)."""
    num, den = keep
    scaled = n * num
    return scaled // den if scaled >= 0 else -(-scaled // den)
