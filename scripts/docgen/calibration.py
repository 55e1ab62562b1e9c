"""The calibration's tables, as scripts/fits/calibration_report.py prints them from the start-up records of
../shared/calibration: the residuals by era and family (docs/calibration.md) and the table per rules
pack with the records of 0.21 and later (docs/releases.md). Without ../shared they cannot be made, and
`python scripts/docs.py` says so and leaves them as they are."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT)]


def _report():
    """scripts/fits/calibration_report.py as a module."""
    path = ROOT / "scripts" / "fits" / "calibration_report.py"
    spec = importlib.util.spec_from_file_location("calibration_report", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def available() -> bool:
    """Whether the training records are beside the checkout (../shared/calibration)."""
    return _report().TRAINING.exists()


@functools.cache
def _predictions():
    from pricing.calibration.predict import predict_all
    from pricing.calibration.records import load_records

    return predict_all(load_records(_report().TRAINING))


def residuals() -> str:
    """`python scripts/fits/calibration_report.py`: its table by era and family and the start-up verdicts."""
    from pricing.calibration.residuals import table

    lines = table(_predictions()).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("era "))
    end = next(i for i, line in enumerate(lines) if line.startswith("all ") and i > start)
    verdicts = [line for line in lines if line.startswith("start-up verdicts")]
    shown = "\n".join(lines[start:end + 1] + verdicts)
    return f"```console\n$ python scripts/fits/calibration_report.py\n{shown}\n```\n"


def by_release() -> str:
    """`python scripts/fits/calibration_report.py --by-release`: the table per pack, then the later records."""
    report = _report()
    return f"\n{report.by_release(_predictions())}\n\n{report.later_records(_predictions())}\n\n"
