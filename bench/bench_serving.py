"""Benchmark of the serving simulator: 2,000 requests through one instance.

    python bench/bench_serving.py [--runs 7]

Each row times `pricing.serving.simulate` in-process (the instance's step-cost tables built once
before, as the planner builds them once per candidate), median of the runs, each run interleaved
with the floor: a fixed pure-Python loop (200,000 additions of a float and dictionary look-ups)
so that the load of other processes on a shared machine falls on both alike, and the CPU time the
call itself took (time.process_time, which other processes' load does not inflate). Target: well
under 0.1 s per simulate call on a 2-core machine; the ratio to the floor is the figure to compare
across machines.
"""

from __future__ import annotations

import argparse
import statistics
import time

from pricing.chips import get_chip
from pricing.graph import load_model
from pricing.kernel import Deployment, Kernel
from pricing.serving import ClosedLoop, Fixed, Instance, Poisson, StepCost, Traffic, shipped, simulate
from pricing.step import StepModel

N = 2000  # requests per simulated benchmark


def floor() -> float:
    start = time.perf_counter()
    table = {i: float(i) for i in range(64)}
    total = 0.0
    for i in range(200_000):
        total += table[i & 63]
    return time.perf_counter() - start


def instance(model: str, chip: str, tp: int):
    kernel = Kernel.of(load_model(model), Deployment(tensor_parallel_size=tp, max_model_len=8192), get_chip(chip))
    inst = Instance.of(kernel)
    start = time.perf_counter()
    cost = StepCost.of(StepModel(kernel), inst)
    return inst, cost, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    sharegpt = shipped("sharegpt")
    cases = [
        ("llama-3.1-70b", "h100", 4, "Poisson 2/s, 2000/500", Traffic(Poisson(2.0), Fixed(2000), Fixed(500), N)),
        ("llama-3.1-70b", "h100", 4, "closed loop 64, 2000/500", Traffic(ClosedLoop(64), Fixed(2000), Fixed(500), N)),
        ("llama-3.1-70b", "h100", 4, "Poisson 20/s (overloaded)", Traffic(Poisson(20.0), Fixed(2000), Fixed(500), N)),
        ("llama-3.1-8b", "h100", 1, "Poisson 20/s, ShareGPT", Traffic(Poisson(20.0), *sharegpt, N)),
        ("qwen3-30b-a3b", "h200", 2, "Poisson 10/s, 1000/1000", Traffic(Poisson(10.0), Fixed(1000), Fixed(1000), N)),
    ]
    print(f"{'model':14} {'chip':5} {'tp':>2} {'traffic (2,000 requests)':28} {'tables':>8} {'simulate':>9} "
          f"{'CPU':>8} {'floor':>7} {'ratio':>6} {'p99 TTFT':>9} {'p50 TPOT':>9}")
    for model, chip, tp, label, traffic in cases:
        inst, cost, build = instance(model, chip, tp)
        times, floors, cpu = [], [], []
        for _ in range(runs):
            floors.append(floor())
            start, start_cpu = time.perf_counter(), time.process_time()
            served = simulate(inst, cost, traffic)
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        t, f, c = statistics.median(times), statistics.median(floors), statistics.median(cpu)
        p99, p50 = served.ttft.percentile(99), served.tpot.percentile(50) * 1e3
        print(f"{model:14} {chip:5} {tp:2} {label:28} {build * 1e3:6.1f}ms {t * 1e3:7.1f}ms {c * 1e3:6.1f}ms "
              f"{f * 1e3:5.1f}ms {t / f:5.2f}x {p99:8.3f}s {p50:7.1f}ms")


if __name__ == "__main__":
    main()
