"""A Prometheus range export (the JSON `GET /api/v1/query_range` returns) of a vLLM fleet's metrics,
binned into intervals.

The series, as vLLM 0.33 names them (vllm/v1/metrics/loggers.py PrometheusStatLogger):
- `vllm:request_success_total` (a counter, one series per finished_reason and engine): the rate;
- `vllm:request_prompt_tokens` and `vllm:request_generation_tokens` (histograms of each finished
  request's prompt and generated tokens): their `_sum` over their `_count` give each interval's
  mean lengths; without them, the token counters `vllm:prompt_tokens_total` and
  `vllm:generation_tokens_total` over the requests finished do, and the source says so. Their
  `_bucket` series (label le: build_1_2_5_buckets, 1, 2, 5, 10, ... tokens) give the window's length
  histograms (`_buckets`), which the schedule draws every interval's requests from beside its means.

A counter's increase between two samples is their difference, or the later value where the counter
fell (a restart reset it), as Prometheus' own `increase()` counts it; the series of one name are
summed. An increase belongs to the interval that holds the span between its two samples (the
interval its later sample ends: a sample on a boundary closes the interval before it); the window
starts at the first sample, so intervals are `interval_minutes` from it, the last one as long as the samples
reach."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

from planner.numbers import plural
from planner.request import LengthHistogram, LengthsSpec
from planner.traffic.intervals import Interval, Traffic
from planner.traffic.lengths import points
from planner.traffic.trace import iso
from pricing.errors import InputError
from pricing.files import read_text

REQUESTS = "vllm:request_success_total"
PROMPT = "vllm:request_prompt_tokens"
GENERATION = "vllm:request_generation_tokens"
TOKEN_COUNTERS = ("vllm:prompt_tokens_total", "vllm:generation_tokens_total")


def _increases(path: Path, index: int, values) -> dict[float, float]:
    """One counter series' increase at each sample after the first (resets counted as Prometheus does)."""
    out: dict[float, float] = {}
    before = None
    for j, pair in enumerate(values):
        where = f"{path}: data.result[{index}].values[{j}]"
        if not isinstance(pair, list) or len(pair) != 2:
            raise InputError(where, "is not a [time, \"value\"] pair", "give the query_range export unchanged")
        try:
            t, v = float(pair[0]), float(pair[1])
        except (TypeError, ValueError):
            raise InputError(where, f"{pair!r} is not a [time, \"value\"] pair of numbers",
                             "give the query_range export unchanged") from None
        if not (math.isfinite(t) and math.isfinite(v)) or v < 0:
            raise InputError(where, f"{pair[1]} is no counter's value", "export counters (never negative)")
        if before is not None:
            if t <= before[0]:
                raise InputError(where, f"time {pair[0]} is not after the sample before it",
                                 "give the query_range export unchanged (samples in time order)")
            out[t] = v - before[1] if v >= before[1] else v
        before = (t, v)
    return out


def read_export(path: Path, interval_minutes: int = 60, **policy) -> Traffic:
    """The export at `path` binned into `interval_minutes` intervals (`policy`: Traffic's
    min_replicas, lead_minutes, scale_down_minutes)."""
    from planner.limits import MAX_INTERVALS
    from pricing.registry import shipped

    path = Path(path)
    text = read_text(path, str(path), shipped().value("input_limits.file_bytes"), "Prometheus query_range JSON")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(str(path), f"not JSON at line {err.lineno}, column {err.colno}: {err.msg}",
                         "give the query_range export unchanged") from None
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or doc.get("status") != "success" or not isinstance(data, dict):
        raise InputError(f"{path}: status", "is not a successful query_range answer",
                         'give the JSON of /api/v1/query_range ({"status": "success", "data": ...})')
    if data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        raise InputError(f"{path}: data.resultType", f"{data.get('resultType')!r} is not a range (matrix)",
                         "export a range query (/api/v1/query_range), not an instant query")
    series: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    times: set[float] = set()
    for i, result in enumerate(data["result"]):
        metric = result.get("metric") if isinstance(result, dict) else None
        if not isinstance(metric, dict) or not isinstance(result.get("values"), list):
            raise InputError(f"{path}: data.result[{i}]", "has no metric and values",
                             "give the query_range export unchanged")
        name = metric.get("__name__")
        if not isinstance(name, str):
            raise InputError(f"{path}: data.result[{i}].metric.__name__", "missing",
                             "export the raw series (no rate() or sum() around them, which drop the name)")
        for j, pair in enumerate(result["values"][:1]):
            try:
                times.add(float(pair[0]))
            except (TypeError, ValueError, IndexError):
                raise InputError(f"{path}: data.result[{i}].values[{j}]", "is not a [time, \"value\"] pair",
                                 "give the query_range export unchanged") from None
        if name in (f"{PROMPT}_bucket", f"{GENERATION}_bucket"):  # one series per bucket bound: kept apart
            name = f"{name}{{le={metric.get('le')}}}"
        for t, rise in _increases(path, i, result["values"]).items():
            series[name][t] += rise
            times.add(t)
    if REQUESTS not in series:
        raise InputError(f"{path}: data.result", f"holds no {REQUESTS} series with two samples or more",
                         f"export {REQUESTS} over the window")
    histograms = all(f"{h}_{p}" in series for h in (PROMPT, GENERATION) for p in ("sum", "count"))
    if histograms:
        lengths = ((f"{PROMPT}_sum", f"{PROMPT}_count"), (f"{GENERATION}_sum", f"{GENERATION}_count"))
        said = "prompt and generation token histograms"
    elif all(c in series for c in TOKEN_COUNTERS):
        lengths = ((TOKEN_COUNTERS[0], REQUESTS), (TOKEN_COUNTERS[1], REQUESTS))
        said = "token counters over the requests finished"
    else:
        raise InputError(f"{path}: data.result", f"holds neither {PROMPT}/{GENERATION} (_sum, _count) nor "
                         f"{' and '.join(TOKEN_COUNTERS)}", "export the lengths' series with the request counter")
    start = min(times)
    end = max(times)
    bin_seconds = interval_minutes * 60
    count = max(1, math.ceil((end - start) / bin_seconds))
    most = MAX_INTERVALS
    if count > most:
        raise InputError(f"{path}: data.result", f"the samples span {count:,} intervals of "
                         f"{plural(interval_minutes, 'minute')}; at most {most:,}",
                         "export a shorter window or give a longer interval_minutes")
    sums = defaultdict(lambda: [0.0] * count)
    for name in {REQUESTS, *(n for pair in lengths for n in pair)}:
        for t, rise in series[name].items():
            sums[name][min(count - 1, max(0, math.ceil((t - start) / bin_seconds) - 1))] += rise  # over (t - step, t]
    total = sum(sums[REQUESTS])
    if total <= 0:
        raise InputError(f"{path}: {REQUESTS}", "did not rise over the window: no request finished",
                         "export a window in which the fleet served requests")

    def mean(k: int | None, pair: tuple[str, str]) -> int:
        num, den = pair
        n, d = (sums[num][k], sums[den][k]) if k is not None else (sum(sums[num]), sum(sums[den]))
        return max(1, math.ceil(n / d)) if d > 0 else mean(None, pair) if k is not None else 1

    intervals = []
    for k in range(count):
        seconds = min(bin_seconds, end - start - k * bin_seconds)
        intervals.append(Interval(start_minute=k * interval_minutes, minutes=max(1, round(seconds / 60)),
                                  requests_per_second=sums[REQUESTS][k] / seconds,
                                  isl=mean(k, lengths[0]), osl=mean(k, lengths[1])))
    source = f"prometheus {path.name} ({round(total):,} requests; lengths from the {said})"
    drawn = None
    if histograms and all(any(n.startswith(f"{h}_bucket{{") for n in series) for h in (PROMPT, GENERATION)):
        prompt, output = _buckets(series, PROMPT), _buckets(series, GENERATION)
        if prompt is not None and output is not None:
            drawn = LengthsSpec(prompt=prompt, output=output, source=f"{source}: the _bucket histograms")
    return Traffic(intervals=intervals, source=source, lengths=drawn, window_start=iso(start), **policy)


def _buckets(series: dict, name: str) -> LengthHistogram | None:
    """The window's `name` histogram from its cumulative `_bucket` increases: each bucket's requests
    (le_(j-1), le_j] placed at one point, at the same fraction f of every bucket's range [le_(j-1) + 1,
    le_j], f fitted (within [0, 1]) so that the histogram's mean is the measured `_sum` / `_count`; the
    +Inf bucket's at its least, le + 1 (its top is not known). None: no bucket rose."""
    cumulative: dict[float, float] = defaultdict(float)
    for key, rises in series.items():
        if key.startswith(f"{name}_bucket{{le="):
            cumulative[float(key[len(name) + 11:-1])] += sum(rises.values())  # float('+Inf') is inf
    ranges, before = [], 0.0
    for le in sorted(cumulative):
        low = math.floor(before) + 1
        high = math.floor(le) if math.isfinite(le) else low
        count = cumulative[le] - (cumulative[before] if before else 0.0)
        if count > 0 and high >= low:
            ranges.append((low, high, count))
        before = le
    total = sum(c for _, _, c in ranges)
    if not total > 0:
        return None
    measured = sum(series[f"{name}_sum"].values()) / max(1.0, sum(series[f"{name}_count"].values()))
    least = sum(lo * c for lo, _, c in ranges) / total
    most = sum(hi * c for _, hi, c in ranges) / total
    f = min(1.0, max(0.0, (measured - least) / (most - least))) if most > least else 0.0
    return points([(round(lo + f * (hi - lo)), c) for lo, hi, c in ranges])

