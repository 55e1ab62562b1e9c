"""A capacity review: a scenario under its base and every variant, side by side, with the
change against the base (`plan compare`), and the renderings a review pastes in: a terminal
table, JSON, Markdown and a chart."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from planner import defaults
from planner.report import numbers as fmt
from planner.report.binds import inventory_binds
from planner.report.fleet import FleetResult, plan_scenario
from planner.report.result import price_footnotes, solver_phrase
from planner.scenario import Scenario, grid_points, point_word


class GridPoint(BaseModel):
    """One point of a scenario's grid, in the ranking: cheapest first, infeasible last."""

    rank: int
    variant: str
    values: dict[str, Any] = Field(description="the point's value of each axis")
    feasible: bool
    cost_per_month: float | None
    gpus: int | None


class Comparison(BaseModel):
    """`plan scenario --variants --format json` and `plan compare --json`: the base and each variant
    (each a scenario's result), with the grid's ranking when the file has a grid."""

    kind: Literal["comparison"] = Field("comparison", description="which report this is (the schema's "
                                                                  "discriminator)")
    review: str
    base: FleetResult
    variants: list[FleetResult]
    grid: dict[str, list[Any]] = Field(default_factory=dict, description="the scenario's grid axes and values")
    ranking: list[GridPoint] = Field(default_factory=list, description="the grid's points by cost (then GPUs), "
                                     "feasible first")

    @property
    def results(self) -> list[FleetResult]:
        return [self.base] + self.variants


def compare(scenario: Scenario, names: list[str] | None = None,
            progress: Callable[[int, int, str], None] | None = None, time_limit: float | None = None,
            executor: str = "sequential", ray_address: str | None = None) -> Comparison:
    """The scenario as written, then under each variant (in file order, or `names`); `time_limit`
    bounds each solve (planner/report/fleet.py `plan_scenario`); the variants are planned by
    `executor` (planner/report/executors.py), with the same results in the same order."""
    from planner.report.executors import plan_variants

    names = list(scenario.variants) if names is None else names
    total = 1 + len(names)
    if progress:
        progress(0, total, "base")
    base = plan_scenario(scenario, "base", time_limit)
    done = [1]

    def tick(name: str) -> None:
        if progress:
            progress(done[0], total, name)
        done[0] += 1

    out = plan_variants([(scenario.apply(name), name) for name in names], time_limit, executor, ray_address,
                        tick if progress else None)
    if progress:
        progress(total, total, "done")
    return Comparison(review=scenario.review, base=base, variants=out, grid=scenario.grid,
                      ranking=rank_grid(scenario, out))


def rank_grid(scenario: Scenario, results: list[FleetResult]) -> list[GridPoint]:
    """The grid's points (the variants `grid_points` names) ranked by $/month, then GPUs; the
    points nothing serves last, in grid order."""
    points = dict(grid_points(scenario.grid))
    mine = [r for r in results if r.variant in points]
    order = sorted(mine, key=lambda r: (not r.feasible, r.cost_per_month if r.feasible else 0,
                                        r.gpus if r.feasible else 0))
    return [GridPoint(rank=i, variant=r.variant, values=points[r.variant], feasible=r.feasible,
                      cost_per_month=r.cost_per_month if r.feasible else None, gpus=r.gpus if r.feasible else None)
            for i, r in enumerate(order, start=1)]


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
    if round(extra * defaults.value("solver.price_units_per_dollar")) > 0:  # dearer by the solver's price unit
        full = [u for u in r.chips if u.available is not None and u.gpus >= u.available]
        return f"{inventory_binds([(u.chip, u.gpus, u.available) for u in full], extra)}; {own}"
    return own


def search_line(r: FleetResult) -> str:
    """How the result was found, as `plan` reports it: the solver's status in words, the
    candidates the oracle evaluated and the wall-clock time."""
    how = "; each service's own optimum (they fit the inventory together)" if r.decomposed and len(r.services) > 1 \
        else ""
    return (f"{solver_phrase(r.solver_status, r.solver_stages)}, {fmt.count(r.candidates_evaluated)} candidates in "
            f"{fmt.duration(r.seconds * 1000)}{how}")


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


def markdown(c: Comparison) -> str:
    """A Markdown report a capacity review can paste in as is; every cost resting on an estimated
    price carries the mark, explained under the table."""
    hours = defaults.value("report.hours_per_month")
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
            cells += ["infeasible", "infeasible", "—"]
        cells.append(binding(r).replace("|", "/"))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines += md_footnotes([p for r in c.results for p in r.services])
    if c.ranking:
        axes = list(c.grid)
        marked = {r.variant for r in c.results if estimated(r)}
        lines += ["### grid points by cost", "", "| rank | " + " | ".join(axes) + f" | $/month ({hours} h) | GPUs |",
                  "|---:|" + "---|" * len(axes) + "---:|---:|"]
        for g in c.ranking:
            money_cell = md_amount(g.cost_per_month, g.variant in marked, cents=False) if g.feasible else "infeasible"
            lines.append(f"| {fmt.count(g.rank)} | " + " | ".join(str(g.values[a]) for a in axes) +
                         f" | {money_cell} | {fmt.count(g.gpus) if g.feasible else '—'} |")
        lines.append("")
    for r in c.results:
        lines.append(f"### {r.variant}")
        lines.append("")
        if not r.feasible:
            for s in r.short:
                lines.append(f"- **{s.service}** is short: {s.reason}")
            lines += ["", search_line(r), ""]
            continue
        lines.append("| service | model | chip | GPUs | replicas × (tp, pp, dp, ep, dcp) | held / asked | headroom "
                     "| $/hour |")
        lines.append("|---|---|---|---:|---|---:|---:|---:|")
        for p in r.services:
            split = (f"{fmt.count(p.replicas)} × ({p.tensor_parallel_size}, {p.pipeline_parallel_size}, "
                     f"{p.data_parallel_size}, {'on' if p.enable_expert_parallel else 'off'}, "
                     f"{p.decode_context_parallel_size})")
            lines.append(f"| {p.service} | {p.model} | {p.chip} | {fmt.count(p.gpus)} | {split} | "
                         f"{fmt.count(p.held)} / {fmt.count(p.asked)} | {fmt.percent(p.headroom, 0)} | "
                         f"{md_amount(p.cost_per_hour, p.price_estimate)} |")
        lines.append("")
        mark = MD_MARK if estimated(r) else ""
        lines.append(f"total: {fmt.plural(r.gpus, 'GPU')}, {fmt.money(r.cost_per_hour)}{mark}/hour, "
                     f"{fmt.money(r.cost_per_month, cents=False)}{mark}/month")
        lines.append("")
        lines += md_footnotes(r.services)
        lines += [search_line(r), ""]
    return "\n".join(lines) + "\n"


def md_footnotes(pools) -> list[str]:
    """The estimate footnotes under a Markdown table (the mark escaped, so a footnote is no list item)."""
    notes = price_footnotes(pools)
    return [note.replace(fmt.ESTIMATE_MARK, MD_MARK, 1) for note in notes] + ([""] if notes else [])


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


LABEL_BOX = {"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none"}  # a label readable over grid lines
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
STYLES = ("-", "--", "-.", ":")


def _integer_axis(ax) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(bottom=0)


def _money_axis(ax) -> None:
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"${v:,.0f}"))
    ax.set_ylim(bottom=0)


def _save(fig, path: str) -> None:
    """Everything inside the image: the tight bounding box takes in legends and long labels."""
    fig.savefig(path, bbox_inches="tight", pad_inches=0.2, dpi=144 if path.lower().endswith(".png") else None)
    import matplotlib.pyplot as plt

    plt.close(fig)


def shortfall_label(r: FleetResult, by_service: bool) -> str:
    """"infeasible" and why in a few words, for a chart (`by_service`: name each service short)."""
    return "\n".join(["infeasible", *(f"{s.service}: {s.brief}" if by_service else s.brief for s in r.short)])


def bar_chart(groups: list[str], infeasible: dict[int, str], gpus: dict[str, list[int | None]],
              money: dict[str, list[float | None]], path: str, title: str, group_label: str,
              why: dict[tuple[str, int], str] | None = None) -> None:
    """Categorical variants as grouped bars, one bar per chip: GPUs (integer ticks) beside $/month.
    A group where nothing is served (`infeasible`: group index to its label) is a hatched
    placeholder across the group; one chip's point that is not served (its value None, `why` its
    label) is a hatched stub in that chip's place with its label. Each chip's GPU bars carry the
    SVG ids `bars-<chip>-<group index>`, placeholders `infeasible-<group index>` and stubs
    `infeasible-<chip>-<group index>`."""
    plt = _pyplot()
    hours = defaults.value("report.hours_per_month")
    why = why or {}
    chips = list(gpus)
    width = 0.8 / max(1, len(chips))
    fig, (ax_gpus, ax_cost) = plt.subplots(1, 2, figsize=(max(8.0, 1.6 * len(groups) + 4), 4.6))
    for ax, values, label in ((ax_gpus, gpus, "GPUs"), (ax_cost, money, f"$/month ({hours} h)")):
        top = max([v for chip in chips for v in values[chip] if v is not None] + [1])
        for j, chip in enumerate(chips):
            xs = [i - 0.4 + width * (j + 0.5) for i in range(len(groups))]
            heights = [v if v is not None and i not in infeasible else 0 for i, v in enumerate(values[chip])]
            bars = ax.bar(xs, heights, width * 0.95, label=chip, color=f"C{j}")
            for i, bar in enumerate(bars):
                bar.set_gid(f"{'bars' if ax is ax_gpus else 'cost'}-{chip}-{i}")
            for i, (bar, v) in enumerate(zip(bars, values[chip], strict=True)):
                if i in infeasible:
                    continue
                if v is None:
                    ax.bar(bar.get_x() + bar.get_width() / 2, top * 0.06, width * 0.95, color="none",
                           edgecolor=f"C{j}", hatch="xx", gid=f"infeasible-{chip}-{i}")
                    ax.text(bar.get_x() + bar.get_width() / 2, top * 0.08, why.get((chip, i), "infeasible"),
                            ha="center", va="bottom", rotation=90, fontsize=8, color=f"C{j}", bbox=LABEL_BOX, zorder=3)
                elif v:
                    text = f"{v:,}" if ax is ax_gpus else f"${v / 1000:,.1f}k"
                    ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center",
                                va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points")
        for i, text in infeasible.items():
            ax.bar(i, top * 0.25, 0.8, color="none", edgecolor="grey", hatch="//", gid=f"infeasible-{i}")
            ax.text(i, top * 0.27, text, ha="center", va="bottom", fontsize=8, color="dimgrey", bbox=LABEL_BOX,
                    zorder=3)
        ax.set_xticks(range(len(groups)), groups, rotation=20 if max(map(len, groups)) > 8 else 0, ha="right"
                      if max(map(len, groups)) > 8 else "center")
        ax.set_xlabel(group_label)
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3)
        (_integer_axis if ax is ax_gpus else _money_axis)(ax)
        ax.set_ylim(0, top * 1.15)
    ax_cost.legend(title="chip", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(title)
    fig.tight_layout()
    _save(fig, path)


def line_chart(series: dict[str, list[tuple[float, float | None, float | None, str]]], path: str, x_label: str,
               title: str, log_x: bool = False, x_format=None) -> None:
    """GPUs and $/month against a numeric x, one line per series (SVG id `line-<label>`), each
    point (x, GPUs, $/month, label); a point where nothing fits (GPUs None) is an ✕ on the axis
    (SVG id `infeasible-<series>`) with its label ("infeasible" and why)."""
    plt = _pyplot()
    hours = defaults.value("report.hours_per_month")
    fig, (ax_gpus, ax_cost) = plt.subplots(1, 2, figsize=(11, 4.6))
    xs_all = sorted({p[0] for pts in series.values() for p in pts})
    n = len(series)
    missed: dict = {}  # (axes, x) -> label -> the series it holds for
    for k, (label, points) in enumerate(sorted(series.items())):
        style = dict(marker=MARKERS[k % len(MARKERS)], linestyle=STYLES[k % len(STYLES)], color=f"C{k}",
                     markersize=7, label=label, alpha=0.9)
        shift = (k - (n - 1) / 2) * 0.08  # series side by side around each x, so none hides another

        def dodge(x, shift=shift):
            return x * 2 ** shift if log_x else x + shift * (xs_all[-1] - xs_all[0] or 1) * 0.1

        for ax, index in ((ax_gpus, 1), (ax_cost, 2)):
            xs = [dodge(p[0]) for p in points]
            ys = [p[index] if p[index] is not None else float("nan") for p in points]
            ax.plot(xs, ys, gid=f"line-{label}" if ax is ax_gpus else f"cost-{label}", **style)
            bad = [p for p in points if p[index] is None]
            if bad:
                ax.plot([dodge(p[0]) for p in bad], [INFEASIBLE_MARK_HEIGHT] * len(bad), marker="x", linestyle="none",
                        color=f"C{k}", markersize=12, markeredgewidth=2.5, clip_on=False, gid=f"infeasible-{label}",
                        transform=_on_the_floor(ax), scalex=False, scaley=False)
                for p in bad:
                    missed.setdefault((ax, p[0]), {}).setdefault(p[3], []).append(k)
    for (ax, x), texts in missed.items():  # one upright label per reason at each x, in the series' colour if one
        for t, (text, who) in enumerate(texts.items()):
            ax.annotate(text.replace("\n", ": "), (x, INFEASIBLE_MARK_HEIGHT), xycoords=_on_the_floor(ax),
                        xytext=((t - (len(texts) - 1) / 2) * 16, 14),
                        textcoords="offset points", ha="center", va="bottom", rotation=90, fontsize=8,
                        color=f"C{who[0]}" if len(who) == 1 else "dimgrey", zorder=3, bbox=LABEL_BOX)
    for ax, label in ((ax_gpus, "GPUs"), (ax_cost, f"$/month ({hours} h)")):
        if log_x:
            ax.set_xscale("log", base=2)
        ax.set_xticks(xs_all, [x_format(x) if x_format else f"{x:g}" for x in xs_all])
        ax.minorticks_off()
        ax.margins(x=0.1)
        ax.set_xlabel(x_label)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        (_integer_axis if ax is ax_gpus else _money_axis)(ax)
        top = ax.dataLim.y1 if math.isfinite(ax.dataLim.y1) and ax.dataLim.y1 > 0 else 1
        ax.set_ylim(0, top * (1 + HEADROOM_ABOVE_THE_HIGHEST))  # from zero, whatever the lowest point
    ax_cost.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(title)
    fig.tight_layout()
    _save(fig, path)


HEADROOM_ABOVE_THE_HIGHEST = 0.12  # the y axis runs to the highest point and this fraction more
INFEASIBLE_MARK_HEIGHT = 0.04  # an infeasible point's ✕, as a fraction of the axes' height: clear of the tick labels


def _on_the_floor(ax):
    """Data x, axes-fraction y: a mark that stands just above the x axis whatever the y range."""
    from matplotlib.transforms import blended_transform_factory

    return blended_transform_factory(ax.transData, ax.transAxes)


def grid_chart(c: Comparison, path: str) -> None:
    """A grid: $/month of every point against each axis (one panel per axis, the points at each
    value side by side, the cheapest joined by a line); a point nothing serves is an ✕ on the axis."""
    plt = _pyplot()
    hours = defaults.value("report.hours_per_month")
    axes = list(c.grid)
    fig, panels = plt.subplots(1, len(axes), figsize=(4.2 * len(axes) + 1, 4.4), squeeze=False)
    for ax, axis in zip(panels[0], axes, strict=True):
        values = c.grid[axis]
        labels = [point_word(v) for v in values]
        cheapest = []
        for i, value in enumerate(values):
            here = [g for g in c.ranking if g.values[axis] == value]
            costs = [g.cost_per_month for g in here if g.feasible]
            spread = [i + (k - (len(costs) - 1) / 2) * 0.35 / max(1, len(costs)) for k in range(len(costs))]
            ax.scatter(spread, costs, s=14, alpha=0.6, color="C0", gid=f"points-{axis}-{i}")
            missed = len(here) - len(costs)
            if missed:
                ax.plot([i], [INFEASIBLE_MARK_HEIGHT], marker="x", color="C3", markersize=10, linestyle="none",
                        transform=_on_the_floor(ax), clip_on=False, gid=f"infeasible-{axis}-{i}")
                ax.annotate(f"{missed} infeasible", (i, INFEASIBLE_MARK_HEIGHT), xycoords=_on_the_floor(ax),
                            xytext=(0, 10), textcoords="offset points", ha="center", fontsize=8, color="C3")
            cheapest.append(min(costs) if costs else float("nan"))
        ax.plot(range(len(values)), cheapest, color="C1", marker="o", label="cheapest", gid=f"cheapest-{axis}")
        ax.set_xticks(range(len(values)), labels)
        ax.set_xlabel(axis.replace("_", " "))
        ax.set_ylabel(f"$/month ({hours} h)")
        ax.grid(alpha=0.3)
        _money_axis(ax)
    panels[0][-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(f"{c.review or 'capacity review'}: $/month of {len(c.ranking)} grid points against each axis")
    fig.tight_layout()
    _save(fig, path)


def chart(c: Comparison, path: str) -> None:
    """A scenario's variants are categories: grouped bars of GPUs and $/month per chip; a grid's
    points are charted against its axes (`grid_chart`)."""
    if c.ranking:
        grid_chart(c, path)
        return
    hours = defaults.value("report.hours_per_month")
    chips = chips_of(c)
    results = c.results
    gpus = {chip: [gpus_by_chip(r, chip) for r in results] for chip in chips}
    money = {chip: [round(sum(u.cost_per_hour for u in r.chips if u.chip == chip) * hours) for r in results]
             for chip in chips}
    names = ", ".join(r.variant for r in c.variants)
    title = f"{c.review or 'capacity review'}: GPUs and cost per chip, base" + (f" vs {names}" if names else "")
    infeasible = {i: shortfall_label(r, by_service=True) for i, r in enumerate(results) if not r.feasible}
    bar_chart([r.variant for r in results], infeasible, gpus, money, path, title, "variant")
    if any(s.serving for r in results for s in r.services):
        targets_chart(c, cost_path(path))


def cost_path(path: str) -> str:
    """Where a review with service targets draws their cost: beside the chart, `-cost` before the suffix."""
    from pathlib import Path

    p = Path(path)
    return str(p.with_name(f"{p.stem}-cost{p.suffix}"))


def targets_chart(c: Comparison, path: str) -> None:
    """The services with targets: $/M output tokens against the rate across the variants (each
    point labelled with its variant), and the base's Pareto front of $/M output tokens against p99
    TPOT for each, its chosen pool starred."""
    plt = _pyplot()
    fig, (ax_rate, ax_front) = plt.subplots(1, 2, figsize=(12, 4.8))
    names = list(dict.fromkeys(s.service for r in c.results for s in r.services if s.serving))
    for k, name in enumerate(names):
        pts = sorted((s.serving.requests_per_second, s.cost_per_million_output_tokens, r.variant)
                     for r in c.results for s in r.services if s.service == name and s.serving)
        ax_rate.plot([p[0] for p in pts], [p[1] for p in pts], marker=MARKERS[k % len(MARKERS)], color=f"C{k}",
                     linestyle="none" if len(pts) < 2 else "-", label=name, gid=f"rate-{name}")
        for x, y, variant in pts:
            ax_rate.annotate(variant, (x, y), xytext=(0, 8), textcoords="offset points", ha="center", fontsize=7,
                             color=f"C{k}")
        base = next((s for s in c.base.services if s.service == name and s.serving), None)
        if base is not None:
            _pareto_panel(ax_front, base.serving.pareto, f"C{k}", name, MARKERS[k % len(MARKERS)])
    ax_rate.set_xlabel("requests per second")
    for ax in (ax_rate, ax_front):
        _cost_per_token_axis(ax)
        ax.set_ylim(0, max(ax.dataLim.y1, 1e-9) * (1 + 2 * HEADROOM_ABOVE_THE_HIGHEST))
        ax.legend(loc="upper right", fontsize=8)
    ax_front.set_xlabel("p99 TPOT (ms), simulated (base)")
    ax_rate.set_title("cost per token against the rate, by variant", fontsize=9)
    ax_front.set_title("cost per token against a p99 TPOT target (★ chosen)", fontsize=9)
    fig.suptitle(f"{c.review or 'capacity review'}: the services with targets")
    fig.tight_layout()
    _save(fig, path)


def node_chart_path(path: str) -> str:
    """The node map's file beside the chart: `review.png` -> `review-nodes.png`."""
    from pathlib import Path

    p = Path(path)
    return str(p.with_name(f"{p.stem}-nodes{p.suffix}"))


def node_chart(r: FleetResult, path: str) -> None:
    """The fleet's node map: one row per node of the inventory, one cell per GPU, coloured by the
    service whose instance holds it and labelled with the instance (SVG id `node-<node>`); idle GPUs
    blank, spare nodes hatched."""
    plt = _pyplot()
    from matplotlib.patches import Patch, Rectangle

    nodes = r.nodes
    width = max((n.gpus for n in nodes), default=1)
    services = list(dict.fromkeys(s.service for s in r.services))
    colour = {name: f"C{i % 10}" for i, name in enumerate(services)}
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * width + 3), max(2.0, 0.55 * len(nodes) + 1.4)))
    for row, n in enumerate(nodes):
        y = len(nodes) - 1 - row
        if n.spare:
            ax.add_patch(Rectangle((0, y + 0.1), n.gpus, 0.8, facecolor="none", edgecolor="grey", hatch="//",
                                   gid=f"node-{n.node}"))
            ax.text(n.gpus / 2, y + 0.5, "spare (kept free)", ha="center", va="center", fontsize=8, color="dimgrey",
                    bbox=LABEL_BOX)
            continue
        runs: list[list] = []  # [label, first GPU, count]
        for g, used in enumerate(n.used_by):
            if runs and runs[-1][0] == used and runs[-1][1] + runs[-1][2] == g:
                runs[-1][2] += 1
            else:
                runs.append([used, g, 1])
        for label, first, count in runs:
            service = label.rsplit("/", 1)[0] if label else ""
            ax.add_patch(Rectangle((first + 0.05, y + 0.1), count - 0.1, 0.8, gid=f"node-{n.node}-{first}",
                                   facecolor=colour.get(service, "white"), edgecolor="grey", alpha=0.85))
            text = f"{service} #{label.rsplit('/', 1)[1]}" if label else "idle"
            ax.text(first + count / 2, y + 0.5, text, ha="center", va="center", fontsize=8,
                    color="black" if label else "grey", bbox=LABEL_BOX if label else None)
    ax.set_xlim(0, width)
    ax.set_ylim(0, max(1, len(nodes)))
    ax.set_xticks([g + 0.5 for g in range(width)], [str(g) for g in range(width)])
    ax.set_yticks([len(nodes) - 1 - i + 0.5 for i in range(len(nodes))], [n.node for n in nodes])
    ax.set_xlabel("GPU index on the node")
    ax.tick_params(length=0)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if services:
        ax.legend(handles=[Patch(facecolor=colour[s], alpha=0.85, label=s) for s in services], title="service",
                  loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(f"{r.review or 'capacity review'}: node map ({r.variant})")
    fig.tight_layout()
    _save(fig, path)


NUMERIC_AXES = {"context_length": ("context length (tokens)", True), "concurrency": ("concurrent requests", True)}


def axis_chart(points: list[dict], varying: list[str], results: list[FleetResult], path: str, title: str) -> None:
    """A command-line sweep: lines against the numeric axis when context length or concurrency
    varies (one line per value of the other axes), bars per chip when only categories vary.
    Points where nothing fits are marked and labelled with why."""
    from pricing.units import tokens_label

    hours = defaults.value("report.hours_per_month")
    if "requests_per_second" in varying:
        rate_chart(points, results, path, title)
        return
    numeric = [a for a in ("context_length", "concurrency") if a in varying]
    if not numeric:
        others = [a for a in varying if a != "chip"]
        groups, seen = [], {}
        for p in points:
            key = " ".join(str(p[a]) for a in others) or p["model"]
            if key not in seen:
                seen[key] = len(groups)
                groups.append(key)
        chips = list(dict.fromkeys(p["chip"] for p in points))
        gpus: dict[str, list[int | None]] = {chip: [0] * len(groups) for chip in chips}
        money: dict[str, list[float | None]] = {chip: [0.0] * len(groups) for chip in chips}
        missed = {}
        for p, r in zip(points, results, strict=True):
            g = seen[" ".join(str(p[a]) for a in others) or p["model"]]
            if r.feasible:
                gpus[p["chip"]][g] = r.gpus
                money[p["chip"]][g] = round(r.cost_per_hour * hours)
            else:
                gpus[p["chip"]][g] = money[p["chip"]][g] = None
                missed[p["chip"], g] = shortfall_label(r, by_service=False)
        # one chip: a miss is its whole group, a placeholder across it; several: a stub in the chip's place
        infeasible = {g: text for (_, g), text in missed.items()} if len(chips) == 1 else {}
        why = {} if len(chips) == 1 else {key: text.replace("\n", ": ") for key, text in missed.items()}
        bar_chart(groups, infeasible, gpus, money, path, title,
                  " · ".join(a.replace("_", " ") for a in others) or "model", why)
        return
    x_axis = numeric[0]
    rest = [a for a in varying if a != x_axis]
    series: dict[str, list[tuple[float, float | None, float | None, str]]] = {}
    for p, r in zip(points, results, strict=True):
        label = " · ".join(str(p[a]) for a in rest) or p["chip"]
        x = p[x_axis] or 0
        series.setdefault(label, []).append(
            (x, r.gpus if r.feasible else None, round(r.cost_per_hour * hours) if r.feasible else None,
             "" if r.feasible else shortfall_label(r, by_service=False)))
    x_label, log_x = NUMERIC_AXES[x_axis]
    fmt = tokens_label if x_axis == "context_length" else (lambda v: f"{v:,}")
    line_chart({k: sorted(v) for k, v in series.items()}, path, x_label, title, log_x=log_x, x_format=fmt)


def _pareto_panel(ax, points: list, colour: str, label: str, marker: str = "o", below: bool = False) -> None:
    """$/M output tokens against p99 TPOT: every pool simulated (faint), the front as a step line,
    the chosen pool as a star."""
    if not points:
        return
    ax.scatter([p.p99_tpot_ms for p in points], [p.cost_per_million_output_tokens for p in points], s=14,
               color=colour, alpha=0.25, marker=marker, linewidths=0)
    front = sorted((p for p in points if p.front), key=lambda p: p.p99_tpot_ms)
    ax.step([p.p99_tpot_ms for p in front], [p.cost_per_million_output_tokens for p in front], where="post",
            color=colour, marker=marker, markersize=5, label=label, gid=f"front-{label}")
    for p in points:
        if p.chosen:
            ax.scatter([p.p99_tpot_ms], [p.cost_per_million_output_tokens], marker="*", s=260, color=colour,
                       edgecolors="black", linewidths=0.8, zorder=5, gid=f"chosen-{label}")
            ax.annotate(f"chosen: {p.replicas} × {p.chip} {p.split}", (p.p99_tpot_ms, p.cost_per_million_output_tokens),
                        xytext=(8, -16 if below else 8), textcoords="offset points", fontsize=8, bbox=LABEL_BOX,
                        zorder=6)


def _cost_per_token_axis(ax) -> None:
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"${v:,.2f}"))
    ax.set_ylim(bottom=0)
    ax.set_ylabel("$ per million output tokens")
    ax.grid(alpha=0.3)


def pareto_chart(serving, path: str, title: str) -> None:
    """One plan's Pareto front: $/M output tokens against p99 TPOT over every pool the sizing
    simulated that meets the other targets, the chosen pool marked."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    _pareto_panel(ax, serving.pareto, "C0", "cheapest pool for each p99 TPOT")
    for t in serving.targets:
        if "p99 TPOT" in t:
            bound = float(t.split("≤")[1].replace("ms", "").replace(",", ""))
            ax.axvline(bound, color="dimgrey", linestyle=":", label=f"target: {t}")
    ax.set_xlabel("p99 TPOT (ms), simulated")
    _cost_per_token_axis(ax)
    ax.set_ylim(0, ax.dataLim.y1 * (1 + 2 * HEADROOM_ABOVE_THE_HIGHEST))
    ax.legend(loc="upper right", fontsize=8)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    _save(fig, path)


def rate_chart(points: list[dict], results: list[FleetResult], path: str, title: str) -> None:
    """A sweep over the request rate: $/M output tokens against the rate (one line per value of
    the other axes, the chosen pool at each rate), and each rate's Pareto front of $/M output
    tokens against p99 TPOT with its chosen pool marked."""
    plt = _pyplot()
    fig, (ax_rate, ax_front) = plt.subplots(1, 2, figsize=(12, 4.8))
    series: dict[str, list] = {}
    for p, r in zip(points, results, strict=True):
        label = p["chip"] if len({q["chip"] for q in points}) > 1 else p["model"]
        pool = r.services[0] if r.feasible and r.services else None
        series.setdefault(label, []).append((p["requests_per_second"], pool))
    for k, (label, pts) in enumerate(sorted(series.items())):
        pts.sort(key=lambda t: t[0])
        xs = [x for x, pool in pts if pool is not None and pool.cost_per_million_output_tokens is not None]
        ys = [pool.cost_per_million_output_tokens for _, pool in pts
              if pool is not None and pool.cost_per_million_output_tokens is not None]
        ax_rate.plot(xs, ys, marker=MARKERS[k % len(MARKERS)], color=f"C{k}", label=label, gid=f"rate-{label}")
        for x, pool in pts:
            if pool is None:
                ax_rate.plot([x], [INFEASIBLE_MARK_HEIGHT], marker="x", color=f"C{k}", markersize=12,
                             transform=_on_the_floor(ax_rate), clip_on=False)
            else:
                ax_rate.annotate(f"{pool.replicas} × {pool.chip} tp {pool.tensor_parallel_size}",
                                 (x, pool.cost_per_million_output_tokens), xytext=(0, 8 if k % 2 == 0 else -16),
                                 textcoords="offset points", ha="center", fontsize=7, color=f"C{k}")
    rates = sorted({p["requests_per_second"] for p in points})
    labels = sorted(series)
    for j, rate in enumerate(rates):  # a colour per rate, a marker per line of the left panel
        for p, r in zip(points, results, strict=True):
            if p["requests_per_second"] == rate and r.feasible and r.services and r.services[0].serving:
                k = labels.index(p["chip"] if len({q["chip"] for q in points}) > 1 else p["model"])
                _pareto_panel(ax_front, r.services[0].serving.pareto, f"C{j + len(series)}",
                              f"{rate:g} requests/s" + (f" on {labels[k]}" if len(series) > 1 else ""),
                              MARKERS[k % len(MARKERS)], below=k % 2 == 1)
    ax_rate.set_xlabel("requests per second")
    ax_rate.set_xticks(rates, [f"{x:g}" for x in rates])
    _cost_per_token_axis(ax_rate)
    ax_rate.legend(loc="upper right", fontsize=8)
    ax_front.set_xlabel("p99 TPOT (ms), simulated")
    _cost_per_token_axis(ax_front)
    for ax in (ax_rate, ax_front):  # room above the highest point for its label
        ax.set_ylim(0, ax.dataLim.y1 * (1 + 2 * HEADROOM_ABOVE_THE_HIGHEST))
    ax_front.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    ax_rate.set_title("cost per token against the rate (the chosen pool at each)", fontsize=9)
    ax_front.set_title("cost per token against a p99 TPOT target (★ chosen)", fontsize=9)
    fig.suptitle(title)
    fig.tight_layout()
    _save(fig, path)


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
