"""Where the headline's time goes, stage by stage, inside the process (issue 13).

    python bench/bench_stages.py [--runs 7]

Each run is a fresh process that imports what a plan needs, then runs the headline (`plan --model
dsv4.1-flash --chip h200 --concurrency 64`) with timers around its stages: the oracle sweep
(`planner.search.cpsat.tables_for`: the card, the graph, the registry's YAML, the kernel evaluations),
the CP-SAT solves, the reported pools (verification, binds, step figures) and the rendering.
Printed: the median of each stage over the runs, in milliseconds. bench/bench_cli.py measures the
whole processes against the floor; this says what inside the work costs what.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from bench_cli import FLOOR_IMPORTS, HEADLINE  # bench/ is on the path when a script there runs

ROOT = Path(__file__).resolve().parents[1]
STAGES = {"planner.search.cpsat": ("tables_for", "solve"), "planner.app.plan": ("_pool",),
          "planner.report.render": ("render_plan",)}

CHILD = f"""
import contextlib, io, json, sys, time
started = time.perf_counter()
{FLOOR_IMPORTS}
floor = time.perf_counter()
import importlib
import planner.cli
stages = {STAGES!r}
spent = {{}}
def timed(module, name):
    inner = getattr(module, name)
    def run(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - start
    setattr(module, name, run)
for module_name, names in stages.items():
    module = importlib.import_module(module_name)
    for name in names:
        timed(module, name)
imported = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    code = planner.cli.main(sys.argv[1:])
done = time.perf_counter()
spent.update({{"floor's imports": floor - started, "the rest of the imports": imported - floor,
              "all the work": done - imported}})
print(json.dumps(spent))
sys.exit(code)
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    opts = parser.parse_args()
    runs: dict[str, list[float]] = {}
    for _ in range(opts.runs):
        done = subprocess.run([sys.executable, "-c", CHILD, *HEADLINE], cwd=ROOT, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"the headline failed ({done.returncode}): {done.stderr[-2000:]}")
        for stage, seconds in json.loads(done.stdout.strip().splitlines()[-1]).items():
            runs.setdefault(stage, []).append(seconds)
    print(f"the headline's stages, median of {opts.runs} processes:")
    for stage, seconds in runs.items():
        print(f"{statistics.median(seconds) * 1000:8.1f} ms  {stage}")


if __name__ == "__main__":
    main()
