#!/usr/bin/env python3
"""Price every measured serving point of validation/measured_points.yaml with NVIDIA aiconfigurator
and write its predictions, with their provenance, to validation/aiconfigurator_points.yaml.

    python scripts/collectors/aiconfigurator_points.py           # run aiconfigurator, write the data file
    python scripts/collectors/aiconfigurator_points.py --check   # run it, diff against the file, write nothing

aiconfigurator is not a dependency of this project and nothing in the project imports it: this
driver (standard library and pyyaml) starts a child, `$AIC_VENV/bin/python <this file> --worker`
(default venv ~/.cache/aic-venv; make it with `python3 -m venv ~/.cache/aic-venv &&
~/.cache/aic-venv/bin/pip install aiconfigurator==0.12.0`), which imports aiconfigurator, decides
from aiconfigurator's own tables whether it supports each point, and runs its aggregated (in-flight
batching) single-point estimate, `aiconfigurator.cli.api.cli_estimate(mode="agg")`, the function
behind `aiconfigurator cli estimate --estimate-mode agg`. It runs on a CPU, offline: the perf
databases and model configs ship in the aiconfigurator-core wheel.

The mapping from a measured point to aiconfigurator's inputs is the tables below and
`_database_version` (every choice is written into the data file):
- chip -> aiconfigurator system: SXM/HGX parts by name; a chip aiconfigurator ships no system for
  (AMD's) is unsupported.
- model card -> its own checkpoint (the card's hf_id, pricing/cards), which aiconfigurator prices
  if it bundles its config; a quantized point -> the stand-in STAND_IN names, else unsupported.
  It ships no DeepSeek-R1 NVFP4 config; nvidia/DeepSeek-V3.1-NVFP4 stands in (config.json
  identical to DeepSeek-R1's except quantization_config, ModelOpt NVFP4 experts, fp8 KV cache).
- engine family -> backend (trt-llm -> trtllm, sglang -> sglang, vllm -> vllm). aiconfigurator
  answers only for its queryable database versions per (system, backend); the measured engine's
  version maps to the newest queryable version not newer than it, or else the oldest queryable one
  (every measured version here predates them all); an engine without a version gets
  aiconfigurator's default ("current").
- parallelism: tp as measured; experts tensor-parallel across the tp ranks (moe_tp = tp, moe_ep = 1)
  unless the point enables expert parallelism (moe_ep = tp, moe_tp = 1); attention dp 1, pp 1.
- workload: batch_size (aiconfigurator's max concurrent requests) = the point's concurrency,
  isl/osl as measured, ctx_tokens, quantization modes, memory fractions and database mode
  (SILICON) at aiconfigurator's defaults.
- output tokens/s per GPU = aiconfigurator's `tokens/s/gpu` (seq/s x osl / GPUs), as the points
  define theirs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
POINTS = ROOT / "validation" / "measured_points.yaml"
OUT = ROOT / "validation" / "aiconfigurator_points.yaml"
DEFAULT_VENV = Path.home() / ".cache" / "aic-venv"

SYSTEM_OF_CHIP = {"h100": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm"}
CARDS = ROOT / "pricing" / "cards"
# (card, quantization) -> the checkpoint aiconfigurator prices in the card's place, and why
STAND_IN = {
    ("dsr1", "nvfp4"): ("nvidia/DeepSeek-V3.1-NVFP4",
                        "aiconfigurator 0.12.0 ships no DeepSeek-R1 NVFP4 config; nvidia/DeepSeek-V3.1-NVFP4 has "
                        "DeepSeek-R1's config.json apart from quantization_config (same DeepseekV3ForCausalLM shape) "
                        "and a ModelOpt NVFP4 checkpoint"),
}
BACKEND_OF_ENGINE = {"trt-llm": "trtllm", "sglang": "sglang", "vllm": "vllm"}


def hf_model(model: str, quantization: str | None) -> tuple[str | None, str | None]:
    """The Hugging Face id aiconfigurator is asked for, and the note of a stand-in: the stand-in's,
    else the card's own checkpoint (its hf_id) unquantized; None for a quantized point without one."""
    import yaml

    if (model, quantization) in STAND_IN:
        return STAND_IN[model, quantization]
    card = CARDS / f"{model}.yaml"
    if quantization is not None or not card.exists():
        return None, None
    return yaml.safe_load(card.read_text())["hf_id"], None


def cases(points: list[dict]) -> list[dict]:
    """Each measured point as aiconfigurator's inputs, or the reason this driver cannot map it."""
    out = []
    for p in points:
        family, _, version = p["engine"].partition(" ")
        tp = int(p["tensor_parallel_size"])
        ep = bool(p.get("enable_expert_parallel"))
        case = {"id": p["id"], "chip": p["chip"], "engine": p["engine"], "system": SYSTEM_OF_CHIP.get(p["chip"]),
                "backend": BACKEND_OF_ENGINE.get(family), "engine_version": version or None}
        hf, note = hf_model(p["model"], p.get("quantization"))
        case.update(model=hf, model_note=note, tp_size=tp, moe_tp_size=1 if ep else tp, moe_ep_size=tp if ep else 1,
                    isl=int(p["isl"]), osl=int(p["osl"]), batch_size=int(p["concurrency"]))
        if case["system"] is None:
            case["unsupported"] = f"aiconfigurator ships no system for chip {p['chip']}"
        elif case["backend"] is None:
            case["unsupported"] = f"no aiconfigurator backend for engine {p['engine']}"
        elif hf is None:
            q = p.get("quantization")
            case["unsupported"] = f"aiconfigurator ships no config for {p['model']}{' ' + q if q else ''}"
        out.append(case)
    return out


def command(case: dict, version: str) -> str:
    """The `aiconfigurator cli estimate` command equivalent to the worker's call."""
    return (f"aiconfigurator cli estimate --model {case['model']} --system {case['system']} "
            f"--backend {case['backend']} --backend-version {version} --estimate-mode agg --database-mode SILICON "
            f"--tp {case['tp_size']} --etp {case['moe_tp_size']} --ep {case['moe_ep_size']} "
            f"--isl {case['isl']} --osl {case['osl']} --bs {case['batch_size']}")


# ------------------------------------------------------------------ worker (aiconfigurator venv)

def _database_version(queryable: list[str], engine_version: str | None, default: str) -> tuple[str, str]:
    from packaging.version import Version

    if engine_version is None:
        return default, "engine version not stated: aiconfigurator's default database (current)"
    mine = Version(engine_version)
    ordered = sorted(queryable, key=Version)
    older = [v for v in ordered if Version(v) <= mine]
    if older:
        return older[-1], f"newest queryable database not newer than {engine_version}"
    return ordered[0], f"{engine_version} predates every queryable database ({', '.join(ordered)}): the oldest"


def worker() -> None:
    import contextlib
    import io
    import logging
    import warnings

    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    from importlib.metadata import version as dist_version

    from aiconfigurator.cli.api import cli_estimate
    from aiconfigurator_core.sdk.common import get_default_models, get_support_matrix
    from aiconfigurator_core.sdk.perf_database import get_latest_database_version, get_supported_databases

    databases = get_supported_databases()
    models = get_default_models()
    matrix = {(r["HuggingFaceID"], r["System"], r["Backend"], r["Version"], r["Mode"]): r for r in get_support_matrix()}
    answers = []
    for case in json.load(sys.stdin):
        ans = {"id": case["id"]}
        answers.append(ans)
        if "unsupported" in case:
            ans["unsupported"] = case["unsupported"]
            continue
        system, backend = case["system"], case["backend"]
        queryable = databases.get(system, {}).get(backend)
        if not queryable:
            ans["unsupported"] = f"no {backend} database for {system}"
            continue
        if case["model"] not in models:
            ans["unsupported"] = f"{case['model']} is not among aiconfigurator's models"
            continue
        version, why = _database_version(queryable, case["engine_version"],
                                         get_latest_database_version(system=system, backend=backend))
        row = matrix.get((case["model"], system, backend, version, "agg"))
        if row is None or row["Status"] != "PASS":
            ans["unsupported"] = (f"support matrix: {case['model']} on {system} {backend} {version} agg "
                                  f"{'not listed' if row is None else row['Status'] + ' ' + row['ErrMsg']}")
            continue
        ans.update(database_version=version, version_rule=why, command=command(case, version))
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                r = cli_estimate(case["model"], system, mode="agg", backend_name=backend, backend_version=version,
                                 database_mode="SILICON", isl=case["isl"], osl=case["osl"],
                                 batch_size=case["batch_size"], tp_size=case["tp_size"],
                                 moe_tp_size=case["moe_tp_size"], moe_ep_size=case["moe_ep_size"])
        except Exception as exc:  # aiconfigurator's own refusal is the answer for this point
            first = str(exc).splitlines()[0].split(". ")[0]
            if first.startswith("OOM"):
                first += " (its memory model; the measured deployment ran)"
            ans["unsupported"] = f"aiconfigurator refused it: {first}"
            continue
        raw = r.raw
        sources = [s for step in (r.per_ops_source or {}).values() for s in step.values()]
        ans.update(
            output_tokens_per_second_per_gpu=round(float(raw["tokens/s/gpu"]), 3),
            ttft_ms=round(float(r.ttft), 3), tpot_ms=round(float(r.tpot), 3),
            parallel=raw["parallel"],
            quant={k: raw[k] for k in ("gemm", "moe", "kvcache", "fmha", "comm")},
            op_sources={k: sources.count(k) for k in sorted(set(sources))},
            kv_cache_warning=r.kv_cache_warning,
        )
    json.dump({"aiconfigurator": dist_version("aiconfigurator"),
               "databases": {s: dict(sorted(b.items())) for s, b in sorted(databases.items())},
               "aiconfigurator_core": dist_version("aiconfigurator-core"), "answers": answers}, sys.stdout)


# ------------------------------------------------------------------ driver (any python with pyyaml)

def run(venv: Path) -> dict:
    import yaml

    points = yaml.safe_load(POINTS.read_text())["points"]
    python = venv / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"{python} not found: set AIC_VENV to a venv with aiconfigurator==0.12.0 "
                         "(see this script's doc)")
    todo = cases(points)
    model_of_card = {f"{p['model']}{'@' + p['quantization'] if p.get('quantization') else ''}": case["model"]
                     for p, case in zip(points, todo, strict=True) if case["model"]}
    proc = subprocess.run([str(python), __file__, "--worker"], input=json.dumps(todo), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"aiconfigurator worker failed:\n{proc.stderr[-4000:]}")
    got = json.loads(proc.stdout)
    rows = []
    for case, ans in zip(todo, got["answers"], strict=True):
        assert case["id"] == ans["id"]
        row = {"id": case["id"]}
        if "unsupported" in ans:
            row.update(supported=False, reason=ans["unsupported"])
        else:
            row.update(supported=True, system=case["system"], backend=case["backend"],
                       measured_engine=case["engine"], database_version=ans["database_version"],
                       version_rule=ans["version_rule"], model=case["model"])
            if case["model_note"]:
                row["model_note"] = case["model_note"]
            row.update({k: ans[k] for k in ("parallel", "quant", "output_tokens_per_second_per_gpu", "ttft_ms",
                                            "tpot_ms", "op_sources", "kv_cache_warning", "command")})
        rows.append(row)
    return {
        "about": ("NVIDIA aiconfigurator's predictions for the measured points of validation/measured_points.yaml, "
                  "written by scripts/collectors/aiconfigurator_points.py (its docstring states every mapping from a "
                  "point to aiconfigurator's inputs). `databases`: the queryable perf-database versions "
                  "aiconfigurator ships, "
                  "per system and backend. Each supported point: the system, backend and database version used, "
                  "the prediction and the equivalent CLI command; each unsupported point: why. Errors against the "
                  "measurements are computed from the two files (scripts/docgen/step_table.py)."),
        "aiconfigurator": got["aiconfigurator"],
        "aiconfigurator_core": got["aiconfigurator_core"],
        "command": ("python scripts/collectors/aiconfigurator_points.py "
                    "(worker under $AIC_VENV, default ~/.cache/aic-venv)"),
        "estimate": "aiconfigurator.cli.api.cli_estimate(mode='agg', database_mode='SILICON'), on a CPU, offline",
        "databases": got["databases"],
        "mapping": {
            "system_of_chip": SYSTEM_OF_CHIP,
            "backend_of_engine": BACKEND_OF_ENGINE,
            "model_of_card": dict(sorted(model_of_card.items())),
            "database_version": ("newest queryable (system, backend) database not newer than the measured "
                                 "engine's version, else the oldest queryable one; unversioned engine: "
                                 "aiconfigurator's default"),
            "parallel": ("moe_tp = tp, moe_ep = 1; with expert parallelism moe_ep = tp, moe_tp = 1; "
                         "attention dp 1, pp 1"),
            "batch_size": "the point's concurrency",
        },
        "points": rows,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="diff against the data file, write nothing")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker()
        return
    import yaml

    doc = run(Path(os.environ.get("AIC_VENV", DEFAULT_VENV)))
    text = yaml.safe_dump(doc, sort_keys=False, width=120, allow_unicode=True)
    supported = sum(r["supported"] for r in doc["points"])
    if args.check:
        same = OUT.exists() and yaml.safe_load(OUT.read_text()) == doc
        print(f"{supported}/{len(doc['points'])} points supported; {OUT.name} {'matches' if same else 'DIFFERS'}")
        sys.exit(0 if same else 1)
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}: {supported}/{len(doc['points'])} points supported by aiconfigurator "
          f"{doc['aiconfigurator']}")


if __name__ == "__main__":
    main()
