"""A rate profile: requests per second for each hour of a day (24 numbers) or of a week (168,
Monday 00:00 first), every hour at the service's workload lengths (isl, osl)."""

from __future__ import annotations

from planner.traffic.intervals import Interval

HOURS = {"hourly": 24, "weekly": 168}


def profile_intervals(rates: list[float], isl: int, osl: int) -> list[Interval]:
    """One 60-minute interval per rate, in order, each at the workload's lengths."""
    return [Interval(start_minute=60 * h, minutes=60, requests_per_second=float(r), isl=isl, osl=osl)
            for h, r in enumerate(rates)]
