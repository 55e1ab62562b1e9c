#!/usr/bin/env python3
"""Regenerate the golden fixtures of one older vLLM release, tests/golden/vllm-<release>/*.json, from
that release's own KV-cache planner.

    python scripts/golden_vllm_release.py 0.19.0                 # regenerate that release's fixtures
    python scripts/golden_vllm_release.py 0.19.0 --check         # diff its answers against the files
    python scripts/golden_vllm_release.py 0.19.0 --only 'gpt-oss*' --list

The release is installed on the CPU by `bash scripts/install_vllm_release.sh <release>` (into
~/.cache/vllm-<release>-venv; VLLM_RELEASE_VENV chooses another). The cases and their oracle inputs
are scripts/golden_vllm.py's (built from the PUBLISHED config.json files in ../shared/models, never
from the project's graph); this script keeps the cases each release's pack is checked on, and a
worker that runs in the release's venv and replays what that release's
`EngineCore._initialize_kv_caches` runs after memory profiling, with that release's own functions:

    >= 0.11  get_kv_cache_configs(vllm_config, specs per worker, memory per worker)
             [-> generate_scheduler_kv_cache_config]      (vllm/v1/core/kv_cache_utils.py)
    0.10     get_kv_cache_config(vllm_config, specs, memory) per worker -> unify_kv_cache_configs

The logged "GPU KV cache size: N tokens" and "Maximum concurrency for L tokens per request: X.XXx"
lines are captured from vLLM's logger. Only what differs from the 0.33 oracle is done here:

- Block size. From 0.18 the platform's `update_block_size_for_backend` takes the attention
  backend's preferred block (run here, as the 0.33 harness runs it). Before 0.18, CUDA's
  `check_and_update_config` forces the MLA block by backend (FlashMLA 64 on SM90, CUTLASS MLA 128 on
  SM100, 16 for Triton MLA elsewhere: vllm/platforms/cuda.py of each release); that rule needs a GPU
  to run, so it is applied here, per release, as `cuda.py` writes it (MLA_BLOCK below), and
  recorded in the fixture's input.
- Hybrids. Up to 0.19 the model config (HybridAttentionMambaModelConfig) raises the attention block
  so a page holds a recurrent state, and the backend's block is not asked; from 0.21 the platform does
  it inside update_block_size_for_backend (Platform._align_hybrid_block_size), which is run then.
- Capacity log. Up to 0.27 get_kv_cache_configs logs "GPU KV cache size" and "Maximum concurrency";
  from 0.28 the engine logs both on one line after it (block_size = the smallest group block, then
  update_kv_cache_capacity), which is replayed.
- Specs. The layer entries are the 0.33 harness's; constructor arguments a release's spec class
  does not have are dropped (e.g. 0.33's max_tp_shards), and before MLAAttentionSpec existed
  (0.10) an MLA cache is FullAttentionSpec(use_mla=True), as those releases build it.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden_vllm as g33  # noqa: E402  (the case table and the input builder)

# The cases a release pack is checked on (the 0.33 case names; each is built by golden_vllm.build_input).
# dense, fp8 KV, tp > 1, a refusal, sliding window (gpt-oss, Gemma 3), MLA, and the recurrent hybrids
# from the releases whose planner groups them with attention.
# (Kimi-K2's published config names remote code, which these releases' ModelConfig will not load without
# trust_remote_code; Gemma 3's rope_scaling fails the 0.10/0.11 configs' check under the transformers those
# venvs resolve: those cases stay where they load)
COMMON = [
    "llama-3.1-8b_h100_tp1_bf16", "llama-3.1-8b_a100_tp1_fp8", "llama-3.1-8b_h200_tp1_block32",
    "llama-3.1-8b_h100_tp1_refused", "llama-3.1-70b_h100_tp4_bf16", "llama-3.3-70b_h200_tp2_fp8",
    "llama-3.1-405b_h200_tp8_fp8", "qwen2.5-7b_a100_tp1_bf16", "qwen3-8b_h100_tp2_bf16",
    "qwen3-30b-a3b_h100_tp1_fp8", "qwen3-235b-a22b_h200_tp8_bf16", "mixtral-8x7b_a100_tp2_bf16",
    "gpt-oss-120b_h100_tp1_bf16", "gpt-oss-120b_h200_tp1_mnbt32768", "gpt-oss-20b_h200_tp1_sync",
    "dsv3_h200_tp8_fp8", "dsv3_h200_tp8_bf16", "dsr1_a100_tp16_bf16",
]
# (Nemotron-H's published config names remote code, which these releases' ModelConfig will not load
# without trust_remote_code: its cases stay with the 0.33 harness. Nemotron-3-Nano loads in 0.10, 0.11 and from
# 0.21, not in 0.19, whose transformers has no nemotron_h config; Qwen3-Next's module does not import in
# 0.10's and 0.11's venvs (its FLA kernels ask triton.language.exp of the CPU triton), so their hybrids are
# Nemotron's)
HYBRID = ["qwen3-next-80b-a3b_h200_tp2_align", "qwen3-next-80b-a3b_h200_tp2_none"]
OLD_HYBRID = ["nemotron-3-nano-30b-a3b_h100_tp1_align", "nemotron-3-nano-30b-a3b_h100_tp1_none"]
# From 0.21 (FlashInfer imports on the CPU, the platform aligns hybrids): SM100/SM120/SM80 backends, more
# hybrids (Mamba-2 with its release's default cache mode, KDA + MLA with its release's MLA alignment,
# FP8 attention beside the states), context parallelism and the MLA refusal. (Gemma 3 and Qwen3.5 are
# multimodal classes whose inspection imports torchvision, which the CPU install leaves out; FlashInfer-MLA
# allocates a CUDA workspace on import, so the SM100 MLA cases stay with the 0.33 harness)
LATER = [
    "llama-3.1-8b_h100_tp1_noprefix_sync", "llama-3.1-8b_rtx-pro-6000_tp1_bf16", "llama-3.1-405b_b200_tp16_bf16",
    "qwen3-32b_b200_tp1_bf16", "qwen3-235b-a22b_h200_tp8_dcp2", "qwen3-235b-a22b-fp8_h200_tp4_fp8",
    "gpt-oss-120b_b200_tp2_bf16", "gpt-oss-20b_a100_tp1_bf16", "kimi-k2_h200_tp8_fp8_dcp8",
    "kimi-k2_h200_tp8_fp8_refused", "qwen3-next-80b-a3b_b200_tp4_align", "qwen3-next-80b-a3b_a100_tp4_none_fp8",
    "nemotron-3-nano-30b-a3b_h100_tp1_align", "nemotron-3-nano-30b-a3b_h100_tp1_none",
    "nemotron-3-nano-30b-a3b_b200_tp2_align_block64", "nemotron-3-nano-30b-a3b_h100_tp1_noprefix_align",
    "kimi-linear-48b-a3b_h100_tp2_align", "kimi-linear-48b-a3b_h200_tp1_none",
]
CASES_BY_RELEASE = {
    "0.10.2": COMMON + OLD_HYBRID,
    "0.11.0": COMMON + OLD_HYBRID,
    "0.19.0": COMMON + ["gemma-3-27b_h100_tp2_bf16"] + HYBRID + [c for c in LATER if not c.startswith("nemotron-3")],
    "0.24.0": COMMON + HYBRID + LATER,
    "0.28.0": COMMON + HYBRID + LATER,
}

# MLA block size forced by CUDA's check_and_update_config before 0.18 (vllm/platforms/cuda.py): the
# default backend per generation, then its required block. (release floor, generation) -> tokens.
MLA_BLOCK = {"sm90": 64, "sm100": 128, "sm80": 16, "sm120": 16}


# backends whose module cannot be imported on the CPU in a release's venv (install_vllm_release.sh installs
# FlashInfer's Python package from 0.21's venvs on, so there it is asked), and why their block is known anyway
IMPORTS_CUDA = {"FLASHINFER": "not importable on the CPU; FlashInferBackend.get_supported_kernel_block_sizes "
                "lists 16, so the preferred block is the default 16"}


def out_dir(release: str) -> Path:
    return ROOT / "tests" / "golden" / f"vllm-{release}"


def _release_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(".")[:3])


def build_input(c: dict, release: str) -> dict:
    inp = g33.build_input(c)
    if _release_tuple(release) < (0, 18) and inp["attention_backend"] in ("FLASHMLA", "FLASHINFER_MLA", "TRITON_MLA") \
            and "block_size" not in c["deployment"]:
        inp["block_size"] = MLA_BLOCK[c["sm"]]
        inp["block_size_from"] = "vllm/platforms/cuda.py check_and_update_config: the MLA backend's forced block"
    return inp


# ---------------------------------------------------------------------------------------------
# Worker (runs in the release's venv)
# ---------------------------------------------------------------------------------------------


def _worker(jobs_path: str) -> None:  # pragma: no cover - needs vLLM
    import contextlib
    import dataclasses
    import io
    import logging
    import re
    import traceback

    os.environ.setdefault("VLLM_LOGGING_LEVEL", "INFO")
    import torch
    import vllm
    import vllm.logger  # noqa: F401
    from vllm.v1 import kv_cache_interface as kci
    from vllm.v1.core import kv_cache_utils as ku

    version = vllm.__version__
    records: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record):
            try:
                records.append(record.getMessage())
            except Exception:
                records.append(str(record.msg))

    lg = logging.getLogger("vllm")
    lg.addHandler(Capture(level=logging.DEBUG))
    lg.setLevel(logging.DEBUG)
    for h in lg.handlers:
        if not isinstance(h, Capture):
            h.setLevel(logging.ERROR)

    def dtype(name):
        aliases = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32", "float": "float32",
                   "auto": "bfloat16"}
        key = str(name).replace("torch.", "")
        key = aliases.get(key, key)
        if key.startswith("fp8"):
            return torch.uint8 if key in ("fp8_ds_mla",) else torch.float8_e4m3fn
        return getattr(torch, key)

    def kv_dtype(cache_dtype, model_dtype):
        if cache_dtype in (None, "auto"):
            return dtype(model_dtype)
        if cache_dtype.startswith("fp8"):
            return torch.uint8  # vLLM stores fp8 caches as uint8 (STR_DTYPE_TO_TORCH_DTYPE["fp8"])
        return dtype(cache_dtype)

    def spec_class(kind):
        table = {"full": "FullAttentionSpec", "mla": "MLAAttentionSpec", "sliding": "SlidingWindowSpec",
                 "chunked_local": "ChunkedLocalAttentionSpec", "mamba": "MambaSpec"}
        name = table[kind]
        if not hasattr(kci, name) and kind == "mla":
            return kci.FullAttentionSpec, {"use_mla": True}
        cls = getattr(kci, name)
        extra = {}
        if "use_mla" in {f.name for f in dataclasses.fields(cls)}:
            extra["use_mla"] = kind == "mla"
        return cls, extra

    def expand(layers):
        out = []
        for e in layers:
            for n in e["names"]:
                d = dict(e)
                d.pop("names")
                d["name"] = n
                out.append(d)
        return out

    def model_cls(vc):
        from vllm.model_executor.models import ModelRegistry

        cls, _ = ModelRegistry.resolve_model_cls(vc.model_config.architecture, model_config=vc.model_config)
        return cls

    def build_config(inp):
        from vllm.config import (
            CacheConfig,
            DeviceConfig,
            LoadConfig,
            ModelConfig,
            ParallelConfig,
            SchedulerConfig,
            VllmConfig,
        )

        hf = json.loads((ROOT / inp["hf_config_file"]).read_text())
        hf.pop("quantization_config", None)
        mml = int(inp["max_model_len"])
        t = hf.get("text_config", hf)
        if (t.get("max_position_embeddings") or 0) < mml:
            t["max_position_embeddings"] = mml
        d = tempfile.mkdtemp(prefix="golden_rel_")
        (Path(d) / "config.json").write_text(json.dumps(hf))
        mc = ModelConfig(model=d, skip_tokenizer_init=True, max_model_len=mml, trust_remote_code=False,
                         enforce_eager=True)
        ck = {}
        if inp.get("block_size") is not None:
            ck["block_size"] = int(inp["block_size"])
        if inp.get("cache_dtype") is not None:
            ck["cache_dtype"] = inp["cache_dtype"]
        if inp.get("enable_prefix_caching") is not None:
            ck["enable_prefix_caching"] = bool(inp["enable_prefix_caching"])
        if inp.get("mamba_cache_mode") is not None:
            ck["mamba_cache_mode"] = inp["mamba_cache_mode"]
        import inspect

        if "swap_space" in inspect.signature(CacheConfig).parameters:
            ck["swap_space"] = 0  # CPU swap (not the GPU pool); older releases check it against this host's memory
        cc = CacheConfig(**ck)
        if getattr(cc, "block_size", None) is None:
            cc.block_size = 16  # CUDA's check_and_update_config default (vllm/platforms/cuda.py)
        sk = {"max_model_len": mc.max_model_len, "is_encoder_decoder": False,
              "max_num_batched_tokens": int(inp["max_num_batched_tokens"]), "max_num_seqs": int(inp["max_num_seqs"])}
        if inp.get("async_scheduling") is not None:
            sk["async_scheduling"] = bool(inp["async_scheduling"])
        sk["enable_chunked_prefill"] = True  # always on in the V1 engine (0.10's SchedulerConfig asks it)
        fields = set(inspect.signature(SchedulerConfig).parameters)
        sk = {k: v for k, v in sk.items() if k in fields}
        sc = SchedulerConfig(**sk)
        pk = {"tensor_parallel_size": int(inp.get("tensor_parallel_size", 1))}
        if inp.get("decode_context_parallel_size"):
            pk["decode_context_parallel_size"] = int(inp["decode_context_parallel_size"])
        pc = ParallelConfig(**pk)
        from vllm.platforms import current_platform

        plat = type(current_platform)
        if plat.__dict__.get("is_async_output_supported") is None and hasattr(plat, "is_async_output_supported"):
            # 0.10's VllmConfig asks it (V0's async output processing, no KV effect); CUDA: not when eager
            plat.is_async_output_supported = classmethod(lambda cls, enforce_eager: not enforce_eager)
        if hasattr(type(current_platform), "support_hybrid_kv_cache"):
            type(current_platform).support_hybrid_kv_cache = classmethod(lambda cls: True)  # CUDA's answer
        vc = VllmConfig(model_config=mc, cache_config=cc, scheduler_config=sc, parallel_config=pc,
                        load_config=LoadConfig(load_format="dummy"), device_config=DeviceConfig(device="cuda"))
        return vc, hf

    def backend_cls(name):
        for mod in ("vllm.v1.attention.backends.registry", "vllm.attention.backends.registry"):
            try:
                m = __import__(mod, fromlist=["AttentionBackendEnum"])
                return m.AttentionBackendEnum[name].get_class()
            except Exception:
                continue
        return None

    def apply_block_size(vc, inp):
        """0.18+: Platform.update_block_size_for_backend with the case's backend (the 0.33 harness
        does the same); earlier releases got the block in the input (MLA_BLOCK)."""
        from vllm.platforms.interface import Platform

        if not hasattr(Platform, "update_block_size_for_backend"):
            return None
        b = backend_cls(inp["attention_backend"])
        if b is None and inp["attention_backend"] in IMPORTS_CUDA:
            # FlashInfer's module needs CUDA to import; its kernels take block 16 (flashinfer.py
            # get_supported_kernel_block_sizes), so update_block_size_for_backend keeps the default
            return {"backend": inp["attention_backend"], "before": vc.cache_config.block_size,
                    "after": vc.cache_config.block_size, "note": IMPORTS_CUDA[inp["attention_backend"]]}
        if b is None:
            raise RuntimeError(f"attention backend {inp['attention_backend']} cannot be loaded on this CPU")
        before = vc.cache_config.block_size
        if hasattr(Platform, "_find_non_ssm_backends"):
            orig = Platform.__dict__["_find_non_ssm_backends"]
            Platform._find_non_ssm_backends = classmethod(lambda cls, _vc: [b])
            try:
                Platform.update_block_size_for_backend(vc)
            finally:
                Platform._find_non_ssm_backends = orig
        else:
            import vllm.config.vllm as cv

            class _Layer:
                def get_attn_backend(self):
                    return b

            orig = cv.get_layers_from_vllm_config
            cv.get_layers_from_vllm_config = lambda *a, **k: {"x": _Layer()}
            try:
                Platform.update_block_size_for_backend(vc)
            finally:
                cv.get_layers_from_vllm_config = orig
        return {"backend": inp["attention_backend"], "before": before, "after": vc.cache_config.block_size}

    def build_specs(vc, hf, inp):
        from vllm.config import set_current_vllm_config

        cc = vc.cache_config
        t = hf.get("text_config", hf)
        mdtype = t.get("torch_dtype") or t.get("dtype") or hf.get("torch_dtype") or "bfloat16"
        specs = {}
        mcls = None
        for e in expand(inp["layers"]):
            kind = e["kind"]
            cls, extra = spec_class(kind)
            names = {f.name for f in dataclasses.fields(cls)}
            kw = dict(extra)
            if kind == "mamba":
                mcls = mcls or model_cls(vc)
                with set_current_vllm_config(vc):
                    kw["shapes"] = mcls.get_mamba_state_shape_from_config(vc)
                    kw["dtypes"] = mcls.get_mamba_state_dtype_from_config(vc)
                kw["block_size"] = cc.mamba_block_size if getattr(cc, "mamba_block_size", None) else cc.block_size
                if "page_size_padded" in names:
                    kw["page_size_padded"] = getattr(cc, "mamba_page_size_padded", None)
                if "mamba_type" in names:
                    mt = e.get("mamba_type")
                    kw["mamba_type"] = {"GDN_ATTN": "gdn_attention", "MAMBA2": "mamba2"}.get(mt, mt)
                    try:
                        from vllm.v1.attention.backends.registry import MambaAttentionBackendEnum

                        kw["mamba_type"] = MambaAttentionBackendEnum[mt]
                    except Exception:
                        pass
                if "mamba_cache_mode" in names:
                    kw["mamba_cache_mode"] = getattr(cc, "mamba_cache_mode", "none")
                if "num_speculative_blocks" in names:
                    kw["num_speculative_blocks"] = 0
            else:
                kw.update(block_size=cc.block_size, num_kv_heads=e["num_kv_heads"], head_size=e["head_size"],
                          dtype=kv_dtype(e.get("cache_dtype"), e.get("dtype") or mdtype))
                if kind == "sliding":
                    kw["sliding_window"] = e["sliding_window"]
                if "cache_dtype_str" in names and e.get("cache_dtype"):
                    kw["cache_dtype_str"] = e["cache_dtype"]
                if "kv_quant_mode" in names and e.get("cache_dtype"):
                    try:
                        kw["kv_quant_mode"] = kci.get_kv_quant_mode(e["cache_dtype"])
                    except Exception:
                        pass
            specs[e["name"]] = cls(**{k: v for k, v in kw.items() if k in names})

        def order(n):
            m = re.search(r"layers\.(\d+)\.", n)
            return (n.startswith("mtp."), int(m.group(1)) if m else 0, ".indexer." not in n)

        return dict(sorted(specs.items(), key=lambda kv_: order(kv_[0])))

    def hybrid_alignment(vc):
        """The release's own HybridAttentionMambaModelConfig (vllm/model_executor/models/config.py),
        which raises the attention block so a page holds one recurrent state."""
        from vllm.model_executor.models import config as mcfg

        cls = getattr(mcfg, "HybridAttentionMambaModelConfig", None)
        if cls is None or not vc.model_config.is_hybrid:
            return None
        before = vc.cache_config.block_size
        cls.verify_and_update_config(vc)
        return {"before": before, "after": vc.cache_config.block_size,
                "mamba_block_size": getattr(vc.cache_config, "mamba_block_size", None),
                "mamba_page_size_padded": getattr(vc.cache_config, "mamba_page_size_padded", None)}

    def plan(vc, specs, avail):
        from vllm.config import set_current_vllm_config

        with set_current_vllm_config(vc):
            if hasattr(ku, "get_kv_cache_configs"):
                cfgs = ku.get_kv_cache_configs(vc, [dict(specs)], [avail])
                cfg = ku.generate_scheduler_kv_cache_config(cfgs) if hasattr(
                    ku, "generate_scheduler_kv_cache_config") else cfgs[0]
                worker = cfgs[0]
                if hasattr(ku, "update_kv_cache_capacity") and cfg.kv_cache_groups:
                    # from 0.28 the engine logs the capacity (v1/engine/core.py _initialize_kv_caches):
                    # block_size = min over the scheduler's groups, then update_kv_cache_capacity
                    vc.cache_config.block_size = min(g.kv_cache_spec.block_size for g in cfg.kv_cache_groups)
                    ku.update_kv_cache_capacity(vc, cfg)
            else:
                worker = ku.get_kv_cache_config(vc, dict(specs), avail)
                ku.unify_kv_cache_configs([worker])
                cfg = worker
            conc = ku.get_max_concurrency_for_kv_cache_config(vc, cfg)
        return worker, cfg, conc

    for job in json.loads(Path(jobs_path).read_text()):
        records.clear()
        for lv in ("debug", "info", "warning", "error"):
            f = getattr(vllm.logger, f"_print_{lv}_once", None)
            if f is not None:
                f.cache_clear()
        t0 = time.time()
        try:
            inp = job["input"]
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                vc, hf = build_config(inp)
                hyb = hybrid_alignment(vc)
                from vllm.platforms.interface import Platform

                # from 0.21 the platform aligns hybrids too (Platform._align_hybrid_block_size, called by
                # update_block_size_for_backend); before, the model config did and the backend block was not asked
                blk = apply_block_size(vc, inp) if hyb is None or hasattr(Platform, "_align_hybrid_block_size") \
                    else None
                if hyb is not None and blk is not None:
                    hyb.update(after=vc.cache_config.block_size,
                               mamba_block_size=getattr(vc.cache_config, "mamba_block_size", None),
                               mamba_page_size_padded=getattr(vc.cache_config, "mamba_page_size_padded", None))
                specs = build_specs(vc, hf, inp)
                block_in = vc.cache_config.block_size
                err = None
                groups, worker_out, cap = [], {}, {}
                try:
                    worker, cfg, conc = plan(vc, specs, int(inp["available_memory_bytes"]))
                    from vllm.config import set_current_vllm_config

                    with set_current_vllm_config(vc):
                        for grp in worker.kv_cache_groups:
                            s = grp.kv_cache_spec
                            mem = s.max_memory_usage_bytes(vc)
                            first = next(iter(s.kv_cache_specs.values())) if hasattr(s, "kv_cache_specs") else s
                            row = {"layers": list(grp.layer_names), "num_layers": len(grp.layer_names),
                                   "spec": type(s).__name__, "layer_spec": type(first).__name__,
                                   "block_size": s.block_size, "page_size_bytes": s.page_size_bytes,
                                   "blocks_per_request": -(-mem // s.page_size_bytes), "max_memory_usage_bytes": mem}
                            if hasattr(s, "kv_cache_specs"):
                                row["layer_page_size_bytes"] = sorted({x.page_size_bytes
                                                                       for x in s.kv_cache_specs.values()})
                            groups.append(row)
                    total = sum(t.size for t in worker.kv_cache_tensors)
                    worker_out = {"num_blocks": worker.num_blocks,
                                  "bytes_per_block": total // worker.num_blocks if worker.num_blocks else 0}
                    cap = {"max_concurrency": conc}
                except (ValueError, AssertionError, NotImplementedError) as e:
                    err = f"{type(e).__name__}: {e}" if not isinstance(e, ValueError) else str(e)
            tokens = [m for m in records if m.startswith("GPU KV cache size")]
            conc_lines = [m for m in records if m.startswith("Maximum concurrency")]  # 0.28 logs one line of both
            n_tokens = int(re.search(r"([\d,]+) tokens", tokens[-1]).group(1).replace(",", "")) if tokens else None
            res = {"case": job["case"], "ok": True, "seconds": round(time.time() - t0, 1), "out": {
                "vllm_version": version, "groups": groups, **worker_out, **cap, "kv_cache_size_tokens": n_tokens,
                "log_lines": tokens[-1:] + conc_lines[-1:], "error": err,
                "inputs": {"block_size": block_in,
                           "max_num_batched_tokens": vc.scheduler_config.max_num_batched_tokens,
                           "async_scheduling": getattr(vc.scheduler_config, "async_scheduling", None),
                           "enable_prefix_caching": vc.cache_config.enable_prefix_caching,
                           "mamba_cache_mode": getattr(vc.cache_config, "mamba_cache_mode", None)},
                "platform_block_size": blk, "hybrid_alignment": hyb,
                "log": [m for m in records if any(k in m for k in ("padding", "block size", "Hybrid", "page size",
                                                                  "attention block"))][:8]}}
        except Exception as e:
            res = {"case": job["case"], "ok": False, "error": f"{type(e).__name__}: {e}",
                   "traceback": traceback.format_exc()[-3000:]}
        sys.stdout.write(json.dumps(res, default=str) + "\n")
        sys.stdout.flush()


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------


def fixture(c: dict, inp: dict, out: dict, release: str) -> dict:
    v = {k: out.get(k) for k in ("groups", "bytes_per_block", "num_blocks", "kv_cache_size_tokens",
                                 "max_concurrency")}
    v["log_lines"] = out.get("log_lines")
    v["error"] = out.get("error")
    return {"case": c["case"], "why": c["why"],
            "project": {"model": c["model"], "chip": c["chip"], "deployment": c["deployment"],
                        "available_memory_bytes": c["available_memory_bytes"], "vllm_version": release},
            "oracle": {"script": "scripts/golden_vllm_release.py", "sm": c["sm"], "input": inp},
            "vllm": v,
            "oracle_raw": {k: out.get(k) for k in ("inputs", "platform_block_size", "hybrid_alignment", "log")},
            "vllm_version": out.get("vllm_version")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Regenerate tests/golden/vllm-<release> from that release's planner.")
    ap.add_argument("release", help=f"one of {', '.join(CASES_BY_RELEASE)}")
    g33.add_run_options(ap)
    args = ap.parse_args(argv)
    if args.worker:
        _worker(args.worker)
        return 0
    if args.release not in CASES_BY_RELEASE:
        print(f"no case table for vLLM {args.release}: use one of {', '.join(CASES_BY_RELEASE)}", file=sys.stderr)
        return 2
    by_name = {c["case"]: c for c in g33.CASES}
    cases = [by_name[n] for n in CASES_BY_RELEASE[args.release]]
    if args.only:
        pats = args.only.split(",")
        cases = [c for c in cases if any(fnmatch.fnmatch(c["case"], p) or p in c["case"] for p in pats)]
    if args.list:
        for c in cases:
            print(f"{c['case']:50s} {c['why']}")
        return 0
    venv = Path(os.environ.get("VLLM_RELEASE_VENV", Path.home() / ".cache" / f"vllm-{args.release}-venv"))
    py = venv / "bin" / "python"
    if not py.exists():
        print(f"vLLM {args.release} not installed at {venv}: run `bash scripts/install_vllm_release.sh "
              f"{args.release}`", file=sys.stderr)
        return 2
    jobs = [{"case": c["case"], "input": build_input(c, args.release)} for c in cases]
    env = dict(os.environ, VLLM_LOGGING_LEVEL="INFO", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1", VLLM_TARGET_DEVICE="cuda")
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="golden_rel_jobs_", delete=False) as jf:
        json.dump(jobs, jf)
    t0 = time.time()
    proc = subprocess.Popen([str(py), str(Path(__file__).resolve()), args.release, "--worker", jf.name],
                            stdout=subprocess.PIPE, stderr=None if os.environ.get("GOLDEN_VERBOSE") else
                            subprocess.DEVNULL, text=True, cwd=str(ROOT), env=env)
    inputs = {j["case"]: j["input"] for j in jobs}
    cases_by = {c["case"]: c for c in cases}
    out = out_dir(args.release)
    out.mkdir(parents=True, exist_ok=True)
    failed, changed, other_release = g33.collect(
        proc, lambda name, res: fixture(cases_by[name], inputs[name], res, args.release), args.release, "the venv",
        out, args.check)
    if other_release:
        return 2
    proc.wait()
    os.unlink(jf.name)
    print(f"{len(cases) - len(failed)}/{len(cases)} cases in {time.time() - t0:.0f} s"
          + (f"; {len(changed)} differ" if args.check else "") + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if proc.returncode or failed or changed else 0


if __name__ == "__main__":
    sys.exit(main())
