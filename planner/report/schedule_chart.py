"""The chart of a review's autoscaled schedules (`plan scenario --chart`, beside the review's own as
`-schedule`): per service with traffic, the arrival rate over the window with the replicas running
(and the fewest needed, and the static peak pool) beside it, the ramps at risk shaded; and the cost
per day of the static pool against the schedule's. Drawn with planner/report/charts.py's helpers
and rules; steps, since each interval's rate and replicas are one value over the interval."""

from __future__ import annotations

from pathlib import Path

from planner.numbers import money, number
from planner.report import charts
from planner.report.words import price_footnotes
from planner.traffic.schedule import ServiceSchedule


def schedule_chart_path(path: str) -> str:
    """Where a review draws its schedules: beside the chart, `-schedule` before the suffix."""
    p = Path(path)
    return str(p.with_name(f"{p.stem}-schedule{p.suffix}"))


def review_charts(c, path: str, named=None) -> list[tuple[str, str]]:
    """Every chart of a review (planner/report/charts.py `chart`) and, when the base schedules
    services, their schedules; all written, or none."""
    with charts.Batch() as batch:
        written = charts._review_charts(c, path, named, batch)
        if c.base.feasible and c.base.schedules:
            there = schedule_chart_path(path)
            names = {s.service for s in c.base.schedules}
            notes = price_footnotes([p for p in c.base.services if p.service in names], named)
            schedule_chart(c.base.schedules, there, c.base.review or "scenario", notes, batch)
            written.append((there, f"rate, replicas and $/day over the window of {len(c.base.schedules)} "
                                   f"service{'s' if len(c.base.schedules) > 1 else ''} with traffic"))
        if c.base.feasible and c.base.over_the_day and c.base.over_the_day.peak_gpus is not None:
            from planner.report.fleet_chart import fleet_written

            written.append(fleet_written(c.base, path, batch))
        return written


def _hours(s: ServiceSchedule) -> tuple[list[float], float]:
    """Each interval's start and the window's end, in hours from the window's start."""
    starts = [i.interval.start_minute / 60 for i in s.intervals]
    last = s.intervals[-1].interval
    return starts, (last.start_minute + last.minutes) / 60


def schedule_chart(schedules: list[ServiceSchedule], path: str, review: str, notes: list[str] | None = None,
                   into=None) -> None:
    """One row per service: rate (left axis) and replicas (right axis) over the window as steps,
    the static peak pool a dashed line, ramps at risk shaded (SVG ids `rate-<service>`,
    `replicas-<service>`, `needed-<service>`, `static-<service>`, `risk-<service>`); beside it the
    cost per day, static against autoscaled (`cost-<service>`); `notes` under it (the estimated
    prices' footnotes)."""
    plt = charts._pyplot()
    rows = len(schedules)
    fig, axes = plt.subplots(rows, 2, squeeze=False, dpi=charts.DPI, figsize=(11, 3.4 * rows),
                             gridspec_kw={"width_ratios": [3, 1]})
    labels = []
    for (ax_rate, ax_cost), s in zip(axes, schedules, strict=True):
        starts, end = _hours(s)
        xs = [*starts, end]
        rates = [i.interval.requests_per_second for i in s.intervals]
        ax_rate.step(xs, [*rates, rates[-1]], where="post", color="C0", linewidth=1.5, label="requests/s",
                     gid=f"rate-{s.service}")
        ax_rate.set_ylabel("requests/s", color="C0")
        ax_rate.set_xlabel("hours from the window's start" if s.window_start else "hour of the day"
                           if end <= 24 else "hour of the week")
        charts._from_zero(ax_rate)
        ax_rate.grid(alpha=0.3)
        ax_reps = ax_rate.twinx()
        running, needed = [i.replicas for i in s.intervals], [i.needed for i in s.intervals]
        ax_reps.step(xs, [*running, running[-1]], where="post", color="C1", linewidth=2, label="replicas running",
                     gid=f"replicas-{s.service}")
        ax_reps.step(xs, [*needed, needed[-1]], where="post", color="C1", linewidth=1, linestyle=":",
                     label="replicas needed", gid=f"needed-{s.service}")
        ax_reps.axhline(s.static_replicas, color="C3", linestyle="--", linewidth=1, label="static peak pool",
                        gid=f"static-{s.service}")
        for i, a in zip(s.intervals, starts, strict=True):
            if i.at_risk:
                ax_reps.fill_between([a, a + i.interval.minutes / 60], 0, 1, color="C3", alpha=0.12, linewidth=0,
                                     transform=ax_reps.get_xaxis_transform(), gid=f"risk-{s.service}")
        charts._integer_axis(ax_reps)
        ax_reps.set_ylim(0, s.static_replicas * (1 + charts.HEADROOM_ABOVE_THE_HIGHEST) + 0.5)
        ax_reps.set_ylabel(f"replicas ({s.shape.gpus_per_replica} GPU{'s' if s.shape.gpus_per_replica > 1 else ''}"
                           f" each)", color="C1")
        ax_rate.set_xlim(0, end)
        ticks = 6 if end <= 24 else 24
        ax_rate.set_xticks([h for h in range(0, int(end) + 1, ticks if end > 24 else 3)])
        from matplotlib.patches import Patch

        handles = [*ax_rate.get_legend_handles_labels()[0], *ax_reps.get_legend_handles_labels()[0]]
        if any(i.at_risk for i in s.intervals):
            handles.append(Patch(color="C3", alpha=0.12, label="ramp at risk"))
        ax_rate.legend(handles=handles, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2),
                       ncol=len(handles), frameon=False)  # under the axes: clear of every step
        ax_rate.set_title(f"{s.service}: {s.shape.split} on {s.shape.chip}, one replica serves up to "
                          f"{number(s.per_replica_rate, 1)} requests/s within the targets", fontsize=9)
        costs = [s.cost_static_per_day, s.cost_autoscaled_per_day]
        ax_cost.bar([0, 1], costs, color=["C3", "C1"], gid=f"cost-{s.service}")
        ax_cost.set_xticks([0, 1], ["static", "autoscaled"])
        charts._money_axis(ax_cost)
        charts._from_zero(ax_cost)
        ax_cost.set_title("$ per day", fontsize=9)
        ax_cost.grid(alpha=0.3, axis="y")
        for x, (usd, hours) in enumerate(zip(costs, [s.gpu_hours_static, s.gpu_hours_autoscaled], strict=True)):
            labels.append(charts.value_label(ax_cost, f"{money(usd, s.shape.price_estimate, cents=False)}\n"
                                                      f"{number(hours, 0)} GPU-h", x, usd))
    charts.title(fig, f"{review}: traffic over the window, the replicas that serve it, and what each costs a day")
    charts._finish(fig, path, labels, notes, into=into)
