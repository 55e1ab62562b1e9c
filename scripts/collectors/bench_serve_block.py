"""The result block `vllm bench serve` (and benchmarks/benchmark_serving.py before it) prints, as the
serving-run collectors read it: each figure's label and its key in validation/*_runs.yaml."""

from __future__ import annotations

FIGURES = {"Successful requests": "requests", "Benchmark duration (s)": "duration_s",
           "Total input tokens": "input_tokens", "Total generated tokens": "output_tokens",
           "Output token throughput (tok/s)": "output_tokens_per_second",
           "Median TTFT (ms)": "p50_ttft_ms", "P99 TTFT (ms)": "p99_ttft_ms",
           "Median TPOT (ms)": "p50_tpot_ms", "P99 TPOT (ms)": "p99_tpot_ms",
           "Median ITL (ms)": "p50_itl_ms", "P99 ITL (ms)": "p99_itl_ms"}


def figures(block: str) -> dict[str, float]:
    """The figures of one printed block, by their run-file keys (the lines it has of FIGURES)."""
    out = {}
    for line in block.splitlines():
        label, _, value = line.strip().partition(":")
        if label.strip() in FIGURES and value.strip():
            out[FIGURES[label.strip()]] = float(value.strip())
    return out
