"""What the step model and the serving simulator cost a plan, as whole processes (issue 38).

    python bench/bench_step.py [--runs 5] [--markdown]

Each figure is the median of `--runs` fresh processes (interpreter start, imports, work, rendering to
a pipe), interleaved round by round with the floor (bench/bench_cli.py's: a process that only imports
what a plan needs) so that load from other processes falls on all of them alike. Each row gives the
wall time, its ratio to the floor's, and the process's CPU time (user + system, from the kernel's
accounting of the child: what the machine's other load touches least).

Targets (issue 38): a plan at a rate (the reviewer's command: service targets at 20 requests/s, each
candidate simulated) within 1.5 s on 2 cores; the headline (`plan --model dsv4.1-flash --chip h200
--concurrency 64`) within 1.5× the floor. The other rows are what the rate-based modes cost beside
them: a rate sized by mean targets (no simulation), `--serving auto` (both plans, then both on the
same simulated arrivals), `--max-rate` (every shape's highest rate, simulated on a grid).
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_cli import FLOOR, FLOOR_IMPORTS, HEADLINE  # bench/ is on the path when a script there runs

ROOT = Path(__file__).resolve().parents[1]
RATE = ["--model", "llama-3.1-70b", "--chip", "h100", "--isl", "2000", "--osl", "500", "--requests-per-second", "20",
        "--p99-ttft-ms", "2000", "--p90-tpot-ms", "40"]  # the command
CASES = {
    "headline: plan --model dsv4.1-flash --chip h200 --concurrency 64": HEADLINE,
    "rate: llama-3.1-70b on h100 at 20 requests/s, p99 TTFT ≤ 2 s, p90 TPOT ≤ 40 ms": RATE,
    "rate by means: the same with --ttft-ms 2000 --tpot-ms 40": [
        *RATE[:RATE.index("--p99-ttft-ms")], "--ttft-ms", "2000", "--tpot-ms", "40"],
    "--serving auto: llama-3.1-8b on h100 at 10 requests/s": [
        "--model", "llama-3.1-8b", "--chip", "h100", "--isl", "2000", "--osl", "200", "--requests-per-second", "10",
        "--ttft-ms", "500", "--tpot-ms", "30", "--context-length", "8192", "--serving", "auto"],
    "--max-rate: llama-3.1-8b, 4 h100 at tp 1 or 2": [
        "--model", "llama-3.1-8b", "--chip", "h100", "--tp", "1", "--tp", "2", "--max-gpus", "4", "--isl", "1000",
        "--osl", "200", "--p99-ttft-ms", "1000", "--p90-tpot-ms", "15", "--max-rate"],
}
TARGETS = {"headline": ("floor", 1.5), "rate:": ("seconds", 1.5)}


def run(args: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(args, cwd=ROOT, capture_output=True, env=dict(os.environ, COLUMNS="140"))
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def target_words(name: str, wall: float, floor: float, cpu: float, cpu_floor: float) -> str:
    """The row's target, judged on wall time and on CPU time (on a loaded machine the wall times of
    every row stretch alike, and only the ratios and CPU times stay readable)."""
    for prefix, (kind, bound) in TARGETS.items():
        if name.startswith(prefix):
            if kind == "floor":
                by_wall, by_cpu, said = wall <= bound * floor, cpu <= bound * cpu_floor, f"≤ {bound}× the floor"
            else:
                by_wall, by_cpu, said = wall <= bound, cpu <= bound, f"≤ {bound} s"
            return (f"target {said}: by wall time {'met' if by_wall else 'not met'}, by CPU time "
                    f"{'met' if by_cpu else 'not met'}")
    return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--markdown", action="store_true", help="print the docs' table")
    opts = parser.parse_args()
    for package in ("planner", "pricing"):  # as `pip install .` compiles them: no timed run compiles the project
        if not compileall.compile_dir(ROOT / package, quiet=1):
            raise SystemExit(f"could not compile {package}")
    walls: dict[str, list[float]] = {"floor": [], **{k: [] for k in CASES}}
    cpus: dict[str, list[float]] = {k: [] for k in walls}
    for _ in range(opts.runs):
        for name, args in [("floor", FLOOR)] + [(k, [sys.executable, "-m", "planner.cli", *v])
                                                for k, v in CASES.items()]:
            wall, cpu = run(args)
            walls[name].append(wall)
            cpus[name].append(cpu)
    wall = {k: statistics.median(v) for k, v in walls.items()}
    cpu = {k: statistics.median(v) for k, v in cpus.items()}
    floor = wall["floor"]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    rows = [(f'floor: `python -c "{FLOOR_IMPORTS}"`' if name == "floor" else f"`{name}`", wall[name],
             wall[name] / floor, cpu[name], cpu[name] / cpu["floor"],
             target_words(name, wall[name], floor, cpu[name], cpu["floor"])) for name in walls]
    if opts.markdown:
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        print(f"Median of {opts.runs} whole processes each, interleaved ({when}, {os.cpu_count()} cores, load "
              f"average {load} at the end):\n")
        print("| command | wall s | vs floor | CPU s | CPU vs floor's | target |")
        print("|---|---:|---:|---:|---:|---|")
        for name, seconds, ratio, used, used_ratio, said in rows:
            print(f"| {name} | {seconds:.2f} | {ratio:.2f}× | {used:.2f} | {used_ratio:.2f}× | {said} |")
    else:
        print(f"{os.cpu_count()} cores, median of {opts.runs} runs, load average {load}")
        for name, seconds, ratio, used, used_ratio, said in rows:
            print(f"{seconds:6.2f} s {ratio:5.2f}×  cpu {used:5.2f} s {used_ratio:5.2f}×  {name}  {said}")


if __name__ == "__main__":
    main()
