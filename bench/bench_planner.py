"""Benchmark of the planner, end to end and by stage.

    python bench/bench_planner.py [--runs 5]

End to end: the headline command (`plan --model dsv4.1-flash --chip h200 --concurrency 64`)
and a 3-chip search (h200, b200, h100), each run as a whole process (interpreter start,
imports, model load, oracle sweep, solves, rendering), median of `--runs`. Target (issue 5):
the headline under 1.5 s on a 2-core machine, the oracle sweep under a quarter of that.

By stage, in one warm process (model and registry loaded, kernel memo cold): the oracle
sweep (kernel evaluations and evaluations per second) and the CP-SAT solves.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_cli import HEADLINE  # bench/ is on the path when a script there runs

ROOT = Path(__file__).resolve().parents[1]
THREE_CHIPS = ["--model", "dsv4.1-flash", "--chip", "h200", "--chip", "b200", "--chip", "h100", "--concurrency", "64"]


def wall(args: list[str], runs: int) -> float:
    """Median wall time of `plan ARGS` as a fresh process."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "planner.cli", *args], cwd=ROOT, capture_output=True,
                              env=dict(os.environ, COLUMNS="140"))
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"plan {' '.join(args)} failed: {done.stderr.decode()}")
    return statistics.median(times)


def stages(chips: tuple[str, ...], runs: int) -> tuple[float, int, float]:
    """Median oracle-sweep seconds, kernel evaluations, and median solve seconds (6 solves)."""
    from planner.candidates.service import ResolvedService
    from planner.request import PoolLimits, ServiceSpec
    from planner.search import cpsat
    from pricing.chips import get_chip
    from pricing.graph import load_model

    service = ServiceSpec(model="dsv4.1-flash", concurrency=64)
    limits = PoolLimits(chips=chips)
    load_model(service.model)
    for chip in chips:
        get_chip(chip)
    sweeps, solves, evaluated = [], [], 0
    for _ in range(runs):
        start = time.perf_counter()
        tables = cpsat.tables_for(ResolvedService.of(service, limits))
        sweeps.append(time.perf_counter() - start)
        evaluated = sum(t.evaluated for t in tables)
        opts = cpsat.options(tables, service, limits)
        start = time.perf_counter()
        pm = cpsat.build([opts], [service.required])
        for _ in range(6):
            sol = cpsat.solve(pm)
            pm.model.add(pm.x[0][sol.picks[0][0]] == 0)
        solves.append(time.perf_counter() - start)
    return statistics.median(sweeps), evaluated, statistics.median(solves)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    rows = []
    for label, args, chips in (("headline: dsv4.1-flash on h200, 64 at 1M", HEADLINE, ("h200",)),
                               ("3 chips: h200, b200, h100", THREE_CHIPS, ("h200", "b200", "h100"))):
        end_to_end = wall(args, runs)
        sweep, evaluated, solve = stages(chips, runs)
        rows.append((label, end_to_end, sweep, evaluated, evaluated / sweep, solve))
    print(f"{os.cpu_count()} cores, median of {runs} runs")
    print(f"{'search':42} {'end to end':>11} {'oracle sweep':>13} {'evaluations':>12} {'eval/s':>8} {'6 solves':>9}")
    for label, e2e, sweep, n, rate, solve in rows:
        print(f"{label:42} {e2e:10.2f}s {sweep:12.3f}s {n:12,} {rate:8,.0f} {solve:8.3f}s")


if __name__ == "__main__":
    main()
