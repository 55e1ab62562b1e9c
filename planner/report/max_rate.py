"""`plan --max-rate` for people: the most requests per second the pool serves within the targets,
what sets it, every shape's most, and the pool at that rate as `plan` prints its best pool."""

from __future__ import annotations

from rich.console import Console

from planner import defaults
from planner.app.max_rate import MaxRateResult
from planner.numbers import count, duration, given
from planner.report.render import best_line, cost_lines, render_launch, render_notes, serving_lines, speed_lines
from planner.report.tables import Col, print_table, unwrapped
from pricing.errors import mention, render

SHAPE_COLUMNS = [Col("chip", "name"), Col("split", "name"), Col("GPUs/replica"), Col("replicas"),
                 Col("req/s each"), Col("req/s"), Col("rates simulated", drop=1),
                 Col("one request alone misses", "text", drop=2)]


def max_rate_line(result: MaxRateResult, named=None) -> str:
    """The answer in one line: 'llama-3.1-8b on 8 GPUs of h100: 33.4 requests/s within p99 TTFT ≤ ...'."""
    t = result.target
    pool = render(f"{mention('max_gpus')} {result.max_gpus}", named)
    within = ", ".join(t.service_targets or [f"TTFT {duration(t.ttft_ms)} (mean, queueing included)"] + (
        [f"TPOT {duration(t.tpot_ms)}"] if t.tpot_ms is not None else []))
    if result.fleet is not None:
        pool += ", prefill and decode pools"
    if not result.feasible:
        return f"{result.model} ({pool}): serves no rate within {within} at ISL {count(t.isl)} / OSL {count(t.osl)}"
    return (f"{result.model} ({pool}): at most {given(result.requests_per_second)} requests/s of ISL "
            f"{count(t.isl)} / OSL {count(t.osl)} within {within}")


def render_max_rate(result: MaxRateResult, console: Console, named=None) -> None:
    """The answer, every shape's most, then the pool at that rate (speed, serving, cost, launch)."""
    console.print(max_rate_line(result, named), soft_wrap=unwrapped(console), markup=False)
    if result.fleet is not None:
        from planner.report.disagg_render import render_disagg

        console.print(f"binds: {result.binds}", soft_wrap=unwrapped(console), markup=False)
        console.print()
        t = result.target
        render_disagg(result.fleet, console, defaults.value("report.hours_per_month"),
                      f"{result.model} at {given(result.requests_per_second)} requests/s of {count(t.isl)} input and "
                      f"{count(t.osl)} output tokens", named)
        render_notes(result.notes, console)
        return
    rows = [[s.chip, s.split, str(s.gpus_per_replica), str(s.replicas), given(s.requests_per_second_per_instance),
             given(s.requests_per_second), str(s.benchmarks), "; ".join(s.misses_alone)] for s in result.shapes]
    if rows:
        print_table(console, "the most each instance shape serves in the pool", SHAPE_COLUMNS, rows)
    for e in result.explanations:
        console.print(e.text, soft_wrap=unwrapped(console), markup=False)
    best = result.best
    if best is not None:
        console.print(f"context length {count(result.target.context_length)} tokens (max_model_len: the workload's "
                      "longest request); rates per instance on a grid of three significant digits")
        console.print()
        console.print(best_line(best), soft_wrap=unwrapped(console), markup=False)
        console.print(f"binds: {best.binds}", soft_wrap=unwrapped(console), markup=False)
        for line in speed_lines(best) + serving_lines(best) + cost_lines(best):
            console.print(line, soft_wrap=unwrapped(console), markup=False)
        render_launch(best, console, named=named)
    render_notes(result.notes, console)
