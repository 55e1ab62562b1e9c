"""docs/step-model.md's section on the step from measured operators (`--step-model operators`): Llama-3.1-70B's
decode step at tp 4 and 64 requests on an H100, part by part in both steps, and scripts/operators/validate.py's
tables (both steps on the held-back silicon rows and the public runs):

    python scripts/docs.py --only operator-step
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pricing.registry import shipped  # noqa: E402
from pricing.step.composed import FITTED, OPERATORS, with_composition  # noqa: E402
from pricing.step.measured import point_kernel  # noqa: E402
from pricing.step.serving import Workload, serving  # noqa: E402
from pricing.step.step import StepModel  # noqa: E402


def _validate():
    path = ROOT / "scripts" / "operators" / "validate.py"
    spec = importlib.util.spec_from_file_location("operators_validate", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["operators_validate"] = module
    spec.loader.exec_module(module)
    return module


def _steps() -> dict[str, tuple]:
    """Each step's pure decode of 64 requests at 2,250 tokens and its steady state at ISL 2000 / OSL 500."""
    out = {}
    for mode in (FITTED, OPERATORS):
        reg = with_composition(shipped(), mode, "scripts/docgen/operator_step.py")
        model = StepModel(point_kernel("llama-3.1-70b", None, "h100", 4, False, 2500, reg))
        out[mode] = (model.decode(64, 2250), serving(model, 64, 2250, Workload(2000, 500)))
    return out


def llama_table() -> list[str]:
    steps = _steps()
    parts = list(dict.fromkeys(p for mode in steps for p in steps[mode][0].parts if steps[mode][0].parts[p] > 5e-6))
    lines = ["| part (Llama-3.1-70B, H100, tp 4, decode of 64 requests at 2,250 tokens) | fitted step, ms | "
             "operator step, ms |", "|---|---:|---:|"]
    for p in parts:
        cells = [f"{steps[m][0].parts.get(p, 0.0) * 1e3:.2f}" for m in (FITTED, OPERATORS)]
        lines.append(f"| {p} | {cells[0]} | {cells[1]} |")
    totals = [f"**{steps[m][0].seconds * 1e3:.2f}**" for m in (FITTED, OPERATORS)]
    lines.append(f"| **decode step** | {totals[0]} | {totals[1]} |")
    lines.append("| steady TPOT at ISL 2000 / OSL 500 (decodes and prefill chunks mixed) | "
                 + " | ".join(f"{steps[m][1].tpot_seconds * 1e3:.1f}" for m in (FITTED, OPERATORS)) + " |")
    return lines


def section() -> str:
    return "\n".join([*llama_table(), "", _validate().tables().rstrip("\n")]) + "\n"
