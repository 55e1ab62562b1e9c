"""Numeric options with their range: every number a command takes is checked as click parses it,
before any work, and a value outside its range (or not finite) is one `InputError` line naming
the flag and the fix (exit status 2). `tests/test_bad_input.py` feeds every such option of every
command values outside its range; an `int` or `float` option without a `Bounded` type fails it."""

from __future__ import annotations

import math

import click

from pricing.errors import InputError


def flag_of(param: click.Parameter | None) -> str:
    """The flag as the user reads it: the first long form (`--tensor-parallel-size`)."""
    if param is None:
        return "value"
    longs = [o for o in getattr(param, "opts", []) if o.startswith("--")]
    return longs[0] if longs else (param.opts[0] if getattr(param, "opts", None) else str(param.name))


class Bounded(click.ParamType):
    """A finite int or float within [low, high] (either end open or absent)."""

    def __init__(self, kind: type, low: float | None = None, high: float | None = None, *, low_open: bool = False,
                 high_open: bool = False, fix: str = ""):
        self.kind, self.low, self.high, self.low_open, self.high_open, self.fix = (
            kind, low, high, low_open, high_open, fix)
        self.name = "integer" if kind is int else "number"

    def describe(self) -> str:
        """The range in words: 'at least 1', 'in (0, 1]', 'at most 100'."""
        low, high = _shown(self.low), _shown(self.high)
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.low_open else '['}{low}, {high}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f"{'above' if self.low_open else 'at least'} {low}"
        if self.high is not None:
            return f"{'below' if self.high_open else 'at most'} {high}"
        return "finite"

    def inside(self, v: float) -> bool:
        if self.low is not None and (v <= self.low if self.low_open else v < self.low):
            return False
        return not (self.high is not None and (v >= self.high if self.high_open else v > self.high))

    def convert(self, value, param, ctx):
        flag = flag_of(param)
        fix = self.fix or f"give {'a whole number' if self.kind is int else 'a number'} {self.describe()}"
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            v = value
        else:
            text = str(value).strip()
            try:
                v = int(text) if self.kind is int else float(text)
            except ValueError:
                what = "a whole number" if self.kind is int else "a number"
                raise InputError(flag, f"{value!r} is not {what}", fix) from None
        if self.kind is float and not math.isfinite(v):
            raise InputError(flag, f"must be finite, got {value}", fix)
        if not self.inside(v):
            raise InputError(flag, f"must be {self.describe()}, got {_shown(v)}", fix)
        return self.kind(v)

    def __repr__(self) -> str:
        return f"Bounded({self.kind.__name__}, {self.describe()})"


def _shown(v: float | None) -> str:
    """A bound or a value as the message prints it: 1,000,000 and 0.92, never 1e+06."""
    if v is None:
        return ""
    if float(v).is_integer() and abs(v) < 1e15:
        return f"{int(v):,}"
    return f"{v:g}"


def at_least(n: int, fix: str = "", high: int | None = None) -> Bounded:
    """A whole number ≥ n (and ≤ high)."""
    return Bounded(int, n, high, fix=fix)


def positive(fix: str = "", high: float | None = None) -> Bounded:
    """A number > 0 (and ≤ high)."""
    return Bounded(float, 0, high, low_open=True, fix=fix)


def fraction(fix: str = "for example 0.92") -> Bounded:
    """A number in (0, 1], as vLLM's gpu_memory_utilization."""
    return Bounded(float, 0, 1, low_open=True, fix=fix)


def percent(fix: str = "", high: float | None = None, high_open: bool = False) -> Bounded:
    """A percentage ≥ 0 (below or at `high`)."""
    return Bounded(float, 0, high, high_open=high_open, fix=fix)


AXES = ("model", "quantization", "concurrency", "context_length", "requests_per_second", "vllm_version", "chip")


def check_sweep(ctx: click.Context) -> None:
    """`plan compare`'s sweep (every combination of the values its axes are given) within the points a
    scenario grid may have (planner/defaults.yaml limits.max_grid_points), counted before any is built."""
    from planner.limits import MAX_GRID_POINTS

    axes = {p.name: p for p in ctx.command.params if p.name in AXES and getattr(p, "multiple", False)}
    if "model" not in axes:  # not a sweep: `plan` chooses among its chips
        return
    sizes = {name: len(dict.fromkeys(ctx.params.get(name) or ())) for name in axes}
    points = math.prod(max(1, n) for n in sizes.values())
    if points > MAX_GRID_POINTS:
        widest = max(sizes, key=sizes.get)
        raise InputError(flag_of(axes[widest]), f"the sweep has {points:,} points "
                         f"({' x '.join(f'{n:,}' for n in sizes.values() if n > 1)}); at most {MAX_GRID_POINTS:,}",
                         "split the sweep into several runs (planner/defaults.yaml limits.max_grid_points)")


class Price(click.ParamType):
    """`--price 3.1` (every chip) or `--price h200=3.1` (one chip, by id or alias): a finite price
    within the solver's range and a known chip, refused as `--price` itself (the text is kept as typed)."""

    name = "price"

    def convert(self, value, param, ctx):
        from planner.limits import MAX_PRICE
        from pricing.chips import get_chip

        flag, text = flag_of(param), str(value)
        key, _, number = text.rpartition("=")
        fix = f"give 3.1, or h200=3.1, in USD per GPU-hour, from 0 to {_shown(MAX_PRICE)}"
        try:
            price = float(number)
        except ValueError:
            raise InputError(flag, f"{text!r} is not a price", fix) from None
        if not math.isfinite(price) or not 0 <= price <= MAX_PRICE:
            raise InputError(flag, f"{number.strip()} is not a price from 0 to {_shown(MAX_PRICE)} USD per GPU-hour",
                             fix)
        if key:
            try:
                get_chip(key)
            except InputError as err:
                raise InputError(flag, f"{key}: {err.problem}", err.fix) from None
        return text
