"""Honest time: a tight review answers the same with --time-limit on a quiet machine and beside
CPU-burning neighbours (issue: honest time limits).

    python bench/bench_honest_time.py [--sizes 120,500] [--time-limit 3] [--burners 2] [--folder DIR]

Each case is `plan scenario FILE --format json --time-limit T` as a fresh process, once alone and
once beside `--burners` processes that each spin a core (`python -c 'while 1: pass'`). The reviews
are bench/reviews.py's tight inventories (a fixed seed; generated into `--folder` once, kept). Printed
per case: whether the two answers are identical apart from the report's wall-clock `seconds`, the
status of every stage, the solve's own wall and CPU seconds and deterministic work (planner/search/
staged.py Budget, read in the child), and the whole command's wall and CPU seconds (the candidate sweep is
most of it; it counts against the limit first, planner/search/sweep_time.py: a limit too short for the
whole sweep bounds it, in shapes priced, and the answer says how many; a limit that buys fewer shapes
than tables is refused, and the refusal's line is then the answer compared). Exit 1 when an answer
differs, or when a command's wall or CPU seconds exceed the limit plus the overhead --help states
(planner/defaults.yaml sweep.command_overhead_seconds): wall-clock is judged only alone (`quiet`),
and means something only on a machine whose cores nothing else uses; CPU seconds are judged always.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import atexit, json, sys, time
from planner.search import staged
acc = {"wall": 0.0, "cpu": 0.0, "work": 0.0}
solver, spend = staged.Budget.solver, staged.Budget.spend
def timed_solver(self):
    acc["t"], acc["c"] = time.perf_counter(), time.process_time()
    return solver(self)
def timed_spend(self, sol, finished):
    acc["wall"] += time.perf_counter() - acc["t"]
    acc["cpu"] += time.process_time() - acc["c"]
    acc["work"] += sol.deterministic_time
    return spend(self, sol, finished)
staged.Budget.solver, staged.Budget.spend = timed_solver, timed_spend
atexit.register(lambda: print(json.dumps({k: acc[k] for k in ("wall", "cpu", "work")}), file=sys.stderr))
from planner.cli import main
sys.exit(main(sys.argv[1:]))
"""


def review(folder: Path, services: int) -> Path:
    path = folder / f"tight-{services}.yaml"
    if not path.exists():
        subprocess.run([sys.executable, str(ROOT / "bench" / "reviews.py"), "--services", str(services),
                        "--inventory", "tight", "--out", str(path)], check=True, cwd=ROOT)
    return path


def run(path: Path, limit: float, burners: int) -> tuple[dict, dict, float, float]:
    spinning = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(burners)]
    try:
        start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run([sys.executable, "-c", CHILD, "scenario", str(path), "--format", "json",
                               "--time-limit", str(limit)], cwd=ROOT, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the command and its workers (burners not yet waited)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    finally:
        for p in spinning:
            p.kill()
            p.wait()
    lines = done.stderr.strip().splitlines()
    if done.returncode == 2:  # refused (a limit the sweep alone takes: planner/search/sweep_time.py): its line
        answer = {"refused": lines[0], "solver_status": "refused"}
    else:
        answer = json.loads(done.stdout)
        answer.pop("seconds", None)
    return answer, json.loads(lines[-1]), seconds, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="120,500")
    parser.add_argument("--time-limit", type=float, default=3.0)
    parser.add_argument("--burners", type=int, default=2)
    parser.add_argument("--folder", default="/tmp/bench-honest-time")
    opts = parser.parse_args()
    folder = Path(opts.folder)
    folder.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))
    from planner import defaults

    overhead = defaults.value("sweep.command_overhead_seconds")
    bound = opts.time_limit + overhead
    differ = False
    for size in (int(s) for s in opts.sizes.split(",")):
        path = review(folder, size)
        quiet, quiet_solve, quiet_wall, quiet_cpu = run(path, opts.time_limit, 0)
        busy, busy_solve, busy_wall, busy_cpu = run(path, opts.time_limit, opts.burners)
        same = quiet == busy
        differ |= not same
        stages = ", ".join(f"{s['stage']} {s['status']}" for s in quiet.get("solver_stages", []))
        print(f"{size} services, --time-limit {opts.time_limit:g}: {'identical' if same else 'DIFFERENT'} answers; "
              f"{quiet['solver_status']} ({stages})")
        if "refused" in quiet:
            print(f"  {quiet['refused']}")
        if quiet.get("sweep_bounded"):
            priced, shapes = quiet["sweep_bounded"]
            print(f"  sweep bounded by --time-limit: {priced:,} of {shapes:,} shapes priced")
        over = [f"{name} {what} {sec:.1f} s" for name, what, sec in (("quiet", "wall", quiet_wall),
                                                                      ("quiet", "CPU", quiet_cpu),
                                                                      ("burners", "CPU", busy_cpu)) if sec > bound]
        if over:
            differ = True
            print(f"  OVER {opts.time_limit:g} s + {overhead:g} s overhead: {', '.join(over)}")
        for name, solve, wall, cpu in (("quiet", quiet_solve, quiet_wall, quiet_cpu),
                                       (f"{opts.burners} burners", busy_solve, busy_wall, busy_cpu)):
            print(f"  {name}: solve {solve['wall']:.2f} s wall, {solve['cpu']:.2f} s CPU, {solve['work']:.3f} "
                  f"deterministic s; command {wall:.1f} s wall, {cpu:.1f} s CPU (with its workers)")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
