"""--time-limit over a review's candidate sweep: the sweep is sized before it runs, in shapes, and
the limit is shared between it and the solver, both counted as work rather than wall time, so that
the same review and limit give the same answer on an idle machine and a loaded one.

A candidate table is one service's sweep on one chip (planner/candidates/table.py `candidate_table`,
shared by every service of equal `sweep_key`); its shapes (`start_table`) are what it evaluates, each
over the utilization × token-budget grid. The review's shapes over planner/defaults.yaml
`sweep.shapes_per_second` (measured on one core) are the seconds the sweep is counted as.

- When they leave the solver at least `sweep.solver_share` of the limit, every table is swept whole
  and the solver gets the rest (planner/search/staged.py Budget, deterministic work).
- Otherwise the sweep is bounded (`sweep_within`): it prices shapes in a fixed priority order until
  its share of the limit, counted in shapes at `sweep.bounded_shapes_per_second` (a table's first
  shapes cost more than a whole sweep's average), is spent, and the solver gets `sweep.solver_share` of
  the limit. The shapes priced depend only on the review and the limit, never on the clock, so the
  answer is the same on any machine load; it is the best over the shapes priced, never proven
  optimal over all shapes (planner/report/words.py `bounded_words`).
- A limit whose share buys fewer shapes than the review has tables (one shape each) is refused
  before anything is swept, naming the limit it needs.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from planner.candidates.shapes import ChipTable, Shape, cheapest_pool
from planner.candidates.table import (
    apply_latency,
    built_table,
    evaluate_shape,
    keep_table,
    needs_stages,
    start_table,
    sweep_key,
)
from planner.defaults import View
from pricing.errors import InputError


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


def priority(shape: Shape, service, holds_at: int | None = None) -> tuple:
    """The order a bounded sweep prices a table's shapes in: the plainest shape of every instance
    size first (tp alone, with pipeline stages where a single stage cannot hold the model), then
    those adding data parallel, expert parallel, decode context parallel or a KV cache dtype other
    than the first asked, by how many of these they add; fewest GPUs first within each, ties in the
    whole sweep's order. A few shapes a table so find the smallest instance that holds the model
    before its variants refine it.

    With `holds_at`, the GPUs of the smallest plain shape that held requests (a table's plain shapes
    are priced first, fewest GPUs first, until one does), the rest are reordered by what raises the
    requests one GPU holds, the pool's cost per request: shapes of fewer GPUs last (their plain
    shapes held none, and no variant takes weights off a rank that tp alone does not); then data
    parallel without expert parallel (it replicates every weight on each rank: fewer requests a
    GPU); then the most of expert parallel (experts not replicated across data-parallel ranks),
    decode context parallel (the KV cache not replicated across tp ranks) and the other KV cache
    dtype (fewer bytes a token) first; fewest GPUs first within each. Reasoned from what a rank
    holds; chosen between this and only the first rule on fresh reviews (bench/reviews.py seeds 7
    and 11), judged on seeds 3 and 5, never on the benches' own reviews (seed 24)."""
    knobs = (shape.dp > 1) + shape.ep + (shape.dcp > 1) + (shape.kv_cache_dtype != service.kv_cache_dtypes[0])
    if holds_at is None:
        return False, knobs, shape.gpus, shape.pp > 1, shape
    raising = shape.ep + (shape.dcp > 1) + (shape.kv_cache_dtype != service.kv_cache_dtypes[0])
    return shape.gpus < holds_at, shape.dp > 1 and not shape.ep, -raising, shape.gpus, shape.pp > 1, shape


@dataclass
class _Sweep:
    """One table of a bounded sweep: its key, request, model and table, its shapes in the whole
    sweep's order (`found`) and those left to price in `priority` order (`queue`), and the grid
    points its pipeline-staged shapes were counted as (`staged`, by shape)."""

    key: tuple
    request: tuple
    model: object
    table: ChipTable
    found: list[Shape]
    queue: list[Shape]
    staged: dict = field(default_factory=dict)
    holds_at: int | None = None  # GPUs of the first plain shape priced that held requests (`priority`)

    @property
    def spec(self):
        return self.request[0].spec

    def needs_staged(self) -> bool:
        """The whole sweep's rule (planner/candidates/table.py `needs_stages`)."""
        return needs_stages(self.spec, self.table)

    def next_shape(self) -> Shape | None:
        """The next shape to price, pipeline-staged ones the whole sweep rules out dropped."""
        while self.queue and self.queue[0].pp > 1 and not self.needs_staged():
            self.queue.pop(0)
        return self.queue[0] if self.queue else None

    def price(self) -> None:
        shape = self.queue.pop(0)
        before, rows = self.table.evaluated, len(self.table.rows)
        evaluate_shape(self.model, self.request[1], self.spec, shape, self.table)
        if shape.pp > 1:
            self.staged[shape] = self.table.evaluated - before
        if self.holds_at is None and len(self.table.rows) > rows and priority(shape, self.spec)[1] == 0:
            self.holds_at = shape.gpus  # plain shapes go by GPUs: the smallest that holds; the rest reordered
            self.queue.sort(key=lambda s: priority(s, self.spec, self.holds_at))

    def finish(self) -> None:
        """Unpriced shapes counted, staged shapes the whole sweep rules out dropped once every
        single-stage shape is priced, verdicts and rows in the whole sweep's order; sealed and kept."""
        table = self.table
        self.next_shape()
        table.unpriced = len(self.queue)
        if not any(s.pp == 1 for s in self.queue) and not self.needs_staged() and self.staged:
            table.verdicts = [v for v in table.verdicts if v.shape not in self.staged]
            table.rows = [r for r in table.rows if r.shape not in self.staged]
            table.evaluated -= sum(self.staged.values())
        place = {sh: (sh.pp > 1, k) for k, sh in enumerate(self.found)}
        table.verdicts.sort(key=lambda v: place[v.shape])
        table.rows.sort(key=lambda r: place[r.shape])
        apply_latency(table, self.model, self.spec)
        table.seal()
        keep_table(self.request[0].tables, self.key, table)


def sweep_within(requests, budget: int, pending: dict | None = None) -> tuple[int, int]:
    """Price at most `budget` shapes of the tables `requests` ask for that are not built yet, and
    keep the tables in the command's store the requests' services carry (planner/candidates/table.py
    `keep_table`, where `candidate_table` finds them).

    Each step prices the next shape (`priority`) of the table first in this order: a table that a
    service without a pool yet asks for (rows that reach its requests within a chip's stock: each
    service is first given an instance that can serve it),
    then the table with the fewest shapes priced, then the first asked for. The order depends only
    on the review and the rows priced, never on the clock. A table's shapes left unpriced are
    counted in `ChipTable.unpriced`; a table priced whole is the whole sweep's (its pipeline-staged
    shapes kept only where the whole sweep prices them, its verdicts and rows in that sweep's
    order). Returns (shapes priced, shapes priced + left)."""
    if not pending:  # the tables `share` started, else started here
        pending, _ = _pending(requests)
    sweeps: list[_Sweep] = []
    for key, (request, (model, table, found)) in pending.items():
        spec = request[0].spec
        sweeps.append(_Sweep(key, request, model, table, found, sorted(found, key=lambda s: priority(s, spec))))
    index = {sw.key: i for i, sw in enumerate(sweeps)}
    of_service: dict[int, list[tuple]] = {}  # each service's tables: (sweep key, its request), built ones included
    users: dict[int, set[int]] = {}  # each pending table's services
    for request in requests:
        key = sweep_key(*request)
        of_service.setdefault(id(request[0]), []).append((key, request))
        if key in index:
            users.setdefault(index[key], set()).add(id(request[0]))
    covered: set[int] = set()  # services with a pool within a chip's stock (rows are only added: they stay so)

    def covers(key, request) -> bool:
        service, _, limits = request
        table = sweeps[index[key]].table if key in index else built_table(service.tables, key)
        return cheapest_pool(table.rows, service.spec.required, table.gpus_per_node, limits.max_gpus, 1) is not None

    def uncovered(service: int) -> bool:
        if service not in covered and any(covers(*asked) for asked in of_service[service]):
            covered.add(service)
        return service not in covered

    def rank(i: int) -> tuple:
        urgent = any(uncovered(u) for u in users.get(i, ()))
        return (0 if urgent else 1), len(sweeps[i].table.verdicts), i

    heap = [rank(i) for i, sw in enumerate(sweeps) if sw.next_shape() is not None]
    heapq.heapify(heap)
    left = budget
    while left > 0 and heap:  # ranks only grow as shapes are priced: a stale one is put back at its own
        top = heapq.heappop(heap)
        i = top[-1]
        if sweeps[i].next_shape() is None:
            continue
        now = rank(i)
        if now != top:
            heapq.heappush(heap, now)
            continue
        sweeps[i].price()
        left -= 1
        if sweeps[i].next_shape() is not None:
            heapq.heappush(heap, rank(i))
    priced = unpriced = 0
    for sw in sweeps:
        sw.finish()
        priced += len(sw.table.verdicts)
        unpriced += sw.table.unpriced
    return priced, priced + unpriced
