"""A capacity review: a scenario under its base and every variant, side by side, with the
change against the base (`plan compare`), and the renderings a review pastes in: a terminal
table, JSON, Markdown and a chart."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from pydantic import BaseModel

from planner import defaults
from planner.report.binds import inventory_binds
from planner.report.fleet import FleetResult, plan_scenario
from planner.report.result import price_footnotes, solver_phrase, star
from planner.scenario import Scenario


class Comparison(BaseModel):
    review: str
    base: FleetResult
    variants: list[FleetResult]

    @property
    def results(self) -> list[FleetResult]:
        return [self.base] + self.variants


def compare(scenario: Scenario, names: list[str] | None = None,
            progress: Callable[[int, int, str], None] | None = None, time_limit: float | None = None) -> Comparison:
    """The scenario as written, then under each variant (in file order, or `names`); `time_limit`
    bounds each solve (planner/search/fleet.py `plan_scenario`)."""
    names = list(scenario.variants) if names is None else names
    total = 1 + len(names)
    if progress:
        progress(0, total, "base")
    base = plan_scenario(scenario, "base", time_limit)
    out = []
    for i, name in enumerate(names, start=1):
        if progress:
            progress(i, total, name)
        out.append(plan_scenario(scenario.apply(name), name, time_limit))
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
    how = "; each service solved on its own (the inventory couples none)" if r.decomposed and len(r.services) > 1 \
        else ""
    return f"{solver_phrase(r.solver_status)}, {r.candidates_evaluated:,} candidates in {r.seconds:.2f} s{how}"


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
            lines += ["", search_line(r), ""]
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
        lines += [search_line(r), ""]
    return "\n".join(lines) + "\n"


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


def chart(c: Comparison, path: str) -> None:
    """A scenario's variants are categories: grouped bars of GPUs and $/month per chip."""
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


NUMERIC_AXES = {"context_length": ("context length (tokens)", True), "concurrency": ("concurrent requests", True)}


def axis_chart(points: list[dict], varying: list[str], results: list[FleetResult], path: str, title: str) -> None:
    """A command-line sweep: lines against the numeric axis when context length or concurrency
    varies (one line per value of the other axes), bars per chip when only categories vary.
    Points where nothing fits are marked and labelled with why."""
    from pricing.units import tokens_label

    hours = defaults.value("report.hours_per_month")
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
