"""`plan --max-rate` for people: the most requests per second the pool serves within the targets,
what sets it, every shape's most, and the pool at that rate as `plan` prints its best pool."""

from __future__ import annotations

from rich.console import Console

from planner.app.max_rate import MaxRateResult
from planner.kinds import Serving
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
    means = ([f"TTFT {duration(t.ttft_ms)} (mean, queueing included)"] if t.ttft_ms is not None else []) + (
        [f"TPOT {duration(t.tpot_ms)}"] if t.tpot_ms is not None else [])
    within = ", ".join(t.service_targets or means)
    if result.serving == Serving.DISAGG:  # sized by the means, judged by the percentile targets too
        pool += ", prefill and decode pools"
        within = ", ".join(means + t.service_targets)
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
        render_disagg(result.fleet, console, result.hours_per_month,
                      f"{result.model} at {given(result.requests_per_second)} requests/s of {count(t.isl)} input and "
                      f"{count(t.osl)} output tokens", named)
        render_notes(result.notes, console)
        return
    rows = shape_rows(result)
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


def shape_rows(result: MaxRateResult) -> list[list[str]]:
    """Every instance shape simulated, the most first (SHAPE_COLUMNS)."""
    return [[s.chip, s.split, str(s.gpus_per_replica), str(s.replicas), given(s.requests_per_second_per_instance),
             given(s.requests_per_second), str(s.benchmarks), "; ".join(s.misses_alone)] for s in result.shapes]


COMPARE_COLUMNS = [Col("point", "name"), Col("req/s"), Col("pool", "name"), Col("GPUs"), Col("$/hour", drop=3),
                   Col("$/M output", drop=2), Col("the next rate misses", "text", drop=1)]


def _point_row(point, named=None) -> list[str]:
    """One point's cells: its most, the pool that serves it, its cost, what the next grid rate misses."""
    r = point.result
    if not r.feasible:
        return [point.label, "0", "none", "-", "-", "-", "no rate meets the targets (why: below)"]
    best = r.best
    if best is None:  # a disaggregated fleet
        f = r.fleet
        return [point.label, given(r.requests_per_second), f"{f.prefill.replicas} prefill + {f.decode.replicas} "
                "decode", str(f.gpus), f"{f.cost_per_hour:,.2f}", f"{f.cost_per_million_output_tokens:.3f}", ""]
    pool = f"{best.replicas} × {r.shapes[0].split} on {best.chip}"  # the shapes, the most first: the best's
    return [point.label, given(r.requests_per_second), pool, str(best.gpus), f"{best.cost_per_hour:,.2f}",
            f"{best.cost_per_million_output_tokens:.3f}" if best.cost_per_million_output_tokens is not None else "-",
            ", ".join(r.next_misses) or "the planner's ceiling"]


def render_max_rate_comparison(comparison, console: Console, named=None) -> None:
    """`plan compare --max-rate`: each point's most, the pool that serves it and what binds, one row a point."""
    rows = [_point_row(p, named) for p in comparison.points]
    print_table(console, comparison.review, COMPARE_COLUMNS, rows)
    first = next((p.result for p in comparison.points if p.result.feasible), comparison.points[0].result)
    t = first.target
    within = ", ".join(t.service_targets)
    console.print(f"within {within} at ISL {count(t.isl)} / OSL {count(t.osl)}, each point's pool at most "
                  f"{render(mention('max_gpus'), named)} {first.max_gpus} GPUs of its chip (as `plan --max-rate` "
                  "answers each); rates per instance on a grid of three significant digits", soft_wrap=True,
                  markup=False)
    for p in comparison.points:
        for e in p.result.explanations:
            console.print(f"{p.label}: {e.text}", soft_wrap=True, markup=False)


def max_rate_markdown(comparison, named=None) -> str:
    """`plan compare --max-rate --format markdown`: the table as a Markdown table."""
    head = [c.header for c in COMPARE_COLUMNS]
    lines = [f"## {comparison.review}", "", "| " + " | ".join(head) + " |",
             "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in _point_row(p, named)) + " |"
              for p in comparison.points]
    why = [f"- {p.label}: {e.text}" for p in comparison.points for e in p.result.explanations]
    lines += [""] + why if why else []
    return "\n".join(lines) + "\n"
