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
from pricing.kernel.startup import StartChecks, Startup, start_checks


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
        checks = self.kernel.once("capacity.held_law", self._held_law).checks
        if any(c.failed_at(budget) is not None for c in checks):
            return 0
        return self._within(min(c.law.blocks(budget) for c in checks), [c.law.pool(budget) for c in checks], margin)

    def _within(self, blocks: int, pools: list[int], margin: float) -> int:
        law = self.kernel.once("capacity.held_law", self._held_law)
        return law.held(blocks, pools, self.kernel.reg.derived(("capacity.kept", margin), lambda: _kept(margin)))

    def _held_law(self) -> _HeldLaw:
        k = self.kernel
        ranks = k.instance.ranks
        layout = k.layout()
        return _HeldLaw(tuple(start_checks(s) for s in ranks), k.engine.max_num_seqs, bool(layout.groups),
                        layout.grouped, k.blocks_per_request() if layout.grouped and layout.groups else 0,
                        tuple(s.request_bytes() for s in ranks) if layout.groups and not layout.grouped else ())


@dataclass(frozen=True)
class _HeldLaw:
    """What `Capacity` reads of an instance to count the requests a pool holds, worked out once:
    every rank's start-up checks, max_num_seqs, the layout's kind, the blocks one request holds
    (grouped layouts) or each rank's bytes a request holds (ungrouped)."""

    checks: tuple[StartChecks, ...]
    max_num_seqs: int
    any_groups: bool
    grouped: bool
    blocks_per_request: int
    request_bytes: tuple[int, ...]

    def held(self, blocks: int, pools: list[int], keep: tuple[int, int]) -> int:
        if not self.any_groups:
            return self.max_num_seqs
        if self.grouped:
            held = (_counted(blocks, keep) - 1) // self.blocks_per_request  # less the null block
        else:
            held = min(_counted(pool, keep) // per for pool, per in zip(pools, self.request_bytes, strict=True))
        return max(0, min(self.max_num_seqs, held))


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
