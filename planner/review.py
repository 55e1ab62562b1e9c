"""A capacity review: a scenario under its base and every variant, side by side, with the
change against the base (`plan compare`), and the renderings a review pastes in: a terminal
table, JSON, Markdown and a chart."""

from __future__ import annotations

import time
from collections.abc import Callable

from pydantic import BaseModel

from planner import defaults
from planner.fleet import FleetResult, plan_scenario
from planner.result import price_footnotes, star
from planner.scenario import Scenario


class Comparison(BaseModel):
    review: str
    base: FleetResult
    variants: list[FleetResult]

    @property
    def results(self) -> list[FleetResult]:
        return [self.base] + self.variants


def compare(scenario: Scenario, names: list[str] | None = None,
            progress: Callable[[int, int, str], None] | None = None) -> Comparison:
    """The scenario as written, then under each variant (in file order, or `names`)."""
    names = list(scenario.variants) if names is None else names
    total = 1 + len(names)
    if progress:
        progress(0, total, "base")
    base = plan_scenario(scenario, "base")
    out = []
    for i, name in enumerate(names, start=1):
        if progress:
            progress(i, total, name)
        out.append(plan_scenario(scenario.apply(name), name))
    if progress:
        progress(total, total, "done")
    return Comparison(review=scenario.review, base=base, variants=out)


def chips_of(c: Comparison) -> list[str]:
    return sorted({u.chip for r in c.results for u in r.chips})


def gpus_by_chip(r: FleetResult, chip: str) -> int:
    return sum(u.gpus for u in r.chips if u.chip == chip)


def binding(r: FleetResult) -> str:
    """The constraint that binds the result, in words."""
    if not r.feasible:
        return "; ".join(f"{s.service} short" for s in r.short) or "infeasible"
    full = [u.chip for u in r.chips if u.available and u.gpus >= u.available]
    if full:
        return "inventory of " + ", ".join(full) + " fully used"
    return "; ".join(f"{p.service}: {p.binding}" for p in r.services)


def delta(value: float, base: float) -> str:
    if base == 0:
        return "n/a" if value else "0"
    change = (value - base) / base * 100
    return f"{change:+.1f} %"


def markdown(c: Comparison) -> str:
    """A Markdown report a capacity review can paste in as is."""
    hours = defaults.value("report.hours_per_month")
    chips = chips_of(c)
    lines = [f"## {c.review or 'Capacity review'}", ""]
    head = ["variant"] + [f"{chip} GPUs" for chip in chips] + ["$/hour", f"$/month ({hours} h)", "vs base", "binds"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join(["---"] + ["---:"] * (len(head) - 2) + ["---"]) + "|")
    for r in c.results:
        cells = [r.variant] + [str(gpus_by_chip(r, chip)) for chip in chips]
        if r.feasible:
            cells += [f"{r.cost_per_hour:,.2f}", f"{r.cost_per_month:,.0f}",
                      "—" if r is c.base else delta(r.cost_per_hour, c.base.cost_per_hour)]
        else:
            cells += ["infeasible", "infeasible", "—"]
        cells.append(binding(r).replace("|", "/"))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for r in c.results:
        lines.append(f"### {r.variant}")
        lines.append("")
        if not r.feasible:
            for s in r.short:
                lines.append(f"- **{s.service}** is short: {s.reason}")
            lines.append("")
            continue
        lines.append("| service | model | chip | GPUs | replicas × (tp, pp, dp, ep, dcp) | concurrency | headroom "
                     "| $/hour |")
        lines.append("|---|---|---|---:|---|---:|---:|---:|")
        for p in r.services:
            split = (f"{p.replicas} × ({p.tensor_parallel_size}, {p.pipeline_parallel_size}, {p.data_parallel_size}, "
                     f"{'on' if p.enable_expert_parallel else 'off'}, {p.decode_context_parallel_size})")
            lines.append(f"| {p.service} | {p.model} | {p.chip} | {p.gpus} | {split} | {p.concurrency} / {p.target} "
                         f"| {p.headroom * 100:.0f} % | {p.cost_per_hour:,.2f}{star(p)} |")
        lines.append("")
        notes = price_footnotes(r.services)
        if notes:
            lines += [note.replace("*", "\\*", 1) for note in notes] + [""]
    return "\n".join(lines) + "\n"


def line_chart(series: dict[str, list[tuple[float, float]]], path: str, x_label: str, title: str,
               log_x: bool = False, ticks: list[str] | None = None) -> None:
    """GPUs against x, one line per series (each line's SVG id is `line-<label>`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for label, points in sorted(series.items()):
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label, gid=f"line-{label}")
    if ticks is not None:
        ax.set_xticks(range(len(ticks)), ticks, rotation=20)
    if log_x:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(x_label)
    ax.set_ylabel("GPUs")
    ax.set_title(title)
    ax.legend(title="chip")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def chart(c: Comparison, path: str) -> None:
    """GPUs per chip (one line per chip) against the variants."""
    series = {chip: [(i, gpus_by_chip(r, chip) if r.feasible else float("nan")) for i, r in enumerate(c.results)]
              for chip in chips_of(c)}
    line_chart(series, path, "variant", c.review or "capacity review", ticks=[r.variant for r in c.results])


class Ticker:
    """A progress bar that appears only when a sweep has taken more than a second."""

    def __init__(self, console):
        self.console = console
        self.start = time.perf_counter()
        self.bar = None
        self.task = None

    def __call__(self, done: int, total: int, label: str) -> None:
        if self.bar is None and time.perf_counter() - self.start > 1.0 and done < total:
            from rich.progress import Progress

            self.bar = Progress(console=self.console, transient=True)
            self.bar.start()
            self.task = self.bar.add_task("planning", total=total)
        if self.bar is not None:
            self.bar.update(self.task, completed=done, description=f"planning {label}")
            if done >= total:
                self.bar.stop()
