"""Small helpers for the tests: a kernel from flags in one call; a script of scripts/ as a module;
the command line run in this process; the coupled three-service review."""

import contextlib
import importlib.util
import io
import sys
from pathlib import Path

from pricing.chips import get_chip
from pricing.graph import load_model
from pricing.kernel import Deployment, Kernel


def kernel(model: str, chip: str = "h200", quantization: str | None = None, memory_bytes: int | None = None,
           registry=None, **flags) -> Kernel:
    target = get_chip(chip).with_overrides(memory_bytes=memory_bytes)
    return Kernel.of(load_model(model, quantization), Deployment(**flags), target, registry)


# A review whose services' own optima (17 h200 GPUs) do not fit its 16: the coupled model runs. 3 tables (a and c
# share one), 17 shapes: tp 1, 2, 4, 8 and tp 8 × pp 2 on h200 (16 GPUs); on h100 (no stock) the same and tp 8 × pp 4,
# pp 8.
COUPLED_REVIEW = """review: coupled
inventory:
  h200: {gpus: 16, gpus_per_node: 8}
  h100: {gpus_per_node: 8}
services:
  - {name: a, model: llama-3.1-8b, concurrency: 64, context_length: 32768, chips: [h200]}
  - {name: b, model: qwen3-32b, concurrency: 32, context_length: 32768, chips: [h200, h100]}
  - {name: c, model: llama-3.1-8b, concurrency: 300, context_length: 32768, chips: [h200]}
"""


def coupled_review(folder: Path, variants: str = "") -> str:
    """COUPLED_REVIEW (then `variants`, a YAML block) written to `folder`/coupled.yaml: its path."""
    path = folder / "coupled.yaml"
    path.write_text(COUPLED_REVIEW + variants)
    return str(path)


def cli(argv: list[str]) -> tuple[int, str, str]:
    """`plan argv` run in this process: its exit status, stdout and stderr."""
    from planner.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def cli_stdout(argv: list[str]) -> tuple[int, str]:
    """`plan argv` run in this process: its exit status and stdout (stderr set aside)."""
    code, out, _ = cli(argv)
    return code, out


def script(name: str):
    """scripts/<name>.py, imported as a module (its functions and constants, nothing run)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as an import would: dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def second_solve_unknown(monkeypatch, status: str = "UNKNOWN") -> None:
    """Every CP-SAT solve after the first returns `status` (UNKNOWN: as a time limit ending it without
    a solution would); the first solves as usual."""
    from ortools.sat.python import cp_model

    real = cp_model.CpSolver.solve
    calls = []

    def second(self, model, *args, **kwargs):
        calls.append(1)
        answer = real(self, model, *args, **kwargs)
        return answer if len(calls) == 1 else getattr(cp_model, status)

    monkeypatch.setattr(cp_model.CpSolver, "solve", second)


def planner_defaults(monkeypatch, values: dict) -> None:
    """Within a test, planner/defaults.yaml's `values` (by name) replaced in the one table every
    command's view reads (planner/defaults.py `load`), their provenance kept."""
    from dataclasses import replace

    from planner import defaults

    table = defaults.load().table
    for name, value in values.items():
        monkeypatch.setitem(table, name, replace(table[name], value=value))
