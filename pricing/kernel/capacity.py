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
        k = self.kernel
        ranks = k.instance.ranks
        if any(failed_check_at(s, budget) is not None for s in ranks):
            return 0
        return self._within(min(s.blocks_at(budget) for s in ranks), [s.pool_at(budget) for s in ranks], margin)

    def _within(self, blocks: int, pools: list[int], margin: float) -> int:
        k = self.kernel
        layout = k.layout()
        if not layout.groups:
            return k.engine.max_num_seqs
        keep = _kept(margin)
        if layout.grouped:
            held = (int(blocks * keep) - 1) // k.blocks_per_request()  # less the null block
        else:
            held = min(int(pool * keep) // s.request_bytes() for pool, s in zip(pools, k.instance.ranks, strict=True))
        return max(0, min(k.engine.max_num_seqs, held))


def _kept(margin: float) -> Fraction:
    """The share of a pool counted on with a `margin` held back, exactly (the margin as written)."""
    return Fraction(1) - Fraction(str(margin))
