#!/usr/bin/env python3
"""Regenerate tests/golden/load_checks/vllm-0.33.0.json: vLLM 0.33's own load-time shape checks,
run on every card with block-scaled FP8 layers under every split the search can produce.

    python scripts/golden_load_checks.py            # judge every case with vLLM, write the fixture
    python scripts/golden_load_checks.py --check    # judge again and diff against the fixture
    python scripts/golden_load_checks.py --list     # the cases only (no vLLM)

The cases. Every card the project ships (pricing/cards) whose served layers include block-scaled FP8
(its checkpoint's quantization_config), under every split planner/candidates/shapes.py `shapes`
enumerates for it on an H200 node (tp within the NVLink domain and allowed by the heads, dp from the
planner's grid, expert parallelism on and off, pipeline stages; the KV cache dtype and dcp do not
reach these checks and are not repeated). What each case hands vLLM:
- the routed experts from the card's PUBLISHED config.json (../shared/models: moe_intermediate_size,
  hidden_size, quantization_config.weight_block_size), never from the project's graph;
- the linear layers as the project's graph lists them (each distinct shape once: its full input and
  output sizes, and whether vLLM fuses it: q/k/v into QKVParallelLinear, checkpoint modules into
  MergedColumnParallelLinear); vLLM's own arithmetic splits them below.

The verdicts, computed in the oracle's interpreter ($VLLM_ORACLE_VENV, vLLM 0.33.0 on the CPU,
../shared/tools/vllm-oracle) by vLLM's own functions with the split's sizes set, no GPU:
- linear: the shards as vLLM's layer classes size them (linear.py: ColumnParallelLinear divide(output,
  tp), RowParallelLinear divide(input, tp), QKVParallelLinear heads divide(heads, tp) and KV heads
  1 when tp >= KV heads else divide(kv, tp)), `ColumnParallelLinear._maybe_allow_fp8_block_shape_mismatch`
  on the layer, then `fp8_utils.validate_fp8_block_shape` (layer.tp_size = tp);
- experts: `FusedMoEParallelConfig.make(tp, pcp, dp, 1, parallel_config)` (the dp and pcp groups and the
  tp rank stubbed to rank 0), FusedMoEConfig's `intermediate_size // tp_size` (fused_moe/config.py), then
  `oracle/fp8.resolve_fp8_moe_weight_block_shape(config, block, kFp8Dynamic128Sym, True)` (moe_backend
  "auto"); unrefined: `fp8_utils.validate_fp8_block_shape_moe` with the attention tp as vLLM's tensor
  parallel world size; refined: `TritonExperts._supports_quant_scheme` of the refined key on a platform
  that supports FP8 (the H200: current_platform.supports_fp8 set true), as select_fp8_moe_backend asks,
  and `kernels_without_fp8`: every FP8 MoE backend's kernel classes (backend_to_kernel_cls) that take the
  refined key with supports_fp8 false (an A100), each class's `_supports_quant_scheme` only (not the rest
  of `is_supported_config`, which can only refuse more).
Beside the cards, PROBES: two published block-FP8 checkpoints that are not cards and three edited
published configs whose shards reach the branches no card reaches (a row-parallel input, a plain
column output and a fused QKV shard off the block), each under the splits the search would give it.
The fixture keeps each model's layers once (`models`) and, per case, the first linear layer and the
first MoE layer vLLM refuses (its exception text), or null. tests/test_load_checks.py asserts the
rules pack agrees on every case.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
OUT = ROOT / "tests" / "golden" / "load_checks" / "vllm-0.33.0.json"
CHIP = "h200"
GPUS_PER_NODE = 8
# published block-FP8 checkpoints that are not cards, and edits of published configs whose shards reach the
# branches the cards never do (a row input, a plain column output, a fused QKV shard off the block): each is
# (name, file in ../shared/models, the fields changed); its layers come from the graph of that config.json
PROBES = (
    ("qwen3-32b-fp8", "Qwen--Qwen3-32B-FP8.json", {}),
    ("qwen3-30b-a3b-fp8", "Qwen--Qwen3-30B-A3B-FP8.json", {}),
    ("qwen3-32b-fp8-intermediate-25664", "Qwen--Qwen3-32B-FP8.json", {"intermediate_size": 25664}),
    ("qwen3-32b-fp8-head-dim-96", "Qwen--Qwen3-32B-FP8.json", {"head_dim": 96}),
    ("dsv3-120-heads", "deepseek-ai--DeepSeek-V3.json", {"num_attention_heads": 120}),
)
# 120 heads allow tp 3, 5 and 6, which the shared experts' 2,048 do not divide (vLLM's divide() asserts
# before any block check): the probe is searched at the tp sizes the cards use
PROBE_TP = {"dsv3-120-heads": (1, 2, 4, 8)}


def published(hf_id: str) -> dict | None:
    """The card's published config.json from ../shared/models (its text_config when wrapped)."""
    path = SHARED / "models" / f"{hf_id.replace('/', '--')}.json"
    if not path.exists():
        return None
    cfg = json.loads(path.read_text())
    return cfg.get("text_config", cfg) if "quantization_config" not in cfg else cfg


def graph_config(card: str) -> dict:
    """The card's own config (its YAML's `config`, transcribed from the published file) where
    ../shared/models has no copy."""
    import yaml

    cfg = yaml.safe_load((ROOT / "pricing" / "cards" / f"{card}.yaml").read_text())["config"]
    return cfg.get("text_config", cfg) if "quantization_config" not in cfg else cfg


def linear_layers(graph) -> list[dict]:
    """The graph's block-FP8 linear layers as vLLM builds them, each distinct shape once."""
    from pricing.config.quantization import Fp8

    out, seen = [], set()
    for _, data in graph.nodes():
        tensors = data["tensors"]
        for t in tensors:
            fmt = t.fmt
            if not (isinstance(fmt, Fp8) and fmt.strategy == "block" and fmt.block) or t.split not in ("row", "column"):
                continue
            prefix = t.name.rsplit(".", 1)[0]
            kv = [s for s in tensors if s.split == "heads" and s.name.rsplit(".", 1)[0] == prefix]
            if t.name.endswith("q_proj") and len(kv) == 2:
                per_head = kv[0].rows // kv[0].heads
                layer = {"kind": "qkv", "input_size": t.cols, "heads": t.rows // per_head, "kv_heads": kv[0].heads,
                         "head_size": per_head}
            elif t.split == "row":
                layer = {"kind": "row", "input_size": t.cols, "output_size": t.rows}
            elif t.parts > 1:
                layer = {"kind": "merged", "input_size": t.cols, "output_sizes": [t.rows // t.parts] * t.parts}
            else:
                layer = {"kind": "column", "input_size": t.cols, "output_size": t.rows}
            layer["block"] = list(fmt.block)
            key = json.dumps(layer, sort_keys=True)
            if key not in seen:
                seen.add(key)
                out.append({"name": t.name, **layer})
    return out


def probe_model(name: str, tmp: Path):
    """The graph of probe `name` (PROBES): its published config.json with the edits, from a folder."""
    from pricing.graph import load_model

    _, file, edits = next(p for p in PROBES if p[0] == name)
    folder = tmp / name
    folder.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((SHARED / "models" / file).read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, **edits}))
    return load_model(str(folder)), {**cfg, **edits}


def cases() -> list[dict]:
    """Every card with block-FP8 layers, and every probe, × every split the search enumerates on the chip."""
    from planner.candidates.shapes import shapes
    from planner.request import ServiceSpec
    from pricing.chips import get_chip
    from pricing.graph import load_model

    chip = get_chip(CHIP)
    out = []
    tmp = Path(tempfile.mkdtemp())
    cards = sorted(p.stem for p in (ROOT / "pricing" / "cards").glob("*.yaml"))
    for card in cards + [f"probe:{p[0]}" for p in PROBES]:
        if card.startswith("probe:"):
            graph, probe_cfg = probe_model(card.removeprefix("probe:"), tmp)
        else:
            graph, probe_cfg = load_model(card), None
        layers = linear_layers(graph)
        cfg = probe_cfg or published(graph.hf_id) or graph_config(card)
        qc = cfg.get("quantization_config") or {}
        experts = None
        if any(t.split == "expert_row" and str(t.fmt).startswith("fp8_block") for _, d in graph.nodes()
               for t in d["tensors"]):
            inter = cfg.get("moe_intermediate_size") or cfg["intermediate_size"]  # MiniMax-M2: intermediate_size
            experts = {"intermediate_size": inter, "hidden_size": cfg["hidden_size"], "block": qc["weight_block_size"]}
        if not layers and experts is None:
            continue
        service = ServiceSpec(model=graph.name if probe_cfg else card, concurrency=1,
                              tp=PROBE_TP.get(card.removeprefix("probe:")))
        found, _ = shapes(graph, chip, service, None, GPUS_PER_NODE)
        splits = sorted({(s.tp, s.dp, s.ep, s.pp) for s in found})
        for tp, dp, ep, pp in splits:
            case = {"id": f"{card}/tp{tp}-dp{dp}-pp{pp}-{'ep' if ep else 'noep'}", "card": card, "chip": CHIP,
                    "split": {"tp": tp, "dp": dp, "pcp": 1, "ep": ep, "pp": pp}, "linear": layers, "experts": experts}
            if probe_cfg:  # what the test rebuilds the graph from
                _, file, edits = next(p for p in PROBES if p[0] == card.removeprefix("probe:"))
                case["config"] = {"file": file, "edits": edits}
            out.append(case)
    return out


WORKER = r'''
import json, sys, types
from unittest import mock
import vllm.distributed
from vllm.model_executor.layers.linear import ColumnParallelLinear
from vllm.model_executor.layers.quantization.utils import fp8_utils
from vllm.model_executor.layers.quantization.utils.quant_utils import (
    GroupShape, create_fp8_quant_key, kFp8Dynamic128Sym)
from vllm.model_executor.layers.fused_moe import config as moe_config
from vllm.model_executor.layers.fused_moe.oracle import fp8 as moe_fp8
from vllm.model_executor.layers.fused_moe.experts import triton_moe
from vllm.distributed.utils import divide
import vllm.platforms

def first_linear(case):
    tp = case["split"]["tp"]
    for layer in case["linear"]:
        kind, block = layer["kind"], layer["block"]
        if kind == "row":
            in_size, out_size = layer["input_size"], layer["output_size"]
            ispp, parts = divide(in_size, tp), [out_size]
        elif kind == "column":
            in_size, out_size = layer["input_size"], layer["output_size"]
            ispp, parts = in_size, [divide(out_size, tp)]
        elif kind == "merged":
            in_size, out_size = layer["input_size"], sum(layer["output_sizes"])
            ispp, parts = in_size, [divide(o, tp) for o in layer["output_sizes"]]
        else:  # QKVParallelLinear.__init__
            heads, kv, hs = layer["heads"], layer["kv_heads"], layer["head_size"]
            num_heads = divide(heads, tp)
            num_kv = 1 if tp >= kv else divide(kv, tp)
            in_size, out_size = layer["input_size"], (heads + 2 * kv) * hs
            ispp, parts = in_size, [num_heads * hs, num_kv * hs, num_kv * hs]
        ns = types.SimpleNamespace(tp_size=tp, prefix=layer["name"], output_partition_sizes=parts,
                                   quant_config=types.SimpleNamespace(weight_block_size=block),
                                   allow_fp8_block_shape_mismatch=False)
        if kind != "row":
            ColumnParallelLinear._maybe_allow_fp8_block_shape_mismatch(ns)
        try:  # the world size is also asked (getattr's default) though the layer's tp_size is read
            with mock.patch.object(vllm.distributed, "get_tensor_model_parallel_world_size", lambda: tp):
                fp8_utils.validate_fp8_block_shape(ns, in_size, out_size, ispp, parts, block)
        except ValueError as err:
            return {"layer": layer["name"], "message": f"ValueError: {err}"}
    return None

def first_moe(case):
    e = case["experts"]
    if e is None:
        return None
    s = case["split"]
    rank0 = types.SimpleNamespace(rank_in_group=0)
    pc = types.SimpleNamespace(enable_expert_parallel=s["ep"], all2all_backend="allgather_reducescatter",
                               enable_eplb=False)
    with mock.patch.object(moe_config, "get_dp_group", lambda: rank0), \
         mock.patch.object(moe_config, "get_pcp_group", lambda: rank0), \
         mock.patch.object(moe_config, "get_tensor_model_parallel_rank", lambda: 0):
        par = moe_config.FusedMoEParallelConfig.make(s["tp"], s["pcp"], s["dp"], 1, pc)
    ispp = e["intermediate_size"] // par.tp_size  # FusedMoEConfig.__post_init__
    cfg = types.SimpleNamespace(intermediate_size_per_partition=ispp, intermediate_size=e["intermediate_size"],
                                tp_size=par.tp_size, ep_size=par.ep_size, hidden_dim=e["hidden_size"],
                                moe_backend="auto", is_lora_enabled=False, has_bias=False)
    shape, refine = moe_fp8.resolve_fp8_moe_weight_block_shape(cfg, list(e["block"]), kFp8Dynamic128Sym, True)
    verdict = {"moe_tp": par.tp_size, "use_ep": par.use_ep, "intermediate_per_rank": ispp, "refined": shape}
    if refine is None:
        with mock.patch.object(vllm.distributed, "get_tensor_model_parallel_world_size", lambda: s["tp"]):
            try:
                fp8_utils.validate_fp8_block_shape_moe(ispp, list(e["block"]))
            except ValueError as err:
                return {**verdict, "message": f"ValueError: {err}"}
        return {**verdict, "message": None}
    key = create_fp8_quant_key(static=True, group_shape=GroupShape(*shape))
    with mock.patch.object(vllm.platforms.current_platform.__class__, "supports_fp8", classmethod(lambda cls: True)):
        taken = triton_moe.TritonExperts._supports_quant_scheme(key, kFp8Dynamic128Sym)
    return {**verdict, "message": None if taken else NO_BACKEND, "kernels_without_fp8": kernels_without_fp8(key)}

NO_BACKEND = "NotImplementedError: No FP8 MoE backend supports the deployment configuration."

def kernels_without_fp8(key):
    """The FP8 MoE kernel classes (every Fp8MoeBackend's, oracle/fp8.py backend_to_kernel_cls) whose
    _supports_quant_scheme takes the refined key on a platform without supports_fp8 (an A100)."""
    names = []
    with mock.patch.object(vllm.platforms.current_platform.__class__, "supports_fp8", classmethod(lambda cls: False)):
        for backend in moe_fp8.Fp8MoeBackend:
            try:
                classes = moe_fp8.backend_to_kernel_cls(backend)
            except Exception as err:  # a backend with no kernel class here (NONE) or one that cannot import
                names.append(f"unjudged {backend.name}: {type(err).__name__}")
                continue
            for cls in classes:
                try:
                    if cls._supports_quant_scheme(key, kFp8Dynamic128Sym):
                        names.append(cls.__name__)
                except Exception as err:
                    names.append(f"unjudged {cls.__name__}: {type(err).__name__}")
    return names

out = []
for case in json.load(open(sys.argv[1])):
    moe = first_moe(case)
    out.append({"id": case["id"], "linear": first_linear(case), "moe": moe})
json.dump(out, open(sys.argv[2], "w"))
'''


def judge(todo: list[dict]) -> list[dict]:
    venv = os.environ.get("VLLM_ORACLE_VENV", str(Path.home() / ".cache" / "vllm-oracle-venv"))
    python = Path(venv) / "bin" / "python"
    with tempfile.TemporaryDirectory() as tmp:
        src, dst, worker = Path(tmp) / "cases.json", Path(tmp) / "verdicts.json", Path(tmp) / "worker.py"
        src.write_text(json.dumps(todo))
        worker.write_text(WORKER)
        done = subprocess.run([str(python), str(worker), str(src), str(dst)], capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"the vLLM worker failed:\n{done.stderr[-4000:]}")
        verdicts = {v["id"]: v for v in json.loads(dst.read_text())}
    version = subprocess.run([str(python), "-c", "import vllm; print(vllm.__version__)"], capture_output=True,
                             text=True).stdout.strip().splitlines()[-1]
    if version != "0.33.0":
        sys.exit(f"the oracle's vLLM is {version}, not 0.33.0")
    return [{**case, "vllm": {"linear": verdicts[case["id"]]["linear"], "moe": verdicts[case["id"]]["moe"]}}
            for case in todo]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="diff vLLM's answers against the fixture")
    ap.add_argument("--list", action="store_true", help="list the cases only")
    args = ap.parse_args()
    todo = cases()
    if args.list:
        for case in todo:
            print(case["id"])
        print(f"{len(todo)} cases")
        return
    judged = judge(todo)
    models = {c["card"]: {k: c[k] for k in ("linear", "experts", "config") if k in c} for c in judged}
    fixture = {"vllm": "0.33.0", "generated_by": "scripts/golden_load_checks.py", "chip": CHIP,
               "models": models,  # what each card or probe hands vLLM, once
               "cases": [{k: c[k] for k in ("id", "card", "chip", "split", "vllm")} for c in judged]}
    text = json.dumps(fixture, indent=1, sort_keys=True) + "\n"
    if args.check:
        same = OUT.exists() and OUT.read_text() == text
        print("fixture matches vLLM" if same else "fixture DIFFERS from vLLM's answers")
        sys.exit(0 if same else 1)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}: {len(todo)} cases")


if __name__ == "__main__":
    main()
