"""Benchmark of the memory kernel: one evaluation, and a sweep of 10,000 deployments.

    python bench/bench_kernel.py

One evaluation = a Kernel for one deployment, answering Capacity.requests_held() (the planner's
question), from a cold memo. The sweep walks 10,000 deployments of one model on one chip
(tp × utilization × token budget × max_num_seqs × context length) through Kernel.of(...)
Capacity(...).requests_held(), as the planner's oracle does: five token budgets, five max_num_seqs, five
context lengths and the model's tp values, with as many utilizations (0.99 down, in steps of
0.01) as make 10,000 points. Target: the whole sweep under one second on a 2-core machine.
"""

from __future__ import annotations

import itertools
import statistics
import time

from pricing.chips import get_chip
from pricing.graph import load_model
from pricing.kernel import Capacity, Deployment, Kernel

SWEEP = 10_000  # deployments per sweep


def one_evaluation(model: str, chip: str, **flags) -> float:
    graph, target = load_model(model), get_chip(chip)  # a graph of its own: a cold memo
    start = time.perf_counter()
    Capacity(Kernel.of(graph, Deployment(**flags), target)).requests_held()
    return time.perf_counter() - start


def sweep(model: str, chip: str, tps, extra: dict) -> tuple[float, int]:
    graph, target = load_model(model), get_chip(chip)
    budgets = [2048, 4096, 8192, 16384, 32768]
    seqs = [64, 128, 256, 512, 1024]
    lengths = [8192, 32768, 131072, 262144, 1048576]
    per_utilization = len(tps) * len(budgets) * len(seqs) * len(lengths)
    utils = [round(0.99 - 0.01 * i, 2) for i in range(-(-SWEEP // per_utilization))]
    grid = list(itertools.product(tps, utils, budgets, seqs, lengths))[:SWEEP]  # the utilizations are rounded up
    start = time.perf_counter()
    held = 0
    for tp, util, budget, n, length in grid:
        length = min(length, graph.max_position)
        d = Deployment(tensor_parallel_size=tp, gpu_memory_utilization=util, max_num_batched_tokens=budget,
                       max_num_seqs=n, max_model_len=length, **extra)
        held += Capacity(Kernel.of(graph, d, target)).requests_held()
    return time.perf_counter() - start, len(grid)


def main() -> None:
    rows = []
    for model, chip, tps, extra in (
        ("llama-3.1-70b", "h200", (1, 2, 4, 8), {}),
        ("dsv3", "h200", (8, 16), {"kv_cache_dtype": "fp8"}),
        ("dsv4.1-flash", "h200", (4, 8), {"kv_cache_dtype": "fp8"}),
    ):
        single = statistics.median(one_evaluation(model, chip, tensor_parallel_size=tps[-1], **extra)
                                   for _ in range(5))
        seconds = statistics.median(sweep(model, chip, tps, extra)[0] for _ in range(3))
        rows.append((model, chip, single * 1e3, seconds, SWEEP / seconds))
    print(f"{'model':16} {'chip':6} {'one cold evaluation':>20} {'10,000-deployment sweep':>24} {'per second':>12}")
    for model, chip, single_ms, seconds, rate in rows:
        print(f"{model:16} {chip:6} {single_ms:17.1f} ms {seconds:21.3f} s {rate:12,.0f}")


if __name__ == "__main__":
    main()
