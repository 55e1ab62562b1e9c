"""What a capacity reviewer waits for at the command line, as whole processes (issue 13).

    python bench/bench_cli.py [--runs 5] [--markdown]

Each figure is the median wall time of `--runs` fresh processes (interpreter start, imports,
work, rendering to a pipe), measured in one run beside the floor: a process that only imports
what a plan needs, `python -c "import ortools.sat.python.cp_model, networkx, pydantic"`.
A third reference row imports every project module a headline process ends up holding and runs
nothing else: what the headline's imports alone cost beside the floor. Targets: `plan --help`,
`plan models`, `plan chips` import neither OR-Tools nor matplotlib nor networkx nor the kernel, and
`plan --help` takes at most 0.3× the floor; `plan memory` does not import OR-Tools; the headline
within 1.5× of the floor; a 50-service review on an
inventory that does not bind within 4× of the headline; a binding one reports its time and the
solver's status. Runs are interleaved (floor, then each command, per round) so that load from
other processes falls on all of them alike. The project's bytecode is compiled before the first
run, as `pip install .` compiles every module it installs (the floor's libraries come compiled
from their own install): no timed run pays for compiling the project, in an environment that sets
PYTHONDONTWRITEBYTECODE or not.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLOOR_IMPORTS = "import ortools.sat.python.cp_model, networkx, pydantic"
FLOOR = [sys.executable, "-c", FLOOR_IMPORTS]
# the floor plus what every plan also imports from the project's other dependencies: what of the
# headline's time no change to the project's own code can remove
DEPENDENCIES = [sys.executable, "-c", FLOOR_IMPORTS + "\n"
                "from pydantic import BaseModel, ConfigDict, Field\n"
                "class Probe(BaseModel):\n    model_config = ConfigDict(frozen=True)\n    x: int = Field(0, ge=0)\n"
                "import click, yaml, rich.console, rich.table"]
HEAVY = ("ortools", "matplotlib", "networkx", "pricing.kernel")
HEADLINE = ["--model", "dsv4.1-flash", "--chip", "h200", "--concurrency", "64"]  # the other benches import it
# the project's modules a headline process holds at its end, for the row that imports them and runs nothing
MODULES = ("import sys, json, io, contextlib\nfrom planner.cli import main\n"
           "with contextlib.redirect_stdout(io.StringIO()):\n    main(sys.argv[1:])\n"
           "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('planner', 'pricing'))))")
PROBE = ("import sys, json\nfrom planner.cli import main\ncode = main(sys.argv[1:])\n"
         f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]), file=sys.stderr)\nsys.exit(code)")

# a review of 50 services: the shipped cards at several concurrencies and context lengths
REVIEW_MODELS = [("llama-3.1-8b", 32768), ("llama-3.1-70b", 32768), ("qwen3-32b", 32768), ("qwen3-8b", 32768),
                 ("gpt-oss-120b", 131072), ("gpt-oss-20b", 131072), ("qwen3-30b-a3b", 32768),
                 ("mixtral-8x7b", 32768), ("gemma-3-27b", 131072), ("dsv4.1-flash", 131072)]
CONCURRENCY = (16, 32, 64, 128, 256)


def review(binding: bool) -> str:
    lines = ["review: bench 50 services" + (" on a binding inventory" if binding else ""), "inventory:"]
    if binding:
        lines += ["  h200: {gpus: 160, gpus_per_node: 8}", "  b200: {gpus: 96, gpus_per_node: 8}"]
    else:
        lines += ["  h200: {gpus_per_node: 8}", "  b200: {gpus_per_node: 8}"]
    lines.append("services:")
    for i in range(50):
        model, length = REVIEW_MODELS[i % len(REVIEW_MODELS)]
        lines.append(f"  - {{name: s{i}, model: {model}, concurrency: {CONCURRENCY[i // 10]}, "
                     f"context_length: {length}}}")
    return "\n".join(lines) + "\n"


def run(args: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, COLUMNS="140"))
    return time.perf_counter() - start, done


def plan(*args: str) -> list[str]:
    return [sys.executable, "-c", PROBE, *args]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--markdown", action="store_true", help="print the README table")
    opts = parser.parse_args()
    for package in ("planner", "pricing"):
        if not compileall.compile_dir(ROOT / package, quiet=1):
            raise SystemExit(f"could not compile {package}")
    folder = Path(tempfile.mkdtemp(prefix="bench-cli-"))
    free, tight = folder / "review-50.yaml", folder / "review-50-binding.yaml"
    free.write_text(review(False))
    tight.write_text(review(True))
    listed = subprocess.run([sys.executable, "-c", MODULES, *HEADLINE], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode:
        raise SystemExit(f"the headline failed: {listed.stderr[-2000:]}")
    modules = json.loads(listed.stdout)
    imported = [sys.executable, "-c", FLOOR_IMPORTS + "\nimport importlib\n"
                f"for name in {modules!r}:\n    importlib.import_module(name)"]
    cases = {
        "plan --help": plan("--help"),
        "plan models": plan("models"),
        "plan chips": plan("chips"),
        "plan memory --model dsv4.1-flash --chip h200 -tp 4 --enable-expert-parallel":
            plan("memory", "--model", "dsv4.1-flash", "--chip", "h200", "-tp", "4", "--enable-expert-parallel"),
        "plan --model dsv4.1-flash --chip h200 --concurrency 64 (headline)":
            plan(*HEADLINE),
        "plan scenario review-50.yaml (50 services, inventory does not bind)":
            plan("scenario", str(free), "--format", "json"),
        "plan scenario review-50-binding.yaml (50 services, 256 GPUs shared)":
            plan("scenario", str(tight), "--format", "json"),
    }
    times: dict[str, list[float]] = {"floor": [], "dependencies": [], "imported": [], **{k: [] for k in cases}}
    heavy: dict[str, list[str]] = {}
    solver: dict[str, str] = {}
    for _ in range(opts.runs):
        times["floor"].append(run(FLOOR)[0])
        times["dependencies"].append(run(DEPENDENCIES)[0])
        times["imported"].append(run(imported)[0])
        for name, args in cases.items():
            seconds, done = run(args)
            if done.returncode not in (0, 1):
                raise SystemExit(f"{name} failed ({done.returncode}): {done.stderr[-2000:]}")
            times[name].append(seconds)
            heavy[name] = json.loads(done.stderr.strip().splitlines()[-1])
            if "scenario" in name:
                out = json.loads(done.stdout)
                solver[name] = (f"{'feasible' if out['feasible'] else 'infeasible'}, solver {out['solver_status']}, "
                                f"{out['seconds']:.2f} s in-process, {out['gpus']} GPUs")
    median = {k: statistics.median(v) for k, v in times.items()}
    floor = median["floor"]
    headline = next(k for k in cases if "headline" in k)
    rows = [(f"floor: `python -c \"{FLOOR_IMPORTS}\"`", floor, "1.00×", "—",
             ""),
            ("the floor + click, PyYAML, rich's console and tables, one pydantic model", median["dependencies"],
             f"{median['dependencies'] / floor:.2f}×", "OR-Tools", "what the project's own code cannot remove"),
            (f"the floor + the {len(modules)} project modules a headline process holds, imported, "
             "nothing run", median["imported"], f"{median['imported'] / floor:.2f}×", "OR-Tools",
             "the headline's imports alone (each module's top-level code: its classes defined): no sweep, no solve, "
             "no output")]
    for name in cases:
        extra = solver.get(name, "")
        if "does not bind" in name:
            extra = f"{median[name] / median[headline]:.2f}× the headline (target ≤ 4×); " + extra
        if "headline" in name:
            extra = f"target ≤ 1.5× the floor: {'met' if median[name] <= 1.5 * floor else 'not met'}"
        if name == "plan --help":
            extra = f"target ≤ 0.3× the floor: {'met' if median[name] <= 0.3 * floor else 'not met'}"
        rows.append((f"`{name}`", median[name], f"{median[name] / floor:.2f}×", ", ".join(heavy[name]) or "none",
                     extra))
    if opts.markdown:
        print(f"Median of {opts.runs} whole processes each, interleaved, one run "
              f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, shared):\n")
        print("| command | median s | vs floor | imports OR-Tools / matplotlib / networkx / the kernel | notes |")
        print("|---|---:|---:|---|---|")
        for name, seconds, ratio, imported, extra in rows:
            print(f"| {name} | {seconds:.2f} | {ratio} | {imported} | {extra} |")
    else:
        for name, seconds, ratio, imported, extra in rows:
            print(f"{seconds:7.2f} s  {ratio:>6}  [{imported}]  {name}  {extra}")


if __name__ == "__main__":
    main()
