"""docs/step-model.md's step-time validation section, from validation/measured_points.yaml, the registry's
fitted factors and validation/aiconfigurator_points.yaml:

    python scripts/docs.py --only step-table   # rewrite it in docs/step-model.md, between its markers
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "scripts" / "docgen")]

from pricing.step.measured import (  # noqa: E402
    load_aiconfigurator,
    load_points,
    median_abs_error,
    predict,
    relative_error,
)


def section() -> str:
    """The section as README.md holds it: what `print_section` prints, and a blank line."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_section()
    return out.getvalue() + "\n"


def print_section() -> None:
    points, sources = load_points()
    held = [p for p in points if p.held_back]
    train = [p for p in points if not p.held_back]
    print(f"**Validation.** `validation/measured_points.yaml`: {len(points)} public measured points (output "
          "tokens/s per GPU at a fixed concurrency and isl/osl), each with its date and, where published, its run, "
          "from:")
    print()
    for key, s in sources.items():
        n = sum(p.source == key for p in points)
        print(f"- `{key}` ({n} points): {s['title']} — {s['url']}")
    print()
    tr, he = median_abs_error(train), median_abs_error(held)
    print(f"The factors are fitted on {len(train)} points; {len(held)} (a third, chosen by a hash of their id) "
          f"are held back. Median absolute error of output tokens/s per GPU: **training {tr:.1%}, held back {he:.1%}** "
          "(target ≤ 20 %).")
    print()
    aic = load_aiconfigurator()
    print("| held-back point (model, chip, engine, tp, isl/osl, concurrency) | measured tok/s/GPU | predicted "
          f"| error | aiconfigurator {aic.version} | its error |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for p in held:
        q = f" {p.quantization}" if p.quantization else ""
        pred = predict(p)
        theirs = (f"{aic.predicted[p.id]:,.1f} | {aic.error(p):+.0%}" if p.id in aic.predicted else "— | —")
        print(f"| {p.model}{q}, {p.chip}, {p.engine}, tp{p.tp}{' ep' if p.ep else ''}, {p.isl}/{p.osl}, "
              f"{p.concurrency} | {p.measured:,.1f} | {pred:,.1f} | {pred / p.measured - 1:+.0%} | {theirs} |")
    print()
    weak = []
    for chip in ("mi300x", "mi325x"):
        errs = [relative_error(p) for p in points if p.chip == chip]
        if errs:
            weak.append(f"on CDNA3 ({chip}) it over-predicts by {min(errs):+.0%} to {max(errs):+.0%} (every point, "
                        "trained or not)")
    vllm_r1 = [relative_error(p) for p in points if p.id.startswith("gpustack:dsr1")]
    if vllm_r1:
        weak.append(f"vLLM 0.11 DeepSeek-R1 on 8 × H200 at concurrency 4 is over-predicted by {vllm_r1[0]:+.0%}")
    print("Where it is weak: " + "; ".join(weak) + ". Most points are DeepSeek-R1 under SGLang and TensorRT-LLM (the "
          "public concurrency sweeps found); the vLLM points are gpt-oss-120b, Qwen3-8B and DeepSeek-R1, each priced "
          "at vLLM's own factors for its chip (CUDA's, refitted on vLLM's measured decode steps and first tokens, "
          "or ROCm's: `engines.vllm` and `engines.vllm-rocm`). The shared fit puts the tensor efficiency at its floor "
          "(0.3): prefill in these runs is slower than its FLOPs at peak.")
    print()
    by_engine(points)
    versus_aiconfigurator(points, aic)


def by_engine(points) -> None:
    """Training and held-back errors per engine, and per engine and chip: median |error| and the
    signed median of output tokens/s per GPU (one set of factors is fitted for every engine)."""
    import statistics

    def cell(subset) -> str:
        if not subset:
            return "—"
        errs = [relative_error(p) for p in subset]
        return (f"{len(errs)}: {statistics.median(abs(e) for e in errs):.1%} "
                f"({statistics.median(errs):+.1%})")

    print("By engine and chip (points: median |error| (signed median) of output tokens/s per GPU; SGLang's and "
          "TensorRT-LLM's at the shared factors, vLLM's at its own):")
    print()
    print("| engine | chip | training | held back |")
    print("| --- | --- | --- | --- |")
    groups: dict[tuple, list] = {}
    for p in points:
        engine = p.engine.split()[0]
        groups.setdefault((engine, "all"), []).append(p)
        groups.setdefault((engine, p.chip), []).append(p)
    for (engine, chip), subset in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] != "all", kv[0][1])):
        print(f"| {engine} | {chip} | {cell([p for p in subset if not p.held_back])} "
              f"| {cell([p for p in subset if p.held_back])} |")
    print()


def versus_aiconfigurator(points, aic) -> None:
    """aiconfigurator's error beside ours, on the points it prices."""
    priced = [p for p in points if p.id in aic.predicted]
    reasons: dict[str, int] = {}
    for reason in aic.unsupported.values():
        reasons[reason] = reasons.get(reason, 0) + 1
    stand_ins = f"; stand-in checkpoints of the same architecture, named per point: {', '.join(aic.stand_ins)}" \
        if aic.stand_ins else ""
    print(f"**Beside NVIDIA aiconfigurator.** `validation/aiconfigurator_points.yaml` holds aiconfigurator "
          f"{aic.version}'s own estimate of each point: its aggregated (in-flight batching) estimate on its SILICON "
          f"perf databases ({', '.join(aic.database_versions)}), run on a CPU by "
          "`scripts/collectors/aiconfigurator_points.py`, "
          f"which states each mapping (chip to system, engine version to database version, model{stand_ins}) and "
          f"each point's equivalent `aiconfigurator cli estimate` command. It prices {len(priced)} of the "
          f"{len(points)} points; the others:")
    print()
    for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print(f"- {n} point{'s' if n > 1 else ''}: {reason}")
    print()
    if aic.older_engines:
        print(f"Its databases are all newer than the measured {', '.join(aic.older_engines)}, so part of its error "
              "may be that gap; and it runs as mapped (experts tensor-parallel unless the point says ep, no attention "
              "data parallelism, its own token budget), which the measured runs may have set otherwise.")
        print()
    print("Median absolute error of output tokens/s per GPU on the points aiconfigurator prices (this model's "
          "factors are fitted on the training ones), overall and by sweep (training and held back together):")
    print()
    print(f"| points aiconfigurator prices | points | aiconfigurator {aic.version} | this model |")
    print("| --- | ---: | ---: | ---: |")
    for label, subset in (("held back", [p for p in priced if p.held_back]),
                          ("training", [p for p in priced if not p.held_back]),
                          ("all (training and held back)", priced)):
        print(f"| {label} | {len(subset)} | {aic.median_abs_error(subset):.1%} | {median_abs_error(subset):.1%} |")
    sweeps: dict[tuple, list] = {}
    for p in priced:
        sweeps.setdefault(p.sweep, []).append(p)
    for subset in sweeps.values():
        p = subset[0]
        print(f"| {p.model}{' ' + p.quantization if p.quantization else ''}, {p.chip}, {p.engine}, tp{p.tp}"
              f"{' ep' if p.ep else ''} | {len(subset)} | {aic.median_abs_error(subset):.1%} "
              f"| {median_abs_error(subset):.1%} |")
