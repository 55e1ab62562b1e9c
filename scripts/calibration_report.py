"""Print the calibration's residual table: the kernel (with the shipped registry, or an
overlay) against the training records of ../shared/calibration, by era and family.

    python scripts/calibration_report.py [--registry overlay.yaml] [--weights auto|kernel|logged]
                                         [RECORDS.jsonl ...]

--weights auto (default) takes the weights as logged where the record logs them, so the table
judges the fixed-memory laws; --weights kernel predicts every part.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TRAINING = ROOT.parent / "shared" / "calibration" / "vllm-startups-train.jsonl"


def main(argv=None) -> int:
    from pricing.calibration.predict import predict_all
    from pricing.calibration.records import load_records
    from pricing.calibration.residuals import table
    from pricing.registry import load, read_overlay

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", nargs="*", default=[str(TRAINING)])
    ap.add_argument("--registry", help="overlay YAML laid over the shipped registry")
    ap.add_argument("--weights", choices=("auto", "kernel", "logged"), default="auto")
    args = ap.parse_args(argv)
    reg = read_overlay(args.registry) if args.registry else load()
    print(table(predict_all(load_records(*args.records), reg, args.weights)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
