"""A CSV trace of arrivals (`timestamp`, `input_tokens`, `output_tokens`: the columns gateway logs
and `vllm bench serve` datasets export), binned into intervals.

Read as a stream (the csv module, one row at a time). A timestamp is epoch seconds (an integer or a
decimal) or ISO-8601 (one without an offset is UTC). The window starts at the first arrival's
interval boundary (epoch time floored to `interval_minutes`) and ends with the last arrival's
interval; each interval's rate is its arrivals over its length, its lengths their means rounded up
(an interval without arrivals: rate 0 at the whole trace's mean lengths). The window's prompt and
output lengths are also tallied into histograms (planner/traffic/lengths.py), which the schedule
draws every interval's requests from; its longest request is the longest prompt and the longest
output together (the histograms draw them independently). Rows are numbered as a spreadsheet
shows them: the header is row 1."""

from __future__ import annotations

import csv
import math
import os
import stat
from datetime import UTC, datetime
from pathlib import Path

from planner.numbers import plural
from planner.traffic.intervals import Interval, Traffic
from planner.traffic.lengths import Tally, of
from pricing.errors import InputError

COLUMNS = ("timestamp", "input_tokens", "output_tokens")


def _where(path: Path, row: int | None = None, column: str | None = None) -> str:
    return str(path) + (f", row {row}" if row is not None else "") + (f", column {column}" if column else "")


LATEST_EPOCH_SECONDS = 1e11  # the year 5138: a larger number is epoch milliseconds or microseconds, not seconds


class Milliseconds(ValueError):
    """A number too large for epoch seconds."""


def parse_timestamp(text: str) -> float:
    """Epoch seconds of `text`: a number of seconds, or ISO-8601 (UTC when it carries no offset)."""
    try:
        value = float(text)
    except ValueError:
        when = datetime.fromisoformat(text.strip())  # ValueError: the caller names the cell
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return when.timestamp()
    if not math.isfinite(value):
        raise ValueError(text)
    if abs(value) > LATEST_EPOCH_SECONDS:
        raise Milliseconds(text)
    return value


def _length(text: str) -> int:
    value = int(text.strip())  # ValueError for '1.5', 'abc'
    if value < 0:
        raise ArithmeticError(text)
    return value


def read_trace(path: Path, interval_minutes: int = 60, **policy) -> Traffic:
    """The trace at `path` binned into `interval_minutes` intervals (`policy`: Traffic's min_replicas,
    lead_minutes, scale_down_minutes)."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        raise InputError(str(path), f"cannot read the trace: {err.strerror}", "give a CSV file") from None
    if not stat.S_ISREG(mode):
        raise InputError(str(path), "is not a regular file", "give a CSV file")
    from planner.limits import MAX_INTERVALS

    bin_seconds = interval_minutes * 60
    most = MAX_INTERVALS
    counts: list[int] = []
    prompt: list[int] = []
    output: list[int] = []
    start = last = None
    prompts, outputs = Tally(), Tally()
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:  # a spreadsheet's byte-order mark is no header
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                raise InputError(str(path), "is empty: the window holds no request",
                                 f"give a header ({', '.join(COLUMNS)}) and one row per request")
            names = [h.strip().lower() for h in header]
            missing = [c for c in COLUMNS if c not in names]
            if missing:
                raise InputError(_where(path, 1, missing[0]), "missing from the header",
                                 f"the header must name {', '.join(COLUMNS)}; it names {', '.join(header)}")
            at = [names.index(c) for c in COLUMNS]
            width = max(at) + 1
            for row, cells in enumerate(reader, start=2):
                if not cells:
                    continue  # a blank line
                if len(cells) < width:
                    column = COLUMNS[next(i for i, a in enumerate(at) if a >= len(cells))]
                    raise InputError(_where(path, row, column), "the row has no such cell",
                                     f"give {', '.join(COLUMNS)} on every row")
                try:
                    t = parse_timestamp(cells[at[0]])
                except Milliseconds:
                    raise InputError(_where(path, row, "timestamp"), f"{cells[at[0]]} is too large for epoch seconds "
                                     "(milliseconds?)", "give epoch seconds (divide milliseconds by 1,000) or "
                                     "ISO-8601") from None
                except ValueError:
                    raise InputError(_where(path, row, "timestamp"), f"{cells[at[0]]!r} is not a time",
                                     "give epoch seconds or ISO-8601, e.g. 2026-03-02T14:00:00Z") from None
                if last is not None and t < last:
                    raise InputError(_where(path, row, "timestamp"), f"{cells[at[0]]} is earlier than the row "
                                     "before it", "sort the trace by timestamp")
                lengths = []
                for column, i in zip(COLUMNS[1:], at[1:], strict=True):
                    try:
                        lengths.append(_length(cells[i]))
                    except ValueError:
                        raise InputError(_where(path, row, column), f"{cells[i]!r} is not a whole number of "
                                         "tokens", "give token counts as integers") from None
                    except ArithmeticError:
                        raise InputError(_where(path, row, column), f"{cells[i]} tokens is negative",
                                         "give token counts of 0 or more") from None
                if start is None:
                    start = math.floor(t / bin_seconds) * bin_seconds
                k = int((t - start) // bin_seconds)
                if k >= most:
                    raise InputError(_where(path, row, "timestamp"), f"{cells[at[0]]} is {k + 1:,} intervals of "
                                     f"{plural(interval_minutes, 'minute')} after the trace's start; at most {most:,}",
                                     "give a shorter window or a longer interval_minutes")
                while len(counts) <= k:
                    counts.append(0)
                    prompt.append(0)
                    output.append(0)
                prompts.add(lengths[0])
                outputs.add(lengths[1])
                counts[k] += 1
                prompt[k] += lengths[0]
                output[k] += lengths[1]
                last = t
    except UnicodeDecodeError as err:
        raise InputError(str(path), f"is not UTF-8 text (byte {err.start}: {err.reason})",
                         "save the trace as UTF-8 CSV") from None
    except csv.Error as err:
        raise InputError(str(path), f"is not CSV: {err}", "save the trace as CSV") from None
    except OSError as err:
        raise InputError(str(path), f"cannot read the trace: {err.strerror}", "give a CSV file") from None
    total = sum(counts)
    if not total:
        raise InputError(str(path), "the window holds no request: the file has a header and no rows",
                         "give one row per request")
    mean_isl = max(1, math.ceil(sum(prompt) / total))
    mean_osl = max(1, math.ceil(sum(output) / total))
    intervals = [Interval(start_minute=k * interval_minutes, minutes=interval_minutes,
                          requests_per_second=n / bin_seconds,
                          isl=max(1, math.ceil(prompt[k] / n)) if n else mean_isl,
                          osl=max(1, math.ceil(output[k] / n)) if n else mean_osl)
                 for k, n in enumerate(counts)]
    source = f"trace {path.name} ({total:,} requests)"
    return Traffic(intervals=intervals, source=source, lengths=of(prompts, outputs, f"{source}: its lengths"),
                   longest_request=prompts.longest + outputs.longest, window_start=iso(start), **policy)


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")
