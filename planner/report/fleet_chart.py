"""The chart of a fleet over the day (`plan scenario --chart`, beside the review's own as `-fleet`):
the GPUs each service takes interval by interval, stacked, whose top is the fleet's GPUs; the peak
of the sum (the busiest interval's GPUs, what the inventory needs) against the sum of the services'
own peaks (what pools sized each for its own peak take), and the inventory; beside it the cost per
day of the fleet over the day against every service's own peak pool held all day. Drawn with
planner/report/charts.py's helpers and rules; steps, since each interval holds one value."""

from __future__ import annotations

from pathlib import Path

from planner.numbers import money, plural
from planner.report import charts


def fleet_chart_path(path: str) -> str:
    """Where a review draws its fleet over the day: beside the chart, `-fleet` before the suffix."""
    p = Path(path)
    return str(p.with_name(f"{p.stem}-fleet{p.suffix}"))


def fleet_chart(over, path: str, review: str, inventory: int | None = None, into=None) -> None:
    """The fleet over the day (planner/app/fleet_schedule.py FleetOverTheDay) as the module's
    docstring draws it (SVG ids `gpus-<service>`, `peak-of-sum`, `sum-of-peaks`, `inventory`,
    `cost-over-the-day`, `cost-static`); `inventory`: the GPUs it holds, when counted."""
    plt = charts._pyplot()
    fig, (ax, ax_cost) = plt.subplots(1, 2, dpi=charts.DPI, figsize=(12, 4.2), gridspec_kw={"width_ratios": [3, 1]})
    end = (over.timeline[-1].start_minute + over.timeline[-1].minutes) / 60
    xs = [t.start_minute / 60 for t in over.timeline] + [end]
    below = [0] * len(over.timeline)
    for k, s in enumerate(over.services):
        top = [b + g for b, g in zip(below, s.gpus, strict=True)]
        ax.fill_between(xs, [*below, below[-1]], [*top, top[-1]], step="post", color=f"C{k}", alpha=0.55,
                        linewidth=0, label=f"{s.service} ({s.gpus_per_replica} × {s.chip} a replica)",
                        gid=f"gpus-{s.service}")
        below = top
    labels = []
    at = over.busiest_start_minute
    ax.axhline(over.peak_gpus, color="black", linewidth=1.5, gid="peak-of-sum",
               label=f"peak of the sum: {over.peak_gpus} (from {at // 60:02d}:{at % 60:02d})")
    ax.axhline(over.sum_of_service_peaks, color="C3", linestyle="--", linewidth=1.5, gid="sum-of-peaks",
               label=f"sum of the services' own peaks: {over.sum_of_service_peaks}")
    if inventory is not None:
        ax.axhline(inventory, color="grey", linestyle=":", linewidth=1, label=f"inventory: {inventory}",
                   gid="inventory")
    charts._integer_axis(ax)
    charts._from_zero(ax, max(over.sum_of_service_peaks, inventory or 0))
    ax.set_xlim(0, end)
    ax.set_xticks(list(range(0, int(end) + 1, 3 if end <= 24 else 24)))
    ax.set_xlabel("hour of the day" if end <= 24 else "hours from the window's start")
    ax.set_ylabel("GPUs")
    ax.grid(alpha=0.3)
    charts._legend(ax)
    saving = over.sum_of_service_peaks - over.peak_gpus
    ax.set_title(f"the fleet needs {plural(over.peak_gpus, 'GPU')} at its busiest interval, {saving} fewer than "
                 f"the sum of its services' peaks", fontsize=9)
    costs = [over.cost_static_per_day, over.cost_autoscaled_per_day]
    ax_cost.bar([0, 1], costs, color=["C3", "black"], gid="cost-static")
    ax_cost.patches[1].set_gid("cost-over-the-day")
    ax_cost.set_xticks([0, 1], ["own peaks\nall day", "over the day"])
    charts._money_axis(ax_cost)
    charts._from_zero(ax_cost)
    ax_cost.set_title("$ per day", fontsize=9)
    ax_cost.grid(alpha=0.3, axis="y")
    for x, usd in enumerate(costs):
        labels.append(charts.value_label(ax_cost, money(usd, cents=False), x, usd))
    charts.title(fig, f"{review}: the fleet over the day, the peak of the sum against the sum of peaks")
    charts._finish(fig, path, labels, into=into)


def fleet_written(r, path: str, batch) -> tuple[str, str]:
    """A scenario result's fleet over the day drawn beside `path` in `batch`; the file and what it shows."""
    over = r.over_the_day
    stock = [c.available for c in r.chips if c.available is not None and any(s.chip == c.chip for s in over.services)]
    there = fleet_chart_path(path)
    fleet_chart(over, there, r.review or "scenario", sum(stock) if stock else None, batch)
    return there, (f"GPUs over the day of {plural(len(over.services), 'service')}: peak of the sum "
                   f"{over.peak_gpus} against a sum of peaks of {over.sum_of_service_peaks}")
