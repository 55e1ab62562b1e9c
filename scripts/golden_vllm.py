#!/usr/bin/env python3
"""Regenerate the golden fixtures tests/golden/vllm-0.33/*.json from vLLM 0.33's own KV-cache planner.

The oracle is ../shared/tools/vllm-oracle (vLLM 0.33.0's real planning code, run on a CPU; see its
README). This script holds the case table (inputs only: card, chip, Deployment flags, available
memory), builds each case's oracle input from the PUBLISHED config.json in ../shared/models (never
from the project's graph code, so a wrong graph cannot agree with itself), runs every case in one
oracle process and writes vLLM's answer, copied verbatim from the oracle output, in the format agreed
in TEAM.md.

    python scripts/golden_vllm.py                  # regenerate every fixture
    python scripts/golden_vllm.py --only 'qwen3-next*'   # a subset (fnmatch pattern, or a substring)
    python scripts/golden_vllm.py --check          # diff vLLM's answers against the files, write nothing
    python scripts/golden_vllm.py --list           # the case table

The oracle's venv is $VLLM_ORACLE_VENV (default ~/.cache/vllm-oracle-venv); install it with
`bash ../shared/tools/vllm-oracle/setup.sh`. The driver needs only python3 (standard library); the
child (`--worker`) runs in the oracle venv, all cases in one process.

Layer lists are written here from each config (names as vLLM's model classes prefix them, kv heads
per rank max(1, total // tp)); the worker checks them against the config as transformers/vLLM parse
it (layer pattern, layer count) before planning. DeepSeek-V4 and V4.1 specs come from vLLM's own
modules (the oracle's dsv4_specs.py / dsv41_specs.py).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
MODELS = SHARED / "models"
ORACLE_DIR = SHARED / "tools" / "vllm-oracle"
OUT_DIR = ROOT / "tests" / "golden" / "vllm-0.33"
VLLM_VERSION = "0.33.0"
GiB = 1 << 30
MiB = 1 << 20

# ---------------------------------------------------------------------------------------------
# Attention backend per chip generation, as vLLM 0.33's CUDA platform orders them
# (vllm/platforms/cuda.py `_get_backend_priorities`, first backend whose validate_configuration
# accepts the layer on that GPU). The oracle runs on a CPU, so the choice is made here and recorded
# in every fixture's oracle input; it decides kernel block sizes (hybrid alignment) and layouts.
# ---------------------------------------------------------------------------------------------
BACKENDS = {
    # dense GQA/MHA: FA2 on SM80/SM120 (no FP8 KV there -> FlashInfer), FA3 on SM90, FlashInfer on SM100
    ("gqa", "sm80", "auto"): "FLASH_ATTN", ("gqa", "sm80", "fp8"): "FLASHINFER",
    ("gqa", "sm90", "auto"): "FLASH_ATTN", ("gqa", "sm90", "fp8"): "FLASH_ATTN",
    ("gqa", "sm100", "auto"): "FLASHINFER", ("gqa", "sm100", "fp8"): "FLASHINFER",
    ("gqa", "sm120", "auto"): "FLASH_ATTN", ("gqa", "sm120", "fp8"): "FLASHINFER",
    # attention sinks (gpt-oss): FA2 has no sinks -> Triton on SM80
    ("sink", "sm80", "auto"): "TRITON_ATTN", ("sink", "sm90", "auto"): "FLASH_ATTN",
    ("sink", "sm100", "auto"): "FLASHINFER", ("sink", "sm120", "auto"): "TRITON_ATTN",
    # dense MLA: FlashMLA on SM90 (vLLM lists FA3-MLA first for bf16, but its module needs the flash_attn
    # CUDA extension and cannot be imported on the oracle's CPU, so bf16 cases use FlashMLA, the next valid
    # one), FlashInfer-MLA on SM100, Triton-MLA on SM80/SM120
    ("mla", "sm80", "auto"): "TRITON_MLA", ("mla", "sm90", "auto"): "FLASHMLA",
    ("mla", "sm90", "fp8"): "FLASHMLA", ("mla", "sm100", "auto"): "FLASHINFER_MLA",
    ("mla", "sm100", "fp8"): "FLASHINFER_MLA", ("mla", "sm120", "auto"): "TRITON_MLA",
    # sparse MLA (DSA indexer): FlashMLA-sparse on SM90 and for bf16 on SM100 (heads > 16),
    # FlashInfer-MLA-sparse for FP8 on SM100, FlashInfer SM120 sparse on SM120
    ("dsa", "sm90", "auto"): "FLASHMLA_SPARSE", ("dsa", "sm90", "fp8"): "FLASHMLA_SPARSE",
    ("dsa", "sm100", "auto"): "FLASHMLA_SPARSE", ("dsa", "sm100", "fp8"): "FLASHINFER_MLA_SPARSE",
    ("dsa", "sm120", "auto"): "FLASHINFER_MLA_SPARSE_SM120", ("dsa", "sm120", "fp8"): "FLASHINFER_MLA_SPARSE_SM120",
}

# vLLM's per-backend layer spellings of --kv-cache-dtype for sparse MLA (mla_attention.py
# _canonicalize_sparse_mla_kv_cache_dtype): FlashMLA-sparse serves any FP8 as fp8_ds_mla,
# the SM120 FlashInfer sparse backend serves auto and fp8 as fp8_ds_mla.
SPARSE_MLA_LAYER_DTYPE = {
    ("FLASHMLA_SPARSE", "fp8"): "fp8_ds_mla",
    ("FLASHINFER_MLA_SPARSE_SM120", "auto"): "fp8_ds_mla",
    ("FLASHINFER_MLA_SPARSE_SM120", "fp8"): "fp8_ds_mla",
}

INDEXER_BACKEND = "vllm.v1.attention.backends.mla.indexer:DeepseekV32IndexerBackend"


def case(name, why, model, chip, sm, memory_gib, deployment, **extra):
    """One golden case: inputs only. memory_gib: the KV pool vLLM is given (--kv-cache-memory-bytes),
    chosen as what remains on that chip after weights, activations and graphs (see "Memory" below)."""
    return {"case": name, "why": why, "model": model, "chip": chip, "sm": sm,
            "available_memory_bytes": int(round(memory_gib * 1024)) * MiB, "deployment": deployment, **extra}


def dep(tp=1, max_model_len=131072, tokens=8192, seqs=256, kv="auto", **kw):
    d = {"tensor_parallel_size": tp, "kv_cache_dtype": kv, "max_model_len": max_model_len,
         "max_num_batched_tokens": tokens, "max_num_seqs": seqs}
    d.update(kw)
    return d


# Memory: ~0.9 x the chip's visible HBM, minus the served weights per rank and ~4 GiB of activations,
# CUDA graphs and non-torch memory (H100/A100 80 GB: 79.2 GiB visible, H200 139.8, B200 178.4,
# RTX PRO 6000 94.5), rounded. The DeepSeek-V4/V4.1 cases keep the oracle's own examples' 40/60 GiB
# (their KV structure does not depend on the figure; dsv4-flash tp1 would not hold its weights).
CASES = [
    # ---------------- dense GQA -------------------------------------------------------------
    case("llama-3.1-8b_h100_tp1_bf16", "dense GQA baseline: one group of 32 layers; the group page (65,536 B, one "
         "layer) is not the pool block (32 pages)",
         "llama-3.1-8b", "h100", "sm90", 52.0, dep()),
    case("llama-3.1-8b_a100_tp1_fp8", "SM80 with an FP8 cache (FlashInfer, since FA2 has no FP8 KV)",
         "llama-3.1-8b", "a100-80gb", "sm80", 52.0, dep(kv="fp8")),
    case("llama-3.1-8b_h200_tp1_block32", "--block-size 32: page 2x, block tokens 32",
         "llama-3.1-8b", "h200", "sm90", 105.0, dep(block_size=32)),
    case("llama-3.1-8b_h100_tp1_noprefix_sync", "prefix caching off and async scheduling off on a dense model",
         "llama-3.1-8b", "h100", "sm90", 52.0, dep(enable_prefix_caching=False, async_scheduling=False)),
    case("llama-3.1-8b_h100_tp1_refused", "vLLM refuses: 1 GiB cannot hold one 128k request (error text kept)",
         "llama-3.1-8b", "h100", "sm90", 1.0, dep()),
    case("llama-3.1-8b_rtx-pro-6000_tp1_bf16", "SM120 dense (FA2 backend, same page layout as SM90)",
         "llama-3.1-8b", "rtx-pro-6000", "sm120", 66.0, dep()),
    case("llama-3.1-70b_h100_tp4_bf16", "tp 4: 8 KV heads -> 2 per rank",
         "llama-3.1-70b", "h100", "sm90", 35.0, dep(tp=4)),
    case("llama-3.3-70b_h200_tp2_fp8", "tp 2, FP8 cache (1-byte elements) on SM90",
         "llama-3.3-70b", "h200", "sm90", 55.0, dep(tp=2, kv="fp8")),
    case("llama-3.1-405b_h200_tp8_fp8", "tp 8: 1 KV head per rank, 126 layers, FP8 cache",
         "llama-3.1-405b", "h200", "sm90", 25.0, dep(tp=8, kv="fp8")),
    case("llama-3.1-405b_b200_tp16_bf16", "tp 16 > 8 KV heads: max(1, 8 // 16) = 1 head per rank (replicated), SM100",
         "llama-3.1-405b", "b200", "sm100", 110.0, dep(tp=16)),
    case("qwen2.5-7b_a100_tp1_bf16", "SM80 dense, 4 KV heads, 32k context (use_sliding_window false)",
         "qwen2.5-7b", "a100-80gb", "sm80", 53.0, dep(max_model_len=32768)),
    case("qwen3-8b_h100_tp2_bf16", "tp 2 dense Qwen3", "qwen3-8b", "h100", "sm90", 59.0,
         dep(tp=2, max_model_len=40960)),
    case("qwen3-32b_b200_tp1_bf16", "SM100 dense (FlashInfer)", "qwen3-32b", "b200", "sm100", 96.0,
         dep(max_model_len=40960)),
    case("qwen3-30b-a3b_h100_tp1_fp8", "MoE with GQA attention, FP8 cache", "qwen3-30b-a3b", "h100", "sm90", 10.0,
         dep(max_model_len=40960, kv="fp8")),
    case("qwen3-235b-a22b_h200_tp8_bf16", "MoE, 4 KV heads at tp 8 -> 1 per rank", "qwen3-235b-a22b", "h200", "sm90",
         64.0, dep(tp=8, max_model_len=40960)),
    case("qwen3-235b-a22b_h200_tp8_dcp2", "decode context parallel 2 on GQA (4 KV heads at tp 8: dcp <= tp / H = 2)",
         "qwen3-235b-a22b", "h200", "sm90", 64.0, dep(tp=8, max_model_len=40960, decode_context_parallel_size=2)),
    case("minimax-m2.7_h200_tp4_bf16", "MiniMax-M2 MoE (62 full-attention layers, 8 KV heads -> 2 per rank), FP8 "
         "checkpoint with a bf16 cache", "minimax-m2.7", "h200", "sm90", 70.0, dep(tp=4, max_model_len=196608)),
    case("minimax-m2.7_b200_tp8_fp8", "MiniMax-M2 at tp 8 (1 KV head per rank), FP8 cache, SM100 (FlashInfer)",
         "minimax-m2.7", "b200", "sm100", 140.0, dep(tp=8, max_model_len=196608, kv="fp8")),
    case("minimax-m2.5_h100_tp4_fp8", "MiniMax-M2.5 (its config from aiconfigurator's public copy), 196k context, "
         "FP8 cache on SM90", "minimax-m2.5", "h100", "sm90", 18.0, dep(tp=4, max_model_len=196608, kv="fp8")),
    case("qwen3-235b-a22b-fp8_h200_tp4_fp8", "FP8 checkpoint with FP8 cache, tp 4", "qwen3-235b-a22b-fp8", "h200",
         "sm90", 65.0, dep(tp=4, max_model_len=40960, kv="fp8")),
    case("mixtral-8x7b_a100_tp2_bf16", "MoE on SM80, tp 2, 32k", "mixtral-8x7b", "a100-80gb", "sm80", 23.0,
         dep(tp=2, max_model_len=32768)),
    # ---------------- sliding window (+ sinks) ----------------------------------------------
    case("gpt-oss-120b_h100_tp1_bf16", "group order: the sliding-window group comes first (layer 0 is sliding); "
         "sinks; SW admission window-1 + 2x8192", "gpt-oss-120b", "h100", "sm90", 8.0, dep()),
    case("gpt-oss-120b_h200_tp1_mnbt32768", "32,768 batched tokens: each SW layer reserves window-1 + 2x32768 tokens",
         "gpt-oss-120b", "h200", "sm90", 62.0, dep(tokens=32768)),
    case("gpt-oss-120b_b200_tp2_bf16", "sliding window + sinks on SM100 (FlashInfer), tp 2", "gpt-oss-120b", "b200",
         "sm100", 125.0, dep(tp=2)),
    case("gpt-oss-20b_a100_tp1_bf16", "sinks on SM80 (Triton backend)", "gpt-oss-20b", "a100-80gb", "sm80", 53.0,
         dep()),
    case("gpt-oss-20b_h200_tp1_sync", "async scheduling off: SW layers reserve window-1 + 1x batched tokens",
         "gpt-oss-20b", "h200", "sm90", 110.0, dep(async_scheduling=False)),
    case("gpt-oss-20b_rtx-pro-6000_tp1_bf16", "sliding window + sinks on SM120 (Triton backend)", "gpt-oss-20b",
         "rtx-pro-6000", "sm120", 68.0, dep()),
    case("gemma-3-27b_h100_tp2_bf16", "config nested under text_config; 5:1 sliding-window (1024) pattern",
         "gemma-3-27b", "h100", "sm90", 40.0, dep(tp=2)),
    # ---------------- MLA --------------------------------------------------------------------
    case("dsv3_h200_tp8_fp8", "MLA, FP8 cache, FlashMLA (block 64); reference deployment A's shape",
         "dsv3", "h200", "sm90", 40.0, dep(tp=8, max_model_len=163840, kv="fp8", seqs=1024)),
    case("dsv3_h200_tp8_bf16", "MLA, bf16 cache (1152 B/token), FlashMLA block 64 on SM90", "dsv3", "h200", "sm90",
         40.0, dep(tp=8, max_model_len=163840)),
    case("dsr1_b200_tp8_fp8", "MLA on SM100 (FlashInfer-MLA), FP8 cache", "dsr1", "b200", "sm100", 77.0,
         dep(tp=8, max_model_len=163840, kv="fp8")),
    case("dsr1_a100_tp16_bf16", "MLA on SM80 (Triton-MLA), bf16 cache, tp 16 over two nodes", "dsr1", "a100-80gb",
         "sm80", 25.0, dep(tp=16, max_model_len=163840)),
    case("dsr1_h200_tp8_fp8_mtp1", "MTP speculative decoding: one draft MLA layer (layer 61) in the same group",
         "dsr1", "h200", "sm90", 40.0,
         dep(tp=8, max_model_len=163840, kv="fp8", num_speculative_tokens=1, speculative_method="mtp")),
    case("kimi-k2_h200_tp8_fp8_dcp8", "decode context parallel 8 on MLA: blocks per request at max_model_len / 8; "
         "fits in the 4 GiB that 1 TB of FP8 weights leave on 8 H200s", "kimi-k2", "h200", "sm90", 4.0,
         dep(tp=8, kv="fp8", decode_context_parallel_size=8)),
    case("kimi-k2_h200_tp8_fp8_refused", "vLLM refuses: without dcp one 128k Kimi-K2 request needs more than the "
         "4 GiB left on 8 H200s (error text kept)", "kimi-k2", "h200", "sm90", 4.0,
         dep(tp=8, kv="fp8")),
    case("kimi-k2.5_h200_tp8_int4", "MLA under a multimodal wrapper (text_config), INT4 routed experts; the "
         "latent cache as Kimi-K2's", "kimi-k2.5", "h200", "sm90", 55.0, dep(tp=8, max_model_len=262144)),
    # ---------------- DSA (sparse MLA + indexer) ---------------------------------------------
    case("dsv3.2_h200_tp8_fp8", "DSA: FlashMLA-sparse serves fp8 as fp8_ds_mla (656 B/token) + indexer K cache",
         "dsv3.2", "h200", "sm90", 40.0, dep(tp=8, max_model_len=163840, kv="fp8")),
    case("dsv3.2_h200_tp8_bf16", "DSA with a bf16 latent cache + indexer K cache", "dsv3.2", "h200", "sm90", 40.0,
         dep(tp=8, max_model_len=163840)),
    case("dsv3.2_rtx-pro-6000_tp8_auto", "DSA on SM120: FlashInfer SM120 sparse serves auto as fp8_ds_mla",
         "dsv3.2", "rtx-pro-6000", "sm120", 10.0, dep(tp=8, max_model_len=163840)),
    case("glm-5_b200_tp8_fp8", "DSA on SM100, FP8 (FlashInfer-MLA-sparse: plain fp8 rows)", "glm-5", "b200", "sm100",
         60.0, dep(tp=8, max_model_len=202752, kv="fp8")),
    case("glm-5_h200_tp8_fp8_mtp1", "DSA + MTP: the draft layer (78) keeps its own indexer (vLLM: MTP layers always "
         "build one) beside its fp8_ds_mla latent cache", "glm-5", "h200", "sm90", 30.0,
         dep(tp=8, max_model_len=202752, kv="fp8", num_speculative_tokens=1, speculative_method="mtp")),
    # ---------------- recurrent hybrids ------------------------------------------------------
    case("qwen3-next-80b-a3b_h200_tp2_align", "GDN hybrid, align mode (prefix caching on): 2 state blocks per "
         "request; attention block raised so a page holds one state", "qwen3-next-80b-a3b", "h200", "sm90", 47.0,
         dep(tp=2, max_model_len=262144)),
    case("qwen3-next-80b-a3b_h200_tp2_none", "GDN hybrid, prefix caching off -> mamba_cache_mode none: 1 state "
         "block", "qwen3-next-80b-a3b", "h200", "sm90", 47.0,
         dep(tp=2, max_model_len=262144, enable_prefix_caching=False)),
    case("qwen3-next-80b-a3b_h200_tp2_align_mtp2", "align mode with 2 MTP speculative tokens: +1 state block per "
         "spec token; MTP draft attention layer", "qwen3-next-80b-a3b", "h200", "sm90", 45.0,
         dep(tp=2, max_model_len=262144, num_speculative_tokens=2, speculative_method="mtp")),
    case("qwen3-next-80b-a3b_b200_tp4_align", "GDN hybrid on SM100 (FlashInfer kernel blocks decide the hybrid "
         "block)", "qwen3-next-80b-a3b", "b200", "sm100", 120.0, dep(tp=4, max_model_len=262144)),
    case("qwen3-next-80b-a3b_a100_tp4_none_fp8", "GDN hybrid on SM80 with an FP8 attention cache, mode none",
         "qwen3-next-80b-a3b", "a100-80gb", "sm80", 30.0,
         dep(tp=4, max_model_len=262144, kv="fp8", enable_prefix_caching=False)),
    case("qwen3.5-35b-a3b_h100_tp1_align_refused", "vLLM refuses: 4 GiB left after 65 GiB of weights cannot hold "
         "one 262k request of this GDN hybrid (error text kept)", "qwen3.5-35b-a3b", "h100", "sm90", 4.0,
         dep(max_model_len=262144)),
    case("qwen3.5-35b-a3b_h200_tp1_align", "Qwen3.5 (text_config, layer_types list) GDN hybrid, align",
         "qwen3.5-35b-a3b", "h200", "sm90", 56.0, dep(max_model_len=262144)),
    case("qwen3.5-35b-a3b_h200_tp1_align_mtp3", "align mode with 3 MTP tokens: 2 + 3 state blocks per request",
         "qwen3.5-35b-a3b", "h200", "sm90", 56.0,
         dep(max_model_len=262144, num_speculative_tokens=3, speculative_method="mtp")),
    case("qwen3.5-397b-a17b_h200_tp8_none_mtp1", "Qwen3.5-397B, tp 8, mode none, 1 MTP token",
         "qwen3.5-397b-a17b", "h200", "sm90", 30.0,
         dep(tp=8, max_model_len=262144, enable_prefix_caching=False, num_speculative_tokens=1,
             speculative_method="mtp")),
    case("nemotron-3-nano-30b-a3b_h100_tp1_align", "Mamba-2 hybrid (MoE), align mode: 2 state blocks",
         "nemotron-3-nano-30b-a3b", "h100", "sm90", 8.0, dep(max_model_len=262144)),
    case("nemotron-3-nano-30b-a3b_h100_tp1_none", "Mamba-2 hybrid, mode none (prefix caching off)",
         "nemotron-3-nano-30b-a3b", "h100", "sm90", 8.0, dep(max_model_len=262144, enable_prefix_caching=False)),
    case("nemotron-3-nano-30b-a3b_b200_tp2_align_block64", "Mamba-2 hybrid on SM100 with --block-size 64 (user block "
         "overridden: vLLM's hybrid alignment raises it to 2112)", "nemotron-3-nano-30b-a3b", "b200", "sm100", 126.0,
         dep(tp=2, max_model_len=262144, block_size=64)),
    case("nemotron-3-nano-30b-a3b_h100_tp1_noprefix_align", "--mamba-cache-mode align given explicitly with prefix "
         "caching off: vLLM 0.33 resolves it to none (and accepts only none|align, not all)",
         "nemotron-3-nano-30b-a3b", "h100", "sm90", 8.0,
         dep(max_model_len=262144, enable_prefix_caching=False, mamba_cache_mode="align")),
    case("nemotron-h-56b_h100_tp4_align", "Nemotron-H: attention block raised so one page holds a Mamba-2 state "
         "(FA3 kernel blocks)", "nemotron-h-56b", "h100", "sm90", 40.0, dep(tp=4, max_model_len=8192)),
    case("nemotron-h-56b_b200_tp2_align", "Nemotron-H on SM100: FlashInfer kernel block sizes decide the hybrid block",
         "nemotron-h-56b", "b200", "sm100", 100.0, dep(tp=2, max_model_len=8192)),
    case("nemotron-h-56b_h100_tp4_none", "Nemotron-H, mode none", "nemotron-h-56b", "h100", "sm90", 40.0,
         dep(tp=4, max_model_len=8192, enable_prefix_caching=False)),
    case("kimi-linear-48b-a3b_h100_tp2_align", "KDA (GDN-type state) + MLA hybrid, align mode",
         "kimi-linear-48b-a3b", "h100", "sm90", 20.0, dep(tp=2, max_model_len=131072)),
    case("kimi-linear-48b-a3b_h200_tp1_none", "KDA + MLA hybrid, mode none, FP8 latent cache",
         "kimi-linear-48b-a3b", "h200", "sm90", 30.0,
         dep(max_model_len=131072, kv="fp8", enable_prefix_caching=False)),
    # ---------------- DeepSeek-V4 -------------------------------------------------------------
    case("dsv4-flash_h200_tp2_1m", "V4-Flash at 1M on H200: compressor-state caches are sliding-window specs with "
         "4/8-token blocks (thousands of blocks per request at admission)", "dsv4-flash", "h200", "sm90", 60.0,
         dep(tp=2, max_model_len=1048576), script="dsv4"),
    case("dsv4-flash_h200_tp1_1m", "the issue's comparison: V4-Flash at 1M on one H200, 40 GiB of KV pool (the "
         "oracle's example e)", "dsv4-flash", "h200", "sm90", 40.0, dep(max_model_len=1048576), script="dsv4"),
    case("dsv4-flash_h200_tp2_1m_mnbt2048", "V4-Flash at 1M with 2048 batched tokens: state windows shrink",
         "dsv4-flash", "h200", "sm90", 60.0, dep(tp=2, max_model_len=1048576, tokens=2048), script="dsv4"),
    case("dsv4-flash_b200_tp1_128k_fp8", "V4-Flash on SM100, --kv-cache-dtype fp8, 128k", "dsv4-flash", "b200",
         "sm100", 20.0, dep(max_model_len=131072, kv="fp8"), script="dsv4"),
    case("dsv4-flash_rtx-pro-6000_tp4_128k_fp8", "SM120 default: DeepseekV4FlashInferSM120Attention (FlashInfer "
         "sparse), which in vLLM 0.33 keeps the 584-B fp8_ds_mla records: the same groups as SM90", "dsv4-flash",
         "rtx-pro-6000", "sm120", 40.0, dep(tp=4, max_model_len=131072, kv="fp8"), script="dsv4"),
    case("dsv4-pro_h200_tp8_1m", "V4-Pro (61 layers) at 1M on H200", "dsv4-pro", "h200", "sm90", 50.0,
         dep(tp=8, max_model_len=1048576), script="dsv4"),
    # ---------------- DeepSeek-V4.1 -----------------------------------------------------------
    case("dsv4.1-flash_h200_fp8", "V4.1 on SM90: 584-B records, block 64, 7 window groups",
         "dsv4.1-flash", "h200", "sm90", 60.0, dep(kv="fp8"), script="dsv41"),
    case("dsv4.1-flash_h200_fp8_dspark5", "reference deployment B's shape: DSpark 5 draft tokens, 3 draft SWA layers",
         "dsv4.1-flash", "h200", "sm90", 60.0,
         dep(kv="fp8", num_speculative_tokens=5, speculative_method="dspark"), script="dsv41"),
    case("dsv4.1-flash_b200_fp8_flashmla", "V4.1 on SM100 without mega attention (FlashMLA sparse, 528-B records)",
         "dsv4.1-flash", "b200", "sm100", 60.0, dep(kv="fp8", mega_attention=False), script="dsv41"),
    case("dsv4.1-flash_b200_fp8_flashmla_dspark5", "SM100 FlashMLA sparse + DSpark 5",
         "dsv4.1-flash", "b200", "sm100", 60.0,
         dep(kv="fp8", mega_attention=False, num_speculative_tokens=5, speculative_method="dspark"), script="dsv41"),
    case("dsv4.1-flash_b200_fp8_mega", "SM100 mega attention (the B200 TP1 default): NVFP4 compressed records, "
         "136,224-B pool block", "dsv4.1-flash", "b200", "sm100", 60.0, dep(kv="fp8", mega_attention=True),
         script="dsv41"),
    case("dsv4.1-flash_b200_fp8_mega_dspark5", "SM100 mega attention + DSpark 5", "dsv4.1-flash", "b200", "sm100",
         60.0, dep(kv="fp8", mega_attention=True, num_speculative_tokens=5, speculative_method="dspark"),
         script="dsv41"),
    case("dsv4.1-flash_rtx-pro-6000_tp2_fp8", "V4.1 on SM120 (capability 12.0 emulated): the model's own backend "
         "choice there", "dsv4.1-flash", "rtx-pro-6000", "sm120", 30.0, dep(tp=2, kv="fp8"), script="dsv41"),
    case("dsv4.1-flash_h200_fp8_1m_sync", "V4.1 on SM90 at 1M with async scheduling off (1x batched tokens in "
         "flight)", "dsv4.1-flash", "h200", "sm90", 60.0, dep(kv="fp8", max_model_len=1048576, async_scheduling=False),
         script="dsv41"),
]


# ---------------------------------------------------------------------------------------------
# Oracle input, from the published config.json
# ---------------------------------------------------------------------------------------------


# published configs that ../shared/models lacks, read from a public repository's copy at a commit:
# hf_id -> (repository, commit, path); the repository's git directory is $AICONFIGURATOR_GIT (a clone or
# bare mirror of github.com/ai-dynamo/aiconfigurator). Extracted to build/published/ (ignored by git) and
# named in the fixture's oracle input.
PUBLISHED_ELSEWHERE = {
    "MiniMaxAI/MiniMax-M2.5": ("ai-dynamo/aiconfigurator", "095f58a51c4ca8e61b66ec108d86f223f8d559ce",
                               "aic-core/src/aiconfigurator_core/model_configs/MiniMaxAI--MiniMax-M2.5_config.json"),
}


def card_hf_id(model: str) -> str:
    import re

    card = (ROOT / "pricing" / "cards" / f"{model}.yaml").read_text()
    return re.search(r"^hf_id:\s*(\S+)\s*$", card, re.M).group(1)  # stdlib only: any python3 runs the driver


def card_config_file(model: str) -> Path:
    """The published config.json of a card: its hf_id 'org/name' -> ../shared/models/org--name.json,
    or the public copy PUBLISHED_ELSEWHERE names."""
    hf_id = card_hf_id(model)
    path = MODELS / (hf_id.replace("/", "--") + ".json")
    if path.is_file():
        return path
    if hf_id in PUBLISHED_ELSEWHERE:
        repo, commit, inner = PUBLISHED_ELSEWHERE[hf_id]
        out = ROOT / "build" / "published" / (hf_id.replace("/", "--") + ".json")
        if not out.is_file():
            git_dir = os.environ.get("AICONFIGURATOR_GIT")
            if not git_dir:
                raise SystemExit(f"{model}: its config is {repo}@{commit[:8]}:{inner}; set AICONFIGURATOR_GIT to a "
                                 f"clone of github.com/{repo}")
            shown = subprocess.run(["git", "-C", git_dir, "show", f"{commit}:{inner}"], capture_output=True, text=True)
            if shown.returncode:
                raise SystemExit(f"{model}: {repo}@{commit[:8]}:{inner} not readable from $AICONFIGURATOR_GIT="
                                 f"{git_dir} ({shown.stderr.strip()})")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(shown.stdout)
        return out
    raise SystemExit(f"{model}: published config {path} is missing")


def config_source(model: str) -> str | None:
    """Where a config PUBLISHED_ELSEWHERE came from, for the fixture."""
    found = PUBLISHED_ELSEWHERE.get(card_hf_id(model))
    return f"{found[0]}@{found[1]}:{found[2]}" if found else None


def rel(path: Path) -> str:
    return os.path.relpath(path, ROOT)


def per_rank(total: int, tp: int) -> int:
    return max(1, total // tp)


def _names(fmt: str, ids) -> list[str]:
    return [fmt.format(i=i) for i in ids]


def _knobs(c: dict) -> dict:
    """Deployment flags -> the oracle's planning knobs (vLLM's own flag names)."""
    d = c["deployment"]
    k = {"available_memory_bytes": c["available_memory_bytes"], "max_model_len": d["max_model_len"],
         "max_num_batched_tokens": d["max_num_batched_tokens"], "max_num_seqs": d["max_num_seqs"],
         "tensor_parallel_size": d.get("tensor_parallel_size", 1)}
    if d.get("decode_context_parallel_size", 1) != 1:
        k["decode_context_parallel_size"] = d["decode_context_parallel_size"]
    if d.get("kv_cache_dtype", "auto") != "auto":
        k["cache_dtype"] = d["kv_cache_dtype"]
    for flag in ("block_size", "enable_prefix_caching", "async_scheduling", "mamba_cache_mode"):
        if flag in d:
            k[flag] = d[flag]
    if d.get("num_speculative_tokens"):
        k["speculative_config"] = {"method": d["speculative_method"],
                                   "num_speculative_tokens": d["num_speculative_tokens"]}
    return k


def _attn_entry(names, kind, heads, head, kv, dtype, **kw) -> dict:
    e = {"names": names, "name": "{i}", "kind": kind, "num_kv_heads": heads, "head_size": head}
    if kv == "auto":
        e["dtype"] = dtype
    else:
        e["cache_dtype"] = kv
    e.update(kw)
    return e


def _dtype(cfg: dict) -> str:
    return cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"


def build_input(c: dict) -> dict:
    """The exact oracle input of a case (hf_config given as a file under ../shared/models)."""
    cfg_path = card_config_file(c["model"])
    full = json.loads(cfg_path.read_text())
    d = c["deployment"]
    tp, kv, sm = d.get("tensor_parallel_size", 1), d.get("kv_cache_dtype", "auto"), c["sm"]
    knobs = _knobs(c)
    script = c.get("script", "oracle")
    if script == "dsv4":
        inp = {"dsv4_hf_config": rel(cfg_path), "emulate_gpu": sm, **knobs}
        if c.get("attention_backend_override"):
            inp["attention_backend_override"] = c["attention_backend_override"]
        return inp
    if script == "dsv41":
        inp = {"dsv41_hf_config": rel(cfg_path), "emulate_gpu": sm,
               "max_position_embeddings": full["text_config"]["max_position_embeddings"], **knobs}
        if d.get("mega_attention") is not None:
            inp["attention_backend_override"] = ("FLASHMLA_MEGA_ATTN_DSV41" if d["mega_attention"]
                                                 else "FLASHMLA_SPARSE_DSV41")
        return inp

    t = full.get("text_config", full)
    dtype = _dtype(t) if (t.get("torch_dtype") or t.get("dtype")) else _dtype(full)
    arch = full["architectures"][0]
    L = t["num_hidden_layers"]
    heads = t["num_attention_heads"]
    kvh = t.get("num_key_value_heads") or heads
    head = t.get("head_dim") or t["hidden_size"] // heads
    layers: list[dict] = []
    checks: dict = {"num_hidden_layers": L}
    nspec = d.get("num_speculative_tokens", 0)
    mt = t["model_type"]
    kind = "gqa"
    if mt in ("llama", "qwen2", "qwen3", "qwen3_moe", "mixtral", "minimax_m2"):
        layers.append(_attn_entry(_names("model.layers.{i}.self_attn.attn", range(L)), "full",
                                  per_rank(kvh, tp), head, kv, dtype))
    elif mt == "gpt_oss":
        kind = "sink"
        lt = t["layer_types"]
        sw = [i for i in range(L) if lt[i] == "sliding_attention"]
        fa = [i for i in range(L) if lt[i] == "full_attention"]
        layers.append(_attn_entry(_names("model.layers.{i}.attn", sw), "sliding", per_rank(kvh, tp), head, kv, dtype,
                                  sliding_window=t["sliding_window"]))
        layers.append(_attn_entry(_names("model.layers.{i}.attn", fa), "full", per_rank(kvh, tp), head, kv, dtype))
        checks["layer_types"] = lt
    elif mt == "gemma3_text":
        # transformers Gemma3TextConfig: layer_types absent -> sliding unless (i + 1) % 6 == 0
        pattern = t.get("sliding_window_pattern", 6)
        lt = t.get("layer_types") or ["sliding_attention" if (i + 1) % pattern else "full_attention"
                                      for i in range(L)]
        pre = "language_model.model.layers.{i}.self_attn.attn"
        by_first = []
        for i in range(L):
            k_ = lt[i]
            if k_ not in by_first:
                by_first.append(k_)
        for k_ in by_first:
            ids = [i for i in range(L) if lt[i] == k_]
            if k_ == "sliding_attention":
                layers.append(_attn_entry(_names(pre, ids), "sliding", per_rank(kvh, tp), head, kv, dtype,
                                          sliding_window=t["sliding_window"]))
            else:
                layers.append(_attn_entry(_names(pre, ids), "full", per_rank(kvh, tp), head, kv, dtype))
        checks["layer_types"] = lt
    elif mt in ("deepseek_v3", "kimi_k2", "deepseek_v32", "glm_moe_dsa"):
        latent = t["kv_lora_rank"] + t["qk_rope_head_dim"]
        sparse = "index_topk" in t
        kind = "dsa" if sparse else "mla"
        backend = BACKENDS[(kind, sm, kv)]
        layer_kv = SPARSE_MLA_LAYER_DTYPE.get((backend, kv), kv) if sparse else kv
        ids = list(range(L))
        if nspec:
            ids += list(range(L, L + t.get("num_nextn_predict_layers", 1)))
        main = [i for i in ids if i < L]
        extra = {"max_tp_shards": 1}
        if sparse:
            extra.update(topk_buffer_width=t["index_topk"], is_index_group_leader=True)
        entry = _attn_entry(_names("model.layers.{i}.self_attn.attn", main), "mla", 1, latent, layer_kv, dtype,
                            **extra)
        if layer_kv != "auto":
            entry["dtype"] = "uint8" if layer_kv.endswith("_ds_mla") or layer_kv.startswith("fp8") else dtype
        layers.append(entry)
        if sparse:
            idx_head = t["index_head_dim"] + t["index_head_dim"] // 128 * 4  # fp8 rows + one fp32 scale per 128
            layers.append({"names": _names("model.layers.{i}.self_attn.indexer.k_cache", main), "name": "{i}",
                           "kind": "mla", "num_kv_heads": 1, "max_tp_shards": 1, "head_size": idx_head,
                           "dtype": "uint8", "cache_role": "indexer", "backend_cls": INDEXER_BACKEND})
        if nspec:
            draft = [i for i in ids if i >= L]
            de = dict(entry, names=_names("model.layers.{i}.self_attn.attn", draft), is_draft=True)
            layers.append(de)
            if sparse:
                layers.append(dict(layers[1], names=_names("model.layers.{i}.self_attn.indexer.k_cache", draft),
                                   is_draft=True))
        checks["mla_head"] = latent
    elif mt in ("qwen3_next", "qwen3_5_moe_text", "qwen3_5_text"):
        interval = t.get("full_attention_interval", 4)
        lt = t.get("layer_types") or ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
                                      for i in range(L)]
        pre = "" if mt == "qwen3_next" else "language_model."
        lin = [i for i in range(L) if lt[i] == "linear_attention"]
        fa = [i for i in range(L) if lt[i] == "full_attention"]
        layers.append({"names": _names(pre + "model.layers.{i}.linear_attn", lin), "name": "{i}", "kind": "mamba",
                       "shapes": "from_model", "dtypes": "from_model", "mamba_type": "GDN_ATTN"})
        layers.append(_attn_entry(_names(pre + "model.layers.{i}.self_attn.attn", fa), "full", per_rank(kvh, tp),
                                  head, kv, dtype))
        if nspec:
            n_mtp = t.get("num_nextn_predict_layers") or t.get("mtp_num_hidden_layers") or 1
            layers.append(_attn_entry(_names("mtp.layers.{i}.self_attn.attn", range(n_mtp)), "full",
                                      per_rank(kvh, tp), head, kv, dtype, is_draft=True))
        checks["layer_types"] = lt
    elif mt == "nemotron_h":
        pat = t["hybrid_override_pattern"]
        assert len(pat) == L, (c["case"], len(pat), L)
        mam = [i for i, ch in enumerate(pat) if ch == "M"]
        att = [i for i, ch in enumerate(pat) if ch == "*"]
        layers.append({"names": _names("model.layers.{i}.mixer", mam), "name": "{i}", "kind": "mamba",
                       "shapes": "from_model", "dtypes": "from_model", "mamba_type": "MAMBA2"})
        layers.append(_attn_entry(_names("model.layers.{i}.mixer.attn", att), "full", per_rank(kvh, tp), head, kv,
                                  dtype))
        checks["hybrid_override_pattern"] = pat
    elif mt == "kimi_linear":
        la = t["linear_attn_config"]
        kda = [i - 1 for i in la["kda_layers"]]  # 1-based in the config (KimiLinearConfig.is_kda_layer)
        fa = [i - 1 for i in la["full_attn_layers"]]
        assert sorted(kda + fa) == list(range(L)), c["case"]
        kind = "mla"
        latent = t["kv_lora_rank"] + t["qk_rope_head_dim"]
        layers.append({"names": _names("model.layers.{i}.self_attn", kda), "name": "{i}", "kind": "mamba",
                       "shapes": "from_model", "dtypes": "from_model", "mamba_type": "GDN_ATTN"})
        # Kimi's MultiHeadLatentAttention (vllm/models/kimi_k3/nvidia/mla.py) is itself the cache layer
        e = _attn_entry(_names("model.layers.{i}.self_attn", fa), "mla", 1, latent, kv, dtype, max_tp_shards=1)
        if kv != "auto":
            e["dtype"] = "uint8"
        layers.append(e)
        checks["kda_layers"] = kda
    else:
        raise SystemExit(f"{c['case']}: no layer builder for model_type {mt!r}")

    if kind in ("mla", "dsa"):
        backend = BACKENDS[(kind, sm, kv)]
    else:
        backend = BACKENDS[(kind, sm, "fp8" if kv.startswith("fp8") else "auto")]
    # sort entries by first layer index so the spec dict is in model order (as the model registers them)
    source = {"hf_config_source": config_source(c["model"])} if config_source(c["model"]) else {}
    return {"hf_config_file": rel(cfg_path), **source, "architecture": arch, "attention_backend": backend,
            "layers": layers, "layer_checks": checks, **knobs}


# ---------------------------------------------------------------------------------------------
# Fixture from the oracle output
# ---------------------------------------------------------------------------------------------


def fixture(c: dict, inp: dict, script: str, out: dict) -> dict:
    groups = []
    for g in out.get("global_kv_cache_groups") or []:
        row = {"layers": g["layer_names"], "num_layers": g["num_layers"], "spec": g["spec_class"],
               "kind": g["kind"], "block_size": g["block_size"], "page_size_bytes": g["page_size_bytes"],
               "blocks_per_request": g["blocks_per_request_at_max_model_len"],
               "max_memory_usage_bytes": g["max_memory_usage_bytes"], "prefix_cacheable": g["prefix_cacheable"]}
        first = g.get("first_spec") or g.get("spec") or {}
        row["layer_spec"] = first.get("class")
        if g.get("per_layer_page_size_bytes"):
            row["layer_page_size_bytes"] = sorted(set(g["per_layer_page_size_bytes"].values()))
        groups.append(row)
    w = (out.get("worker_kv_cache_configs") or [{}])[0]
    cap = out.get("capacity") or {}
    err = out.get("error")
    vllm = {
        "groups": groups,
        "bytes_per_block": w.get("bytes_per_block"),
        "num_blocks": w.get("num_blocks"),
        "kv_cache_size_tokens": cap.get("kv_cache_size_tokens"),
        "max_concurrency": cap.get("max_concurrency"),
        "scheduler_block_size": cap.get("scheduler_block_size"),
        "blocks_per_request_total": cap.get("blocks_per_request_total"),
        "kv_cache_layout": out.get("kv_cache_layout"),
        "log_line": out.get("kv_cache_size_log_line"),
        "error": err["message"] if err else None,
    }
    raw = {  # a small, per-layer-free excerpt of the oracle's own report
        "inputs": out.get("inputs"),
        "platform_block_size": out.get("platform_block_size"),
        "distinct_layer_specs": [
            {k: v for k, v in s.items() if k not in ("example_layer",)} | {"example_layer": s.get("example_layer")}
            for s in out.get("distinct_layer_specs") or []],
        "model_summary": out.get("model_summary"),
        "log": [r["message"] for r in out.get("log") or []][:12],
    }
    return {
        "case": c["case"], "why": c["why"],
        "project": {"model": c["model"], "chip": c["chip"], "deployment": c["deployment"],
                    "available_memory_bytes": c["available_memory_bytes"]},
        "oracle": {"script": {"oracle": "oracle.py", "dsv4": "dsv4_specs.py", "dsv41": "dsv41_specs.py"}[script],
                   "sm": c["sm"], "input": inp},
        "vllm": vllm,
        "oracle_raw": raw,
        "vllm_version": out.get("vllm_version"),
    }


def summary_line(f: dict) -> str:
    v = f["vllm"]
    if v["error"]:
        return f"{f['case']}: REFUSED: {v['error'][:110]}"
    gs = " ".join(f"{g['spec'].replace('Spec', '').replace('UniformTypeKVCache', 'Uniform')}[{g['num_layers']}]"
                  f"b{g['block_size']}/{g['page_size_bytes']}B" for g in v["groups"])
    if len(gs) > 150:
        gs = f"{len(v['groups'])} groups ({gs[:140]}...)"
    return (f"{f['case']}: {gs} | pool {v['bytes_per_block']} B x {v['num_blocks']} | "
            f"{v['kv_cache_size_tokens']:,} tokens, {v['max_concurrency']:.2f}x")


# ---------------------------------------------------------------------------------------------
# Worker (runs in the oracle venv)
# ---------------------------------------------------------------------------------------------


def _worker(jobs_path: str) -> None:  # pragma: no cover - needs vLLM
    import contextlib
    import importlib
    import io
    import traceback

    sys.path.insert(0, str(ORACLE_DIR))
    import oracle  # noqa: E402

    sys.modules.setdefault("oracle", oracle)
    import dsv4_specs  # noqa: E402
    import dsv41_specs  # noqa: E402
    from vllm.platforms import current_platform
    from vllm.platforms.interface import DeviceCapability

    caps = {"sm80": (8, 0), "sm90": (9, 0), "sm100": (10, 0), "sm120": (12, 0)}
    plat_cls = type(current_platform)
    orig_cap = plat_cls.__dict__.get("get_device_capability")

    def emulate(sm):
        major, minor = caps[sm]
        plat_cls.get_device_capability = classmethod(lambda c, device_id=0: DeviceCapability(major, minor))

    def restore():
        if orig_cap is not None:
            plat_cls.get_device_capability = orig_cap
        elif "get_device_capability" in plat_cls.__dict__:
            delattr(plat_cls, "get_device_capability")

    def load_cls(path):
        mod, _, name = path.partition(":")
        return getattr(importlib.import_module(mod), name)

    def run_plain(inp):
        from vllm.config import set_current_vllm_config
        from vllm.platforms.interface import Platform
        from vllm.v1.attention.backends.utils import get_supported_kv_cache_layouts

        desc = dict(inp)
        desc["hf_config"] = json.loads((ROOT / inp["hf_config_file"]).read_text())
        desc["hf_config"].pop("quantization_config", None)  # weights only; KV specs are written here
        vc = oracle.build_vllm_config(desc)
        # check the hand-written layer list against the config as vLLM/transformers parse it
        hf = vc.model_config.hf_text_config
        chk = inp["layer_checks"]
        assert hf.num_hidden_layers == chk["num_hidden_layers"], "layer count"
        if "layer_types" in chk and getattr(hf, "layer_types", None) is not None:
            assert list(hf.layer_types) == chk["layer_types"], "layer_types differ from the parsed config"
        if "hybrid_override_pattern" in chk:
            assert hf.hybrid_override_pattern == chk["hybrid_override_pattern"]
        if "kda_layers" in chk:
            assert [i for i in range(hf.num_hidden_layers) if hf.is_kda_layer(i)] == chk["kda_layers"]
        assert vc.model_config.architecture == inp["architecture"], vc.model_config.architecture
        # every attention entry against vLLM's own reading of the config (ModelConfig: kv heads per rank, head size)
        want = (vc.model_config.get_num_kv_heads(vc.parallel_config), vc.model_config.get_head_size())
        for e in inp["layers"]:
            if e["kind"] != "mamba" and e.get("cache_role") != "indexer":
                assert (e["num_kv_heads"], e["head_size"]) == want, (e["names"][0], e["num_kv_heads"],
                                                                     e["head_size"], want)
        main_backend = oracle._backend_cls(inp["attention_backend"])
        entries = oracle._expand_layers(inp["layers"])
        per_layer = {}
        backends = [main_backend]
        for e in entries:
            b = e.pop("backend_cls", None)
            if b:
                b = load_cls(b)
                if b not in backends:
                    backends.append(b)
            per_layer[e["name"]] = b
        before = {"block_size": vc.cache_config.block_size, "mamba_block_size": vc.cache_config.mamba_block_size}
        orig = Platform.__dict__["_find_non_ssm_backends"]
        Platform._find_non_ssm_backends = classmethod(lambda cls, _vc: list(backends))
        try:
            Platform.update_block_size_for_backend(vc)
        finally:
            Platform._find_non_ssm_backends = orig
        after = {"block_size": vc.cache_config.block_size, "mamba_block_size": vc.cache_config.mamba_block_size,
                 "mamba_page_size_padded": vc.cache_config.mamba_page_size_padded}
        with set_current_vllm_config(vc):
            specs = {e["name"]: oracle.build_spec(e, vc, per_layer[e["name"]] or main_backend) for e in entries}
        # the model registers layers in layer order; keep that order (it decides vLLM's group order)
        import re

        def order(n):
            # registration order: by layer; within a DSA layer the indexer's K cache is built first
            m = re.search(r"layers\.(\d+)\.", n)
            return (n.startswith("mtp."), int(m.group(1)) if m else 0, ".indexer." not in n)

        specs = dict(sorted(specs.items(), key=lambda kv_: order(kv_[0])))
        layouts = [m.name for m in get_supported_kv_cache_layouts(backends)]
        return oracle.run_plan(desc, specs_by_worker=[specs], vc=vc, supported_layouts=layouts,
                               extra={"platform_block_size": {"backends": [b.get_name() for b in backends],
                                                              "before": before, "after": after},
                                      "model_summary": {"backends": [b.get_name() for b in backends],
                                                        "layouts": layouts,
                                                        "num_speculative_tokens": vc.num_speculative_tokens}})

    import vllm.logger as vllm_logger

    once = [getattr(vllm_logger, f"_print_{lv}_once") for lv in ("debug", "info", "warning", "error")]
    for job in json.loads(Path(jobs_path).read_text()):
        oracle.LOG_CAPTURE.records.clear()
        for f in once:  # info_once would swallow a "GPU KV cache size" line equal to an earlier case's
            f.cache_clear()
        t0 = time.time()
        try:
            inp = dict(job["input"])
            inp["report_layers"] = True
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                if job["script"] == "dsv4":
                    emulate(inp.pop("emulate_gpu"))
                    inp["dsv4_hf_config"] = str(ROOT / inp["dsv4_hf_config"])
                    inp["_input_path"] = str(ROOT / "x.json")
                    out = dsv4_specs.run(inp)
                    s = out.pop("dsv4", {})
                    out["model_summary"] = {k: v for k, v in s.items() if k != "layers"}
                    out["model_summary"]["emulated_gpu"] = job["input"]["emulate_gpu"]
                elif job["script"] == "dsv41":
                    emulate(inp.pop("emulate_gpu"))  # P1 of dsv41_specs, for every generation incl. SM120
                    inp["dsv41_hf_config"] = str(ROOT / inp["dsv41_hf_config"])
                    inp["_input_path"] = str(ROOT / "x.json")
                    out = dsv41_specs.run(inp)
                    s = out.pop("dsv41", {})
                    out["model_summary"] = {k: v for k, v in s.items() if k not in ("layers", "draft_layers")}
                    out["model_summary"]["emulated_gpu"] = job["input"]["emulate_gpu"]
                else:
                    out = run_plain(inp)
            out = json.loads(json.dumps(out, default=oracle._jsonable))
            res = {"case": job["case"], "ok": True, "out": out, "seconds": round(time.time() - t0, 1)}
        except Exception as e:  # a failed case is reported, never written
            res = {"case": job["case"], "ok": False, "error": f"{type(e).__name__}: {e}",
                   "traceback": traceback.format_exc()[-3000:]}
        finally:
            restore()
        sys.stdout.write(json.dumps(res) + "\n")
        sys.stdout.flush()


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------


def _select(pattern: str | None) -> list[dict]:
    if not pattern:
        return CASES
    pats = pattern.split(",")
    return [c for c in CASES if any(fnmatch.fnmatch(c["case"], p) or p in c["case"] for p in pats)]


def _diff(old: dict, new: dict, path="") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new)):
            out += _diff(old.get(k), new.get(k), f"{path}.{k}")
        return out
    if old != new:
        return [f"{path}: {json.dumps(old)[:80]} -> {json.dumps(new)[:80]}"]
    return []


def add_run_options(ap: argparse.ArgumentParser) -> None:
    """The options of a fixture regenerator (this script, golden_vllm_release.py): --only, --check,
    --list, and --worker for the process that runs in the oracle's venv."""
    ap.add_argument("--only", help="fnmatch pattern(s) or substrings, comma-separated")
    ap.add_argument("--check", action="store_true", help="compare with the fixture files, write nothing")
    ap.add_argument("--list", action="store_true", help="print the case table and exit")
    ap.add_argument("--worker", metavar="JOBS", help=argparse.SUPPRESS)


def collect(proc, make_fixture, version: str, runner: str, out_dir: Path, check: bool) -> tuple[list, list, bool]:
    """Read the worker's results, one JSON line a case (other lines, what a release prints on
    import, skipped): each case's fixture (`make_fixture(name, out)`) written to `out_dir`, or with
    `check` compared with the file there, and its summary line printed. Returns the cases the
    oracle failed, those that differ, and whether a fixture came from a vLLM other than `version`
    (then at once)."""
    failed, changed = [], []
    for line in proc.stdout:
        if not line.startswith("{"):
            continue
        res = json.loads(line)
        name = res["case"]
        if not res["ok"]:
            failed.append(name)
            print(f"{name}: ORACLE FAILED: {res['error']}\n{res.get('traceback', '')}", file=sys.stderr)
            continue
        f = make_fixture(name, res["out"])
        if f["vllm_version"] != version:
            print(f"{name}: {runner} runs vLLM {f['vllm_version']}, not {version}", file=sys.stderr)
            return failed, changed, True
        print(f"{summary_line(f)}  [{res['seconds']} s]", flush=True)
        path = out_dir / f"{name}.json"
        if check:
            old = json.loads(path.read_text()) if path.exists() else {}
            d = _diff(old, f)
            if d:
                changed.append(name)
                print("  differs: " + "\n  differs: ".join(d[:10]))
        else:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(f, indent=1) + "\n")
            tmp.replace(path)
    return failed, changed, False


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Regenerate tests/golden/vllm-0.33 from vLLM 0.33's own planner.")
    add_run_options(ap)
    args = ap.parse_args(argv)
    if args.worker:
        _worker(args.worker)
        return 0
    cases = _select(args.only)
    if not cases:
        print(f"no case matches {args.only!r}", file=sys.stderr)
        return 2
    if args.list:
        for c in cases:
            print(f"{c['case']:50s} {c['why']}")
        return 0
    venv = Path(os.environ.get("VLLM_ORACLE_VENV", Path.home() / ".cache" / "vllm-oracle-venv"))
    py = venv / "bin" / "python"
    if not py.exists():
        print(f"oracle venv not found at {venv}: run `bash ../shared/tools/vllm-oracle/setup.sh` "
              "(VLLM_ORACLE_VENV chooses where)", file=sys.stderr)
        return 2
    jobs = []
    for c in cases:
        script = c.get("script", "oracle")
        jobs.append({"case": c["case"], "script": script, "input": build_input(c)})
    t0 = time.time()
    env = dict(os.environ, VLLM_LOGGING_LEVEL="INFO", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="golden_jobs_", delete=False) as jf:
        json.dump(jobs, jf)
    proc = subprocess.Popen([str(py), str(Path(__file__).resolve()), "--worker", jf.name],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL if not os.environ.get("GOLDEN_VERBOSE")
                            else None, text=True, cwd=str(ROOT), env=env)
    by_name = {c["case"]: c for c in cases}
    inputs = {j["case"]: j for j in jobs}
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    failed, changed, other_release = collect(
        proc, lambda name, out: fixture(by_name[name], inputs[name]["input"], inputs[name]["script"], out),
        VLLM_VERSION, "oracle", OUT_DIR, args.check)
    if other_release:
        return 2
    proc.wait()
    os.unlink(jf.name)
    done = len(cases) - len(failed)
    print(f"{done}/{len(cases)} cases in {time.time() - t0:.0f} s"
          + (f"; {len(changed)} differ" if args.check else "") + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    missing = [c["case"] for c in cases if c["case"] not in inputs]
    pp_status = 0
    if not args.only:  # the pipeline-parallel cases (pp_*.json): scripts/golden_vllm_pp.py, in the oracle venv
        pp_status = subprocess.call([str(py), str(Path(__file__).with_name("golden_vllm_pp.py"))]
                                    + (["--check"] if args.check else []), cwd=str(ROOT), env=env,
                                    stderr=None if os.environ.get("GOLDEN_VERBOSE") else subprocess.DEVNULL)
    if proc.returncode or failed or missing:
        return 1
    return 1 if changed or pp_status else 0


if __name__ == "__main__":
    sys.exit(main())
