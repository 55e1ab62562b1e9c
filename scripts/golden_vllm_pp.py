#!/usr/bin/env python3
"""Regenerate the pipeline-parallel golden fixtures tests/golden/vllm-0.33/pp_*.json from vLLM 0.33's
own KV-cache planner (../shared/tools/vllm-oracle), in the fixture format agreed in TEAM.md
(scripts/golden_vllm.py writes the others).

Run it with the oracle's interpreter (vLLM 0.33.0 installed, CPU only):

    ~/.cache/vllm-oracle-venv/bin/python scripts/golden_vllm_pp.py          # write every pp fixture
    ~/.cache/vllm-oracle-venv/bin/python scripts/golden_vllm_pp.py --check  # compare, write nothing

Each case's layers are written from the PUBLISHED config.json in ../shared/models (never from the
project's graph), and each pipeline stage's layers come from vLLM's own
`vllm.distributed.utils.get_pp_indices` (VLLM_PP_LAYER_PARTITION set when the case gives one).
The oracle then plans every worker as EngineCore does: global groups over all stages, projected
onto each, and every worker set to the fewest blocks. The fixture adds, beside the agreed fields,
`vllm.workers`: each stage's `num_blocks` before the minimum and its `bytes_per_block`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
ORACLE_DIR = SHARED / "tools" / "vllm-oracle"
OUT_DIR = ROOT / "tests" / "golden" / "vllm-0.33"
GiB = 1 << 30


def gqa_layers(cfg: dict, tp: int) -> list[dict]:
    """LlamaAttention / Qwen3 / Qwen3-MoE: one full-attention cache per layer, kv heads per rank."""
    heads = cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    head = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    return [{"name": f"model.layers.{i}.self_attn.attn", "kind": "full", "num_kv_heads": max(1, heads // tp),
             "head_size": head, "dtype": "bfloat16"} for i in range(cfg["num_hidden_layers"])]


def gpt_oss_layers(cfg: dict, tp: int) -> list[dict]:
    heads = max(1, cfg["num_key_value_heads"] // tp)
    out = []
    for i, t in enumerate(cfg["layer_types"][: cfg["num_hidden_layers"]]):
        entry = {"name": f"model.layers.{i}.attn", "kind": "full", "num_kv_heads": heads,
                 "head_size": cfg["head_dim"], "dtype": "bfloat16"}
        if t == "sliding_attention":
            entry.update(kind="sliding", sliding_window=cfg["sliding_window"])
        out.append(entry)
    return out


def mla_layers(cfg: dict, tp: int, cache_dtype: str) -> list[dict]:
    """DeepSeek-V3 / Kimi-K2 MLA: one latent head of kv_lora_rank + rope dim, never divided by tp."""
    head = cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]
    entry = {"kind": "mla", "num_kv_heads": 1, "head_size": head, "max_tp_shards": 1}
    entry.update({"cache_dtype": "fp8", "dtype": "uint8"} if cache_dtype == "fp8" else {"dtype": "bfloat16"})
    return [{"name": f"model.layers.{i}.self_attn.attn", **entry} for i in range(cfg["num_hidden_layers"])]


BUILDERS = {"gqa": gqa_layers, "gpt_oss": gpt_oss_layers, "mla": mla_layers}

# name, why, card, chip, config file, builder, backend, deployment, available memory (GiB, or one per stage)
CASES = [
    ("pp_llama-3.1-8b_h100_pp2", "dense, pp 2: 16 + 16 layers, each stage's block is half the pp-1 block",
     "llama-3.1-8b", "h100", "meta-llama--Meta-Llama-3.1-8B.json", "gqa", "FLASH_ATTN",
     {"tensor_parallel_size": 1, "pipeline_parallel_size": 2}, 30),
    ("pp_llama-3.1-8b_h100_pp3", "dense, pp 3: 32 layers as 11 + 11 + 10, the 11-layer stages bind",
     "llama-3.1-8b", "h100", "meta-llama--Meta-Llama-3.1-8B.json", "gqa", "FLASH_ATTN",
     {"tensor_parallel_size": 1, "pipeline_parallel_size": 3}, 30),
    ("pp_llama-3.1-8b_h100_pp2_uneven_memory", "dense, pp 2 with a different pool per stage: the fewest blocks win",
     "llama-3.1-8b", "h100", "meta-llama--Meta-Llama-3.1-8B.json", "gqa", "FLASH_ATTN",
     {"tensor_parallel_size": 1, "pipeline_parallel_size": 2}, [30, 26.5]),
    ("pp_llama-3.1-8b_h100_pp2_partition", "VLLM_PP_LAYER_PARTITION=12,20: the 20-layer stage binds",
     "llama-3.1-8b", "h100", "meta-llama--Meta-Llama-3.1-8B.json", "gqa", "FLASH_ATTN",
     {"tensor_parallel_size": 1, "pipeline_parallel_size": 2, "pp_layer_partition": [12, 20]}, 30),
    ("pp_qwen3-30b-a3b_h100_tp2_pp4", "MoE, tp 2 pp 4: 48 layers as 12 each, 2 KV heads per rank",
     "qwen3-30b-a3b", "h100", "Qwen--Qwen3-30B-A3B.json", "gqa", "FLASH_ATTN",
     {"tensor_parallel_size": 2, "pipeline_parallel_size": 4, "max_model_len": 40960}, 20),
    ("pp_dsv3_h200_tp8_pp2_fp8", "MLA, tp 8 pp 2: 61 layers as 31 + 30, fp8 latent cache (FlashMLA, block 64)",
     "dsv3", "h200", "deepseek-ai--DeepSeek-V3.json", "mla", "FLASHMLA",
     {"tensor_parallel_size": 8, "pipeline_parallel_size": 2, "kv_cache_dtype": "fp8", "max_model_len": 163840,
      "max_num_seqs": 1024}, 60),
    ("pp_kimi-k2_h100_tp8_pp4_fp8", "MLA, tp 8 pp 4: 61 layers as 15 + 15 + 16 + 15, the third stage binds",
     "kimi-k2", "h100", "moonshotai--Kimi-K2-Instruct.json", "mla", "FLASHMLA",
     {"tensor_parallel_size": 8, "pipeline_parallel_size": 4, "kv_cache_dtype": "fp8", "max_model_len": 32768,
      "max_num_seqs": 1024}, 20),
    ("pp_gpt-oss-120b_h100_pp2", "hybrid sliding window + full, pp 2: groups formed over both stages, then "
     "projected (9 + 9 layers per stage); pp + 1 = 3 batches in flight widen the window rings",
     "gpt-oss-120b", "h100", "openai--gpt-oss-120b.json", "gpt_oss", "FLASH_ATTN",
     {"tensor_parallel_size": 1, "pipeline_parallel_size": 2}, 8),
]


def deployment(d: dict) -> dict:
    out = {"tensor_parallel_size": 1, "kv_cache_dtype": "auto", "max_model_len": 131072,
           "max_num_batched_tokens": 8192, "max_num_seqs": 256}
    out.update(d)
    return out


def oracle_input(case) -> dict:
    name, why, card, chip, cfg_file, builder, backend, dep, memory = case
    d = deployment(dep)
    cfg = json.loads((SHARED / "models" / cfg_file).read_text())
    cfg = cfg.get("text_config", cfg) if "num_hidden_layers" not in cfg else cfg
    tp, pp = d["tensor_parallel_size"], d["pipeline_parallel_size"]
    args = (cfg, tp, d["kv_cache_dtype"]) if builder == "mla" else (cfg, tp)
    layers = BUILDERS[builder](*args)
    if d.get("pp_layer_partition"):
        os.environ["VLLM_PP_LAYER_PARTITION"] = ",".join(map(str, d["pp_layer_partition"]))
    else:
        os.environ.pop("VLLM_PP_LAYER_PARTITION", None)
    from vllm.distributed.utils import get_pp_indices

    n = cfg["num_hidden_layers"]
    workers = []
    for rank in range(pp):
        start, end = get_pp_indices(n, rank, pp)
        workers.append([layers[i]["name"] for i in range(start, end)])
    if isinstance(memory, list):
        available = [int(round(m * 1024)) << 20 for m in memory]
    else:
        available = int(round(memory * 1024)) << 20
    inp = {"layers": layers, "workers": workers, "available_memory_bytes": available,
           "max_model_len": d["max_model_len"], "max_num_batched_tokens": d["max_num_batched_tokens"],
           "max_num_seqs": d["max_num_seqs"], "tensor_parallel_size": tp, "pipeline_parallel_size": pp,
           "attention_backend": backend}
    if d["kv_cache_dtype"] != "auto":
        inp["cache_dtype"] = d["kv_cache_dtype"]
    return inp


def fixture(case, out: dict, inp: dict) -> dict:
    name, why, card, chip, cfg_file, *_ , dep, memory = case
    cap = out.get("capacity") or {}
    err = out.get("error")
    groups = [{"layers": g["layer_names"], "num_layers": g["num_layers"], "spec": g["spec_class"],
               "block_size": g["block_size"], "page_size_bytes": g["page_size_bytes"],
               "blocks_per_request": g["blocks_per_request_at_max_model_len"]}
              for g in out.get("global_kv_cache_groups", [])]
    workers = out.get("worker_kv_cache_configs", [])
    first = workers[0] if workers else {}
    shown = dict(inp)
    shown["hf_config_file"] = f"../shared/models/{cfg_file}"
    return {
        "case": name, "why": why,
        "project": {"model": card, "chip": chip, "deployment": deployment(dep),
                    "available_memory_bytes": inp["available_memory_bytes"]},
        "oracle": {"script": "oracle.py", "generator": "scripts/golden_vllm_pp.py", "input": shown},
        "vllm": {
            "groups": groups,
            "bytes_per_block": first.get("bytes_per_block", 0),
            "num_blocks": cap.get("num_gpu_blocks", 0),
            "kv_cache_size_tokens": cap.get("kv_cache_size_tokens", 0),
            "max_concurrency": cap.get("max_concurrency", 0.0),
            "blocks_per_request_total": cap.get("blocks_per_request_total"),
            "log_line": out.get("kv_cache_size_log_line"),
            "error": err["message"] if err else None,
            "workers": [{"layers": len(w), "bytes_per_block": wo.get("bytes_per_block"),
                         "num_blocks_after_min": wo.get("num_blocks")}
                        for w, wo in zip(inp["workers"], workers, strict=False)],
            "max_in_flight_tokens": out["inputs"]["max_in_flight_tokens"],
        },
        "vllm_version": out.get("vllm_version"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the files, write nothing")
    args = ap.parse_args()
    sys.path.insert(0, str(ORACLE_DIR))
    import oracle  # the oracle's own module: vLLM's planner replayed

    status = 0
    for case in CASES:
        inp = oracle_input(case)
        out = oracle.run_plan(dict(inp))
        data = fixture(case, out, inp)
        path = OUT_DIR / f"{case[0]}.json"
        text = json.dumps(data, indent=1) + "\n"
        if args.check:
            same = path.exists() and json.loads(path.read_text())["vllm"] == data["vllm"]
            print(("same    " if same else "DIFFERS ") + path.name)
            status |= 0 if same else 1
        else:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}: {data['vllm']['log_line'] or data['vllm']['error']}")
    return status


if __name__ == "__main__":
    sys.exit(main())
