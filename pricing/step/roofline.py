"""The rooflines the operator tables are measured against, and the tables' interpolation.

Standard library only: scripts/operators/reduce.py loads this file by path in its side venv
(aiconfigurator-core, pandas) to reduce the measured tables against the same laws the step model
prices with, so a reduction and its use can never disagree.

    GEMM        max(2 m n k / peak FLOP/s of the format, (n k · weight bytes + 2 m (n + k)) / bandwidth)
    fused MoE   max(2 · 3 h i · n · top-k / ep / peak,
                    touched local experts · 3 h i · weight bytes / bandwidth)
                (a gated expert is three h × i matrices: gate, up, down; i its width on this rank);
                touched: the expected distinct experts of a router choosing uniformly (a served
                step), or min(experts, n · top-k) for the tables' `balanced` routing, which gives
                every token-expert assignment its own expert until all are used (aiconfigurator's
                collector/helper.py balanced_logits: token i takes experts i·⌈E/k⌉/n + j·⌈E/k⌉)

A measured operator's time is its roofline times a ratio (≥ about 1), interpolated multilinearly in
log2 of the operator's sizes (`Curve`); past the grid the edge value holds.
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass

ACT_BYTES = 2  # activations enter and leave a GEMM in 16 bits (vLLM quantizes them inside the kernel)


def gemm_roofline(m: float, n: float, k: float, weight_bytes: float, peak_flops: float, bandwidth: float) -> float:
    """Seconds of an m × k by k × n matrix multiply at the chip's peak rates: its FLOPs or its
    bytes (the weights once, the activations in and out), whichever takes longer."""
    flops = 2.0 * m * n * k
    nbytes = n * k * weight_bytes + ACT_BYTES * m * (n + k)
    return max(flops / peak_flops, nbytes / bandwidth)


def expected_experts(experts: int, top_k: int, tokens: float) -> float:
    """Expected distinct experts `tokens` tokens route to, each picking `top_k` of `experts`
    (uniform): E·(1 − (1 − k/E)^n)."""
    if experts <= 0 or tokens <= 0:
        return 0.0
    k = min(top_k, experts)
    return experts * (1.0 - (1.0 - k / experts) ** tokens)


def balanced_experts(experts: int, top_k: int, tokens: float) -> float:
    """Distinct experts `tokens` tokens use under the measured tables' balanced routing: every
    token-expert assignment its own expert until all are used, min(E, n·k)."""
    return min(float(experts), max(tokens, 0.0) * min(top_k, experts))


def moe_roofline(tokens: float, hidden: int, inter: int, top_k: int, experts: int, ep: int,
                 weight_bytes: float, peak_flops: float, bandwidth: float, balanced: bool = False) -> float:
    """Seconds of one fused-MoE layer on one rank at the peak rates: `tokens` tokens each routed to
    `top_k` of `experts` experts (uniformly; `balanced`: as the measured tables route them,
    `balanced_experts`), `experts / ep` of them on this rank, each expert three `hidden` × `inter`
    matrices (`inter`: this rank's share of the expert's width)."""
    local = experts / ep
    flops = 2.0 * 3 * hidden * inter * tokens * top_k / ep
    touched = (balanced_experts if balanced else expected_experts)(experts, top_k, tokens) * local / experts
    nbytes = touched * 3 * hidden * inter * weight_bytes + ACT_BYTES * tokens * hidden * 2
    return max(flops / peak_flops, nbytes / bandwidth)


@dataclass(frozen=True)
class Curve:
    """A ratio sampled on a grid over log2 of an operator's sizes (one axis per size), interpolated
    multilinearly and clamped at the grid's edges: what a measured operator takes over its roofline."""

    axes: tuple[tuple[float, ...], ...]  # log2 grid points of each size, increasing
    ln_ratio: tuple[float, ...]  # ln(measured / roofline) at the grid's points, row-major (last axis fastest)

    @classmethod
    def of(cls, value: dict) -> Curve:
        """From a registry value: {log2_axes: [[...], ...], ln_ratio: [...] (row-major)}."""
        return cls(tuple(tuple(float(x) for x in a) for a in value["log2_axes"]),
                   tuple(float(v) for v in value["ln_ratio"]))

    def ratio(self, *sizes: float) -> float:
        """measured / roofline at these sizes (each > 0, one per axis)."""
        cells = [_cell(axis, math.log2(size)) for axis, size in zip(self.axes, sizes, strict=True)]
        strides = [1] * len(self.axes)
        for a in range(len(self.axes) - 2, -1, -1):
            strides[a] = strides[a + 1] * len(self.axes[a + 1])
        total = 0.0
        for corner in range(1 << len(cells)):
            weight, flat = 1.0, 0
            for a, (i, f) in enumerate(cells):
                up = (corner >> a) & 1
                if up and len(self.axes[a]) == 1:
                    weight = 0.0
                    break
                weight *= f if up else 1.0 - f
                flat += (i + up) * strides[a]
            if weight:
                total += weight * self.ln_ratio[flat]
        return math.exp(total)


def _cell(grid: tuple[float, ...], v: float) -> tuple[int, float]:
    """The grid interval holding v and v's fraction into it (clamped to the grid)."""
    if len(grid) == 1 or v <= grid[0]:
        return 0, 0.0
    if v >= grid[-1]:
        return len(grid) - 2, 1.0
    i = bisect.bisect_right(grid, v) - 1
    return i, (v - grid[i]) / (grid[i + 1] - grid[i])


def loglog(points: list[tuple[float, float]], x: float) -> float:
    """y at x on the piecewise linear curve through `points` in log-log (clamped below the first
    point; extrapolated in proportion to x past the last)."""
    if x <= points[0][0]:
        return points[0][1]
    if x >= points[-1][0]:
        return points[-1][1] * x / points[-1][0]
    i = bisect.bisect_right([p[0] for p in points], x) - 1
    (x0, y0), (x1, y1) = points[i], points[i + 1]
    t = math.log(x / x0) / math.log(x1 / x0)
    return math.exp(math.log(y0) + (math.log(y1) - math.log(y0)) * t)


@dataclass(frozen=True)
class ShapeTable:
    """Measured seconds of one operator for each measured shape (an MoE layer's hidden, width, top-k,
    experts and EP; an attention layer's heads), each shape its own grid over log2 of the sizes
    (`axes`): ln(seconds) interpolated multilinearly, clamped below the grid and in proportion to
    each size past its last node (work grows with tokens and batch). None for a shape not measured."""

    axes: tuple[tuple[float, ...], ...]
    rows: dict[tuple[int, ...], tuple[float, ...]]  # shape -> ln(seconds) at the grid's nodes, row-major

    @classmethod
    def of(cls, value: dict) -> ShapeTable:
        """From a registry value: {log2_axes: [[...], ...], shapes: [[...], ...], ln_seconds_x100_steps:
        [[...], ...]} (each shape's 100 ln(seconds) at its nodes, row-major, as integer steps from the
        previous node's, the first from 0)."""
        return cls(tuple(tuple(float(x) for x in a) for a in value["log2_axes"]),
                   {tuple(int(x) for x in s): tuple(v / 100.0 for v in itertools.accumulate(row))
                    for s, row in zip(value["shapes"], value["ln_seconds_x100_steps"], strict=True)})

    def seconds(self, shape: tuple[int, ...], *sizes: float) -> float | None:
        row = self.rows.get(tuple(int(x) for x in shape))
        if row is None:
            return None
        past = 1.0
        for axis, size in zip(self.axes, sizes, strict=True):
            past *= max(1.0, size / 2.0 ** axis[-1])
        return Curve(self.axes, row).ratio(*sizes) * past
