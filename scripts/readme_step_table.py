"""Print the README's step-time validation section from validation/measured_points.yaml and the
registry's fitted factors: python scripts/readme_step_table.py (paste between the markers)."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pricing.step.measured import load_points, predict, relative_error  # noqa: E402


def main() -> None:
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
    tr = statistics.median(abs(relative_error(p)) for p in train)
    he = statistics.median(abs(relative_error(p)) for p in held)
    print(f"The factors are fitted on {len(train)} points; {len(held)} (a third, chosen by a hash of their id) "
          f"are held back. Median absolute error of output tokens/s per GPU: **training {tr:.1%}, held back {he:.1%}** "
          "(target ≤ 20 %).")
    print()
    print("| held-back point (model, chip, engine, tp, isl/osl, concurrency) | measured tok/s/GPU | predicted "
          "| error |")
    print("| --- | ---: | ---: | ---: |")
    for p in held:
        q = f" {p.quantization}" if p.quantization else ""
        pred = predict(p)
        print(f"| {p.model}{q}, {p.chip}, {p.engine}, tp{p.tp}{' ep' if p.ep else ''}, {p.isl}/{p.osl}, "
              f"{p.concurrency} | {p.measured:,.1f} | {pred:,.1f} | {pred / p.measured - 1:+.0%} |")
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
          "public concurrency sweeps found); the vLLM points are gpt-oss-120b, Qwen3-8B and DeepSeek-R1. The fit puts "
          "the tensor efficiency at its floor (0.3): prefill in these runs is slower than its FLOPs at peak, so TTFT "
          "for dense models is likely pessimistic. aiconfigurator's error on the same points is not reported: it was "
          "not run here.")


if __name__ == "__main__":
    main()
