"""The charts a review puts in a deck (.png or .svg), drawn for `plan --chart`, `plan compare
--chart` and `plan scenario --chart`. Every chart keeps to the same rules:

- a short title (what is compared), a subtitle per panel (what is drawn);
- the figures in the text's style (planner/numbers.py), `*` beside an estimated price and
  the estimate's footnote under the figure, as the tables print it (result.py `price_footnotes`);
- a point nothing serves is an ✕ on the axis with why, never a bar;
- markers where only the points were computed, a step line only where a step is the truth (the
  Pareto front: the cheapest pool for each TPOT target);
- no two labels overlapping (`place_labels` moves a value label clear of every other text);
- the file written whole or not at all (`save`)."""

from __future__ import annotations

import math
import re
import textwrap
from pathlib import Path

from planner.app.review import Comparison
from planner.numbers import count, duration, given, money, per_million_tokens
from planner.report.review import delta
from planner.report.words import no_plan_cell, price_footnotes
from planner.scenario import point_word

DPI = 144  # the PNG's resolution; labels are placed at it, so what is checked is what is written
LABEL_BOX = {"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none"}  # readable over grid lines
LEADER = {"arrowstyle": "-", "color": "grey", "lw": 0.6, "shrinkA": 0, "shrinkB": 3}  # a moved label to its point
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
HEADROOM_ABOVE_THE_HIGHEST = 0.12  # the y axis runs to the highest point and this fraction more
INFEASIBLE_MARK_HEIGHT = 0.04  # an infeasible point's ✕, as a fraction of the axes' height: clear of the tick labels
LABEL_GAP_PX = 2  # the least room between two texts
SHORTFALL_LINE = 28  # characters of a line of why a variant is infeasible, under its ✕
MARK_RADIUS_PT = 7  # a labelled point's mark: no label covers it
DATA_MARK_PT = 3  # the room kept around each data point and along each data line: no label covers it
AXIS_RAISES = 4  # times an axis' top rises by a fifth to keep its labels inside, at most (then they stand above it)
WIDEST_INCHES = 14.0  # a figure wider than this puts its panels one above the other (a 16:9 slide at 144 dpi)
TITLE_CHARACTERS_PER_INCH = 10  # a title wraps at the figure's width (12-point text: about 10 characters an inch)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure(width: float, height: float, panels: int = 1, columns: int | None = None):
    """A figure of `panels` (each `width` × `height` inches) side by side, or one above the other
    when side by side would be wider than a slide; with `columns`, rows of that many panels (the
    last row's unused places left empty); at the resolution it is written at."""
    plt = _pyplot()
    if columns is not None:
        rows = math.ceil(panels / columns)
        fig, axes = plt.subplots(rows, columns, squeeze=False, dpi=DPI, figsize=(columns * width + 1.5, rows * height))
        for ax in list(axes.flat)[panels:]:
            ax.remove()
        return fig, list(axes.flat)[:panels]
    across = panels * width + 1.5 <= WIDEST_INCHES
    fig, axes = plt.subplots(1 if across else panels, panels if across else 1, squeeze=False, dpi=DPI,
                             figsize=(panels * width + 1.5, height) if across else (width + 1.5, panels * height))
    return fig, list(axes.flat)


CHART_FIELD = "chart_path"  # the option every --chart is stored under: a system error names it


class Batch:
    """Charts written together (planner/report/atomic.py Files): each into a temporary file beside
    its target, all renamed into place when the block ends, or, on an error or a signal in any,
    none (every target stays as it was and no temporary file is left)."""

    def __init__(self):
        from planner.report.atomic import Files

        self.files = Files(CHART_FIELD)

    def save(self, fig, path: str) -> None:
        try:
            self.files.add(path, _drawing(fig, path))
        finally:
            _pyplot().close(fig)

    def __enter__(self) -> Batch:
        self.files.__enter__()
        return self

    def __exit__(self, kind, error, trace) -> None:
        self.files.__exit__(kind, error, trace)


def save(fig, path: str) -> None:
    """Write the figure whole or not at all: into a temporary file beside `path`, then renamed over
    it (an error half-way leaves no file and the old one as it was; a `Batch` renames its charts
    together). The tight bounding box takes in legends, footnotes and long labels."""
    with Batch() as batch:
        batch.save(fig, path)


def _drawing(fig, path: str):
    """What writes the figure into a stream, in the format `path`'s suffix names."""
    def draw(out) -> None:
        fig.savefig(out, format=Path(path).suffix.lower().lstrip("."), bbox_inches="tight", pad_inches=0.2, dpi=DPI)

    return draw


def texts(fig) -> list:
    """Every text a reader sees: titles, tick and axis labels, value labels, legends, footnotes;
    those the figure draws (a tick label outside the axis' limits is kept but not drawn)."""
    from matplotlib.text import Text

    seen, draw = [], Text.draw

    def drawing(self, renderer):  # every Text.draw call of one layout pass, annotations' too
        draw(self, renderer)
        if self.get_visible() and self.get_text().strip():
            seen.append(self)

    Text.draw = drawing
    try:
        fig.draw_without_rendering()
    finally:
        Text.draw = draw
    return list(dict.fromkeys(seen))


def extent(t, renderer):
    """A text's box on the canvas in pixels: the words only (an annotation's leader line is not a text)."""
    from matplotlib.text import Annotation, Text

    if isinstance(t, Annotation):
        t.update_positions(renderer)
    return Text.get_window_extent(t, renderer)


def _framed(t, renderer):
    """A label's box with its white frame (LABEL_BOX's padding), which would hide the axes' top line."""
    from matplotlib.transforms import Bbox

    box = extent(t, renderer)
    patch = t.get_bbox_patch()
    if patch is None:
        return box
    t.update_bbox_position_size(renderer)
    return Bbox.union([box, patch.get_window_extent(renderer)])


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 + LABEL_GAP_PX and b.x0 < a.x1 + LABEL_GAP_PX and \
        a.y0 < b.y1 + LABEL_GAP_PX and b.y0 < a.y1 + LABEL_GAP_PX


def _mark(a, fig):
    """The box of the point an annotation labels (its mark, which no label may cover)."""
    from matplotlib.transforms import Bbox

    where = a.axes.transData if a.xycoords == "data" else a.xycoords
    x, y = where.transform(a.xy)
    r = MARK_RADIUS_PT * fig.dpi / 72
    return Bbox([[x - r, y - r], [x + r, y + r]])


def _data_marks(fig) -> list:
    """Small boxes over the data a label must not hide: every scattered point, and points every
    few pixels along each data series' line (a line with a gid: reference lines, such as a
    target's, have none and may be crossed)."""
    import numpy as np
    from matplotlib.collections import PathCollection
    from matplotlib.transforms import Bbox

    r = DATA_MARK_PT * fig.dpi / 72
    points = []
    for ax in fig.axes:
        for coll in ax.collections:
            if isinstance(coll, PathCollection) and len(coll.get_offsets()):
                points += list(coll.get_offset_transform().transform(coll.get_offsets()))
        for line in ax.get_lines():
            if line.get_gid() is None or len(line.get_xydata()) < 1:
                continue
            xy = line.get_transform().transform(line.get_path().vertices)
            xy = xy[np.isfinite(xy).all(axis=1)]  # a gap in a series (NaN) is no point
            for (x0, y0), (x1, y1) in zip(xy, xy[1:], strict=False):
                steps = max(1, int(np.hypot(x1 - x0, y1 - y0) / r))
                points += [(x0 + (x1 - x0) * k / steps, y0 + (y1 - y0) * k / steps) for k in range(steps + 1)]
            points += list(xy[-1:])
    return [Bbox([[x - r, y - r], [x + r, y + r]]) for x, y in points if np.isfinite(x) and np.isfinite(y)]


def place_labels(fig, labels: list) -> None:
    """Move each value label (an annotation in offset points) inside its axes' sides, then up until
    it overlaps no other text, no legend, no bar, no labelled point's mark and no data (`_data_marks`);
    where one is pushed above its axes, raise the axes' top and place them all again (at most
    AXIS_RAISES times)."""
    if not labels:
        return
    start = {id(a): a.__dict__.setdefault("home", a.xyann) for a in labels}  # where each was first put
    for _ in range(AXIS_RAISES + 1):
        for a in labels:
            a.xyann = start[id(a)]
        fig.draw_without_rendering()
        renderer = fig.canvas.get_renderer()
        mine = {id(a) for a in labels}
        placed = ([extent(t, renderer) for t in texts(fig) if id(t) not in mine] + [_mark(a, fig) for a in labels]
                  + _data_marks(fig)
                  + [ax.get_legend().get_window_extent(renderer) for ax in fig.axes if ax.get_legend() is not None]
                  + [bar.get_window_extent(renderer) for ax in fig.axes for bar in ax.patches
                     if bar.get_width() * bar.get_height() > 0])  # no label over a bar
        for a in sorted(labels, key=lambda a: extent(a, renderer).y0):
            box, frame = extent(a, renderer), a.axes.bbox
            if box.width < frame.width and (box.x1 > frame.x1 or box.x0 < frame.x0):  # within its axes' sides
                x, y = a.xyann
                inward = frame.x1 - LABEL_GAP_PX - box.x1 if box.x1 > frame.x1 else frame.x0 + LABEL_GAP_PX - box.x0
                a.xyann = (x + inward * 72 / fig.dpi, y)
                box = extent(a, renderer)
            for _ in range(200):
                hits = [b for b in placed if _overlap(box, b)]
                if not hits:
                    break
                x, y = a.xyann
                a.xyann = (x, y + (max(b.y1 for b in hits) - box.y0 + LABEL_GAP_PX + 0.5) * 72 / fig.dpi)
                box = extent(a, renderer)
            placed.append(box)
        high = {a.axes for a in labels if a.axes is not None
                and _framed(a, renderer).y1 > a.axes.bbox.y1 - LABEL_GAP_PX}
        if not high or _ == AXIS_RAISES:  # placed; or as high as the axis may rise: above it, clear of all
            for a in labels:  # a leader line only to a label moved well off its place
                if a.arrow_patch is not None:
                    a.arrow_patch.set_visible(abs(a.xyann[1] - start[id(a)][1]) > 2 * MARK_RADIUS_PT)
            return
        for ax in high:
            bottom, top = ax.get_ylim()
            ax.set_ylim(bottom, bottom + (top - bottom) * 1.2)


def fit_ticks(fig, names: dict) -> None:
    """Categories on the x axis of each axes (`names`: axes to its categories): as written when
    they fit, wrapped at their hyphens and spaces when that fits, else upright."""
    for attempt in ("as written", "wrapped", "upright"):
        for ax, words in names.items():
            if attempt == "as written":
                ax.set_xticks(range(len(words)), words)
            elif attempt == "wrapped":
                ax.set_xticks(range(len(words)), [_wrap(n) for n in words])
            else:
                ax.set_xticks(range(len(words)), words, rotation=90)
        if attempt == "upright":
            return
        fig.draw_without_rendering()
        renderer = fig.canvas.get_renderer()
        crossing = set()
        for ax in names:
            boxes = [extent(t, renderer) for t in ax.get_xticklabels() if t.get_text()]
            if any(_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:]):
                crossing.add(ax)
        names = {ax: words for ax, words in names.items() if ax in crossing}
        if not names:
            return


def _wrap(name: str, width: int = 12) -> str:
    return "\n".join(textwrap.wrap(name.replace("-", "- "), width)).replace("- ", "-") or name


def title(fig, text: str) -> None:
    """The chart's title, wrapped at the figure's width."""
    fig.suptitle(textwrap.fill(text, max(30, int(fig.get_figwidth() * TITLE_CHARACTERS_PER_INCH))))


def footnotes(fig, lines: list[str]) -> None:
    """Lines under everything drawn (the estimate's footnotes), left-aligned."""
    if not lines:
        return
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    lowest = min([extent(t, renderer).y0 for t in texts(fig)] + [ax.bbox.y0 for ax in fig.axes])
    left = min(ax.bbox.x0 for ax in fig.axes)
    fig.text(left, lowest - 6, "\n".join(lines), transform=None, ha="left", va="top", fontsize=8, color="dimgrey")


def _floor(ax):
    """Data x, axes-fraction y: a mark that stands just above the x axis whatever the y range."""
    from matplotlib.transforms import blended_transform_factory

    return blended_transform_factory(ax.transData, ax.transAxes)


def infeasible_mark(ax, x: float, text: str, colour: str, gid: str) -> object:
    """An ✕ on the axis at `x` where nothing is served, with why above it; returns the label."""
    ax.plot([x], [INFEASIBLE_MARK_HEIGHT], marker="x", linestyle="none", color=colour, markersize=11,
            markeredgewidth=2.5, clip_on=False, gid=gid, transform=_floor(ax), scalex=False, scaley=False)
    return ax.annotate(text, (x, INFEASIBLE_MARK_HEIGHT), xycoords=_floor(ax), xytext=(0, 10),
                       textcoords="offset points", ha="center", va="bottom", fontsize=8, color=colour,
                       bbox=LABEL_BOX, zorder=4, arrowprops=LEADER)


def value_label(ax, text: str, x: float, y: float, colour: str = "black", above: int = 3) -> object:
    return ax.annotate(text, (x, y), xytext=(0, above), textcoords="offset points", ha="center", va="bottom",
                       fontsize=8, color=colour, bbox=LABEL_BOX, zorder=4, arrowprops=LEADER)


def _integer_axis(ax) -> None:
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: count(v)))


def _money_axis(ax) -> None:
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: money(v, cents=False)))


def _per_token_axis(ax) -> None:
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: money(v)))
    ax.set_ylabel("$ per million output tokens")
    ax.grid(alpha=0.3)


def _from_zero(ax, top: float | None = None) -> None:
    """The y axis from zero to the highest point and some more, whatever the lowest point."""
    top = ax.dataLim.y1 if top is None else top
    top = top if math.isfinite(top) and top > 0 else 1
    ax.set_ylim(0, top * (1 + HEADROOM_ABOVE_THE_HIGHEST))


def _legend(ax, handles: list | None = None, **how) -> None:
    """The legend of what is drawn, outside the axes on the right unless `loc` says."""
    if handles is not None and not handles:
        return
    where = {} if "loc" in how else {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0)}
    ax.legend(handles=handles, fontsize=8, **where, **how)


def _finish(fig, path: str, labels: list, notes: list[str] | None = None, into: Batch | None = None) -> None:
    """Lay the figure out, place its labels (again when placing them raised an axis, whose new
    ticks the layout must make room for), add the footnotes and write it (with `into`, in that batch)."""
    for _ in range(2):
        fig.tight_layout()
        limits = [ax.get_ylim() for ax in fig.axes]
        place_labels(fig, labels)
        if limits == [ax.get_ylim() for ax in fig.axes]:
            break
    footnotes(fig, notes or [])
    (into.save if into is not None else save)(fig, path)


def shortfall_label(r, by_service: bool) -> str:
    """"infeasible" and why in a few words, a line each, for a chart (`by_service`: name the service
    short, or how many are when several are short for the same reason)."""
    if not by_service:
        return "\n".join([no_plan_cell(r), *dict.fromkeys(s.brief for s in r.short)])
    why: dict[str, list[str]] = {}
    for s in r.short:
        why.setdefault(s.brief, []).append(s.service)
    lines = [f"{who[0]}: {brief}" if len(who) == 1 else f"{len(who)} services: {brief}" for brief, who in why.items()]
    return "\n".join([no_plan_cell(r), *(textwrap.fill(line, SHORTFALL_LINE, subsequent_indent="  ")
                                          for line in lines)])


def _estimated(results, named=None) -> tuple[set[str], list[str]]:
    """The chips whose price is an estimate, and the footnotes that say so."""
    pools = [p for r in results for p in r.services]
    return {p.chip for p in pools if p.price_estimate}, price_footnotes(pools, named)


# -- a review: its variants ----------------------------------------------------------------------
def chart(c: Comparison, path: str, named=None) -> list[tuple[str, str]]:
    """Every chart of a review, each (path, what it shows): the variants (or the grid's points),
    with service targets their cost per token beside it (`-cost`), and the base's node map
    (`-nodes`); all written, or none (a field a footnote mentions named as `named` calls it)."""
    with Batch() as batch:
        return _review_charts(c, path, named, batch)


def _review_charts(c: Comparison, path: str, named, batch: Batch) -> list[tuple[str, str]]:
    hours = c.base.hours_per_month
    if c.ranking:
        grid_chart(c, path, named, batch)
        written = [(path, f"$/month ({hours} h) of {count(len(c.ranking))} grid points against each axis")]
    else:
        variants_chart(c, path, named, batch)
        written = [(path, f"GPUs and $/month ({hours} h) of the base" + (f" and {len(c.variants)} variant"
                                                                       f"{'s' if len(c.variants) > 1 else ''}"
                                                                       if c.variants else ""))]
    if any(s.serving for r in c.results for s in r.services):
        targets_chart(c, cost_path(path), named, batch)
        written.append((cost_path(path), "$/M output tokens of the services with targets"))
    if c.base.feasible and c.base.nodes:
        node_chart(c.base, node_chart_path(path), batch)
        written.append((node_chart_path(path), f"node map of {c.base.variant}"))
    return written


def cost_path(path: str) -> str:
    """Where a review with service targets draws their cost: beside the chart, `-cost` before the suffix."""
    p = Path(path)
    return str(p.with_name(f"{p.stem}-cost{p.suffix}"))


def node_chart_path(path: str) -> str:
    """The node map's file beside the chart: `review.png` -> `review-nodes.png`."""
    p = Path(path)
    return str(p.with_name(f"{p.stem}-nodes{p.suffix}"))


def variants_chart(c: Comparison, path: str, named=None, into: Batch | None = None) -> None:
    """A review's base and variants: GPUs of each chip stacked by service, with the inventory of
    the chip as a line over its bar (SVG ids `bars-<chip>-<variant index>-<service>`,
    `inventory-<chip>-<variant index>`); $/month stacked by service with its total and its change
    against the base (`cost-<variant index>-<service>`); a variant nothing serves is an ✕ with why
    (`infeasible-<variant index>`)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    hours = c.base.hours_per_month
    results = c.results
    services = list(dict.fromkeys(p.service for r in results for p in r.services))
    colour = {name: f"C{i % 10}" for i, name in enumerate(services)}
    chips = sorted({p.chip for r in results for p in r.services}  # the chips used, and those in stock unused
                   | {u.chip for r in results if r.feasible for u in r.chips if u.available})
    estimated, notes = _estimated(results, named)
    width = 0.8 / max(1, len(chips))
    fig, (ax_gpus, ax_cost) = figure(max(4.0, (1.0 + 0.4 * len(chips)) * len(results) + 0.5), 4.6, panels=2)
    labels, inventory_drawn, said = [], False, {}
    for i, r in enumerate(results):
        if not r.feasible:
            for ax in (ax_gpus, ax_cost):
                labels.append(infeasible_mark(ax, i, shortfall_label(r, by_service=len(services) > 1), "dimgrey",
                                              f"infeasible-{i}"))
            continue
        for j, chip in enumerate(chips):
            x = i - 0.4 + width * (j + 0.5)
            bottom = 0
            for p in (p for p in r.services if p.chip == chip):
                ax_gpus.bar(x, p.gpus, width * 0.92, bottom=bottom, color=colour[p.service],
                            gid=f"bars-{chip}-{i}-{p.service}")
                bottom += p.gpus
            stock = next((u.available for u in r.chips if u.chip == chip), None)
            if stock:
                ax_gpus.hlines(stock, x - width * 0.5, x + width * 0.5, colors="black", linestyles="--",
                               linewidth=1.2, gid=f"inventory-{chip}-{i}")
                inventory_drawn = True
                if bottom == stock:  # the bar reaches the line: one label says both (two would crowd one point)
                    labels.append(value_label(ax_gpus, f"{count(bottom)} {chip}, all in stock", x, bottom))
                    said[chip], bottom = stock, 0
                    continue
                if said.get(chip) != stock:  # the inventory's figure where it first appears or changes, left of
                    # its line (above it, a bar beside would push it up the axis, away from its line)
                    labels.append(ax_gpus.annotate(f"{count(stock)} {chip} in stock", (x - width * 0.5, stock),
                                                   xytext=(-3, 0), textcoords="offset points", ha="right",
                                                   va="center", fontsize=8, color="dimgrey", bbox=LABEL_BOX,
                                                   zorder=4, arrowprops=LEADER))
                said[chip] = stock
            if bottom:
                labels.append(value_label(ax_gpus, f"{count(bottom)} {chip}", x, bottom))
        bottom = 0.0
        for p in r.services:
            ax_cost.bar(i, p.cost_per_hour * hours, 0.6, bottom=bottom, color=colour[p.service],
                        gid=f"cost-{i}-{p.service}")
            bottom += p.cost_per_hour * hours
        total = money(r.cost_per_month, any(p.chip in estimated for p in r.services), cents=False)
        change = "" if r is c.base or not c.base.feasible else \
            f"\n{delta(r.cost_per_month, c.base.cost_per_month)} against base"
        labels.append(value_label(ax_cost, total + change, i, bottom))
    for ax, what in ((ax_gpus, "GPUs"), (ax_cost, f"$/month ({hours} h)")):
        ax.set_xlim(-0.6, len(results) - 0.4)
        ax.set_xlabel("variant")
        ax.set_ylabel(what)
        ax.grid(axis="y", alpha=0.3)
        _from_zero(ax)
    fit_ticks(fig, {ax_gpus: [r.variant for r in results], ax_cost: [r.variant for r in results]})
    _integer_axis(ax_gpus)
    _money_axis(ax_cost)
    ax_gpus.set_title("GPUs of each chip, by service" + (" (- - the inventory)" if inventory_drawn else ""),
                      fontsize=9)
    ax_cost.set_title("$/month by service, the total" + (" and its change against base" if c.variants else ""),
                      fontsize=9)
    handles = [Patch(color=colour[s], label=s) for s in services]
    if inventory_drawn:
        handles.append(Line2D([], [], color="black", linestyle="--", label="inventory"))
    if not all(r.feasible for r in results):
        handles.append(Line2D([], [], color="dimgrey", marker="x", linestyle="none", markeredgewidth=2.5,
                              label="infeasible (nothing drawn)"))
    _legend(ax_cost, handles, title="service")
    title(fig, c.review or "capacity review")
    _finish(fig, path, labels, notes, into)


def grid_chart(c: Comparison, path: str, named=None, into: Batch | None = None) -> None:
    """A grid: $/month of every point against each axis (one panel per axis, in rows of up to three,
    the points at each value side by side, the cheapest ringed); a value where a point is not
    served has an ✕ on the axis with how many."""
    from matplotlib.lines import Line2D

    hours = c.base.hours_per_month
    axes = list(c.grid)
    columns = len(axes) if len(axes) <= 3 else 2 if len(axes) == 4 else 3  # landscape: rows of panels, not a strip
    fig, panels = figure(min(4.2, (WIDEST_INCHES - 1.5) / columns), 4.4, panels=len(axes), columns=columns)
    labels = []
    by_name = {r.variant: r for r in c.variants}
    estimated, notes = _estimated(c.variants, named)
    for ax, axis in zip(panels, axes, strict=True):
        values = c.grid[axis]
        for i, value in enumerate(values):
            here = [g for g in c.ranking if g.values[axis] == value]
            costs = [g.cost_per_month for g in here if g.feasible]
            spread = [i + (k - (len(costs) - 1) / 2) * 0.35 / max(1, len(costs)) for k in range(len(costs))]
            ax.scatter(spread, costs, s=14, alpha=0.6, color="C0", gid=f"points-{axis}-{i}")
            missed = len(here) - len(costs)
            if missed:
                labels.append(infeasible_mark(ax, i, f"{count(missed)} infeasible", "C3", f"infeasible-{axis}-{i}"))
            if costs:
                k, best = min(enumerate(g for g in here if g.feasible), key=lambda kg: kg[1].cost_per_month)
                ax.plot([spread[k]], [best.cost_per_month], marker="o", markersize=11, markerfacecolor="none",
                        markeredgecolor="C1", markeredgewidth=2, linestyle="none", gid=f"cheapest-{axis}-{i}")
                star = any(p.chip in estimated for p in by_name[best.variant].services)
                labels.append(value_label(ax, money(best.cost_per_month, star, cents=False), spread[k],
                                          best.cost_per_month, "C1", above=8))
        ax.set_xlim(-0.6, len(values) - 0.4)
        ax.set_xlabel(axis.replace("_", " "))
        ax.set_ylabel(f"$/month ({hours} h)")
        ax.grid(alpha=0.3)
        _money_axis(ax)
        _from_zero(ax)
    fit_ticks(fig, {ax: [point_word(v, axis) for v in c.grid[axis]] for ax, axis in zip(panels, axes, strict=True)})
    _legend(panels[-1], [Line2D([], [], color="C0", marker="o", linestyle="none", alpha=0.6, label="a grid point"),
                         Line2D([], [], color="C1", marker="o", markerfacecolor="none", linestyle="none",
                                markeredgewidth=2, label="the cheapest at the value")])
    title(fig, c.review or "capacity review")
    panels[0].set_title(f"$/month of {count(len(c.ranking))} grid points against each axis", fontsize=9, loc="left")
    _finish(fig, path, labels, notes, into)


def targets_chart(c: Comparison, path: str, named=None, into: Batch | None = None) -> None:
    """The services with targets: $/M output tokens against the rate across the variants (each
    point labelled with its variant), and the base's Pareto front of $/M output tokens against p99
    TPOT for each, its chosen pool starred."""
    fig, (ax_rate, ax_front) = figure(5.5, 4.8, panels=2)
    names = list(dict.fromkeys(s.service for r in c.results for s in r.services if s.serving))
    estimated, notes = _estimated(c.results, named)
    labels = []
    for k, name in enumerate(names):
        pts = sorted((s.serving.requests_per_second, s.cost_per_million_output_tokens, r.variant)
                     for r in c.results for s in r.services if s.service == name and s.serving)
        ax_rate.plot([p[0] for p in pts], [p[1] for p in pts], marker=MARKERS[k % len(MARKERS)], color=f"C{k}",
                     linestyle="none", label=name, gid=f"rate-{name}")
        for x, y, variant in pts:
            labels.append(value_label(ax_rate, variant, x, y, f"C{k}", above=6))
        base = next((s for s in c.base.services if s.service == name and s.serving), None)
        if base is not None:
            labels += _pareto_panel(ax_front, base.serving.pareto, f"C{k}", name, MARKERS[k % len(MARKERS)],
                                    base.chip in estimated, bound=tpot_bound(base.serving))
    ax_rate.set_xlabel("requests per second")
    ax_rate.margins(x=0.15)
    for ax in (ax_rate, ax_front):
        _per_token_axis(ax)
        _from_zero(ax)
    _legend(ax_front, title="service")  # one legend for both panels, outside them
    axis = tpot_axis([p for s in c.base.services if s.serving for p in s.serving.pareto])
    ax_front.set_xlabel(f"{axis}, simulated (ms)")
    ax_rate.set_title("cost per token against the rate, by variant", fontsize=9)
    ax_front.set_title(f"the base's cost per token against a {axis} target (★ chosen, ┆ the target, ○ misses it)",
                       fontsize=9)
    title(fig, f"{c.review or 'capacity review'}: the services with targets")
    _finish(fig, path, labels, notes, into)


def node_chart(r, path: str, into: Batch | None = None) -> None:
    """The fleet's node map: one row per node of the inventory, one cell per GPU, coloured by the
    service whose instance holds it and labelled with the instance (SVG id `node-<node>`; the
    service's name where it fits the cell, else the instance's number, the colour naming the
    service); idle GPUs blank, spare nodes hatched."""
    from matplotlib.patches import Patch, Rectangle

    nodes = r.nodes
    width = max((n.gpus for n in nodes), default=1)
    services = list(dict.fromkeys(s.service for s in r.services))
    colour = {name: f"C{i % 10}" for i, name in enumerate(services)}
    fig, (ax,) = figure(max(4.5, 0.9 * width + 1.5), max(2.0, 0.55 * len(nodes) + 1.4))
    cells = []  # (text artist, the shorter text, cell width in data units)
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
        for label, first, gpus in runs:
            service = label.rsplit("/", 1)[0] if label else ""
            ax.add_patch(Rectangle((first + 0.05, y + 0.1), gpus - 0.1, 0.8, gid=f"node-{n.node}-{first}",
                                   facecolor=colour.get(service, "white"), edgecolor="grey", alpha=0.85))
            number = f"#{label.rsplit('/', 1)[1]}" if label else ""
            text = f"{service} {number}" if label else "idle"
            t = ax.text(first + gpus / 2, y + 0.5, text, ha="center", va="center", fontsize=8,
                        color="black" if label else "grey", bbox=LABEL_BOX if label else None)
            cells.append((t, number if label else "", gpus - 0.1))
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
                  loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    title(fig, f"{r.review or 'capacity review'}: node map ({r.variant})")
    fig.tight_layout()
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    per_gpu = ax.transData.transform((1, 0))[0] - ax.transData.transform((0, 0))[0]
    for t, shorter, cell in cells:  # a name wider than its cell gives way to the instance's number alone
        if extent(t, renderer).width > cell * per_gpu:
            t.set_text(shorter)
            t.set_visible(bool(shorter) and extent(t, renderer).width <= cell * per_gpu)
    (into.save if into is not None else save)(fig, path)


# -- a sweep from the command line ---------------------------------------------------------------
NUMERIC_AXES = {"context_length": ("context length (tokens)", True), "concurrency": ("concurrent requests", True)}


def axis_chart(points: list[dict], varying: list[str], results: list, path: str, title_text: str,
               named=None) -> str:
    """A command-line sweep: markers against the numeric axis when context length or concurrency
    varies (one series per value of the other axes), bars per chip when only categories vary, the
    cost per token against the rate when the rate varies. Points where nothing fits are marked
    and labelled with why. Returns what the chart shows, in words."""
    from pricing.units import tokens_label

    if "requests_per_second" in varying:
        rate_chart(points, results, path, title_text, named)
        return "$/M output tokens against the rate, and each rate's Pareto front"
    hours = results[0].hours_per_month  # as each point's fleet was priced
    estimated, notes = _estimated(results, named)
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
        cost: dict[str, list[float | None]] = {chip: [0.0] * len(groups) for chip in chips}
        why = {}
        for p, r in zip(points, results, strict=True):
            g = seen[" ".join(str(p[a]) for a in others) or p["model"]]
            if r.feasible:
                gpus[p["chip"]][g] = r.gpus
                cost[p["chip"]][g] = r.cost_per_hour * hours
            else:
                gpus[p["chip"]][g] = cost[p["chip"]][g] = None
                why[p["chip"], g] = shortfall_label(r, by_service=False)
        bar_chart(groups, gpus, cost, path, title_text, " · ".join(a.replace("_", " ") for a in others) or "model",
                  why, estimated, notes, hours=hours)
        return f"GPUs and $/month ({hours} h) by chip"
    x_axis = numeric[0]
    rest = [a for a in varying if a != x_axis]
    series: dict[str, list[tuple[float, float | None, float | None, str, bool]]] = {}
    for p, r in zip(points, results, strict=True):
        label = " · ".join(str(p[a]) for a in rest) or p["chip"]
        series.setdefault(label, []).append(
            (p[x_axis] or 0, r.gpus if r.feasible else None, r.cost_per_hour * hours if r.feasible else None,
             "" if r.feasible else shortfall_label(r, by_service=False),
             any(s.chip in estimated for s in r.services)))
    x_label, log_x = NUMERIC_AXES[x_axis]
    fmt = tokens_label if x_axis == "context_length" else count
    line_chart({k: sorted(v) for k, v in series.items()}, path, x_label, title_text, log_x=log_x, x_format=fmt,
               notes=notes, hours=hours)
    return f"GPUs and $/month ({hours} h) against the {x_label.split(' (')[0]}"


def bar_chart(groups: list[str], gpus: dict[str, list[int | None]], cost: dict[str, list[float | None]], path: str,
              title_text: str, group_label: str, why: dict[tuple[str, int], str] | None = None,
              estimated: set[str] | None = None, notes: list[str] | None = None, *, hours: int) -> None:
    """Categorical points as grouped bars, one bar per chip: GPUs (integer ticks) beside $/month,
    each with its figure (SVG ids `bars-<chip>-<group index>`, `cost-<chip>-<group index>`). A
    point not served (its value None, `why` its label) is an ✕ on the axis in the chip's place
    (`infeasible-<chip>-<group index>`), no bar; the legend names the chips with a bar."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    why, estimated = why or {}, estimated or set()
    chips = list(gpus)
    width = 0.8 / max(1, len(chips))
    fig, (ax_gpus, ax_cost) = figure(max(3.5, 0.55 * len(groups) * max(2, len(chips)) + 1.5), 4.6, panels=2)
    labels = []
    for ax, values in ((ax_gpus, gpus), (ax_cost, cost)):
        for j, chip in enumerate(chips):
            for i, v in enumerate(values[chip]):
                x = i - 0.4 + width * (j + 0.5) if len(chips) > 1 else i
                if v is None:
                    labels.append(infeasible_mark(ax, x, why.get((chip, i), "infeasible"), f"C{j}",
                                                  f"infeasible-{chip}-{i}"))
                    continue
                ax.bar(x, v, width * 0.92, color=f"C{j}", gid=f"{'bars' if ax is ax_gpus else 'cost'}-{chip}-{i}")
                text = count(v) if ax is ax_gpus else money(v, chip in estimated, cents=False)
                labels.append(value_label(ax, text, x, v))
        ax.set_xlim(-0.6, len(groups) - 0.4)
        ax.set_xlabel(group_label)
        ax.grid(axis="y", alpha=0.3)
        _from_zero(ax)
    fit_ticks(fig, {ax_gpus: groups, ax_cost: groups})
    ax_gpus.set_ylabel("GPUs")
    ax_cost.set_ylabel(f"$/month ({hours} h)")
    _integer_axis(ax_gpus)
    _money_axis(ax_cost)
    handles = [Patch(color=f"C{j}", label=chip) for j, chip in enumerate(chips)
               if any(v is not None for v in gpus[chip])]
    if any(v is None for chip in chips for v in gpus[chip]):
        handles.append(Line2D([], [], color="dimgrey", marker="x", linestyle="none", markeredgewidth=2.5,
                              label="infeasible (nothing drawn)"))
    _legend(ax_cost, handles, title="chip")
    title(fig, title_text)
    _finish(fig, path, labels, notes)


def line_chart(series: dict[str, list[tuple]], path: str, x_label: str, title_text: str, log_x: bool = False,
               x_format=None, notes: list[str] | None = None, *, hours: int) -> None:
    """GPUs and $/month against a numeric x, one series of markers per label (SVG ids `line-<label>`
    and `cost-<label>`; no line between: nothing was computed between the points), each point
    (x, GPUs, $/month, why it is not served, its price is an estimate) with its figure; a point
    where nothing fits (GPUs None) is an ✕ on the axis (`infeasible-<label>`) with why."""
    fig, (ax_gpus, ax_cost) = figure(4.8, 4.6, panels=2)
    xs_all = sorted({p[0] for pts in series.values() for p in pts})
    n = len(series)
    labels = []
    for k, (label, points) in enumerate(sorted(series.items())):
        shift = (k - (n - 1) / 2) * 0.08  # series side by side around each x, so none hides another

        def dodge(x, shift=shift):
            return x * 2 ** shift if log_x else x + shift * (xs_all[-1] - xs_all[0] or 1) * 0.1

        for ax, index in ((ax_gpus, 1), (ax_cost, 2)):
            ys = [p[index] if p[index] is not None else float("nan") for p in points]
            ax.plot([dodge(p[0]) for p in points], ys, marker=MARKERS[k % len(MARKERS)], linestyle="none",
                    color=f"C{k}", markersize=7, label=label, gid=f"line-{label}" if ax is ax_gpus else f"cost-{label}")
            for p in points:
                if p[index] is None:
                    labels.append(infeasible_mark(ax, dodge(p[0]), p[3] or "infeasible", f"C{k}",
                                                  f"infeasible-{label}"))
                else:
                    text = count(p[1]) if ax is ax_gpus else money(p[2], p[4], cents=False)
                    labels.append(value_label(ax, text, dodge(p[0]), p[index], f"C{k}", above=5))
    for ax, what in ((ax_gpus, "GPUs"), (ax_cost, f"$/month ({hours} h)")):
        if log_x:
            ax.set_xscale("log", base=2)
        ax.set_xticks(xs_all, [x_format(x) if x_format else f"{x:g}" for x in xs_all])
        ax.minorticks_off()
        ax.margins(x=0.15)
        ax.set_xlabel(x_label)
        ax.set_ylabel(what)
        ax.grid(alpha=0.3)
        _from_zero(ax)
    _integer_axis(ax_gpus)
    _money_axis(ax_cost)
    ax_gpus.set_title("GPUs at each point computed", fontsize=9)
    ax_cost.set_title(f"$/month ({hours} h) at each point computed", fontsize=9)
    _legend(ax_cost)
    title(fig, title_text)
    _finish(fig, path, labels, notes)


def _pareto_panel(ax, points: list, colour: str, label: str, marker: str = "o", estimate: bool = False,
                  words: bool = True, bound: float | None = None) -> list:
    """$/M output tokens against TPOT at the percentile the target names: every pool simulated
    (faint; hollow where it misses the TPOT target), the front within the target as a step line
    (the cheapest pool for each TPOT target), the target `bound` as a dotted line, the chosen pool
    as a star, with its figures when `words` (a panel of several fronts leaves them to the panel
    beside it); returns the label."""
    if not points:
        return []
    met = [p for p in points if p.meets_tpot]
    missed = [p for p in points if not p.meets_tpot]
    ax.scatter([p.tpot_ms for p in met], [p.cost_per_million_output_tokens for p in met], s=14,
               color=colour, alpha=0.25, marker=marker, linewidths=0)
    if missed:
        ax.scatter([p.tpot_ms for p in missed], [p.cost_per_million_output_tokens for p in missed], s=18,
                   facecolors="none", edgecolors=colour, alpha=0.6, marker=marker, linewidths=0.8,
                   gid=f"missing-{label}")
    front = sorted((p for p in met if p.front), key=lambda p: p.tpot_ms)
    ax.step([p.tpot_ms for p in front], [p.cost_per_million_output_tokens for p in front], where="post",
            color=colour, marker=marker, markersize=5, label=label, gid=f"front-{label}")
    if bound is not None:
        ax.axvline(bound, color=colour, linestyle=":", linewidth=1)  # no gid: a reference line labels may cross
    out = []
    for p in points:
        if p.chosen:
            ax.scatter([p.tpot_ms], [p.cost_per_million_output_tokens], marker="*", s=260, color=colour,
                       edgecolors="black", linewidths=0.8, zorder=5, gid=f"chosen-{label}")
            if not words:
                continue
            out.append(ax.annotate(chosen_words(p, estimate), (p.tpot_ms, p.cost_per_million_output_tokens),
                                   xytext=(10, 6), textcoords="offset points", fontsize=8, bbox=LABEL_BOX, zorder=6,
                                   color=colour, arrowprops=LEADER))
    return out


def chosen_words(p, estimate: bool) -> str:
    """The chosen pool's label: what it is and its two figures, as the plan prints them."""
    return (f"chosen: {p.replicas} × {p.chip} {p.split}\n"
            f"{per_million_tokens(p.cost_per_million_output_tokens, estimate)}/M output tokens, "
            f"p{p.tpot_percentile} TPOT {duration(p.tpot_ms)}")


def tpot_axis(points: list) -> str:
    """The x axis's TPOT: 'p90 TPOT' where every point is at one percentile (the target's), else
    'TPOT at each target's percentile'."""
    percentiles = {p.tpot_percentile for p in points}
    return f"p{percentiles.pop()} TPOT" if len(percentiles) == 1 else "TPOT at each target's percentile"


def pareto_chart(serving, path: str, title_text: str, estimated: set[str] | None = None,
                 notes: list[str] | None = None) -> str:
    """One plan's cost against its TPOT at the percentile its TPOT target names (p99 without one):
    every pool the sizing simulated that meets the other targets, one colour per chip (SVG ids
    `pools-<chip>`), hollow where it misses the TPOT target (`missing-<chip>`), the Pareto front of
    the pools that meet every target as a step line (`front-…`), the chosen pool starred with its
    figures (`chosen-…`), the TPOT target as a dotted line (labelled 'target: …')."""
    estimated = estimated or set()
    fig, (ax,) = figure(6.5, 5.0)
    axis = tpot_axis(serving.pareto) if serving.pareto else "p99 TPOT"
    chips = list(dict.fromkeys(p.chip for p in serving.pareto))
    for j, chip in enumerate(chips):
        mine = [p for p in serving.pareto if p.chip == chip and p.meets_tpot]
        ax.scatter([p.tpot_ms for p in mine], [p.cost_per_million_output_tokens for p in mine], s=22,
                   color=f"C{j}", alpha=0.45, marker=MARKERS[j % len(MARKERS)], linewidths=0, gid=f"pools-{chip}",
                   label=f"a pool on {chip}")
    missed = [p for p in serving.pareto if not p.meets_tpot]
    for j, chip in enumerate(chips):
        mine = [p for p in missed if p.chip == chip]
        if mine:
            ax.scatter([p.tpot_ms for p in mine], [p.cost_per_million_output_tokens for p in mine], s=26,
                       facecolors="none", edgecolors=f"C{j}", marker=MARKERS[j % len(MARKERS)], linewidths=1,
                       gid=f"missing-{chip}", label=f"a pool on {chip} that misses the {axis} target")
    front = sorted((p for p in serving.pareto if p.front and p.meets_tpot), key=lambda p: p.tpot_ms)
    ax.step([p.tpot_ms for p in front], [p.cost_per_million_output_tokens for p in front], where="post",
            color="black", linewidth=1.2, label=f"the cheapest pool for each {axis} within the target",
            gid="front-pareto")
    labels = []
    for p in serving.pareto:
        if p.chosen:
            j = chips.index(p.chip)
            ax.scatter([p.tpot_ms], [p.cost_per_million_output_tokens], marker="*", s=300, color=f"C{j}",
                       edgecolors="black", linewidths=0.8, zorder=5, gid=f"chosen-{p.chip}", label="the pool chosen")
            labels.append(ax.annotate(chosen_words(p, p.chip in estimated),
                                      (p.tpot_ms, p.cost_per_million_output_tokens), xytext=(12, 8),
                                      textcoords="offset points", fontsize=8, bbox=LABEL_BOX, zorder=6,
                                      arrowprops=LEADER))
    for percentile, bound in tpot_targets(serving):
        if f"p{percentile} TPOT" == axis:
            ax.axvline(bound, color="dimgrey", linestyle=":", label=f"target: {axis} ≤ {duration(bound)}")
    ax.set_xlabel(f"{axis}, simulated (ms)")
    _per_token_axis(ax)
    _from_zero(ax)
    ax.margins(x=0.08)
    _legend(ax)
    title(fig, title_text)
    ax.set_title(f"every pool simulated that meets the other targets: $/M output tokens against {axis}",
                 fontsize=9)
    _finish(fig, path, labels, notes)
    return f"$/M output tokens against {axis} of every pool simulated, the chosen one starred"


def tpot_targets(serving) -> list[tuple[int, float]]:
    """The TPOT bounds among the service targets: (percentile, ms), as the targets' words give them
    ('p90 TPOT ≤ 40 ms')."""
    out = []
    for t in serving.targets:
        m = re.match(r"p(\d+) TPOT ≤ ([\d,.]+) ms", t)
        if m:
            out.append((int(m.group(1)), float(m.group(2).replace(",", ""))))
    return out


def tpot_bound(serving) -> float | None:
    """The TPOT target at the percentile the front is drawn at (None without one)."""
    axis = {p.tpot_percentile for p in serving.pareto}
    return next((ms for percentile, ms in tpot_targets(serving) if {percentile} == axis), None)


def rate_chart(points: list[dict], results: list, path: str, title_text: str, named=None) -> None:
    """A sweep over the request rate: $/M output tokens against the rate (one series of markers per
    value of the other axes, each point labelled with the pool chosen at that rate and its $/M),
    and each rate's Pareto front of $/M output tokens against TPOT (at the percentile its target names)
    with its chosen pool starred
    (named on the left, so the fronts' panel carries no words of its own)."""
    fig, (ax_rate, ax_front) = figure(5.8, 5.0, panels=2)
    estimated, notes = _estimated(results, named)
    many_chips = len({q["chip"] for q in points}) > 1
    series: dict[str, list] = {}
    for p, r in zip(points, results, strict=True):
        label = p["chip"] if many_chips else p["model"]
        pool = r.services[0] if r.feasible and r.services else None
        series.setdefault(label, []).append((p["requests_per_second"], pool, r))
    names = sorted(series)
    labels = []
    for k, label in enumerate(names):
        pts = sorted(series[label], key=lambda t: t[0])
        shown = [(x, pool) for x, pool, _ in pts
                 if pool is not None and pool.cost_per_million_output_tokens is not None]
        ax_rate.plot([x for x, _ in shown], [pool.cost_per_million_output_tokens for _, pool in shown],
                     marker=MARKERS[k % len(MARKERS)], linestyle="none", color=f"C{k}", label=label,
                     gid=f"rate-{label}")
        for x, pool, r in pts:
            if pool is None:
                labels.append(infeasible_mark(ax_rate, x, shortfall_label(r, by_service=False),
                                              f"C{k}", f"infeasible-{label}"))
            elif pool.cost_per_million_output_tokens is not None:
                cost = per_million_tokens(pool.cost_per_million_output_tokens, pool.price_estimate)
                labels.append(value_label(ax_rate, f"{pool.replicas} × {pool.chip} tp {pool.tensor_parallel_size}\n"
                                          f"{cost}", x, pool.cost_per_million_output_tokens, f"C{k}", above=6))
    rates = sorted({p["requests_per_second"] for p in points})
    for j, rate in enumerate(rates):  # a colour per rate, a marker per series of the left panel
        for p, r in zip(points, results, strict=True):
            if p["requests_per_second"] == rate and r.feasible and r.services and r.services[0].serving:
                k = names.index(p["chip"] if many_chips else p["model"])
                labels += _pareto_panel(ax_front, r.services[0].serving.pareto, f"C{j + len(series)}",
                                        f"{given(rate)} requests/s" + (f" on {names[k]}" if len(series) > 1 else ""),
                                        MARKERS[k % len(MARKERS)], r.services[0].chip in estimated,
                                        words=len(points) == 1, bound=tpot_bound(r.services[0].serving))
    ax_rate.set_xlabel("requests per second")
    ax_rate.set_xticks(rates, [given(x) for x in rates])
    ax_rate.margins(x=0.2)
    axis = tpot_axis([q for r in results if r.feasible and r.services and r.services[0].serving
                      for q in r.services[0].serving.pareto])
    ax_front.set_xlabel(f"{axis}, simulated (ms)")
    for ax in (ax_rate, ax_front):
        _per_token_axis(ax)
        _from_zero(ax)
    left, right = (ax.get_legend_handles_labels()[0] for ax in (ax_rate, ax_front))
    _legend(ax_front, left + right, title="left: chosen pools; right: fronts")  # outside both panels
    ax_rate.set_title("cost per token against the rate (the pool chosen at each)", fontsize=9)
    ax_front.set_title(f"cost per token against a {axis} target (★ the pool chosen)", fontsize=9)
    title(fig, title_text)
    _finish(fig, path, labels, notes)
