"""A scenario service's `traffic:` block: exactly one form (an hourly or weekly profile, a CSV trace,
a Prometheus range export), the bin length for the file forms, and the autoscaling policy."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from planner.limits import MAX_RATE
from planner.traffic.intervals import Traffic
from planner.traffic.profile import HOURS
from pricing.errors import InputError

FORMS = ("hourly_requests_per_second", "weekly_requests_per_second", "trace", "prometheus")


class TrafficSpec(BaseModel):
    """How a service's arrivals vary over the day: give exactly one of `hourly_requests_per_second`
    (24 numbers), `weekly_requests_per_second` (168, Monday 00:00 first), `trace` (a CSV of
    timestamp, input_tokens, output_tokens) or `prometheus` (a query_range JSON export of vLLM's
    metrics). File paths are read relative to the scenario file."""

    model_config = ConfigDict(extra="forbid")

    hourly_requests_per_second: list[float] | None = Field(None, description="requests/s for each hour of a day, "
                                                           "00:00 first (24 numbers)")
    weekly_requests_per_second: list[float] | None = Field(None, description="requests/s for each hour of a week, "
                                                           "Monday 00:00 first (168 numbers)")
    trace: str | None = Field(None, description="a CSV of arrivals: timestamp (epoch seconds or ISO-8601), "
                              "input_tokens, output_tokens")
    prometheus: str | None = Field(None, description="a Prometheus query_range JSON export of vLLM's "
                                   "request_success_total and its prompt/generation token histograms")
    interval_minutes: int | None = Field(None, ge=1, le=1440, description="bin length of a trace or export "
                                         "(default 60); profiles are hourly")
    scale: float = Field(1.0, gt=0, description="every interval's rate × this (a what-if: 1.5 for 50 % more "
                         "traffic; a variant's growth multiplies it)")
    min_replicas: int = Field(1, ge=0, description="replicas kept however quiet the interval")
    lead_minutes: float | None = Field(None, ge=0, description="scale-up lead time: model load and warm-up "
                                       "(default: the weights' bytes per rank over the storage bandwidth)")
    scale_down_minutes: float | None = Field(None, ge=0, description="how long replicas are kept after the need "
                                             "falls (default: the HorizontalPodAutoscaler's 300 s window)")

    @field_validator("hourly_requests_per_second", "weekly_requests_per_second")
    @classmethod
    def _rates(cls, v, info):
        if v is None:
            return v
        want = HOURS[info.field_name.split("_", 1)[0]]
        if len(v) != want:
            raise ValueError(f"give {want} rates, one per hour; got {len(v)}")
        bad = [i for i, r in enumerate(v) if not 0 <= r <= MAX_RATE]
        if bad:
            raise ValueError(f"hour {bad[0]}: {v[bad[0]]} requests/s is not within 0 to {MAX_RATE:g}")
        if not any(v):
            raise ValueError("every hour is 0 requests/s; give the rate of at least one hour")
        return v

    @model_validator(mode="after")
    def _one_form(self):
        given = [f for f in FORMS if getattr(self, f) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of {', '.join(FORMS)}" + (f"; got {', '.join(given)}" if given
                                                                            else ""))
        if self.interval_minutes is not None and given[0] not in ("trace", "prometheus"):
            raise ValueError("interval_minutes bins a trace or a prometheus export; a profile is hourly")
        return self

    @property
    def form(self) -> str:
        return next(f for f in FORMS if getattr(self, f) is not None)

    def file_stamp(self) -> tuple | None:
        """The file's size and modification time (None: a profile, or a file that is not there), so
        that a file read once is read again when it changes."""
        path = self.trace or self.prometheus
        try:
            st = Path(path).expanduser().stat() if path is not None else None
        except OSError:
            return None
        return (st.st_size, st.st_mtime_ns) if st is not None else None

    def resolve(self, isl: int | None, osl: int | None, folder: Path | None = None) -> Traffic:
        """The intervals this block describes (a profile at the workload's `isl`/`osl`; a file read
        from `folder`, the scenario file's, when relative)."""
        traffic = self._read(isl, osl, folder)
        if self.scale == 1:
            return traffic
        scaled = [i.model_copy(update={"requests_per_second": i.requests_per_second * self.scale})
                  for i in traffic.intervals]
        top = max(i.requests_per_second for i in scaled)
        if top > MAX_RATE:
            raise InputError("scale", f"{self.scale:g} × the busiest interval is {top:,.6g} requests/s, above the "
                             f"{MAX_RATE:,g} the planner sizes", "give a smaller scale or growth")
        return traffic.model_copy(update={"intervals": scaled,
                                          "source": f"{traffic.source}, rates × {self.scale:g}"})

    def _read(self, isl: int | None, osl: int | None, folder: Path | None) -> Traffic:
        policy = {"min_replicas": self.min_replicas, "lead_minutes": self.lead_minutes,
                  "scale_down_minutes": self.scale_down_minutes}
        minutes = self.interval_minutes or 60
        if self.trace is not None:
            from planner.traffic.trace import read_trace

            return read_trace(_local(self.trace, folder), minutes, **policy)
        if self.prometheus is not None:
            from planner.traffic.prometheus import read_export

            return read_export(_local(self.prometheus, folder), minutes, **policy)
        from planner.traffic.profile import profile_intervals

        if isl is None or osl is None:
            raise InputError("workload", "a rate profile needs the requests' lengths",
                             "give the service workload {isl, osl}")
        rates = self.hourly_requests_per_second or self.weekly_requests_per_second
        word = "hourly" if self.hourly_requests_per_second else "weekly"
        return Traffic(intervals=profile_intervals(rates, isl, osl), source=f"{word} profile", cyclic=True, **policy)


def _local(path: str, folder: Path | None) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() or folder is None else folder / p
