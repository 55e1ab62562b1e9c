#!/usr/bin/env python3
"""Regenerate tests/golden/load_checks/vllm-0.33.0.json: vLLM 0.33's own load-time shape checks,
run on every card with block-scaled FP8 layers under every split the search can produce; and
vllm-0.33.0-heads-groups.json: the heads, linear shards, weight-only INT groups and NVFP4 (below,
`heads_cases`, `group_cases`, QUANT_WORKER).

    python scripts/golden_load_checks.py            # judge every case with vLLM, write both fixtures
    python scripts/golden_load_checks.py --check    # judge again and diff against the fixtures
    python scripts/golden_load_checks.py --list     # the cases only (no vLLM)
    python scripts/golden_load_checks.py --only quant   # one fixture (fp8 | quant); quant takes ~4 min

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


# -- the heads, weight-only INT group and NVFP4 checks (tests/golden/load_checks/vllm-0.33.0-heads-groups.json) --
# What QUANT_WORKER hands vLLM and calls (all vLLM 0.33.0 code in the oracle's interpreter, no GPU):
# - heads: a real ModelConfig from the card's config.json, ModelConfig.verify_with_parallel_config at each tp,
#   then QKVParallelLinear (non-MLA) and every other tensor-parallel linear layer of the graph as Row-,
#   Column- or MergedColumnParallelLinear, unquantized, on the meta device, with the tp group stubbed to rank 0;
# - groups: the checkpoint's quantization config (get_quantization_config(...).from_config) and the layers
#   built with it the same way; the routed experts: FusedMoEParallelConfig.make (dp/pcp groups stubbed),
#   FusedMoEConfig, the config's get_quant_method on a RoutedExperts carrying the attributes its __init__ sets
#   before asking (the expert map and router not built), then create_weights; vLLM's platform made to report
#   CUDA at SM90 (SM100 for NVFP4) after every import, so the kernels' can_implement and backend choices run
#   as on that GPU. Nothing here is left uncalled: each check the rules pack holds is vLLM's own code.
OUT_QUANT = ROOT / "tests" / "golden" / "load_checks" / "vllm-0.33.0-heads-groups.json"
# every tensor-parallel size the search gives on a shipped chip (GB200 and GB300 NVL72: tp up to 72), with the
# sizes between that the heads refuse (the probes around each boundary)
HEADS_TP = tuple(range(1, 73))
GROUP_CHIPS = ("h200", "gb200")  # the splits the search gives within an HGX node and an NVL72 domain
AWQ_128 = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
GPTQ_128 = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}
CT_W4A16_128 = {"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
                "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                    "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 128}}}}
# vLLM's reading of `--quantization nvfp4` on a ModelOpt checkpoint (hf_quant_config.json's fields)
MODELOPT_NVFP4 = {"quant_method": "modelopt", "quantization": {"quant_algo": "NVFP4", "group_size": 16,
                                                               "kv_cache_quant_algo": None,
                                                               "exclude_modules": ["lm_head"]}}
GENZ_GPTQ = {"bits": 4, "group_size": 128, "damp_percent": 0.1, "desc_act": True, "sym": True, "true_sequential": True,
             "model_name_or_path": None, "model_file_base_name": "model", "quant_method": "gptq"}  # as published
# the weight-only INT and NVFP4 models: the shipped card that serves a group-quantized format (Kimi-K2.5:
# compressed-tensors W4A16 experts, group 32), and published configs (some edited so that a shard cuts a
# group at a split the search gives) for the loaders no card reaches: (name, file in ../shared/models or
# None for a card, the fields changed, --quantization, the GPU vLLM's platform is made to report)
GROUP_MODELS = (
    ("kimi-k2.5", None, {}, None, "sm90"),
    ("awq-qwen2.5-72b", "LDCC--Qwen2.5-72B-Instruct-ko-AWQ.json", {}, None, "sm90"),
    # Genz's published desc_act true is refused by vLLM 0.33 whatever the split (GPTQConfig: "GPTQ group
    # activation ordering (desc_act=True) is no longer supported"): the split's checks are judged with it off,
    # and the published config kept to show that refusal
    ("gptq-genz-70b-static-order", "TheBloke--Genz-70b-GPTQ.json", {"quantization_config": {
        **GENZ_GPTQ, "desc_act": False}}, None, "sm90"),
    ("gptq-genz-70b", "TheBloke--Genz-70b-GPTQ.json", {}, None, "sm90"),
    ("ct-qwen3-8b-intermediate-12416", "Qwen--Qwen3-8B.json",
     {"intermediate_size": 12416, "quantization_config": CT_W4A16_128}, None, "sm90"),
    ("awq-mixtral-8x7b", "mistralai--Mixtral-8x7B-v0.1.json", {"quantization_config": AWQ_128}, None, "sm90"),
    ("gptq-mixtral-8x7b", "mistralai--Mixtral-8x7B-v0.1.json", {"quantization_config": GPTQ_128}, None, "sm90"),
    ("nvfp4-qwen3-8b-intermediate-12304", "Qwen--Qwen3-8B.json", {"intermediate_size": 12304}, "nvfp4", "sm100"),
)
# MoE splits past the search's largest instance (grids.max_gpus_per_instance), where a 2,048 or 14,336
# intermediate size is cut below a group: (tp, dp, ep)
GROUP_PROBE_SPLITS = ((8, 16, False), (8, 16, True), (16, 8, False))


def group_model(name: str, tmp: Path):
    """The graph of GROUP_MODELS' `name` and the config.json vLLM is handed (its quantization_config
    included: for `--quantization nvfp4`, ModelOpt's NVFP4 fields)."""
    from pricing.graph import load_model

    _, file, edits, quantization, _ = next(m for m in GROUP_MODELS if m[0] == name)
    if file is None:
        graph = load_model(name)
        return graph, published(graph.hf_id) or graph_config(name)
    folder = tmp / name
    folder.mkdir(parents=True, exist_ok=True)
    cfg = {**json.loads((SHARED / "models" / file).read_text()), **edits}
    (folder / "config.json").write_text(json.dumps(cfg))
    graph = load_model(str(folder), quantization)
    if quantization == "nvfp4":
        cfg = {**cfg, "quantization_config": MODELOPT_NVFP4}
    return graph, cfg


def group_layers(graph) -> tuple[list[dict], dict | None]:
    """The graph's weight-only INT (grouped) and NVFP4 layers as vLLM builds them, each distinct shape
    once: row-parallel layers (input split tp ways), for NVFP4 the column-parallel ones too (their input
    whole), and the routed experts' down projection (hidden × intermediate)."""
    from pricing.config.quantization import Nvfp4, PackedInt

    layers, experts, seen = [], None, set()
    for _, data in graph.nodes():
        for t in data["tensors"]:
            fmt = t.fmt
            grouped = isinstance(fmt, PackedInt) and fmt.group > 0
            if not (grouped or isinstance(fmt, Nvfp4)):
                continue
            if t.split == "expert_row" and experts is None:
                experts = {"name": t.name, "intermediate_size": t.cols, "hidden_size": t.rows}
            elif t.split == "row" or (t.split == "column" and isinstance(fmt, Nvfp4)):
                layer = ({"kind": "row", "input_size": t.cols, "output_size": t.rows} if t.split == "row" else
                         {"kind": "column", "input_size": t.cols, "output_sizes": [t.rows // t.parts] * t.parts})
                key = json.dumps(layer, sort_keys=True)
                if key not in seen:
                    seen.add(key)
                    layers.append({"name": t.name, **layer})
    return layers, experts


def shard_layers(graph) -> list[dict]:
    """The graph's tensor-parallel linear layers, any format, each distinct shape once: a row-parallel
    layer's input and output, a column-parallel one's output (a fused one's per module); a q_proj beside its
    k_proj and v_proj is vLLM's QKVParallelLinear, which the heads cases build."""
    out, seen = [], set()
    for _, data in graph.nodes():
        tensors = data["tensors"]
        for t in tensors:
            if t.split not in ("row", "column"):
                continue
            prefix = t.name.rsplit(".", 1)[0]
            if t.name.endswith("q_proj") and sum(s.split == "heads" and s.name.rsplit(".", 1)[0] == prefix
                                                 for s in tensors) == 2:
                continue
            if t.split == "row":
                layer = {"kind": "row", "input_size": t.cols, "output_size": t.rows}
            else:
                layer = {"kind": "column", "input_size": t.cols, "output_sizes": [t.rows // t.parts] * t.parts}
            key = json.dumps(layer, sort_keys=True)
            if key not in seen:
                seen.add(key)
                out.append({"name": t.name, **layer})
    return out


def heads_cases() -> list[dict]:
    """Every shipped card with the config.json vLLM reads (its quantization_config dropped: it does not
    reach the heads, and vLLM would check it against a platform it cannot see here)."""
    import yaml

    from pricing.graph import load_model

    out = []
    for card in sorted(p.stem for p in (ROOT / "pricing" / "cards").glob("*.yaml")):
        graph = load_model(card)
        path = SHARED / "models" / f"{graph.hf_id.replace('/', '--')}.json"
        if path.exists():
            cfg, source = json.loads(path.read_text()), f"../shared/models/{path.name}"
        else:
            cfg = yaml.safe_load((ROOT / "pricing" / "cards" / f"{card}.yaml").read_text())["config"]
            source = f"pricing/cards/{card}.yaml config"
        cfg = {k: v for k, v in cfg.items() if k != "quantization_config"}
        if isinstance(cfg.get("text_config"), dict):
            cfg["text_config"] = {k: v for k, v in cfg["text_config"].items() if k != "quantization_config"}
        out.append({"card": card, "config_source": source, "config": cfg, "tp": list(HEADS_TP),
                    "linear": shard_layers(graph)})
    return out


def group_cases() -> list[dict]:
    """Every GROUP_MODELS model × every split the search gives it on GROUP_CHIPS (tp, dp, expert
    parallelism; pipeline stages and the KV cache dtype do not reach these checks), and for a MoE model
    GROUP_PROBE_SPLITS."""
    from planner.candidates.shapes import shapes
    from planner.request import ServiceSpec
    from pricing.chips import get_chip

    out = []
    tmp = Path(tempfile.mkdtemp())
    for name, file, edits, quantization, gpu in GROUP_MODELS:
        graph, cfg = group_model(name, tmp)
        layers, experts = group_layers(graph)
        qc = cfg.get("quantization_config") or cfg.get("text_config", {}).get("quantization_config")
        if experts is not None:
            text = cfg.get("text_config", cfg)
            experts["num_experts"] = text.get("n_routed_experts") or text.get("num_local_experts")
            experts["top_k"] = text["num_experts_per_tok"]
        splits = set()
        for chip_id in GROUP_CHIPS:
            chip = get_chip(chip_id)
            service = ServiceSpec(model=graph.name if file else name, concurrency=1, quantization=quantization)
            found, _ = shapes(graph, chip, service, None, chip.gpus_per_node)
            splits |= {(s.tp, s.dp, s.ep) for s in found}
        if experts is not None:
            splits |= set(GROUP_PROBE_SPLITS)
        model = {"quantization_config": qc, "linear": layers, "experts": experts, "gpu": gpu}
        if file is not None:
            model["config"] = {"file": file, "edits": edits, "quantization": quantization}
        for tp, dp, ep in sorted(splits):
            out.append({"id": f"{name}/tp{tp}-dp{dp}-{'ep' if ep else 'noep'}", "model": name,
                        "split": {"tp": tp, "dp": dp, "pcp": 1, "ep": ep}, **model})
    return out


QUANT_WORKER = r'''
import json, sys, types
from unittest import mock
import torch
from vllm.platforms import PlatformEnum, current_platform
from vllm.platforms.interface import DeviceCapability
from vllm.config import ModelConfig
from vllm.distributed import parallel_state
from vllm.model_executor.layers import linear
from vllm.model_executor.layers.quantization import get_quantization_config
from vllm.model_executor.layers.fused_moe import config as moe_config
from vllm.model_executor.layers.fused_moe.activation import MoEActivation
from vllm.model_executor.layers.fused_moe.config import RoutingMethodType
from vllm.model_executor.layers.fused_moe.routed_experts import RoutedExperts
from vllm.model_executor.kernels.linear.mixed_precision.marlin import MarlinLinearKernel
from vllm.model_executor.kernels.linear.mixed_precision.triton_w4a16 import TritonW4A16LinearKernel
from vllm.model_executor.kernels.linear.mixed_precision.MPLinearKernel import MPLinearLayerConfig

# every config class resolved (and its module's import-time platform probes run) before the platform is emulated
CONFIGS = {m: get_quantization_config(m) for m in ("awq", "gptq", "compressed-tensors", "modelopt_fp4")}
PLATFORM = type(current_platform)
CAPS = {"sm90": (9, 0), "sm100": (10, 0)}

def emulate(gpu):
    # vLLM's platform reports CUDA at the GPU's compute capability (the kernels' can_implement and the
    # backend oracles read these); set after every import, whose module-level probes need vllm._C
    PLATFORM._enum = PlatformEnum.CUDA
    major, minor = CAPS[gpu]
    PLATFORM.get_device_capability = classmethod(lambda cls, device_id=0: DeviceCapability(major=major, minor=minor))

def tp_group(tp):
    return mock.patch.object(parallel_state, "_TP", types.SimpleNamespace(rank_in_group=0, world_size=tp))

def err(e):
    return f"{type(e).__name__}: {e}"

def heads(case):
    import os, tempfile
    folder = tempfile.mkdtemp()
    json.dump(case["config"], open(os.path.join(folder, "config.json"), "w"))
    mc = ModelConfig(model=folder, skip_tokenizer_init=True, trust_remote_code=False, enforce_eager=True,
                     max_model_len=4096)
    total, kv = mc.model_arch_config.total_num_attention_heads, mc.get_total_num_kv_heads()
    refused = {}
    for tp in case["tp"]:
        pc = types.SimpleNamespace(enable_hc_sp=False, tensor_parallel_size=tp, enable_expert_parallel=False,
                                   pipeline_parallel_size=1, decode_context_parallel_size=1)
        try:
            mc.verify_with_parallel_config(pc)
        except ValueError as e:
            refused[str(tp)] = {"check": "verify_with_parallel_config", "message": err(e)}
            continue
        if mc.use_mla:  # latent attention builds no QKVParallelLinear
            continue
        try:
            with tp_group(tp), torch.device("meta"):
                linear.QKVParallelLinear(mc.get_hidden_size(), mc.get_head_size(), total, kv, bias=False,
                                         params_dtype=torch.bfloat16, prefix="model.layers.0.self_attn.qkv_proj")
        except AssertionError as e:
            refused[str(tp)] = {"check": "QKVParallelLinear", "message": err(e)}
            continue
        for layer in case["linear"]:  # the other tensor-parallel layers, unquantized (their split alone)
            try:
                with tp_group(tp), torch.device("meta"):
                    if layer["kind"] == "row":
                        linear.RowParallelLinear(layer["input_size"], layer["output_size"], bias=False,
                                                 params_dtype=torch.bfloat16, prefix="model." + layer["name"])
                    elif len(layer["output_sizes"]) > 1:  # a fused layer
                        linear.MergedColumnParallelLinear(layer["input_size"], layer["output_sizes"], bias=False,
                                                          params_dtype=torch.bfloat16, prefix="model." + layer["name"])
                    else:
                        linear.ColumnParallelLinear(layer["input_size"], layer["output_sizes"][0], bias=False,
                                                    params_dtype=torch.bfloat16, prefix="model." + layer["name"])
            except AssertionError as e:
                refused[str(tp)] = {"check": "linear", "layer": layer["name"], "message": err(e)}
                break
    return {"card": case["card"], "heads": total, "kv_heads": kv, "use_mla": mc.use_mla, "refused": refused}

def conf_of(qc):
    name = "modelopt_fp4" if qc["quant_method"] == "modelopt" else qc["quant_method"]
    return CONFIGS[name].from_config(qc)

def first_linear(case):
    """The first layer vLLM refuses to build (its exception), else the first row-parallel layer whose
    chosen mixed-precision kernel Marlin or Triton W4A16 would have declined (their reasons), else None."""
    tp, declined_first = case["split"]["tp"], None
    for layer in case["linear"]:
        try:  # the checkpoint's quantization config is parsed first (GPTQConfig refuses desc_act there)
            quant = dict(bias=False, params_dtype=torch.bfloat16, quant_config=conf_of(case["quantization_config"]),
                         prefix="model." + layer["name"])
            with tp_group(tp), torch.device("meta"):
                if layer["kind"] == "row":
                    built = linear.RowParallelLinear(layer["input_size"], layer["output_size"], **quant)
                elif len(layer["output_sizes"]) > 1:  # a fused layer
                    built = linear.MergedColumnParallelLinear(layer["input_size"], layer["output_sizes"], **quant)
                else:
                    built = linear.ColumnParallelLinear(layer["input_size"], layer["output_sizes"][0], **quant)
        except (ValueError, AssertionError) as e:
            return {"layer": layer["name"], "message": err(e)}
        kernel = getattr(built.quant_method, "kernel", None) or getattr(getattr(built, "scheme", None), "kernel", None)
        if declined_first is None and layer["kind"] == "row" and isinstance(getattr(kernel, "config", None),
                                                                            MPLinearLayerConfig):
            declined = {}
            for other in (MarlinLinearKernel, TritonW4A16LinearKernel):
                ok, why = other.can_implement(kernel.config)
                if not ok:
                    declined[other.__name__] = why
            if declined:
                declined_first = {"layer": layer["name"], "message": None, "kernel": type(kernel).__name__,
                                  "declined": declined}
    return declined_first

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
    local = e["num_experts"] // par.ep_size
    cfg = moe_config.FusedMoEConfig(num_experts=e["num_experts"], experts_per_token=e["top_k"],
                                    hidden_dim=e["hidden_size"], intermediate_size=e["intermediate_size"],
                                    num_local_experts=local, num_logical_experts=e["num_experts"],
                                    activation=MoEActivation.SILU, device="meta",
                                    routing_method=list(RoutingMethodType)[0], moe_parallel_config=par,
                                    in_dtype=torch.bfloat16)
    # the layer's attributes as RoutedExperts.__init__ sets them before it asks for its quant method (its
    # defaults: checkpoint names gate_proj / up_proj / down_proj); the expert map and router are not built
    layer = RoutedExperts.__new__(RoutedExperts)
    torch.nn.Module.__init__(layer)
    prefix = "model.layers.1.mlp.experts"
    for name, value in (("layer_name", prefix), ("moe_config", cfg), ("quant_config", None),
                        ("ckpt_gate_proj_name", "gate_proj"), ("ckpt_down_proj_name", "down_proj"),
                        ("ckpt_up_proj_name", "up_proj"), ("is_fused_checkpoint_transposed", False),
                        ("hidden_size", e["hidden_size"]), ("global_num_experts", e["num_experts"]),
                        ("local_num_experts", local), ("params_dtype", torch.bfloat16), ("top_k", e["top_k"]),
                        ("activation", MoEActivation.SILU)):
        setattr(layer, name, value)
    verdict = {"moe_tp": par.tp_size, "intermediate_per_rank": cfg.intermediate_size_per_partition}
    try:
        with tp_group(s["tp"]), torch.device("meta"):
            layer.quant_config = conf_of(case["quantization_config"])
            method = layer.quant_config.get_quant_method(layer, prefix)
            verdict["method"] = type(method).__name__
            method.create_weights(layer, local, e["hidden_size"], cfg.intermediate_size_per_partition,
                                  torch.bfloat16, weight_loader=lambda *a, **k: None)
    except (ValueError, AssertionError) as x:
        return {**verdict, "message": err(x)}
    if hasattr(layer, "group_size"):  # MoeWNA16Method's group after halving
        verdict["group_size"] = layer.group_size
    return {**verdict, "message": None}

todo = json.load(open(sys.argv[1]))
out = {"heads": [heads(c) for c in todo["heads"]], "groups": []}
for case in todo["groups"]:
    emulate(case["gpu"])
    out["groups"].append({"id": case["id"], "linear": first_linear(case), "moe": first_moe(case)})
json.dump(out, open(sys.argv[2], "w"))
'''


def judge_quant(heads: list[dict], groups: list[dict]) -> dict:
    """vLLM 0.33's verdicts on the heads and group cases (QUANT_WORKER in the oracle's interpreter)."""
    python = oracle_python()
    with tempfile.TemporaryDirectory() as tmp:
        src, dst, worker = Path(tmp) / "cases.json", Path(tmp) / "verdicts.json", Path(tmp) / "worker.py"
        src.write_text(json.dumps({"heads": heads, "groups": groups}))
        worker.write_text(QUANT_WORKER)
        done = subprocess.run([str(python), str(worker), str(src), str(dst)], capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"the vLLM worker failed:\n{done.stderr[-4000:]}")
        return json.loads(dst.read_text())


def oracle_python() -> Path:
    venv = os.environ.get("VLLM_ORACLE_VENV", str(Path.home() / ".cache" / "vllm-oracle-venv"))
    return Path(venv) / "bin" / "python"


def quant_fixture() -> str:
    """The heads-and-groups fixture's text, judged by vLLM now."""
    heads, groups = heads_cases(), group_cases()
    verdicts = judge_quant(heads, groups)
    by_id = {v["id"]: v for v in verdicts["groups"]}
    models = {}
    for c in groups:
        models.setdefault(c["model"], {k: c[k] for k in ("quantization_config", "linear", "experts", "gpu", "config")
                                       if k in c})
    fixture = {"vllm": "0.33.0", "generated_by": "scripts/golden_load_checks.py --quant",
               "heads": {"tp": list(HEADS_TP), "cards": {
                   h["card"]: {"config_source": c["config_source"], "linear": c["linear"],
                               **{k: h[k] for k in ("heads", "kv_heads", "use_mla", "refused")}}
                   for c, h in zip(heads, verdicts["heads"], strict=True)}},
               "groups": {"models": models,
                          "cases": [{"id": c["id"], "model": c["model"], "split": c["split"],
                                     "vllm": {"linear": by_id[c["id"]]["linear"], "moe": by_id[c["id"]]["moe"]}}
                                    for c in groups]}}
    return json.dumps(fixture, indent=1, sort_keys=True) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="diff vLLM's answers against the fixtures")
    ap.add_argument("--list", action="store_true", help="list the cases only")
    ap.add_argument("--only", choices=("fp8", "quant"), help="one fixture: the block-FP8 cases (vllm-0.33.0.json) "
                    "or the heads, weight-only INT group and NVFP4 cases (vllm-0.33.0-heads-groups.json)")
    args = ap.parse_args()
    if args.only != "quant":
        fp8(args)
    if args.only != "fp8":
        quant(args)


def quant(args) -> None:
    if args.list:
        heads, groups = heads_cases(), group_cases()
        for case in heads:
            print(f"heads:{case['card']} tp {HEADS_TP[0]}-{HEADS_TP[-1]}")
        for case in groups:
            print(case["id"])
        print(f"{len(heads)} cards × {len(HEADS_TP)} tp sizes, {len(groups)} group cases")
        return
    text = quant_fixture()
    if args.check:
        same = OUT_QUANT.exists() and OUT_QUANT.read_text() == text
        print("heads-groups fixture matches vLLM" if same else "heads-groups fixture DIFFERS from vLLM's answers")
        if not same:
            sys.exit(1)
        return
    OUT_QUANT.write_text(text)
    print(f"wrote {OUT_QUANT.relative_to(ROOT)}")


def fp8(args) -> None:
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
        if not same:
            sys.exit(1)
        return
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}: {len(todo)} cases")


if __name__ == "__main__":
    main()
