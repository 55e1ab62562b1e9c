"""--time-limit bounds the whole review (issue 39, honest time): the candidate sweep is counted in
shapes before it runs (planner/search/sweep_time.py), a limit it would take whole is refused before
anything is swept, and the same review and limit give the same answer beside a CPU-burning process."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from planner import defaults
from tests.helpers import cli as run
from tests.helpers import coupled_review

ROOT = Path(__file__).resolve().parents[1]
SHAPES = 17  # the coupled review's candidate sweep (tests/helpers.py COUPLED_REVIEW)


def test_a_limit_the_sweep_alone_would_take_is_refused_before_anything_is_swept(tmp_path, monkeypatch):
    from planner.candidates import table
    from planner.search import fleet

    def swept(*args, **kwargs):
        raise AssertionError("a shape was swept")

    monkeypatch.setattr(table, "evaluate_shape", swept)
    monkeypatch.setattr(fleet, "evaluate_shape", swept)
    rate = defaults.value("sweep.shapes_per_second")
    limit = SHAPES / rate * 0.9
    code, out, err = run(["scenario", coupled_review(tmp_path), "--time-limit", f"{limit:g}"])
    assert code == 2 and out == "" and err.count("\n") == 1, (code, out, err)
    assert err.startswith(f"plan: error: --time-limit: {limit:g} s is too short for this review: its candidate "
                          f"sweep (3 tables, {SHAPES} shapes) counts as "), err
    assert f"counts as {SHAPES / rate:.3g} s at the measured {rate:,} shapes a second" in err, err
    assert err.endswith("(give at least 2: the sweep's seconds and one for the solver)\n"), err  # ⌈0.017⌉ + 1


def test_the_solver_has_what_the_sweep_leaves_of_the_limit(tmp_path, monkeypatch):
    from planner.search.staged import Budget

    given = []
    solver = Budget.solver

    def recording(self):
        given.append(self.limit)
        return solver(self)

    monkeypatch.setattr(Budget, "solver", recording)
    assert run(["scenario", coupled_review(tmp_path), "--time-limit", "2", "--format", "json"])[0] == 0
    assert given and given == [pytest.approx(2 - SHAPES / defaults.value("sweep.shapes_per_second"))] * len(given)


def _answer(path: str, limit: float, busy: bool) -> tuple[int, dict | str, float]:
    spinning = subprocess.Popen([sys.executable, "-c", "while 1: pass"]) if busy else None
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)  # the burner counts once waited for: not yet
        done = subprocess.run([sys.executable, "-m", "planner.cli", "scenario", path, "--format", "json",
                               "--time-limit", f"{limit:g}"], cwd=ROOT, capture_output=True, text=True, timeout=120)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    finally:
        if spinning is not None:
            spinning.kill()
            spinning.wait()
    if done.returncode == 2:
        return done.returncode, done.stderr, seconds
    answer = json.loads(done.stdout)
    answer.pop("seconds", None)  # the report's own wall clock
    return done.returncode, answer, seconds


@pytest.mark.parametrize("limit", [3.0, 0.01])
def test_the_same_review_and_limit_answer_alike_beside_a_cpu_burning_process(tmp_path, limit):
    """Byte for byte (the report's seconds aside), an answer and a refusal alike; each command within
    its limit plus the overhead --help states (start-up, reading, reporting), in CPU seconds: the
    machine's other processes (8 agents on 2 cores) stretch wall-clock time, which says nothing of
    the command."""
    path = coupled_review(tmp_path)
    quiet = _answer(path, limit, busy=False)
    busy = _answer(path, limit, busy=True)
    assert quiet[:2] == busy[:2]
    assert quiet[0] == (0 if limit > 1 else 2)
    overhead = defaults.value("sweep.command_overhead_seconds")
    assert quiet[2] < limit + overhead and busy[2] < limit + overhead, (quiet[2], busy[2])
