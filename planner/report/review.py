"""The renderings a capacity review pastes in (planner/app/review.py `Comparison`): a terminal
table's words, Markdown (its charts: planner/report/charts.py), and the change against the base."""

from __future__ import annotations

import time

from planner import numbers as fmt
from planner.app.binds import inventory_binds
from planner.app.fleet import FleetResult
from planner.app.review import Comparison
from planner.report.words import (
    bounded_words,
    no_plan_cell,
    price_footnotes,
    solver_phrase,
    unserved_words,
)
from planner.scenario import point_word
from pricing.errors import render


def chips_of(c: Comparison) -> list[str]:
    return sorted({u.chip for r in c.results for u in r.chips})


def gpus_by_chip(r: FleetResult, chip: str) -> int:
    return sum(u.gpus for u in r.chips if u.chip == chip)


def binding(r: FleetResult) -> str:
    """The constraint that binds the result, in words."""
    if not r.feasible:
        if len(r.short) == 1 and len(r.services) == 0:
            return r.short[0].reason
        return "; ".join(f"{s.service} short: {s.reason}" for s in r.short) or "infeasible"
    own = r.services[0].binds if len(r.services) == 1 else "; ".join(f"{p.service}: {p.binds}" for p in r.services)
    extra = r.cost_per_hour - r.own_cost_per_hour if r.own_cost_per_hour is not None else 0.0
    if r.inventory_dearer:  # dearer by the solver's price unit
        full = [u for u in r.chips if u.available is not None and u.gpus >= u.available]
        return f"{inventory_binds([(u.chip, u.gpus, u.available) for u in full], extra)}; {own}"
    return own


def binding_head(r: FleetResult) -> str:
    """What binds the result, in a few words: each pool's binds phrase up to its first colon ('KV cache',
    'tpot', 'weights force the split'; the full phrase is each variant's own), or why it is infeasible
    (`binding`'s reasons, whole)."""
    if not r.feasible:  # the reason, whole: a comparison may print nothing else about the point
        return binding(r)
    heads = list(dict.fromkeys(p.binds.split(":", 1)[0] for p in r.services))
    return "; ".join(heads) if len(r.services) == 1 or len(heads) == 1 else "; ".join(
        f"{p.service}: {p.binds.split(':', 1)[0]}" for p in r.services)


def search_line(r: FleetResult, named=None) -> str:
    """How the result was found, as `plan` reports it: the solver's status in words, the
    candidates the oracle evaluated and the wall-clock time (time_limit named as `named` calls it)."""
    how = "; each service's own optimum (they fit the inventory together)" if r.decomposed and len(r.services) > 1 \
        else ""
    phrase = solver_phrase(r.solver_status, r.solver_stages)
    if r.sweep_bounded:
        how += "; " + bounded_words(*r.sweep_bounded, found=not r.unproven)
        if r.solver_stages and all(s.status == "OPTIMAL" for s in r.solver_stages):  # proven over those shapes only
            phrase = "solver FEASIBLE (every stage's optimum proven over the shapes priced only)"
    return render(f"{phrase}, {fmt.count(r.candidates_evaluated)} candidates in {fmt.duration(r.seconds * 1000)}{how}",
                  named)


def delta(value: float | None, base: float | None) -> str:
    if value is None or base is None:  # an infeasible point has no cost to compare
        return "—"
    if base == 0:
        return "n/a" if value else "0"
    return fmt.change((value - base) / base)


def estimated(r: FleetResult) -> bool:
    """Whether a result's cost rests on a catalogue estimate (any of its pools' prices)."""
    return any(p.price_estimate for p in r.services)


MD_MARK = "\\" + fmt.ESTIMATE_MARK  # the estimate mark in Markdown, escaped so that it never opens emphasis


def md_amount(usd: float, estimate: bool, cents: bool = True) -> str:
    """A Markdown cell of USD, the estimate mark escaped."""
    return fmt.amount(usd, cents=cents) + (MD_MARK if estimate else "")


def markdown(c: Comparison, named=None) -> str:
    """A Markdown report a capacity review can paste in as is; every cost resting on an estimated
    price carries the mark, explained under the table (a field its text mentions named as `named`
    calls it)."""
    hours = c.base.hours_per_month
    chips = chips_of(c)
    lines = [f"## {c.review or 'Capacity review'}", ""]
    head = ["variant"] + [f"{chip} GPUs" for chip in chips] + ["$/hour", f"$/month ({hours} h)", "vs base", "binds"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join(["---"] + ["---:"] * (len(head) - 2) + ["---"]) + "|")
    for r in c.results:
        cells = [r.variant] + [fmt.count(gpus_by_chip(r, chip)) if r.feasible else "—" for chip in chips]
        if r.feasible:
            cells += [md_amount(r.cost_per_hour, estimated(r)), md_amount(r.cost_per_month, estimated(r), cents=False),
                      "—" if r is c.base else delta(r.cost_per_hour, c.base.cost_per_hour)]
        else:
            cells += [no_plan_cell(r), no_plan_cell(r), "—"]
        cells.append(binding(r).replace("|", "/"))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines += md_footnotes([p for r in c.results for p in r.services], named)
    if c.ranking:
        axes = list(c.grid)
        marked = {r.variant for r in c.results if estimated(r)}
        lines += ["### grid points by cost", "", "| rank | " + " | ".join(axes) + f" | $/month ({hours} h) | GPUs |",
                  "|---:|" + "---|" * len(axes) + "---:|---:|"]
        for g in c.ranking:
            money_cell = md_amount(g.cost_per_month, g.variant in marked, cents=False) if g.feasible else "infeasible"
            lines.append(f"| {fmt.count(g.rank)} | " + " | ".join(point_word(g.values[a], a) for a in axes) +
                         f" | {money_cell} | {fmt.count(g.gpus) if g.feasible else '—'} |")
        lines.append("")
    for r in c.results:
        lines.append(f"### {r.variant}")
        lines.append("")
        if not r.feasible:
            if r.unproven:  # nothing proven: said before the services it leaves short
                lines += [f"**{render(unserved_words(r), named)}**", ""]
            for s in r.short:
                lines.append(f"- **{s.service}** is short: {s.reason}")
            lines += ["", search_line(r, named), ""]
            continue
        lines.append("| service | model | chip | GPUs | replicas × (tp, pp, dp, ep, dcp) | held / asked | headroom "
                     "| $/hour |")
        lines.append("|---|---|---|---:|---|---:|---:|---:|")
        for p in r.services:
            split = (f"{fmt.count(p.replicas)} × ({p.tensor_parallel_size}, {p.pipeline_parallel_size}, "
                     f"{p.data_parallel_size}, {'on' if p.enable_expert_parallel else 'off'}, "
                     f"{p.decode_context_parallel_size})")
            lines.append(f"| {p.service} | {p.model} | {p.chip} | {fmt.count(p.gpus)} | {split} | "
                         f"{fmt.count(p.held)} / {'-' if p.target.implicit_concurrency else fmt.count(p.asked)} | "
                         f"{'-' if p.target.implicit_concurrency else fmt.percent(p.headroom, 0)} | "
                         f"{md_amount(p.cost_per_hour, p.price_estimate)} |")
        lines.append("")
        mark = MD_MARK if estimated(r) else ""
        lines.append(f"total: {fmt.plural(r.gpus, 'GPU')}, {fmt.money(r.cost_per_hour)}{mark}/hour, "
                     f"{fmt.money(r.cost_per_month, cents=False)}{mark}/month")
        lines.append("")
        lines += md_footnotes(r.services, named)
        lines += [search_line(r, named), ""]
        for schedule in r.schedules:  # a service with traffic: its autoscaled schedule
            from planner.report.schedule import markdown_lines

            lines += markdown_lines(schedule)
    return "\n".join(lines) + "\n"


def md_footnotes(pools, named=None) -> list[str]:
    """The estimate footnotes under a Markdown table (the mark escaped, so a footnote is no list item)."""
    notes = price_footnotes(pools, named)
    return [note.replace(fmt.ESTIMATE_MARK, MD_MARK, 1) for note in notes] + ([""] if notes else [])


class Ticker:
    """A progress bar of the variants planned that appears only when a sweep has taken longer than
    planner/defaults.yaml report.progress_after seconds; none where not `shown` (stderr not a
    terminal, or --json: planner/commands/progress.py wanted), the delay `after` as the command read it."""

    def __init__(self, console, shown: bool, after: float):
        self.console = console
        self.start = time.perf_counter()
        self.bar = None
        self.task = None
        self.shown = shown
        self.after = float(after)

    def __call__(self, done: int, total: int, label: str) -> None:
        if not self.shown:
            return
        if self.bar is None and time.perf_counter() - self.start > self.after and done < total:
            from rich.progress import Progress

            self.bar = Progress(console=self.console, transient=True)
            self.bar.start()
            self.task = self.bar.add_task("planning", total=total)
        if self.bar is not None:
            self.bar.update(self.task, completed=done, description=f"planning {label}")
            if done >= total:
                self.bar.stop()
