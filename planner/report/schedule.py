"""A service's autoscaled schedule for people: the static peak pool against the schedule (GPU-hours
and cost per day), the policy with where each figure comes from, and the replicas over the window,
consecutive intervals that run alike on one row; the ramps at risk named."""

from __future__ import annotations

from datetime import datetime, timedelta

from rich import box
from rich.console import Console

from planner.numbers import count, duration, given, money, number, percent, plural
from planner.report.tables import Col, print_table
from planner.traffic.schedule import IntervalPlan, ServiceSchedule

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
COLUMNS = [Col("from", "name"), Col("to", "name"), Col("req/s"), Col("isl/osl", drop=3), Col("need", drop=2),
           Col("replicas"), Col("GPUs"), Col("p99 TTFT", drop=1), Col("p99 TPOT", drop=1), Col("ramp", "name")]


def clock(s: ServiceSchedule, minute: int) -> str:
    """A minute of the window as a time: a profile's 'HH:MM' (a week's 'Mon HH:MM'), a trace's or an
    export's UTC time of day (with the date when the window spans days)."""
    window = sum(i.interval.minutes for i in s.intervals)
    if s.window_start is None:
        if minute == window:  # the window's end: the last day's 24:00
            return f"{DAYS[(minute - 1) // 1440 % 7]} 24:00" if window > 1440 else "24:00"
        day, rest = divmod(minute, 1440)
        text = f"{rest // 60:02d}:{rest % 60:02d}"
        return f"{DAYS[day % 7]} {text}" if window > 1440 else text
    at = datetime.fromisoformat(s.window_start.replace("Z", "+00:00")) + timedelta(minutes=minute)
    return at.strftime("%m-%d %H:%M" if window > 1440 else "%H:%M")


def runs(s: ServiceSchedule) -> list[list[IntervalPlan]]:
    """Consecutive intervals that run the same replicas, need the same and are alike at risk."""
    out: list[list[IntervalPlan]] = []
    for i in s.intervals:
        last = out[-1][-1] if out else None
        if last is not None and (last.replicas, last.needed, last.at_risk) == (i.replicas, i.needed, i.at_risk):
            out[-1].append(i)
        else:
            out.append([i])
    return out


def _span(values: list[float], show) -> str:
    lo, hi = min(values), max(values)
    return show(lo) if lo == hi else f"{show(lo)}–{show(hi)}"


def _ms(values: list[float | None]) -> str:
    known = [v for v in values if v is not None]
    return duration(max(known)) if known else "-"


def rows(s: ServiceSchedule) -> list[list[str]]:
    out = []
    for run in runs(s):
        first, last = run[0].interval, run[-1].interval
        out.append([clock(s, first.start_minute), clock(s, last.start_minute + last.minutes),
                    _span([r.interval.requests_per_second for r in run], lambda v: number(v, 1)),
                    _span([r.interval.isl for r in run], count) + "/" + _span([r.interval.osl for r in run], count),
                    count(run[0].needed), count(run[0].replicas), count(run[0].gpus),
                    _ms([r.p99_ttft_ms for r in run]), _ms([r.p99_tpot_ms for r in run]),
                    "at risk" if run[0].at_risk else ""])
    return out


def summary_lines(s: ServiceSchedule) -> list[str]:
    """What the schedule saves and the policy it is held to, each figure with where it comes from."""
    shape = s.shape
    saved = 1 - s.cost_autoscaled_per_day / s.cost_static_per_day if s.cost_static_per_day else 0.0
    risky = [i for i in s.intervals if i.at_risk]
    lines = [
        f"traffic: {s.source}; {shape.split} on {shape.chip} ({plural(shape.gpus_per_replica, 'GPU')} a replica, "
        f"{money(shape.price_per_gpu_hour, shape.price_estimate)}/GPU-hour); one replica serves "
        f"{given(s.per_replica_rate)} requests/s within the targets at the busiest interval's lengths (simulated, "
        "tails included)",
        f"static peak pool: {plural(s.static_replicas, 'replica')} all day, {number(s.gpu_hours_static, 1)} "
        f"GPU-hours, {money(s.cost_static_per_day, shape.price_estimate)}/day",
        f"autoscaled: {number(s.gpu_hours_autoscaled, 1)} GPU-hours, "
        f"{money(s.cost_autoscaled_per_day, shape.price_estimate)}/day ({percent(saved)} less)",
        f"policy: at least {plural(s.min_replicas, 'replica')}; replicas start {number(s.lead_minutes, 1)} min "
        f"ahead ({s.lead_source}); kept {number(s.scale_down_minutes, 1)} min after the need falls",
    ]
    if risky:
        lines.append(f"at risk during a ramp: {len(risky)} interval{'s' if len(risky) > 1 else ''} ("
                     + ", ".join(clock(s, i.interval.start_minute) for i in risky[:6])
                     + (", …" if len(risky) > 6 else "") + "): the schedule starts their replicas "
                     f"{number(s.lead_minutes, 1)} min ahead; an autoscaler that reacts to load starts them late")
    return lines


def title(s: ServiceSchedule) -> str:
    return f"{s.service} — schedule"


def render_schedule(s: ServiceSchedule, console: Console) -> None:
    print_table(console, title(s), COLUMNS, rows(s), box=box.SIMPLE_HEAD)
    for line in summary_lines(s):
        console.print(f"{s.service}: {line}", soft_wrap=True, markup=False, highlight=False)


def markdown_lines(s: ServiceSchedule) -> list[str]:
    """The schedule as a Markdown section a review pastes in: the table, then the summary."""
    lines = [f"#### {s.service} — autoscaled schedule", "",
             "| " + " | ".join(c.header for c in COLUMNS) + " |",
             "|" + "|".join("---:" if c.align == "right" else "---" for c in COLUMNS) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "/") or " " for cell in row) + " |" for row in rows(s)]
    return [*lines, "", *(f"- {line}" for line in summary_lines(s)), ""]
