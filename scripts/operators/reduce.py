"""Reduce NVIDIA aiconfigurator-core's measured vLLM operator tables to the project's own compact
operator data: pricing/registry/operators_<chip>.yaml, and a held-out fixture sample under
tests/fixtures/operators/.

Runs in a side venv, never at run time (the package is not a dependency of the project):

    python3 -m venv /tmp/venv-aic && /tmp/venv-aic/bin/pip install aiconfigurator_core-0.12.0-*.whl pandas pyarrow
    /tmp/venv-aic/bin/python scripts/operators/reduce.py [--data <.../aiconfigurator_core/systems/data>]

    /tmp/venv-aic/bin/python scripts/operators/reduce.py --check   # judge the whole tables, write nothing

Every reduction is fitted and judged by one function, fit_and_judge: ln(measured / roofline) fitted
on a grid over log2 of the operator's sizes (least squares, multilinear, with a second-difference
penalty that fills nodes no training row reaches), one grid per group, and judged on the rows held
out of the fit by a hash (every HOLD_OUT-th; the figures go into each value's provenance).

    GEMM             per format: the ratio to the GEMM roofline (pricing/step/roofline.py, loaded
                     here by path so the reduction and the step model share one law) on log2 m x n x k;
                     shapes (n, k) held out
    fused MoE        per format: each measured shape (hidden, width on the rank, top-k, experts, EP)
                     its own seconds at the measured token counts (`moe_measured`, rows held out); for
                     shapes the table does not hold, the ratio to the MoE roofline on token-expert
                     assignments x one expert's elements x local experts (`moe`, model shapes held out)
    attention        context and generation, per KV-cache dtype: each head shape (heads, KV heads, head
                     size) its own seconds on the batch x tokens grid (`attention_measured`); the older
                     single achieved fractions stay (`attention`)
    MLA, DSA         DeepSeek-style attention modules per model, cache dtype and GEMM format: each head
                     count its own seconds on the batch x tokens grid (`mla`, `dsa`)
    all-reduce       the custom all-reduce (CUDA-graph backend) as measured, seconds by message bytes,
                     per GPU count; the log-log law between points judged on held-out points
    all-to-all       MoE dispatch and combine (DeepEP) per backend and phase: each shape (EP size,
                     hidden, top-k, experts) its own seconds at the measured token counts
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("roofline", ROOT / "pricing" / "step" / "roofline.py")
roofline = importlib.util.module_from_spec(_spec)
sys.modules["roofline"] = roofline
_spec.loader.exec_module(roofline)

PACKAGE = "aiconfigurator-core 0.12.0"
HOLD_OUT = 4  # every 4th row or shape (by a hash of it) is held out
FLOOR_SECONDS = 50e-6
SMOOTH = 0.05  # the fit's second-difference penalty (relative to the rows per cell)
TARGET_MEDIAN, TARGET_P90 = 0.08, 0.20  # issue 38: held-out median |error| <= 8 %, p90 <= 20 %
FIXTURE_ROWS = 100  # held-out rows per chip and GEMM format in the test fixture (half that for MoE and attention)
GRID_M = [float(x) for x in range(0, 16)]  # log2 tokens: 1 .. 32768
GRID_NK = [float(x) for x in range(8, 17)]  # log2 n and log2 k: 256 .. 65536
MIN_NK = 256  # GEMMs with n or k below this are outside the reduction (no layer of a served LLM is so narrow)
GRID_TOKENS = [float(x) for x in range(0, 16)]  # log2 token-expert assignments on the rank: 1 .. 32768
GRID_EXPERT = [float(x) for x in range(20, 32, 2)]  # log2 elements of one expert's three matrices on the rank
GRID_LOCAL = [float(x) for x in range(0, 10, 2)]  # log2 experts on the rank: 1 .. 256

# aiconfigurator system -> (the project's chip id, the vLLM data version)
SYSTEMS = {"h100_sxm": ("h100", "0.24.0"), "h200_sxm": ("h200", "0.24.0"), "b200_sxm": ("b200", "0.24.0"),
           "b300_sxm": ("b300", "0.24.0"), "gb200": ("gb200", "0.24.0"), "gb300": ("gb300", "0.24.0"),
           "l40s": ("l40s", "0.24.0"), "rtx_pro_6000_server": ("rtx-pro-6000", "0.24.0"),
           "a100_sxm": ("a100-80gb", "0.14.0")}
BLACKWELL = ("b200_sxm", "b300_sxm", "gb200", "gb300")

# GEMM: table dtype -> (weight bytes per element, peak rate, kernels in vLLM 0.33's order of choice)
GEMM = {"bfloat16": (2.0, "bf16_flops", ("torch.nn.functional.linear", "vllm_default")),
        "fp8": (1.0, "fp8_flops", ("CutlassFP8ScaledMMLinearKernel",)),
        "fp8_block": (1.0, "fp8_flops", ("FlashInferFp8BlockScaledMMKernel", "DeepGemmFp8BlockScaledMMKernel",
                                         "CutlassFp8BlockScaledMMKernel", "TritonFp8BlockScaledMMKernel")),
        "nvfp4": (0.5625, "fp4_flops", ("FlashInferCuteDslNvFp4LinearKernel", "FlashInferCutlassNvFp4LinearKernel"))}
GEMM_WHY = {
    "fp8_block": "vLLM 0.33 CudaFp8BlockScaledMMKernel.apply_weights picks FlashInfer's block-scale GEMM where its "
                 "shape conditions hold (VLLM_BLOCKSCALE_FP8_GEMM_FLASHINFER), else DeepGEMM where supported, else "
                 "CUTLASS then Triton; the table holds one of the first two per shape where vLLM ran them (FlashInfer "
                 "at m <= 32 on Hopper, DeepGEMM above), so a row of the first kernel present in that order is kept",
}
# why block-FP8 weights are priced by the per-tensor FP8 GEMM's curve (measured in CUDA graphs, same weight bytes)
BLOCK_FP8_COLLECTOR = (
    "aiconfigurator's collector (collector/vllm/collect_gemm.py run_gemm) times fp8_block alone outside CUDA graphs "
    "(use_cuda_graph=gemm_type != 'fp8_block', one layer per timed call, every other format six layers in a graph), "
    "so each row is the larger of the GPU's time and the host's eager launch of vLLM's Python forward "
    "(activation quant + GEMM), which a step replayed from vLLM's CUDA graph does not pay")
BLOCK_FP8_HOPPER = (
    BLOCK_FP8_COLLECTOR + ": on Hopper the rows floor at 55 us (FlashInfer's block-scale GEMM, m <= 17), 77 us "
    "(DeepGEMM) and 151 us (CUTLASS) whatever n and k (the per-tensor FP8 GEMM of the same shapes: 4.5 us and up), "
    "up to m ~ 1024; where the rows are the GPU's (m > 4096) block / per-tensor FP8 is a median 0.98 (h100_sxm) and "
    "1.04 (h200_sxm), 1,961 and 1,932 shapes. vLLM runs block FP8 on Hopper through DeepGEMM or CUTLASS's "
    "block-scaled GEMM with a per-token-group activation quant, inside the step's CUDA graph.")
BLOCK_FP8_BLACKWELL = (
    "its DeepGEMM rows are a flat ~0.18 ms per call up to m = 2048 whatever n and k (8192 x 8192: 10-20x the "
    "weights' read time, 8x the per-tensor FP8 GEMM), a fixed cost a CUDA-graph-captured step does not pay ("
    + BLOCK_FP8_COLLECTOR + "; vLLM's measured TPOT of block-FP8 checkpoints on Blackwell, "
    "validation/vllm_silicon_points.yaml, is near the weights' read time; aiconfigurator's own accuracy corpus "
    "labels those runs fp8).")
# fused MoE: table dtype -> (weight bytes, peak rate, kernel sources in order of preference by generation)
MOE = {"bfloat16": (2.0, "bf16_flops", ("trtllmbf16experts", "tritonexperts", "flashinfer_cutlass", "vllm_fused_moe")),
       "fp8": (1.0, "fp8_flops", ("trtllmfp8expertsmonolithic", "tritonexperts", "flashinfer_cutlass",
                                  "vllm_fused_moe")),  # not FlashInfer CUTLASS on Hopper: HOPPER_FP8_MOE
       "fp8_block": (1.0, "fp8_flops", ("trtllmfp8expertsmonolithic", "tritonexperts", "vllm_fused_moe")),
       "nvfp4": (0.5625, "fp4_flops", ("trtllmnvfp4expertsmonolithic", "flashinfer_cutlass")),
       "w4a16_mxfp4": (0.53125, "bf16_flops", ("trtllmmxfp4expertsmonolithic", "oaitritonmxfp4", "marlin")),
       "int4_wo": (0.5625, "bf16_flops", ("marlin",))}
HOPPER = ("h100_sxm", "h200_sxm")
MOE_ROUTING = ("the collector routes `balanced` (collector/helper.py balanced_logits: every token-expert assignment "
               "its own expert until all are used, min(E, n k) distinct), a served step's router about uniformly "
               "(E (1 - (1 - k/E)^n) expected distinct): the step prices a shape at these seconds x its uniform "
               "roofline / its balanced roofline (pricing/step/operators.py moe_seconds; at 32 tokens of top-8 over "
               "256 experts, 163 experts read, not 256)")
HOPPER_FP8_MOE = ("per-tensor FP8 experts on Hopper: the table holds FlashInfer's CUTLASS MoE alone (4-8x the "
                  "weights' read time at every batch), which vLLM runs only with VLLM_USE_FLASHINFER_MOE_FP8 set; by "
                  "default it runs the Triton fused MoE, so the step model prices them by the block-FP8 Triton table")
MOE_WHY = ("the kernel vLLM 0.33's fused-MoE oracle picks by default for the format on the chip "
           "(fused_moe/oracle: FlashInfer TRT-LLM monolithic experts on Blackwell for bf16/fp8/nvfp4/mxfp4, "
           "Triton (TritonOrDeepGemm) on Hopper for bf16 and fp8, OpenAI's Triton kernel for gpt-oss MXFP4 on "
           "Hopper, Marlin for W4A16): the rows of the first kernel_source of the preference list the table holds")
# the project's formats each table serves (step model: pricing/step/operators.py)
GEMM_FORMATS = {"bfloat16": "bf16", "fp8": "fp8_tensor", "fp8_block": "fp8_block", "nvfp4": "nvfp4"}
MOE_FORMATS = {"bfloat16": "bf16", "fp8": "fp8_tensor", "fp8_block": "fp8_block", "nvfp4": "nvfp4",
               "w4a16_mxfp4": "mxfp4", "int4_wo": "int4"}


MOE_SHAPE = ["hidden_size", "inter", "topk", "num_experts", "moe_ep_size"]  # one measured MoE layer on a rank
MOE_TOKEN_STEP = 0.0  # every measured token count is a node (thinning them misses the held-out target)
MIN_TOKEN_COUNTS = 8  # a measured shape with fewer token counts is left to the general curve
ATTENTION_STEP = 2.0  # attention grids: nodes a factor of 4 apart at least (the registry stays compact)
HEADS = ["num_heads", "num_key_value_heads", "head_dim"]  # one attention layer's heads on a rank
# DeepSeek-style attention modules (MLA; DSA: DeepSeek sparse attention) as aiconfigurator measured them:
# table folder and file stem per phase, and the model names -> the project's label
MODULES = {"mla": ("mla", "mla_{phase}_module_perf"), "dsa": ("sparse_attention", "dsa_{phase}_module_perf")}
MODULE_MODELS = {"deepseek-ai/DeepSeek-V3": "deepseek-v3", "deepseek-ai/DeepSeek-V3.2": "deepseek-v3.2",
                 "zai-org/GLM-5": "glm-5"}


def held_out(*key) -> bool:
    return int(hashlib.sha256(repr(key).encode()).hexdigest(), 16) % HOLD_OUT == 0


def chip_rates(chip: str) -> dict:
    doc = yaml.safe_load((ROOT / "pricing" / "registry" / "chips" / f"{chip}.yaml").read_text())
    return {k: float(v["value"]) for k, v in doc["rates"].items()}


def _cells(points: np.ndarray, grids: list[list[float]]):
    """Each row's multilinear weights on the grid's nodes (row-major, last axis fastest): a sparse
    rows x nodes matrix; an axis of one node holds its value (as roofline.Curve does)."""
    from scipy import sparse

    dims = [len(g) for g in grids]
    strides = np.cumprod([1] + dims[::-1][:-1])[::-1]
    idx, frac = [], []
    for a, g in enumerate(grids):
        ga = np.asarray(g, dtype=float)
        if len(g) == 1:
            idx.append(np.zeros(len(points), dtype=int))
            frac.append(np.zeros(len(points)))
            continue
        x = np.clip(points[:, a], ga[0], ga[-1])
        i = np.clip(np.searchsorted(ga, x, side="right") - 1, 0, len(g) - 2)
        idx.append(i)
        frac.append((x - ga[i]) / (ga[i + 1] - ga[i]))
    rows, cols, weights = [], [], []
    for corner in range(1 << len(grids)):
        if any((corner >> a) & 1 and dims[a] == 1 for a in range(len(grids))):
            continue
        col = sum((idx[a] + ((corner >> a) & 1)) * strides[a] for a in range(len(grids)))
        w = np.prod([frac[a] if (corner >> a) & 1 else 1 - frac[a] for a in range(len(grids))], axis=0)
        rows.append(np.arange(len(points)))
        cols.append(col)
        weights.append(w)
    return sparse.csr_matrix((np.concatenate(weights), (np.concatenate(rows), np.concatenate(cols))),
                             shape=(len(points), int(np.prod(dims))))


def fit_grid(points: np.ndarray, z: np.ndarray, grids: list[list[float]], smooth: float = SMOOTH) -> np.ndarray:
    """The grid values whose multilinear interpolation fits z at `points` (rows x axes, log2) in least
    squares, with a second-difference penalty (weight `smooth`) along each axis that fills nodes no
    row reaches (a held-out node between two measured ones: their log-log line); sparse normal
    equations."""
    from scipy import sparse
    from scipy.sparse.linalg import spsolve

    dims = [len(g) for g in grids]
    size = int(np.prod(dims))
    strides = np.cumprod([1] + dims[::-1][:-1])[::-1]
    a = _cells(points, grids)
    m = a.T @ a + 1e-9 * sparse.identity(size)
    flat = np.arange(size)
    for axis, n in enumerate(dims):
        if n < 3:
            continue
        base = flat[(flat // strides[axis]) % n + 2 < n]
        r = np.arange(len(base))
        d = sparse.csr_matrix((np.concatenate([np.ones(len(base)), -2 * np.ones(len(base)), np.ones(len(base))]),
                               (np.concatenate([r, r, r]),
                                np.concatenate([base, base + strides[axis], base + 2 * strides[axis]]))),
                              shape=(len(base), size))
        m = m + smooth ** 2 * max(len(z), 1) / size * (d.T @ d)
    return np.asarray(spsolve(m.tocsc(), a.T @ z)).reshape(dims)


def axis_grid(values, step: float = 1.0) -> list[float]:
    """log2 of the measured values of one axis, thinned so that neighbouring nodes are at least `step`
    apart (the first and last measured values kept): interpolation over the measured grid."""
    v = np.unique(np.log2(np.asarray(values, dtype=float)))
    out = [v[0]]
    for x in v[1:]:
        if x - out[-1] >= step - 1e-9:
            out.append(x)
    if v[-1] > out[-1]:
        if len(out) > 1 and v[-1] - out[-1] < step / 2:
            out[-1] = v[-1]
        else:
            out.append(v[-1])
    return [round(float(x), 4) for x in out]


def errors(pred: np.ndarray, meas: np.ndarray) -> tuple[float, float]:
    e = np.abs(pred / meas - 1.0)
    return float(np.median(e)), float(np.quantile(e, 0.9))


@dataclass
class Fit:
    """One reduction fitted on its training rows and judged on its held-out rows: the grid values
    (one row of nodes per group), and the errors of its predictions."""

    grid: np.ndarray  # groups x nodes: ln(measured / roofline) at the nodes
    train: int
    held: int
    median: float
    p90: float
    whole: tuple[float, float]

    def judged(self) -> str:
        return (f"{self.train} training rows; held-out {self.held} rows: median |error| {self.median:.1%}, "
                f"p90 {self.p90:.1%}; whole table {self.whole[0]:.1%}, p90 {self.whole[1]:.1%}")

    def meets(self) -> bool:
        return self.median <= TARGET_MEDIAN and self.p90 <= TARGET_P90


def fit_and_judge(sizes: np.ndarray, seconds: np.ndarray, roof: np.ndarray, hold: np.ndarray,
                  grids: list[list[float]], groups: np.ndarray | None = None, smooth: float = SMOOTH) -> Fit:
    """Fit ln(seconds / roof) on a grid over log2 of `sizes` (rows x axes) on the rows not held out,
    one independent grid per group (None: one for all rows), and judge it on the held-out rows."""
    points = np.log2(sizes)
    z = np.log(seconds / roof)
    groups = np.zeros(len(z), dtype=int) if groups is None else groups
    n_groups = int(groups.max()) + 1
    grid = np.zeros((n_groups, int(np.prod([len(g) for g in grids]))))
    pred = np.empty(len(z))
    for g in range(n_groups):
        rows = groups == g
        train = rows & ~hold
        grid[g] = fit_grid(points[train], z[train], grids, smooth).ravel()
        pred[rows] = _cells(points[rows], grids) @ grid[g]
    est = roof * np.exp(pred)
    med, p90 = errors(est[hold], seconds[hold]) if hold.any() else (float("nan"), float("nan"))
    return Fit(grid, int((~hold).sum()), int(hold.sum()), med, p90, errors(est, seconds))


def measured_shapes(rows: pd.DataFrame, shape: list[str], axes: list[str], step: float) -> tuple[dict, Fit, np.ndarray]:
    """One operator's table as measured, shape by shape (`shape`: the columns that name one layer on
    a rank): each shape its own ln(seconds) on the measured grid of `axes` (nodes at least `step`
    apart in log2), rows held out by a hash filled by the multilinear log-log surface of their
    neighbours (fit_and_judge, one grid per shape), stored as 100 ln(seconds) rounded (the rounding
    moves a time by 0.5 % at most) and written as steps: each node's value less the previous node's
    (row-major), the first node's value as it is (small integers: a compact registry). The registry
    value (roofline.ShapeTable), the fit, and which rows were held out."""
    shapes = rows[shape].drop_duplicates().sort_values(shape).reset_index(drop=True)
    group = rows[shape].merge(shapes.reset_index(), on=shape, how="left")["index"].to_numpy()
    hold = np.array([held_out(*k) for k in rows[[*axes, *shape]].itertuples(index=False)])
    grids = [axis_grid(rows[c], step) for c in axes]
    t = rows.latency.to_numpy() / 1e3
    fit = fit_and_judge(rows[axes].to_numpy().astype(float), t, np.ones(len(t)), hold, grids, group)
    value = {"shape": shape, "axes": axes, "log2_axes": grids,
             "shapes": [[int(x) for x in r] for r in shapes.itertuples(index=False)],
             "ln_seconds_x100_steps": [np.diff(np.round(100 * row).astype(int), prepend=0).tolist()
                                       for row in fit.grid]}
    return value, fit, hold


def one_kernel(df: pd.DataFrame, kernels: tuple) -> pd.DataFrame:
    """The rows of the first kernel (by substring, in order) the table holds at all."""
    for name in kernels:
        rows = df[df["kernel_source"].str.contains(name, regex=False)]
        if not rows.empty:
            return rows
    return df.iloc[0:0]


def pick_kernel(df: pd.DataFrame, kernels: tuple, keys: list) -> pd.DataFrame:
    """Per shape, the row of the first kernel (by substring, in order) that has one."""
    order = np.full(len(df), len(kernels))
    for rank, name in reversed(list(enumerate(kernels))):
        order[df["kernel_source"].str.contains(name, regex=False).to_numpy()] = rank
    df = df.assign(_rank=order)
    df = df[df._rank < len(kernels)]
    df = df.sort_values("_rank").drop_duplicates(keys, keep="first")
    return df.drop(columns="_rank")


def curve_value(grids: list, grid: np.ndarray, weight_bytes: float) -> dict:
    return {"weight_bytes": weight_bytes, "log2_axes": grids, "ln_ratio": [round(float(v), 3) for v in grid.ravel()]}


def seconds_of(ms) -> float:
    return float(f"{float(ms) / 1e3:.4g}")


def sample_held_out(hold: np.ndarray, n: int) -> np.ndarray:
    """n of the held-out rows' positions (the same every run)."""
    pick = np.flatnonzero(hold)
    return np.sort(np.random.default_rng(0).choice(pick, min(n, len(pick)), replace=False))


def report(system: str, op: str, label: str, rows: int, fit: Fit, note: str = "") -> None:
    flag = "" if fit.meets() else "  MISSES the target"
    print(f"{system:22s} {op:10s} {label:24s} rows {rows:6d} held-out median {fit.median:6.1%} p90 {fit.p90:6.1%}"
          f"  whole {fit.whole[0]:6.1%} / {fit.whole[1]:6.1%}{flag}{note}", flush=True)


def reduce_gemm(system: str, data: Path, version: str, rates: dict, fixtures: dict, results: list) -> dict:
    path = data / system / "gemm" / "vllm" / version / "gemm_perf.parquet"
    g = pd.read_parquet(path)
    out = {}
    for dtype, (wbytes, peak_key, kernels) in GEMM.items():
        rows = g[g.gemm_dtype == dtype]
        if rows.empty or not rates.get(peak_key):
            continue
        rows = pick_kernel(rows[(rows.n >= MIN_NK) & (rows.k >= MIN_NK)], kernels, ["m", "n", "k"])
        if len(rows) < 100:
            continue
        used = sorted(rows.kernel_source.unique())
        t = rows.latency.to_numpy() / 1e3
        roof = np.array([roofline.gemm_roofline(m, n, k, wbytes, rates[peak_key], rates["memory_bandwidth"])
                         for m, n, k in zip(rows.m, rows.n, rows.k, strict=True)])
        hold = np.array([held_out(n, k) for n, k in zip(rows.n, rows.k, strict=True)], dtype=bool)
        grids = [GRID_M, GRID_NK, GRID_NK]
        fit = fit_and_judge(rows[["m", "n", "k"]].to_numpy().astype(float), t, roof, hold, grids)
        note = GEMM_WHY.get(dtype, f"the one kernel vLLM runs for {dtype} ({', '.join(used)})")
        fmt = GEMM_FORMATS[dtype]
        out[fmt] = {"value": curve_value(grids, fit.grid[0], wbytes),
                    "source": f"{PACKAGE} systems/data/{system}/gemm/vllm/{version}/gemm_perf.parquet, gemm_dtype "
                              f"{dtype}, kernel_source {', '.join(used)}",
                    "how": f"ln(measured / GEMM roofline at {peak_key} and memory_bandwidth, pricing/step/roofline.py) "
                           f"fitted bilinearly on log2 m x log2 n x log2 k (n, k >= {MIN_NK}; shapes n, k held out by "
                           f"a hash; scripts/operators/reduce.py fit_and_judge): {fit.judged()}; kernel: {note}"}
        r = rows.iloc[sample_held_out(hold, FIXTURE_ROWS)]
        fixtures.setdefault("gemm", {"columns": ["format", "m", "n", "k", "seconds"], "rows": []})["rows"].extend(
            [fmt, int(a), int(b), int(c), seconds_of(d)] for a, b, c, d in zip(r.m, r.n, r.k, r.latency, strict=True))
        results.append((system, "gemm", fmt, fit))
        report(system, "gemm", fmt, len(rows), fit)
    if "fp8_tensor" in out and "fp8_block" in out and (system in BLACKWELL or system in HOPPER):
        block = out["fp8_block"]
        out["fp8_block"] = dict(out["fp8_tensor"])
        out["fp8_block"]["how"] = "the per-tensor FP8 (CUTLASS) curve of this chip, not the block-FP8 table: " + (
            BLOCK_FP8_BLACKWELL if system in BLACKWELL else BLOCK_FP8_HOPPER) + (
            " The block-FP8 table's reduction, unused: " + block["how"].split("; kernel:")[0])
        fixtures["gemm"]["rows"] = [r for r in fixtures["gemm"]["rows"] if r[0] != "fp8_block"]
        results[:] = [r for r in results if r[:3] != (system, "gemm", "fp8_block")]
    return out


def reduce_moe(system: str, data: Path, version: str, rates: dict, fixtures: dict, results: list) -> tuple:
    """Two reductions per format: `moe` (any shape: the ratio to the roofline on log2 token-expert
    assignments x one expert's elements x local experts, judged on held-out model shapes) and
    `moe_measured` (each measured shape's own seconds, interpolated log-log in tokens, judged on
    held-out rows: what a shape the table covers is priced at)."""
    path = data / system / "moe" / "vllm" / version / "moe_perf.parquet"
    if not path.exists():
        return {}, {}
    g = pd.read_parquet(path)
    g = g[g.distribution == "balanced"]
    g = g.assign(inter=g.inter_size // g.moe_tp_size)
    general, measured = {}, {}
    for dtype, (wbytes, peak_key, kernels) in MOE.items():
        rows = g[g.moe_dtype == dtype]
        if dtype == "fp8" and system in HOPPER:
            print(f"{system:22s} moe  {dtype:10s} skipped: {HOPPER_FP8_MOE}")
            continue
        rows = one_kernel(rows, kernels).drop_duplicates(["num_tokens", *MOE_SHAPE])
        if len(rows) < 100:
            continue
        peak = rates.get(peak_key) or rates["bf16_flops"]
        used = sorted(rows.kernel_source.unique())
        source = (f"{PACKAGE} systems/data/{system}/moe/vllm/{version}/moe_perf.parquet, moe_dtype {dtype}, "
                  f"distribution balanced, kernel_source {', '.join(used)}")
        fmt = MOE_FORMATS[dtype]
        t = rows.latency.to_numpy() / 1e3
        roof = np.array([roofline.moe_roofline(n, h, i, k, e, ep, wbytes, peak, rates["memory_bandwidth"], True)
                         for n, h, i, k, e, ep in zip(rows.num_tokens, rows.hidden_size, rows.inter, rows.topk,
                                                      rows.num_experts, rows.moe_ep_size, strict=True)])
        sizes = np.stack([(rows.num_tokens * rows.topk / rows.moe_ep_size).to_numpy().astype(float),
                          (3 * rows.hidden_size * rows.inter).to_numpy().astype(float),
                          (rows.num_experts / rows.moe_ep_size).to_numpy().astype(float)], axis=1)
        shape_hold = np.array([held_out(*k) for k in rows[MOE_SHAPE].itertuples(index=False)])
        if not shape_hold.all() and shape_hold.any():
            grids = [GRID_TOKENS, GRID_EXPERT, GRID_LOCAL]
            fit = fit_and_judge(sizes, t, roof, shape_hold, grids)
            general[fmt] = {"value": curve_value(grids, fit.grid[0], wbytes), "source": source,
                            "how": f"for shapes the table does not hold: ln(measured / fused-MoE roofline at "
                                   f"{peak_key} and memory_bandwidth of the table's balanced routing, "
                                   f"pricing/step/roofline.py moe_roofline balanced=True) fitted bilinearly "
                                   f"on log2 token-expert assignments x log2 one expert's elements x log2 experts, "
                                   f"all on the rank, model shapes held out by a hash: {fit.judged()}; "
                                   f"kernel: {MOE_WHY}"}
            report(system, "moe any", fmt, len(rows), fit)
        # each measured shape's own curve in tokens
        enough = (rows.groupby(MOE_SHAPE).num_tokens.transform("nunique") >= MIN_TOKEN_COUNTS).to_numpy()
        rows = rows[enough]
        value, fit, hold = measured_shapes(rows, MOE_SHAPE, ["num_tokens"], MOE_TOKEN_STEP)
        value["shape"] = ["hidden", "inter", "top_k", "experts", "ep"]
        measured[fmt] = {
            "value": value,
            "source": source,
            "how": f"each measured shape (hidden, inter = inter_size / moe_tp_size, top_k, experts, ep; "
                   f"{len(value['shapes'])} with at least {MIN_TOKEN_COUNTS} token counts) its own ln(seconds) at "
                   f"the table's token counts, rows held out by a hash filled by the log-log line of their neighbours "
                   f"(scripts/operators/reduce.py measured_shapes): {fit.judged()}; kernel: {MOE_WHY}; routing: "
                   f"{MOE_ROUTING}"}
        r = rows.iloc[sample_held_out(hold, FIXTURE_ROWS // 2)]
        fixtures.setdefault("moe", {"columns": ["format", "tokens", "hidden", "inter", "top_k", "experts", "tp", "ep",
                                                "seconds"], "rows": []})["rows"].extend(
            [fmt, int(a), int(b), int(c), int(d), int(e), int(f), int(h), seconds_of(s)]
            for a, b, c, d, e, f, h, s in zip(r.num_tokens, r.hidden_size, r.inter_size, r.topk, r.num_experts,
                                              r.moe_tp_size, r.moe_ep_size, r.latency, strict=True))
        results.append((system, "moe", fmt, fit))
        report(system, "moe shape", fmt, len(rows), fit, f"  ({', '.join(used)})")
    return general, measured


def reduce_attention(system: str, data: Path, version: str, rates: dict) -> dict:
    out = {}
    for phase in ("context", "generation"):
        path = data / system / "attention" / "vllm" / version / f"{phase}_attention_perf.parquet"
        if not path.exists():
            continue
        g = pd.read_parquet(path)
        if "window_size" in g:
            g = g[g.window_size == 0]
        if "kv_cache_dtype" not in g:
            g = g.assign(kv_cache_dtype="bfloat16")
        g = g[g.attn_dtype.isin(["bfloat16", "float16"])] if "attn_dtype" in g else g
        if "step" in g and phase == "context":
            g = g[g.step == 0]
        for kv in sorted(g.kv_cache_dtype.unique()):
            rows = g[g.kv_cache_dtype == kv]
            kv_bytes = 1 if kv == "fp8" else 2
            b, s, h, hk, d = (rows[c].to_numpy().astype(float) for c in
                              ("batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim"))
            if phase == "generation":  # isl is the one new token; `step` tokens are already in the cache
                s = s + rows["step"].to_numpy().astype(float)
            t = rows.latency.to_numpy() / 1e3
            if phase == "context":  # causal: every (query, key) pair below the diagonal, QK and PV
                work = 2.0 * h * d * s * (s + 1) * b
                roof = work / rates["bf16_flops"]
            else:  # one query per request reads its context's K and V
                work = b * s * hk * d * 2 * kv_bytes
                roof = work / rates["memory_bandwidth"]
            keep = roof >= FLOOR_SECONDS
            if keep.sum() < 20:
                continue
            hold = np.array([held_out(*k) for k in zip(h, hk, d, s, strict=True)]) & keep
            train = keep & ~hold
            fraction = float(np.exp(-np.median(np.log(t[train] / roof[train]))))
            med, p90 = errors(roof[hold] / fraction, t[hold])
            whole = errors(roof[keep] / fraction, t[keep])
            rate = "bf16 FLOP/s" if phase == "context" else "memory bandwidth"
            out.setdefault(phase, {})[kv] = {
                "value": round(fraction, 4),
                "source": f"{PACKAGE} systems/data/{system}/attention/vllm/{version}/{phase}_attention_perf.parquet, "
                          f"attn_dtype bfloat16, kv_cache_dtype {kv}, window 0, kernel_source "
                          f"{', '.join(sorted(rows.kernel_source.unique()))}",
                "how": f"the achieved fraction of the {rate}: exp(-median ln(measured / roofline)) over the "
                       f"{int(train.sum())} training rows whose roofline is at least {FLOOR_SECONDS * 1e6:.0f} us "
                       f"(below it the step model's per-layer floor prices the kernel); held-out {int(hold.sum())} "
                       f"rows: median |error| {med:.1%}, p90 {p90:.1%}; all such rows {whole[0]:.1%}, "
                       f"p90 {whole[1]:.1%}"}
            print(f"{system:22s} attn {phase:10s} kv {kv:8s} fraction {fraction:.3f} held-out median {med:6.1%}"
                  f" p90 {p90:6.1%}")
    return out




def reduce_attention_measured(system: str, data: Path, version: str, fixtures: dict, results: list) -> dict:
    """Context and generation attention as measured, by head shape (heads, KV heads, head size) on the
    grid of batch x tokens (context: each prompt's length; generation: each request's context,
    isl + step). The kernel: the one most rows were measured with (FlashAttention 3 on Hopper,
    FlashInfer TRT-LLM on Blackwell)."""
    out: dict = {}
    for phase in ("context", "generation"):
        path = data / system / "attention" / "vllm" / version / f"{phase}_attention_perf.parquet"
        if not path.exists():
            continue
        g = pd.read_parquet(path)
        g = g[g.window_size == 0] if "window_size" in g else g
        g = g.assign(kv_cache_dtype="bfloat16") if "kv_cache_dtype" not in g else g
        g = g[g.attn_dtype.isin(["bfloat16", "float16"])] if "attn_dtype" in g else g
        step = g["step"] if "step" in g else 0
        g = g.assign(tokens=g.isl + step if phase == "generation" else g.isl)
        for kv in sorted(g.kv_cache_dtype.unique()):
            rows = g[g.kv_cache_dtype == kv]
            kernel = rows.kernel_source.value_counts().index[0]
            rows = rows[rows.kernel_source == kernel].drop_duplicates(["batch_size", "tokens", *HEADS])
            if len(rows) < 100:
                continue
            value, fit, hold = measured_shapes(rows, HEADS, ["batch_size", "tokens"], ATTENTION_STEP)
            axis = "prompt length" if phase == "context" else "context length (isl + step)"
            out.setdefault(phase, {})[kv] = {
                "value": value,
                "source": f"{PACKAGE} systems/data/{system}/attention/vllm/{version}/{phase}_attention_perf.parquet, "
                          f"attn_dtype bfloat16, kv_cache_dtype {kv}, window 0, kernel_source {kernel}",
                "how": surface_how(f"each head shape ({len(value['shapes'])})", axis, fit)}
            r = rows.iloc[sample_held_out(hold, FIXTURE_ROWS // 2)]
            fixtures.setdefault(f"attention_{phase}", {
                "columns": ["format", "batch", "tokens", "heads", "kv_heads", "head_dim", "seconds"], "rows": []
            })["rows"].extend([kv, int(a), int(b), int(c), int(d), int(e), seconds_of(f)] for a, b, c, d, e, f in zip(
                r.batch_size, r.tokens, r.num_heads, r.num_key_value_heads, r.head_dim, r.latency, strict=True))
            results.append((system, f"attn {phase[:3]}", kv, fit))
            report(system, f"attn {phase[:3]}", kv, len(rows), fit, f"  ({kernel}, {len(value['shapes'])} head shapes)")
    return out


def surface_how(each: str, axis: str, fit) -> str:
    """The provenance of a table `measured_shapes` keeps: what each surface is, over which grid, and
    its held-out fit."""
    return (f"{each} its own ln(seconds) on the measured batch x {axis} grid (nodes a factor "
            f"{2 ** ATTENTION_STEP:.0f} apart at least), rows held out by a hash filled by the bilinear log-log "
            f"surface of their neighbours (scripts/operators/reduce.py measured_shapes): {fit.judged()}")


def reduce_modules(system: str, data: Path, version: str, fixtures: dict, results: list) -> dict:
    """The whole attention module of a DeepSeek-style layer (MLA: its projections and attention; DSA:
    with the indexer's top-k), per model, cache dtype and GEMM format, by heads on the rank, as
    measured on the grid of batch x tokens (context: prompt length; generation: context, isl + step)."""
    out: dict = {}
    for op, (folder, stem) in MODULES.items():
        for phase in ("context", "generation"):
            path = data / system / folder / "vllm" / version / f"{stem.format(phase=phase)}.parquet"
            if not path.exists():
                continue
            g = pd.read_parquet(path)
            g = g.assign(tokens=g.isl + g.step if phase == "generation" else g.isl)
            for (model, kv, gemm), rows in g.groupby(["model", "kv_cache_dtype", "gemm_type"]):
                kernel = rows.kernel_source.value_counts().index[0]
                rows = rows[rows.kernel_source == kernel].drop_duplicates(["batch_size", "tokens", "num_heads"])
                if len(rows) < 100 or model not in MODULE_MODELS:
                    continue
                value, fit, hold = measured_shapes(rows, ["num_heads"], ["batch_size", "tokens"], ATTENTION_STEP)
                label = f"{MODULE_MODELS[model]}_{kv}_{gemm}"
                out.setdefault(op, {}).setdefault(phase, {})[label] = {
                    "value": value,
                    "source": f"{PACKAGE} systems/data/{system}/{folder}/vllm/{version}/{path.name}, model {model}, "
                              f"kv_cache_dtype {kv}, gemm_type {gemm}, kernel_source {kernel}",
                    "how": surface_how("each head count on the rank", "tokens", fit)}
                r = rows.iloc[sample_held_out(hold, FIXTURE_ROWS // 5)]
                fixtures.setdefault(f"{op}_{phase}", {
                    "columns": ["format", "batch", "tokens", "heads", "seconds"], "rows": []
                })["rows"].extend([label, int(a), int(b), int(c), seconds_of(d)] for a, b, c, d in zip(
                    r.batch_size, r.tokens, r.num_heads, r.latency, strict=True))
                results.append((system, f"{op} {phase[:3]}", label, fit))
                report(system, f"{op} {phase[:3]}", label, len(rows), fit, f"  ({kernel})")
    return out


A2A_SHAPE = ["ep_size", "hidden_size", "topk", "num_experts"]  # one MoE layer's all-to-all


def reduce_all_to_all(system: str, data: Path, fixtures: dict, results: list) -> dict:
    """The MoE all-to-all (DeepEP dispatch and combine, per backend: high-throughput, low-latency, ...)
    as measured: each shape (EP size, hidden, top-k, experts) its own seconds at the measured token
    counts on the rank, rows held out by a hash filled by the log-log line of their neighbours."""
    folder = data / system / "comm" / "vllm"
    paths = sorted(folder.glob("*/moe_a2a_perf.parquet")) if folder.exists() else []
    if not paths:
        return {}
    path = paths[-1]
    g = pd.read_parquet(path)
    out: dict = {}
    for (backend, phase), rows in g.groupby(["comm_backend", "phase"]):
        rows = rows.drop_duplicates(["num_tokens", *A2A_SHAPE])
        if len(rows) < 40:
            continue
        value, fit, hold = measured_shapes(rows, A2A_SHAPE, ["num_tokens"], 0.0)
        label = f"{backend}_{phase}"
        out[label] = {
            "value": value,
            "source": f"{PACKAGE} systems/data/{system}/comm/vllm/{path.parent.name}/moe_a2a_perf.parquet, "
                      f"comm_backend {backend}, phase {phase}, sms {', '.join(map(str, sorted(rows.sms.unique())))}",
            "how": f"each shape ({len(value['shapes'])}: ep_size, hidden, top_k, experts) its own ln(seconds) at the "
                   f"measured token counts, rows held out by a hash filled by the log-log line of their neighbours "
                   f"(scripts/operators/reduce.py measured_shapes): {fit.judged()}"}
        r = rows.iloc[np.flatnonzero(hold)]  # every held-out row (a table of 80 rows)
        fixtures.setdefault("all_to_all", {
            "columns": ["format", "tokens", "ep", "hidden", "top_k", "experts", "seconds"], "rows": []
        })["rows"].extend([label, int(a), int(b), int(c), int(d), int(e), seconds_of(f)] for a, b, c, d, e, f in zip(
            r.num_tokens, r.ep_size, r.hidden_size, r.topk, r.num_experts, r.latency, strict=True))
        results.append((system, "all-to-all", label, fit))
        report(system, "all-to-all", label, len(rows), fit)
    return out


def reduce_allreduce(system: str, data: Path, results: list) -> dict:
    folder = data / system / "comm" / "vllm"
    if not folder.exists():
        return {}
    versions = sorted((p for p in folder.iterdir() if (p / "custom_allreduce_perf.parquet").exists()),
                      key=lambda p: tuple(int(x) for x in p.name.split(".")))
    if not versions:
        return {}
    path = versions[-1] / "custom_allreduce_perf.parquet"
    g = pd.read_parquet(path)
    g = g[(g.backend == "vllm_graph") & (g.allreduce_dtype == "bfloat16")] if "backend" in g else g
    out = {}
    for gpus, rows in g.groupby("num_gpus"):
        rows = rows.sort_values("message_size")
        pts = [[int(m) * 2, round(float(v) / 1e3, 9)] for m, v in zip(rows.message_size, rows.latency, strict=True)]
        # the law (log-log between measured points) judged on rows held out by a hash, from the others
        hold = np.array([held_out(int(gpus), p[0]) for p in pts])
        hold[[0, -1]] = False  # the ends are kept: the law does not extrapolate below the first point
        x = np.log([p[0] for p in pts])
        y = np.log([p[1] for p in pts])
        est = np.exp(np.interp(x, x[~hold], y[~hold]))
        t = np.exp(y)
        fit = Fit(np.zeros((1, 0)), int((~hold).sum()), int(hold.sum()), *errors(est[hold], t[hold]), errors(est, t))
        results.append((system, "all-reduce", f"gpus_{int(gpus)}", fit))
        report(system, "all-reduce", f"gpus_{int(gpus)}", len(rows), fit)
        out[f"gpus_{int(gpus)}"] = {
            "value": pts,
            "source": f"{PACKAGE} systems/data/{system}/comm/vllm/{versions[-1].name}/custom_allreduce_perf.parquet, "
                      f"num_gpus {int(gpus)}, backend vllm_graph, bfloat16",
            "how": "[message bytes, seconds] as measured (message_size elements x 2 bytes, latency ms / 1000); the "
                   "step model interpolates in log-log (pricing/step/roofline.py loglog); that law on rows held out by "
                   f"a hash (the first and last kept), from the others: {fit.judged()}"}
    return out


# the dense MLP of Llama-3.1-70B at tensor parallel 4 (gate_up 14336 x 8192, down 8192 x 7168): its measured
# rows, and the two measured widths around 14336 (tests/test_operators.py checks the step's MLP against them)
MLP_SHAPES = [(12288, 8192), (16384, 8192), (8192, 7168)]


def mlp_fixture(data: Path) -> None:
    g = pd.read_parquet(data / "h100_sxm" / "gemm" / "vllm" / "0.24.0" / "gemm_perf.parquet")
    rows = g[(g.gemm_dtype == "bfloat16") & g[["n", "k"]].apply(tuple, axis=1).isin(MLP_SHAPES)].sort_values(
        ["n", "k", "m"])
    doc = {"columns": ["m", "n", "k", "seconds"],
           "rows": [[int(a), int(b), int(c), float(f"{float(d) / 1e3:.4g}")]
                    for a, b, c, d in zip(rows.m, rows.n, rows.k, rows.latency, strict=True)]}
    (ROOT / "tests" / "fixtures" / "operators" / "h100_bf16_mlp_llama70b_tp4.yaml").write_text(
        f"# {PACKAGE} systems/data/h100_sxm/gemm/vllm/0.24.0/gemm_perf.parquet, gemm_dtype bfloat16: every row of "
        f"the shapes (n, k) {MLP_SHAPES}, as measured (scripts/operators/reduce.py)\n"
        + yaml.safe_dump(doc, sort_keys=False, width=100000, default_flow_style=None))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--systems", nargs="*", default=list(SYSTEMS))
    ap.add_argument("--check", action="store_true",
                    help="reduce the whole tables and judge every reduction on its held-out rows; write nothing; "
                         "exit 1 if one misses the target (median 8 %%, p90 20 %%)")
    args = ap.parse_args()
    data = args.data
    if data is None:
        import aiconfigurator_core
        data = Path(aiconfigurator_core.__file__).parent / "systems" / "data"
    fixtures_dir = ROOT / "tests" / "fixtures" / "operators"
    if not args.check:
        fixtures_dir.mkdir(parents=True, exist_ok=True)
        mlp_fixture(data)
    results: list = []
    for system in args.systems:
        chip, version = SYSTEMS[system]
        rates = chip_rates(chip)
        fixtures: dict = {}
        moe, moe_measured = reduce_moe(system, data, version, rates, fixtures, results)
        doc = {"gemm": reduce_gemm(system, data, version, rates, fixtures, results),
               "moe": moe,
               "moe_measured": moe_measured,
               "attention": reduce_attention(system, data, version, rates),
               "attention_measured": reduce_attention_measured(system, data, version, fixtures, results),
               **reduce_modules(system, data, version, fixtures, results),
               "all_reduce": reduce_allreduce(system, data, results),
               "all_to_all": reduce_all_to_all(system, data, fixtures, results)}
        doc = {k: v for k, v in doc.items() if v}
        if args.check:
            continue
        header = (f"# Measured vLLM {version} operator timings on {system}, reduced for the step model "
                  "(pricing/step/).\n"
                  f"# Generated by scripts/operators/reduce.py from {PACKAGE} (Apache-2.0); do not edit by hand.\n"
                  f"# Chip {chip}: rooflines at pricing/registry/chips/{chip}.yaml `rates`.\n")
        target = ROOT / "pricing" / "registry" / f"operators_{chip}.yaml"
        target.write_text(header + yaml.safe_dump(doc, sort_keys=False, width=100000, default_flow_style=None))
        (fixtures_dir / f"{chip}.yaml").write_text(
            f"# Held-out rows of {system}'s vLLM {version} operator tables ({PACKAGE}), sampled by "
            "scripts/operators/reduce.py; seconds as measured.\n"
            + yaml.safe_dump(fixtures, sort_keys=False, width=100000, default_flow_style=None))
    missed = [r for r in results if not r[3].meets()]
    print(f"\n{len(results)} reductions judged on held-out rows; {len(missed)} miss the target "
          f"(median <= {TARGET_MEDIAN:.0%}, p90 <= {TARGET_P90:.0%}):")
    for system, op, label, fit in missed:
        print(f"  {system} {op} {label}: median {fit.median:.1%}, p90 {fit.p90:.1%}")
    if args.check and missed:
        sys.exit(1)


if __name__ == "__main__":
    main()
