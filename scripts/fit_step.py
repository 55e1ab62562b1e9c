"""Fit the step model's efficiency factors (pricing/registry/step_model.yaml) on the training
part of validation/measured_points.yaml and report the error on the held-back part.

    python scripts/fit_step.py            # fit and print the table (writes nothing)
    python scripts/fit_step.py --write    # also write the fitted values into step_model.yaml

The objective is the mean |log(predicted / measured)| over the training points (smooth, and
symmetric in over- and under-prediction); coordinate descent over a grid per factor, a few
rounds. The held-back points (a third, by a hash of their id) never enter the fit. The
collective latency and the activation width are sourced values, not fitted.
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pricing.step.measured import POINTS, load_points, predict  # noqa: E402
from pricing.step.rates import Efficiency  # noqa: E402

REGISTRY = ROOT / "pricing" / "registry" / "step_model.yaml"
GRIDS = {
    "memory_bandwidth": [round(0.30 + 0.025 * i, 3) for i in range(26)],  # at most 0.925: no read streams at peak
    "expert_bandwidth": [round(0.20 + 0.025 * i, 3) for i in range(33)],
    "tensor_compute": [round(0.30 + 0.025 * i, 3) for i in range(25)],  # 0.3-0.9: a prior floor
    "interconnect": [round(0.30 + 0.05 * i, 2) for i in range(15)],
    "step_seconds": [i * 2.5e-4 for i in range(41)],
    "layer_seconds": [i * 1.0e-5 for i in range(31)],
    "per_request_seconds": [i * 5.0e-6 for i in range(21)],
}


def loss(points, eff: Efficiency) -> float:
    return statistics.fmean(abs(math.log(predict(p, eff) / p.measured)) for p in points)


def fit(points, start: Efficiency, rounds: int = 3) -> Efficiency:
    best = start
    best_loss = loss(points, best)
    for _ in range(rounds):
        for name, grid in GRIDS.items():
            for value in grid:
                trial = best.replaced(**{name: value})
                trial_loss = loss(points, trial)
                if trial_loss < best_loss - 1e-12:
                    best, best_loss = trial, trial_loss
    return best


def table(points, eff: Efficiency) -> list[tuple]:
    return [(p, predict(p, eff)) for p in points]


def write(eff: Efficiency, train: int, held: int, train_err: float, held_err: float) -> None:
    text = REGISTRY.read_text()
    how = (f"fitted by scripts/fit_step.py on {train} training points of validation/measured_points.yaml "
           f"(median absolute error of output tokens/s per GPU {train_err:.1%}); "
           f"held-back {held} points: {held_err:.1%}")
    for field, name in Efficiency.NAMES.items():
        if field not in GRIDS:  # sourced, not fitted
            continue
        section, key = name.split(".")
        value = getattr(eff, field)
        pattern = re.compile(rf"(  {key}:\n    value: )[^\n]*\n    source: [^\n]*\n    how: [^\n]*\n")
        block = (f'{float(value):.6e}\n    source: "fit on measured points, validation/measured_points.yaml"\n'
                 f'    how: "{how}"\n')
        text, n = pattern.subn(lambda m, block=block: m.group(1) + block, text, count=1)
        if n != 1:
            raise SystemExit(f"could not find {name} in {REGISTRY}")
    REGISTRY.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the fitted factors into step_model.yaml")
    args = ap.parse_args()
    points, sources = load_points(POINTS)
    train = [p for p in points if not p.held_back]
    held = [p for p in points if p.held_back]
    start = Efficiency.from_registry()
    eff = fit(train, start)
    train_err = statistics.median(abs(pred / p.measured - 1) for p, pred in table(train, eff))
    held_rows = table(held, eff)
    held_err = statistics.median(abs(pred / p.measured - 1) for p, pred in held_rows)
    for field in Efficiency.NAMES:
        print(f"{field:28s} {getattr(eff, field):.6g}")
    print(f"training points {len(train)}, median |error| {train_err:.1%}")
    print(f"held-back points {len(held)}, median |error| {held_err:.1%}")
    print("| point | measured tok/s/GPU | predicted | error |")
    print("|---|---:|---:|---:|")
    for p, pred in held_rows:
        print(f"| {p.model} {p.chip} {p.engine} tp{p.tp}{' ep' if p.ep else ''} {p.isl}/{p.osl} c{p.concurrency} "
              f"| {p.measured:,.1f} | {pred:,.1f} | {pred / p.measured - 1:+.0%} |")
    if args.write:
        write(eff, len(train), len(held), train_err, held_err)
        print(f"wrote {REGISTRY.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
