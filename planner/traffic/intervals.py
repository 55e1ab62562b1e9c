"""The day (or week, or a trace's window) as bins: what every traffic form resolves to, and what
the schedule and the fleet's time dimension consume."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from planner.request import LengthsSpec


class Interval(BaseModel):
    """One bin of the window: its arrivals' mean rate and mean lengths."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    start_minute: int = Field(ge=0, description="minutes from the window's start")
    minutes: int = Field(ge=1, description="the bin's length in minutes")
    requests_per_second: float = Field(ge=0, description="mean arrival rate in the bin")
    isl: int = Field(ge=1, description="mean input (prompt) tokens of the bin's requests, rounded up")
    osl: int = Field(ge=1, description="mean output tokens of the bin's requests, rounded up")

    @property
    def requests(self) -> float:
        """Requests arriving in the bin (rate × its seconds)."""
        return self.requests_per_second * self.minutes * 60


class Traffic(BaseModel):
    """A service's arrivals over a window, as consecutive bins, with where they came from and the
    autoscaling policy its schedule is held to."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    intervals: list[Interval] = Field(min_length=1)
    source: str = Field(description="the form it came from, e.g. 'hourly profile', 'trace FILE (100,000 requests)'")
    min_replicas: int = Field(1, ge=0, description="replicas kept at every interval, however quiet")
    lead_minutes: float | None = Field(None, ge=0, description="scale-up lead time (model load and warm-up); "
                                       "None: from the weights' bytes per rank over the storage bandwidth "
                                       "(planner/defaults.yaml traffic.storage_bytes_per_second)")
    scale_down_minutes: float | None = Field(None, ge=0, description="replicas are kept this long after the need "
                                             "falls; None: planner/defaults.yaml traffic.scale_down_seconds")
    longest_request: int | None = Field(None, ge=1, description="input + output tokens of the longest request "
                                        "(a trace's); None: the intervals' mean lengths are all that is known")
    lengths: LengthsSpec | None = Field(None, description="the window's prompt and output length histograms (a "
                                        "trace's, an export's): every interval is simulated drawing from them; "
                                        "None: at each interval's mean lengths")
    window_start: str | None = Field(None, description="the window's first minute, ISO-8601 UTC (a trace's or an "
                                     "export's); None: a profile's midnight (Monday's, weekly)")
    cyclic: bool = Field(False, description="the window repeats (a day or week profile): its end ramps into its start")

    @property
    def window_minutes(self) -> int:
        return sum(i.minutes for i in self.intervals)

    @property
    def peak(self) -> Interval:
        """The busiest interval: the most tokens a second (rate × (isl + osl)), then the highest
        rate, the earliest of equals. The static plan is sized at it."""
        return max(self.intervals, key=lambda i: (i.requests_per_second * (i.isl + i.osl), i.requests_per_second))
