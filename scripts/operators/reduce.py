"""Reduce NVIDIA aiconfigurator-core's measured vLLM operator tables to the project's own compact
operator data: pricing/registry/operators_<chip>.yaml, and a held-out fixture sample under
tests/fixtures/operators/.

Runs in a side venv, never at run time (the package is not a dependency of the project):

    python3 -m venv /tmp/venv-aic && /tmp/venv-aic/bin/pip install aiconfigurator_core-0.12.0-*.whl pandas pyarrow
    /tmp/venv-aic/bin/python scripts/operators/reduce.py [--data <.../aiconfigurator_core/systems/data>]

Each operator's measured time is divided by its roofline at the chip's data-sheet peak rates
(pricing/step/roofline.py, loaded here by path so the reduction and the step model share one law) and
the ratio's logarithm is fitted on a grid in log2 of the operator's size (least squares, bilinear,
with a small smoothness penalty that fills empty cells): GEMMs by tokens m and weight elements n·k,
fused MoE by tokens per expert (tokens · top-k / experts) and one expert's elements (3 · hidden ·
width). Attention is reduced to one achieved fraction of the roofline per chip and KV-cache dtype
(context: of the bf16 FLOP/s, generation: of the memory bandwidth) over the rows where the roofline is
at least FLOOR_SECONDS (below that the per-layer floor of the step model prices them). The custom
all-reduce (CUDA-graph backend) is kept as measured, seconds by message bytes, per GPU count.

Rows are split by a hash of their shape: every HOLD_OUT-th shape is held out of the fit and judges it.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import sys
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
HOLD_OUT = 4  # every 4th shape (by a hash of it) is held out
FLOOR_SECONDS = 50e-6
SMOOTH = 0.05  # the fit's second-difference penalty (relative to the rows per cell)
FIXTURE_ROWS = 200  # held-out rows per chip and format in the test fixture
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
# fused MoE: table dtype -> (weight bytes, peak rate, kernel sources in order of preference by generation)
MOE = {"bfloat16": (2.0, "bf16_flops", ("trtllmbf16experts", "tritonexperts", "flashinfer_cutlass", "vllm_fused_moe")),
       "fp8": (1.0, "fp8_flops", ("trtllmfp8expertsmonolithic", "tritonexperts", "flashinfer_cutlass",
                                  "vllm_fused_moe")),  # not FlashInfer CUTLASS on Hopper: HOPPER_FP8_MOE
       "fp8_block": (1.0, "fp8_flops", ("trtllmfp8expertsmonolithic", "tritonexperts", "vllm_fused_moe")),
       "nvfp4": (0.5625, "fp4_flops", ("trtllmnvfp4expertsmonolithic", "flashinfer_cutlass")),
       "w4a16_mxfp4": (0.53125, "bf16_flops", ("trtllmmxfp4expertsmonolithic", "oaitritonmxfp4", "marlin")),
       "int4_wo": (0.5625, "bf16_flops", ("marlin",))}
HOPPER = ("h100_sxm", "h200_sxm")
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


def held_out(*key) -> bool:
    return int(hashlib.sha256(repr(key).encode()).hexdigest(), 16) % HOLD_OUT == 0


def chip_rates(chip: str) -> dict:
    doc = yaml.safe_load((ROOT / "pricing" / "registry" / "chips" / f"{chip}.yaml").read_text())
    return {k: float(v["value"]) for k, v in doc["rates"].items()}


def fit_grid(points: np.ndarray, z: np.ndarray, grids: list[list[float]], smooth: float = SMOOTH) -> np.ndarray:
    """The grid values whose multilinear interpolation fits z at `points` (rows x axes, log2) in least
    squares, with a second-difference penalty (weight `smooth`) along each axis that fills cells no row
    reaches; solved through the normal equations (the grid is small, the rows many)."""
    dims = [len(g) for g in grids]
    size = int(np.prod(dims))
    strides = np.cumprod([1] + dims[::-1][:-1])[::-1]
    idx, frac = [], []
    for a, g in enumerate(grids):
        x = np.clip(points[:, a], g[0], g[-1])
        i = np.clip(np.searchsorted(g, x, side="right") - 1, 0, len(g) - 2)
        ga = np.asarray(g)
        idx.append(i)
        frac.append((x - ga[i]) / (ga[i + 1] - ga[i]))
    ata = np.zeros((size, size))
    atz = np.zeros(size)
    corners = np.array(np.meshgrid(*[[0, 1]] * len(grids), indexing="ij")).reshape(len(grids), -1).T
    cols, weights = [], []
    for c in corners:
        col = sum((idx[a] + c[a]) * strides[a] for a in range(len(grids)))
        w = np.prod([frac[a] if c[a] else 1 - frac[a] for a in range(len(grids))], axis=0)
        cols.append(col)
        weights.append(w)
    for ci, wi in zip(cols, weights, strict=True):
        np.add.at(atz, ci, wi * z)
        for cj, wj in zip(cols, weights, strict=True):
            np.add.at(ata, (ci, cj), wi * wj)
    s = smooth ** 2 * max(len(z), 1) / size
    for a, n in enumerate(dims):
        for flat in range(size):
            pos = (flat // strides[a]) % n
            if pos + 2 < n:
                d = np.zeros(size)
                d[flat], d[flat + strides[a]], d[flat + 2 * strides[a]] = 1, -2, 1
                nz = [flat, flat + strides[a], flat + 2 * strides[a]]
                ata[np.ix_(nz, nz)] += s * np.outer(d[nz], d[nz])
    return np.linalg.solve(ata + 1e-9 * np.eye(size), atz).reshape(dims)


def errors(pred: np.ndarray, meas: np.ndarray) -> tuple[float, float]:
    e = np.abs(pred / meas - 1.0)
    return float(np.median(e)), float(np.quantile(e, 0.9))


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


def predict(curve: dict, sizes: np.ndarray) -> np.ndarray:
    c = roofline.Curve.of(curve)
    return np.array([c.ratio(*row) for row in sizes])


def reduce_gemm(system: str, data: Path, version: str, rates: dict, fixtures: dict) -> dict:
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
        sizes = rows[["m", "n", "k"]].to_numpy().astype(float)
        grids = [GRID_M, GRID_NK, GRID_NK]
        grid = fit_grid(np.log2(sizes[~hold]), np.log(t[~hold] / roof[~hold]), grids)
        value = curve_value(grids, grid, wbytes)
        pred = predict(value, sizes) * roof
        med, p90 = errors(pred[hold], t[hold])
        whole = errors(pred, t)
        note = GEMM_WHY.get(dtype, f"the one kernel vLLM runs for {dtype} ({', '.join(used)})")
        fmt = GEMM_FORMATS[dtype]
        out[fmt] = {"value": value,
                    "source": f"{PACKAGE} systems/data/{system}/gemm/vllm/{version}/gemm_perf.parquet, gemm_dtype "
                              f"{dtype}, kernel_source {', '.join(used)}",
                    "how": f"{int((~hold).sum())} training rows (shapes n, k not held out); ln(measured / GEMM "
                           f"roofline at {peak_key} and memory_bandwidth, pricing/step/roofline.py) fitted bilinearly "
                           f"on log2 m x log2 n x log2 k (n, k >= {MIN_NK}; scripts/operators/reduce.py); "
                           f"held-out {int(hold.sum())} rows: "
                           f"median |error| {med:.1%}, p90 {p90:.1%}; whole table {whole[0]:.1%}, p90 {whole[1]:.1%}; "
                           f"kernel: {note}"}
        sample = rows[hold].sample(min(FIXTURE_ROWS, int(hold.sum())), random_state=0)
        fixtures.setdefault("gemm", {"columns": ["format", "m", "n", "k", "seconds"], "rows": []})["rows"].extend(
            [fmt, int(a), int(b), int(c), float(f"{float(d) / 1e3:.4g}")]
            for a, b, c, d in zip(sample.m, sample.n, sample.k, sample.latency, strict=True))
        print(f"{system:22s} gemm {dtype:10s} rows {len(rows):6d} held-out median {med:6.1%} p90 {p90:6.1%}"
              f"  whole {whole[0]:6.1%} / {whole[1]:6.1%}")
    if system in BLACKWELL and "fp8_tensor" in out and "fp8_block" in out:
        block = out["fp8_block"]
        out["fp8_block"] = dict(out["fp8_tensor"])
        out["fp8_block"]["how"] = (
            "the per-tensor FP8 (CUTLASS) curve of this chip, not the block-FP8 table: its DeepGEMM rows are a flat "
            "~0.18 ms per call up to m = 2048 whatever n and k (8192 x 8192: 10-20x the weights' read time, 8x the "
            "per-tensor FP8 GEMM), a fixed cost a CUDA-graph-captured step does not pay (vLLM's measured TPOT of "
            "block-FP8 checkpoints on Blackwell, validation/vllm_silicon_points.yaml, is near the weights' read time; "
            "aiconfigurator's own accuracy corpus labels those runs fp8). The block-FP8 table's reduction, unused: "
            + block["how"].split("; kernel:")[0])
        fixtures["gemm"]["rows"] = [r for r in fixtures["gemm"]["rows"] if r[0] != "fp8_block"]
    return out


def reduce_moe(system: str, data: Path, version: str, rates: dict, fixtures: dict) -> dict:
    path = data / system / "moe" / "vllm" / version / "moe_perf.parquet"
    if not path.exists():
        return {}
    g = pd.read_parquet(path)
    g = g[g.distribution == "balanced"]
    out = {}
    keys = ["num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size"]
    for dtype, (wbytes, peak_key, kernels) in MOE.items():
        rows = g[g.moe_dtype == dtype]
        if dtype == "fp8" and system in HOPPER:
            print(f"{system:22s} moe  {dtype:10s} skipped: {HOPPER_FP8_MOE}")
            continue
        rows = one_kernel(rows, kernels).drop_duplicates(keys)
        if len(rows) < 100:
            continue
        peak = rates.get(peak_key) or rates["bf16_flops"]
        used = sorted(rows.kernel_source.unique())
        t = rows.latency.to_numpy() / 1e3
        inter = (rows.inter_size // rows.moe_tp_size).to_numpy()
        roof = np.array([roofline.moe_roofline(n, h, i, k, e, ep, wbytes, peak, rates["memory_bandwidth"])
                         for n, h, i, k, e, ep in zip(rows.num_tokens, rows.hidden_size, inter, rows.topk,
                                                      rows.num_experts, rows.moe_ep_size, strict=True)])
        sizes = np.stack([(rows.num_tokens * rows.topk / rows.moe_ep_size).to_numpy().astype(float),
                          (3 * rows.hidden_size.to_numpy() * inter).astype(float),
                          (rows.num_experts / rows.moe_ep_size).to_numpy().astype(float)], axis=1)
        hold = np.array([held_out(*k) for k in zip(rows.hidden_size, rows.inter_size, rows.topk, rows.num_experts,
                                                    rows.moe_tp_size, rows.moe_ep_size, strict=True)])
        if hold.all() or not hold.any():
            continue
        grids = [GRID_TOKENS, GRID_EXPERT, GRID_LOCAL]
        grid = fit_grid(np.log2(sizes[~hold]), np.log(t[~hold] / roof[~hold]), grids)
        value = curve_value(grids, grid, wbytes)
        pred = predict(value, sizes) * roof
        med, p90 = errors(pred[hold], t[hold])
        whole = errors(pred, t)
        fmt = MOE_FORMATS[dtype]
        out[fmt] = {"value": value,
                    "source": f"{PACKAGE} systems/data/{system}/moe/vllm/{version}/moe_perf.parquet, "
                              f"moe_dtype {dtype}, "
                              f"distribution balanced, kernel_source {', '.join(used)}",
                    "how": f"{int((~hold).sum())} training rows (model shapes not held out); ln(measured / fused-MoE "
                           f"roofline at {peak_key} and memory_bandwidth, pricing/step/roofline.py) fitted bilinearly "
                           f"on log2 token-expert assignments x log2 one expert's elements x log2 experts, all on "
                           f"the rank; held-out {int(hold.sum())} rows: "
                           f"median |error| {med:.1%}, p90 {p90:.1%}; whole table {whole[0]:.1%}, p90 {whole[1]:.1%}; "
                           f"kernel: {MOE_WHY}"}
        pick = np.flatnonzero(hold)
        pick = np.random.default_rng(0).choice(pick, min(FIXTURE_ROWS // 2, len(pick)), replace=False)
        r = rows.iloc[pick]
        fixtures.setdefault("moe", {"columns": ["format", "tokens", "hidden", "inter", "top_k", "experts", "tp", "ep",
                                                "seconds"], "rows": []})["rows"].extend(
            [fmt, int(a), int(b), int(c), int(d), int(e), int(f), int(h), float(f"{float(s) / 1e3:.4g}")]
            for a, b, c, d, e, f, h, s in zip(r.num_tokens, r.hidden_size, r.inter_size, r.topk, r.num_experts,
                                              r.moe_tp_size, r.moe_ep_size, r.latency, strict=True))
        print(f"{system:22s} moe  {dtype:10s} rows {len(rows):6d} held-out median {med:6.1%} p90 {p90:6.1%}"
              f"  whole {whole[0]:6.1%} / {whole[1]:6.1%}  ({', '.join(used)})")
    return out


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


def reduce_allreduce(system: str, data: Path) -> dict:
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
        out[f"gpus_{int(gpus)}"] = {
            "value": pts,
            "source": f"{PACKAGE} systems/data/{system}/comm/vllm/{versions[-1].name}/custom_allreduce_perf.parquet, "
                      f"num_gpus {int(gpus)}, backend vllm_graph, bfloat16",
            "how": "[message bytes, seconds] as measured (message_size elements x 2 bytes, latency ms / 1000); "
                   "the step "
                   "model interpolates in log-log (pricing/step/roofline.py loglog)"}
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
    args = ap.parse_args()
    data = args.data
    if data is None:
        import aiconfigurator_core
        data = Path(aiconfigurator_core.__file__).parent / "systems" / "data"
    fixtures_dir = ROOT / "tests" / "fixtures" / "operators"
    fixtures_dir.mkdir(parents=True, exist_ok=True)
    mlp_fixture(data)
    for system in args.systems:
        chip, version = SYSTEMS[system]
        rates = chip_rates(chip)
        fixtures: dict = {}
        doc = {"gemm": reduce_gemm(system, data, version, rates, fixtures),
               "moe": reduce_moe(system, data, version, rates, fixtures),
               "attention": reduce_attention(system, data, version, rates),
               "all_reduce": reduce_allreduce(system, data)}
        doc = {k: v for k, v in doc.items() if v}
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


if __name__ == "__main__":
    main()
