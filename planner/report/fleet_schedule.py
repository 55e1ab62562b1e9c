"""A scenario's fleet over the day for people (planner/app/fleet_schedule.py FleetOverTheDay): the
shape each service keeps all day, its replicas' range and its own peak, then the GPUs the inventory
needs at its busiest interval against the sum of the services' own peaks, the cost per day of both,
and what the solver proved."""

from __future__ import annotations

from rich import box
from rich.console import Console

from planner.numbers import count, money, percent, plural
from planner.report.tables import Col, print_table

TITLE = "fleet over the day — one shape a service all day, replicas by interval, one inventory"
COLUMNS = [Col("service", "name"), Col("a replica (tp,pp,dp)", "name"), Col("chip", "name"),
           Col("replicas", "name"), Col("own peak GPUs"), Col("$/day"), Col("$/day own peak all day", drop=1),
           Col("shape", "name", drop=2)]


def _clock(minute: int) -> str:
    day, rest = divmod(minute, 1440)
    text = f"{rest // 60:02d}:{rest % 60:02d}"
    return f"day {day + 1} {text}" if day else text


def rows(over) -> list[list[str]]:
    return [[s.service, f"{s.gpus_per_replica} GPU{'s' if s.gpus_per_replica > 1 else ''} "
             f"({s.tensor_parallel_size},{s.pipeline_parallel_size},{s.data_parallel_size})", s.chip,
             f"{min(s.replicas)}–{max(s.replicas)}" if min(s.replicas) != max(s.replicas) else count(s.replicas[0]),
             count(s.peak_gpus), money(s.cost_per_day, cents=False), money(s.cost_static_per_day, cents=False),
             ("static plan's" if s.same_as_static else "cheaper over the day") + ("" if s.autoscaled else ", flat")]
            for s in over.services]


def summary_lines(over) -> list[str]:
    """The peak of the sum against the sum of peaks, the cost per day of both, the solver's proof."""
    if over.peak_gpus is None:
        return [f"no fleet over the day fits the inventory at every interval (solver {over.solver_status})"]
    saving = over.sum_of_service_peaks - over.peak_gpus
    share = saving / over.sum_of_service_peaks if over.sum_of_service_peaks else 0.0
    stages = ", ".join(f"{st.stage} {st.status}" for st in over.solver_stages)
    saved = 1 - over.cost_autoscaled_per_day / over.cost_static_per_day if over.cost_static_per_day else 0.0
    return [f"peak of the sum: {plural(over.peak_gpus, 'GPU')} at the busiest interval (from "
            f"{_clock(over.busiest_start_minute)}) against {count(over.sum_of_service_peaks)}, the sum of the "
            f"services' own peaks: {count(saving)} fewer ({percent(share)})",
            f"cost: {money(over.cost_autoscaled_per_day)}/day over the day against "
            f"{money(over.cost_static_per_day)}/day for every service's own peak pool all day ({percent(saved)} less)",
            f"solver {over.solver_status} ({stages}); each service's shape chosen among its "
            f"{'/'.join(str(s.shapes_considered) for s in over.services)} cheapest at the peak "
            "(planner/defaults.yaml time_fleet.shapes_per_service)"] + _inventory_line(over)


def _inventory_line(over) -> list[str]:
    """When the services' own peaks would not fit the inventory together but the fleet over the day does."""
    chips = {s.chip for s in over.services}
    stock = {c: g for c, g in over.inventory.items() if c in chips}
    if not stock or len(chips) > 1 or over.sum_of_service_peaks <= sum(stock.values()):
        return []
    held = ", ".join(f"{c} {count(g)}" for c, g in stock.items())
    return [f"the inventory ({held}) holds the fleet at every interval, though the services' own peaks "
            f"({count(over.sum_of_service_peaks)} GPUs) would not fit it together"]


def render_over_the_day(over, console: Console) -> None:
    print_table(console, TITLE, COLUMNS, rows(over), box=box.SIMPLE_HEAD)
    for line in summary_lines(over) + over.notes:
        console.print(f"fleet: {line}", soft_wrap=True, markup=False, highlight=False)
