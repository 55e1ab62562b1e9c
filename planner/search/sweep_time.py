"""--time-limit over a review's candidate sweep: the sweep is sized before it runs, in shapes, and
the limit is shared between it and the solver, both counted as work rather than wall time, so that
the same review and limit give the same answer on an idle machine and a loaded one.

A candidate table is one service's sweep on one chip (planner/candidates/table.py `candidate_table`,
shared by every service of equal `sweep_key`); its shapes (`start_table`) are what it evaluates, each
over the utilization × token-budget grid. The review's shapes over planner/defaults.yaml
`sweep.shapes_per_second` (measured on one core) are the seconds the sweep is counted as.

- When they leave the solver at least `sweep.solver_share` of the limit, every table is swept whole
  and the solver gets the rest (planner/search/staged.py Budget, deterministic work).
- Otherwise the sweep is bounded (`sweep_within`): it prices shapes in an order that depends only on
  the review and the rows priced (each service first given a pool, then, least bound first, the
  shapes that may lower a service's cheapest pool the most) until its share of the limit, counted in
  shapes at `sweep.bounded_shapes_per_second` (a table's first shapes cost more than a whole sweep's
  average) with the bounds worked out on the way (`sweep.bounds_per_shape` to a shape), is spent, and
  the solver gets `sweep.solver_share` of the limit. The shapes priced never depend on the clock, so
  the answer is the same on any machine load; it is the best over the shapes priced, never proven
  optimal over all shapes (planner/report/words.py `bounded_words`).
- A limit whose share buys fewer shapes than the review has tables (one shape each) is refused
  before anything is swept, naming the limit it needs.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from fractions import Fraction

from planner.candidates.service import defaults_of
from planner.candidates.shapes import ChipTable, Shape, cheapest_pool
from planner.candidates.table import (
    apply_latency,
    built_table,
    evaluate_shape,
    held_bound,
    keep_table,
    needs_stages,
    start_table,
    sweep_key,
    whole_model,
)
from planner.defaults import View
from planner.limits import price_units
from pricing.errors import InputError
from pricing.units import cdiv


@dataclass(frozen=True)
class SweepShare:
    """What a --time-limit gives the sweep and the solver: the review's tables and shapes not swept
    yet (0 when no limit is given: not counted), the shapes the sweep may price (None: every table
    whole) and the solver's seconds (None: no limit given, the solver's default applies)."""

    tables: int
    shapes: int
    budget: int | None
    solver: float | None
    pending: dict = field(default_factory=dict, repr=False, compare=False)  # `_pending`'s tables, started


def _pending(requests) -> tuple[dict, int]:
    """The tables not built yet, by sweep key (each distinct `sweep_key` once): (the first request
    for it, its `start_table`), in the order asked for; and their shapes, every shape a whole sweep
    may evaluate, pipeline-staged ones included (an upper bound: the staged rule evaluates fewer)."""
    seen: dict = {}
    shapes = 0
    for request in requests:
        key = sweep_key(*request)
        if key in seen or built_table(request[0].tables, key) is not None:
            continue
        seen[key] = request, start_table(*request)
        shapes += len(seen[key][1][2])
    return seen, shapes


def share(requests, time_limit: float | None, reads: View) -> SweepShare:
    """How `time_limit` is shared between the sweep of `requests` and the solver (the module's
    docstring, its rates read through `reads`); raises InputError naming the limit needed when its
    share of the sweep buys fewer shapes than there are tables."""
    if time_limit is None:  # nothing to share: the sweep is whole, the solver's default applies
        return SweepShare(0, 0, None, None)
    pending, shapes = _pending(requests)
    tables = len(pending)
    rate = reads.value("sweep.shapes_per_second")
    kept = reads.value("sweep.solver_share")
    sweep = shapes / rate
    if sweep <= time_limit * (1 - kept):
        return SweepShare(tables, shapes, None, time_limit - sweep)
    bounded = reads.value("sweep.bounded_shapes_per_second")
    budget = math.floor(time_limit * (1 - kept) * bounded)
    if budget < tables:
        least = tables / bounded / (1 - kept)
        some = f"{budget:,} shape{'s' if budget != 1 else ''}"
        raise InputError("time_limit", f"{time_limit:g} s is too short for this review: its candidate sweep "
                         f"({tables:,} tables, {shapes:,} shapes) gets {1 - kept:.3g} of the limit: {some} at the "
                         f"{bounded:,} a second measured for a bounded sweep, fewer than one a table",
                         f"give at least {_ceil_to(least, 3):g}; {whole_limit(shapes, reads):g} or more sweeps "
                         "every shape")
    return SweepShare(tables, shapes, budget, time_limit * kept, pending)


def whole_limit(shapes: int, reads: View) -> float:
    """The least --time-limit, rounded up at 3 significant digits, whose sweep share holds `shapes`
    (`share`'s whole sweep: shapes / `sweep.shapes_per_second` within 1 - `sweep.solver_share` of it)."""
    rate = reads.value("sweep.shapes_per_second")
    return _ceil_to(shapes / rate / (1 - reads.value("sweep.solver_share")), 3)


def _ceil_to(seconds: float, digits: int) -> float:
    """`seconds` rounded up at `digits` significant digits (a limit that is enough, printed short)."""
    scale = 10 ** (digits - 1 - math.floor(math.log10(seconds)))
    return math.ceil(seconds * scale - 1e-9) / scale


def priority(shape: Shape, service) -> tuple:
    """The order a bounded sweep prices the shapes of a table that hold no request by their bound
    (`_Sweep.bound`, after every other): the plainest shape of every instance size first (tp alone,
    with pipeline stages where a single stage cannot hold the model), then those adding data
    parallel, expert parallel, decode context parallel or a KV cache dtype other than the first
    asked, by how many of these they add; fewest GPUs first within each, ties in the whole sweep's
    order."""
    knobs = (shape.dp > 1) + shape.ep + (shape.dcp > 1) + (shape.kv_cache_dtype != service.kv_cache_dtypes[0])
    return knobs, shape.gpus, shape.pp > 1, shape


@dataclass
class _Sweep:
    """One table of a bounded sweep: its key, request, model and table, its shapes in the whole
    sweep's order (`found`), what one of its GPUs costs in the solver's price units (`units`), the
    most requests one of its services asks for (`need`), its shapes left to price (`queue`, a heap
    by `bound` at `need`), the whole model's and one request's bytes once worked out (`whole`,
    planner/candidates/table.py `whole_model`; `opened` once asked), each shape's `held_bound` once
    worked out (`held`), and the grid points its pipeline-staged shapes were counted as (`staged`)."""

    key: tuple
    request: tuple
    model: object
    table: ChipTable
    found: list[Shape]
    units: int
    need: int
    queue: list = field(default_factory=list)
    held: dict = field(default_factory=dict)
    staged: dict = field(default_factory=dict)
    whole: tuple[int, int, int, int] | None = None  # with the share of a pool kept beside the KV margin
    opened: bool = False

    def __post_init__(self):
        self.queue = [self._entry(shape) for shape in self.found]
        heapq.heapify(self.queue)

    @property
    def spec(self):
        return self.request[0].spec

    def needs_staged(self) -> bool:
        """The whole sweep's rule (planner/candidates/table.py `needs_stages`)."""
        return needs_stages(self.spec, self.table)

    def next_shape(self) -> Shape | None:
        """The shape of the least bound left, pipeline-staged ones the whole sweep rules out dropped."""
        while self.queue and self.queue[0][-1].pp > 1 and not self.needs_staged():
            heapq.heappop(self.queue)
        return self.queue[0][-1] if self.queue else None

    def at_most(self, shape: Shape) -> int | None:
        """The most requests an instance of `shape` may hold: its `held_bound` once worked out, within
        what its GPUs' memory holds beside the whole model's weights (`whole`); None: not known yet."""
        held = self.held.get(shape)
        if self.whole is None:
            return held
        weights, request, num, den = self.whole
        most = max(0, shape.gpus * self.request[1].memory_bytes - weights) * num // den // request
        return most if held is None else min(most, held)

    def bound(self, shape: Shape, need: int) -> int:
        """The least a pool of `shape` reaching `need` requests may cost, in price units: its instances
        at `at_most` requests each, one at least; `_NONE` when it holds none."""
        most = self.at_most(shape)
        if most is None:
            return shape.gpus * self.units
        return cdiv(need, most) * shape.gpus * self.units if most else _NONE

    def _entry(self, shape: Shape) -> tuple:
        """A shape's place in the queue: single-stage shapes that may hold requests by their bound,
        then pipeline-staged ones (the whole sweep prices them only where no single stage fits a
        node), then those that hold none in `priority` order; fewest GPUs first on a tie. Before the
        table's first bound nothing is known of any shape (`bound`: its GPUs' price), and every one of
        its shapes is placed so, at once."""
        if self.whole is None and not self.held:
            return int(shape.pp > 1), shape.gpus * self.units, (shape.gpus,), shape
        least = self.bound(shape, self.need)
        if least == _NONE:
            return 2, least, priority(shape, self.spec), shape
        return int(shape.pp > 1), least, (shape.gpus,), shape

    def settle(self, per: int) -> tuple[int, Shape | None]:
        """Bound the next shape when it is not yet: (the work done, in bounds, and the shape bounded),
        the queue reordered. The table's first bound is `whole_model`, which bounds every shape, and
        counts as a shape priced (`per` bounds: it builds the table's first kernel)."""
        if not self.opened:
            self.opened = True
            whole = whole_model(self.model, self.request[1], self.spec, self.table)
            if whole is not None:
                keep = Fraction(1) - Fraction(str(self.spec.kv_margin(self.table.registry)))
                self.whole = (*whole, keep.numerator, keep.denominator)
            self.queue = [self._entry(shape) for *_, shape in self.queue]
            heapq.heapify(self.queue)
            return per, None
        shape = self.queue[0][-1]
        if shape in self.held:
            return 0, None
        self.held[shape] = held_bound(self.model, self.request[1], self.spec, shape, self.table)
        heapq.heapreplace(self.queue, self._entry(shape))
        return 1, shape

    def price(self, shape: Shape | None = None) -> None:
        """Price the next shape, or `shape` (the queue's own object, as `settle` returns it)."""
        if shape is None:
            shape = heapq.heappop(self.queue)[-1]
        else:
            self.queue = [q for q in self.queue if q[-1] is not shape]  # the queue holds each shape once
            heapq.heapify(self.queue)
        before = self.table.evaluated
        evaluate_shape(self.model, self.request[1], self.spec, shape, self.table)
        if shape.pp > 1:
            self.staged[shape] = self.table.evaluated - before

    def finish(self) -> None:
        """Unpriced shapes counted, staged shapes the whole sweep rules out dropped once every
        single-stage shape is priced, verdicts and rows in the whole sweep's order; sealed and kept."""
        table = self.table
        self.next_shape()
        table.unpriced = len(self.queue)
        if not self.needs_staged() and self.staged:  # a single stage fits a node: the whole sweep prices none
            table.verdicts = [v for v in table.verdicts if v.shape not in self.staged]
            table.rows = [r for r in table.rows if r.shape not in self.staged]
            table.evaluated -= sum(self.staged.values())
        place = {sh: (sh.pp > 1, k) for k, sh in enumerate(self.found)}
        table.verdicts.sort(key=lambda v: place[v.shape])
        table.rows.sort(key=lambda r: place[r.shape])
        apply_latency(table, self.model, self.spec)
        table.seal()
        keep_table(self.request[0].tables, self.key, table)


_NONE = 1 << 62  # a bound no pool reaches: the shape holds no request


def sweep_within(requests, budget: int, pending: dict | None = None) -> tuple[int, int]:
    """Price at most `budget` shapes of the tables `requests` ask for that are not built yet, and
    keep the tables in the command's store the requests' services carry (planner/candidates/table.py
    `keep_table`, where `candidate_table` finds them).

    Work is counted in bounds, `sweep.bounds_per_shape` to a shape priced: `budget` shapes' worth.
    Each step prices the next shape of the table first in this order: a table that a service without
    a pool yet asks for (a pool within a chip's stock: each service is first given an instance that
    can serve it), then a table whose next shape's bound (`_Sweep.bound`) is below the cheapest pool
    so far of one of its services (it may lower that service's cost), then the rest; within each, the
    table with the fewest shapes priced (round robin), then the first asked for. A table's shapes go
    in `priority` order until it holds requests; then the shapes that may lower a service's cost are
    bounded (`_Sweep.bound_queue`, counted as work) and priced by their bound, least first. The order
    depends only on the review and the rows priced, never on the clock. A table's shapes left
    unpriced are counted in `ChipTable.unpriced`; a table priced whole is the whole sweep's (its
    pipeline-staged shapes kept only where the whole sweep prices them, its verdicts and rows in that
    sweep's order). Returns (shapes priced, shapes priced + left)."""
    if not requests:
        return 0, 0
    reads = defaults_of([service for service, _, _ in requests])
    if not pending:  # the tables `share` started, else started here
        pending, _ = _pending(requests)
    needs: dict[tuple, int] = {}
    for request in requests:
        key = sweep_key(*request)
        needs[key] = max(needs.get(key, 0), request[0].spec.required)
    sweeps: list[_Sweep] = []
    for key, (request, (model, table, found)) in pending.items():
        sweeps.append(_Sweep(key, request, model, table, found, price_units(request[1].price_per_gpu_hour, reads),
                             needs[key]))
    index = {sw.key: i for i, sw in enumerate(sweeps)}
    users: dict[int, list[tuple]] = {}  # each pending table's services: (service, what it asks, its stock)
    cheapest: dict[int, int | None] = {}  # each service's cheapest pool within a chip's stock so far, price units
    for request in requests:
        service, chip, limits = request
        key = sweep_key(*request)
        pool = None
        if key in index:
            users.setdefault(index[key], []).append((id(service), service.spec.required, limits.max_gpus))
        elif (built := built_table(service.tables, key)) is not None:
            pool = cheapest_pool(built.rows, service.spec.required, built.gpus_per_node, limits.max_gpus,
                                 price_units(chip.price_per_gpu_hour, reads))
        mine = cheapest.get(id(service))
        cheapest[id(service)] = pool if mine is None else mine if pool is None else min(mine, pool)

    def lowered(i: int, rows: list) -> None:
        sw = sweeps[i]
        for service, need, stock in users[i]:
            pool = cheapest_pool(rows, need, sw.table.gpus_per_node, stock, sw.units)
            if pool is not None and (cheapest[service] is None or pool < cheapest[service]):
                cheapest[service] = pool

    def rank(i: int) -> tuple:
        sw = sweeps[i]
        shape = sw.next_shape()
        if any(cheapest[u] is None for u, _, _ in users[i]):
            return 0, 0, len(sw.table.verdicts), i
        gain = max(cheapest[u] - sw.bound(shape, need) for u, need, _ in users[i])
        if gain > 0:
            return 1, -gain, len(sw.table.verdicts), i
        return 2, 0, len(sw.table.verdicts), i

    per = reads.value("sweep.bounds_per_shape")
    heap = [rank(i) for i, sw in enumerate(sweeps) if sw.next_shape() is not None]
    heapq.heapify(heap)
    left = budget * per
    while left >= per and heap:  # ranks only grow as shapes are priced: a stale one is put back at its own
        top = heapq.heappop(heap)
        i = top[-1]
        sw = sweeps[i]
        if sw.next_shape() is None:
            continue
        now = rank(i)
        if now != top:
            heapq.heappush(heap, now)
            continue
        work, bounded = sw.settle(per)
        left -= work
        if not work or (now[0] == 0 and bounded is not None and sw.held[bounded]):
            rows = len(sw.table.rows)  # the least bound's shape; a service without a pool yet: the first that holds
            sw.price(bounded)
            left -= per
            lowered(i, sw.table.rows[rows:])
        if sw.next_shape() is not None:
            heapq.heappush(heap, rank(i))
    priced = unpriced = 0
    for sw in sweeps:
        sw.finish()
        priced += len(sw.table.verdicts)
        unpriced += sw.table.unpriced
    return priced, priced + unpriced
