"""--time-limit bounds the whole review (issue 39, honest time): the candidate sweep is counted in
shapes before it runs (planner/search/sweep_time.py), a limit it would take whole is refused before
anything is swept, and the same review and limit give the same answer beside a CPU-burning process."""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner import defaults
from tests.helpers import cli as run
from tests.helpers import coupled_review, planner_defaults

ROOT = Path(__file__).resolve().parents[1]
SHAPES = 17  # the coupled review's candidate sweep (tests/helpers.py COUPLED_REVIEW)


def test_a_limit_that_buys_fewer_shapes_than_tables_is_refused_before_anything_is_swept(tmp_path, monkeypatch):
    from planner.candidates import table
    from planner.search import fleet, sweep_time

    def swept(*args, **kwargs):
        raise AssertionError("a shape was swept")

    monkeypatch.setattr(table, "evaluate_shape", swept)
    monkeypatch.setattr(fleet, "evaluate_shape", swept)
    monkeypatch.setattr(sweep_time, "evaluate_shape", swept)
    rates = [defaults.value(f"sweep.{k}") for k in ("shapes_per_second", "bounded_shapes_per_second", "solver_share")]
    assert rates == [1000, 500, 0.25]  # the figures below: 3 tables need 3 / 500 / 0.75 = 0.008 s
    code, out, err = run(["scenario", coupled_review(tmp_path), "--time-limit", "0.003"])
    assert code == 2 and out == "" and err.count("\n") == 1, (code, out, err)
    assert err == ("plan: error: --time-limit: 0.003 s is too short for this review: its candidate sweep (3 tables, "
                   f"{SHAPES} shapes) gets 0.75 of the limit: 1 shape at the 500 a second measured for a bounded "
                   "sweep, fewer than one a table (give at least 0.008; 0.0227 or more sweeps every shape)\n"), err
    # 17 shapes / 1,000 a second / 0.75 for the whole sweep


def test_the_solver_has_what_the_sweep_leaves_of_the_limit(tmp_path, monkeypatch):
    from planner.search.staged import Budget

    given = []
    solver = Budget.solver

    def recording(self):
        given.append(self.limit)
        return solver(self)

    monkeypatch.setattr(Budget, "solver", recording)
    assert run(["scenario", coupled_review(tmp_path), "--time-limit", "2", "--format", "json"])[0] == 0
    assert given and given == [pytest.approx(2 - SHAPES / defaults.value("sweep.shapes_per_second"))] * len(given)


def _answer(path: str, limit: float, busy: bool) -> tuple[int, dict | str, float]:
    spinning = subprocess.Popen([sys.executable, "-c", "while 1: pass"]) if busy else None
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)  # the burner counts once waited for: not yet
        done = subprocess.run([sys.executable, "-m", "planner.cli", "scenario", path, "--format", "json",
                               "--time-limit", f"{limit:g}"], cwd=ROOT, capture_output=True, text=True, timeout=120)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    finally:
        if spinning is not None:
            spinning.kill()
            spinning.wait()
    if done.returncode == 2:
        return done.returncode, done.stderr, seconds
    answer = json.loads(done.stdout)
    answer.pop("seconds", None)  # the report's own wall clock
    return done.returncode, answer, seconds


@pytest.mark.parametrize("limit, code", [(3.0, 0), (0.02, 1), (0.003, 2)])
def test_the_same_review_and_limit_answer_alike_beside_a_cpu_burning_process(tmp_path, limit, code):
    """Byte for byte (the report's seconds aside), an answer and a refusal alike; each command within
    its limit plus the overhead --help states (start-up, reading, reporting), in CPU seconds: the
    machine's other processes (8 agents on 2 cores) stretch wall-clock time, which says nothing of
    the command."""
    path = coupled_review(tmp_path)
    quiet = _answer(path, limit, busy=False)
    busy = _answer(path, limit, busy=True)
    assert quiet[:2] == busy[:2]
    assert quiet[0] == code
    if limit == 0.02:  # 7 shapes' work, 14 bounds (a bounded sweep, sweep_within; sweep.bounds_per_shape 2): for a
        # (and c) and then b, a table's whole-model bound (2), its least-bound shape's bound (1) and price (2); then
        # the table that may lower a pool most (b's on h100, one GPU at least) its whole-model bound (2) and a bound
        # (1), one left: 2 shapes of 17, whose rows do not fit the 16 h200 together: not proven
        assert quiet[1]["solver_status"] == "UNKNOWN" and quiet[1]["sweep_bounded"] == [2, 17], quiet[1]
        assert quiet[1]["short"][0]["reason"].startswith("the 2 of 17 shapes priced within its 0.02 s time limit give "
                                                         "no plan that fits the inventory (--time-limit raises it); ")
    overhead = defaults.value("sweep.command_overhead_seconds")
    assert quiet[2] < limit + overhead and busy[2] < limit + overhead, (quiet[2], busy[2])


def _json(argv: list[str]) -> tuple[int, dict]:
    code, out, err = run(argv)
    assert out, (code, err)
    answer = json.loads(out)
    answer.pop("seconds")  # the report's own wall clock
    return code, answer


@pytest.fixture
def ten_shapes_a_second(monkeypatch):
    """sweep.shapes_per_second (and a bounded sweep's) at 10, so that a limit of seconds bounds the
    17-shape review's sweep and leaves its solver enough to prove what the shapes priced give."""
    planner_defaults(monkeypatch, {"sweep.shapes_per_second": 10, "sweep.bounded_shapes_per_second": 10})


def test_a_bounded_sweep_prices_the_same_shapes_however_slow_the_machine(tmp_path, monkeypatch, ten_shapes_a_second):
    """The sweep --time-limit bounds counts shapes, never the clock: the same answer when every
    shape takes ten times as long, and it says it is the best of the shapes priced (FEASIBLE)."""
    import time

    from planner.search import sweep_time

    path = coupled_review(tmp_path)
    quick = _json(["scenario", path, "--time-limit", "1.2", "--format", "json"])
    evaluate = sweep_time.evaluate_shape

    def slow(*args, **kwargs):
        start = time.perf_counter()
        evaluate(*args, **kwargs)
        time.sleep(9 * (time.perf_counter() - start) + 0.01)

    monkeypatch.setattr(sweep_time, "evaluate_shape", slow)
    assert _json(["scenario", path, "--time-limit", "1.2", "--format", "json"]) == quick
    code, answer = quick
    # 1.2 s × 0.75 × 10 shapes a second: 9 shapes' work, bounds and whole-model bounds counted too (sweep_within),
    # of the 17 shapes; the whole sweep's answer costs no more
    priced, shapes = answer["sweep_bounded"]
    assert code == 0 and answer["solver_status"] == "FEASIBLE" and shapes == 17 and 3 <= priced <= 9, answer
    assert answer["solver_stages"][0]["status"] == "OPTIMAL"  # over the shapes priced
    assert answer["cost_per_hour"] >= _json(["scenario", path, "--format", "json"])[1]["cost_per_hour"]


def test_a_bounded_sweep_says_so_beside_the_solver_status(tmp_path, ten_shapes_a_second):
    path = coupled_review(tmp_path)
    code, out, _ = run(["scenario", path, "--time-limit", "1.2", "--format", "markdown"])
    priced = _json(["scenario", path, "--time-limit", "1.2", "--format", "json"])[1]["sweep_bounded"][0]
    assert code == 0 and priced < 17
    assert (f"; sweep bounded by --time-limit: {priced} of 17 shapes priced; the plan is the best of those, not "
            "proven optimal over all shapes") in out, out
    assert "solver FEASIBLE (every stage's optimum proven over the shapes priced only), " in out, out
    assert "OPTIMAL" not in out, out


def test_a_limit_that_prices_every_shape_answers_as_the_whole_sweep(tmp_path, monkeypatch):
    """At 5 shapes a second for the whole sweep and 10 for a bounded one, a 4 s limit bounds the sweep
    (17 shapes count 3.4 s, more than 0.75 of it) but buys 30 shapes' work: the 3 tables' whole-model
    bounds (3), a bound of each shape at most (17 halves, 8.5) and every shape the whole sweep prices
    (13), 24.5 in all, so the answer is its own."""
    value = defaults.value
    rates = {"sweep.shapes_per_second": 5, "sweep.bounded_shapes_per_second": 10}
    monkeypatch.setattr(defaults, "value", lambda name: rates.get(name) or value(name))
    path = coupled_review(tmp_path)
    code, bounded = _json(["scenario", path, "--time-limit", "4", "--format", "json"])
    code_whole, whole = _json(["scenario", path, "--format", "json"])
    assert bounded["sweep_bounded"] is None and code == code_whole == 0
    assert bounded == whole


def test_a_budget_that_prices_every_shape_gives_the_whole_sweeps_tables():
    """sweep_within with shapes to spare builds the tables candidate_table builds: the same rows,
    verdicts and grid points, pipeline-staged shapes only where the whole sweep prices them (a
    model no single 8 × A100 node holds needs them; Llama 8B never does)."""
    from planner.candidates.service import ResolvedService
    from planner.candidates.store import TableStore
    from planner.candidates.table import built_table, candidate_table, priced_chip, sweep_key
    from planner.request import PoolLimits, ServiceSpec
    from planner.search.sweep_time import sweep_within

    requests = []
    for model, chip, length in (("llama-3.1-8b", "h200", 32768), ("llama-3.1-405b", "a100-80gb", 8192),
                                ("qwen3-30b-a3b", "h100", 16384)):
        limits = PoolLimits(chips=(chip,))
        spec = ServiceSpec(model=model, concurrency=8, context_length=length)
        requests.append((ResolvedService.of(spec, limits), priced_chip(chip, limits), limits))

    def tables(build) -> list:
        with TableStore(defaults.load()) as store:
            kept = [kept_in(store, r) for r in requests]
            found = build(kept)
            built = [built_table(store, sweep_key(*r)) if found is None else found[i] for i, r in enumerate(kept)]
            return [(t.rows, [v.__dict__ for v in t.verdicts], t.evaluated, t.best, t.unpriced) for t in built]

    whole = tables(lambda kept: [candidate_table(*r) for r in kept])
    priced = []
    bounded = tables(lambda kept: priced.append(sweep_within(kept, 10**6)))
    assert bounded == whole
    assert priced[0][0] == priced[0][1] == sum(len(v) for _, v, *_ in whole)
    staged = [any(r.shape.pp > 1 for r in rows) for rows, *_ in whole]
    assert staged == [False, True, False], staged


def test_staged_shapes_a_bounded_sweep_priced_early_go_where_the_whole_sweep_never_prices_them(monkeypatch):
    """A bounded sweep prices the plain pipeline-staged shapes before the single-stage variants
    (`priority`); when a variant then fits a node, the whole sweep would never have priced them, so a
    budget that prices every shape drops them: the whole sweep's table. A stand-in kernel: only the
    fp8 KV cache and staged shapes hold requests (Llama 405B on H100: tp 1 to 8, stages at tp 8)."""
    from planner.candidates import table as table_module
    from planner.candidates.service import ResolvedService
    from planner.candidates.shapes import Row, ShapeVerdict
    from planner.candidates.store import TableStore
    from planner.candidates.table import built_table, candidate_table, priced_chip, sweep_key
    from planner.request import PoolLimits, ServiceSpec
    from planner.search import sweep_time

    def stand_in(model, chip, service, shape, table):
        table.verdicts.append(ShapeVerdict(shape))
        table.evaluated += 3
        if shape.kv_cache_dtype == "fp8" or shape.pp > 1:
            table.rows.append(Row(chip.id, shape, 0.9, 8192, 4, 4))

    monkeypatch.setattr(table_module, "evaluate_shape", stand_in)
    monkeypatch.setattr(sweep_time, "evaluate_shape", stand_in)
    limits = PoolLimits(chips=("h100",))
    spec = ServiceSpec(model="llama-3.1-405b", concurrency=8, context_length=8192, kv_cache_dtypes=("auto", "fp8"))
    request = (ResolvedService.of(spec, limits), priced_chip("h100", limits), limits)
    whole = candidate_table(*request)
    with TableStore(defaults.load()) as store:
        priced = sweep_time.sweep_within([kept_in(store, request)], 10**6)
        bounded = built_table(store, sweep_key(*request))
    assert not any(r.shape.pp > 1 for r in whole.rows) and any(r.shape.kv_cache_dtype == "fp8" for r in whole.rows)
    assert (bounded.rows, bounded.verdicts, bounded.evaluated, bounded.unpriced) == (
        whole.rows, whole.verdicts, whole.evaluated, 0)
    assert priced == (len(whole.verdicts), len(whole.verdicts))
    # a budget that ends after the staged shapes, before the fp8 ones: they are the rows
    with TableStore(defaults.load()) as store:
        plain = sum(1 for v in whole.verdicts if v.shape.kv_cache_dtype == "auto")
        staged = len([s for s in request_shapes(request) if s.pp > 1 and s.kv_cache_dtype == "auto"])
        sweep_time.sweep_within([kept_in(store, request)], plain + staged)
        cut = built_table(store, sweep_key(*request))
    assert {r.shape.pp > 1 for r in cut.rows} == {True} and cut.unpriced > 0


def kept_in(store, request) -> tuple:
    """`request` with its service carrying `store` (a command's TableStore: where the sweep keeps its tables)."""
    from dataclasses import replace

    return (replace(request[0], tables=store), *request[1:])


def request_shapes(request) -> list:
    from planner.candidates.table import start_table

    return start_table(*request)[2]


@pytest.fixture(scope="module")
def three_tables():
    """Three candidate tables' requests (llama-3.1-8b and qwen3-32b on h200, qwen3-32b on h100, each
    with a bf16 and an fp8 KV cache: a bounded sweep prices the fp8 shapes after every plain one, in
    another order than the whole sweep's) and their whole sweeps."""
    from planner.candidates.service import ResolvedService
    from planner.candidates.table import candidate_table, priced_chip
    from planner.request import PoolLimits, ServiceSpec

    requests = []
    for model, chip in (("llama-3.1-8b", "h200"), ("qwen3-32b", "h200"), ("qwen3-32b", "h100")):
        limits = PoolLimits(chips=(chip,), max_gpus=16 if chip == "h200" else None)
        spec = ServiceSpec(model=model, concurrency=32, context_length=32768, kv_cache_dtypes=("auto", "fp8"))
        requests.append((ResolvedService.of(spec, limits), priced_chip(chip, limits), limits))
    return requests, [candidate_table(*r) for r in requests]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(budget=st.integers(min_value=1, max_value=40))
def test_a_bounded_sweep_prices_each_shape_as_the_whole_sweep_does(three_tables, budget):
    """Whatever the budget, the shapes a bounded sweep prices are judged as the whole sweep judges
    them (a shape's rows and verdict do not depend on the order): each table's rows and verdicts are
    the whole table's of the shapes it priced, at most `budget` of them, and what it left is counted."""
    from planner.candidates.store import TableStore
    from planner.candidates.table import built_table, sweep_key
    from planner.search.sweep_time import sweep_within

    requests, whole = three_tables
    with TableStore(defaults.load()) as store:
        priced, shapes = sweep_within([kept_in(store, r) for r in requests], budget)
        tables = [built_table(store, sweep_key(*r)) for r in requests]
    assert priced == sum(len(t.verdicts) for t in tables) <= budget  # bounds are work too: at most `budget`
    for table, w in zip(tables, whole, strict=True):
        mine = {v.shape for v in table.verdicts}
        assert [v.__dict__ for v in table.verdicts] == [v.__dict__ for v in w.verdicts if v.shape in mine]
        assert table.rows == [r for r in w.rows if r.shape in mine]
        assert table.unpriced == 0 or len(mine) < len(w.verdicts) + table.unpriced


def test_a_bounded_sweep_without_a_plan_says_what_is_true_in_every_format(tmp_path):
    """A bounded sweep whose shapes give no plan proves nothing (UNKNOWN): no report says that not
    every service can be served or that the review is infeasible; each says no plan was found among
    the shapes priced, and the limit that sweeps every shape, which does (the next two limits)."""
    path = coupled_review(tmp_path)
    headline = ("no plan found among the 2 of 17 shapes priced within --time-limit; a longer limit may find one "
                "(give at least 0.0227 to sweep every shape)")  # 17 shapes / 1,000 a second / 0.75, rounded up
    page = tmp_path / "review.html"
    for fmt in ("table", "markdown", "json", "html"):
        code, out, err = run(["scenario", path, "--time-limit", "0.02", "--format", fmt]
                             + (["-o", str(page)] if fmt == "html" else []))
        text = out + (re.sub("<[^>]*>", " ", page.read_text()) if fmt == "html" else "")  # the page's words
        if fmt == "json":  # each stage's status is the solver's over the shapes priced (INFEASIBLE here), by design
            text = json.dumps({k: v for k, v in json.loads(out).items() if k != "solver_stages"})
        assert code == 1, (fmt, code, err)
        assert err.startswith(f"plan: coupled — base: {headline}: a (needs 3 h200); "), (fmt, err)
        assert "not every service" not in (text + err).lower() and "infeasible" not in text.lower(), (fmt, text)
        assert "the plan is the best" not in " ".join(text.split()), (fmt, text)  # there is no plan
        if fmt == "json":
            answer = json.loads(out)
            assert answer["unproven"] == headline and answer["solver_status"] == "UNKNOWN", answer
        elif fmt == "html":
            assert f'id="verdict">{headline[0].upper()}{headline[1:]}.</p>' in page.read_text()
        else:
            assert headline in " ".join(text.split()), (fmt, text)
    assert _json(["scenario", path, "--time-limit", "0.0226", "--format", "json"])[1]["sweep_bounded"] is not None
    whole = _json(["scenario", path, "--time-limit", "0.0227", "--format", "json"])[1]
    # the sweep whole at the limit named (the solver's 0.0057 s may end before its proof on a loaded machine)
    assert whole["sweep_bounded"] is None and "shapes priced" not in (whole["unproven"] or ""), whole


def test_a_bounded_sweep_prices_a_table_least_bound_first(monkeypatch):
    """`sweep_within`: a table's shapes are bounded as they come up and priced least bound first (the
    first that holds at once while its service has no pool), so no shape is priced while one of a
    lower bound is left. A stand-in kernel whose rows hold exactly the stand-in bound: a shape of g
    GPUs holds 3 g requests, 5 g with expert parallel, none below 4 GPUs (Qwen3-30B-A3B on H200, 64
    asked): one instance of 4 GPUs without expert parallel first (the fewest GPUs that hold), then
    pools of 16 GPUs (4 × 4, 2 × 8, 1 × 16 with expert parallel, whatever their dcp), then dearer
    ones (6 × 4 without: 24), each bound no less than the one before; the shapes that hold none last."""
    from planner.candidates import table as table_module
    from planner.candidates.service import ResolvedService
    from planner.candidates.shapes import Row, ShapeVerdict
    from planner.candidates.store import TableStore
    from planner.candidates.table import priced_chip
    from planner.request import PoolLimits, ServiceSpec
    from planner.search import sweep_time
    from pricing.units import cdiv

    def held(shape) -> int:
        return 0 if shape.gpus < 4 else (5 if shape.ep else 3) * shape.gpus

    priced = []

    def stand_in(model, chip, service, shape, table):
        priced.append(shape)
        table.verdicts.append(ShapeVerdict(shape))
        table.evaluated += 1
        if held(shape):
            table.rows.append(Row(chip.id, shape, 0.9, 8192, 4, held(shape) // shape.dp))

    monkeypatch.setattr(table_module, "evaluate_shape", stand_in)
    monkeypatch.setattr(sweep_time, "evaluate_shape", stand_in)
    monkeypatch.setattr(sweep_time, "whole_model", lambda *args: None)
    monkeypatch.setattr(sweep_time, "held_bound", lambda model, chip, service, shape, table: held(shape))
    limits = PoolLimits(chips=("h200",))
    spec = ServiceSpec(model="qwen3-30b-a3b", concurrency=64, context_length=8192)
    with TableStore(defaults.load()) as store:
        sweep_time.sweep_within([(ResolvedService.of(spec, limits, tables=store), priced_chip("h200", limits), limits)],
                                10**6)
    gpus = [cdiv(64, held(s)) * s.gpus if held(s) else None for s in priced]
    first = priced[0]
    assert first.gpus == 4 and not first.ep and gpus[0] == 24, priced[:3]
    holding = [g for g in gpus[1:] if g is not None]
    assert holding == sorted(holding) and holding[0] == 16 and 24 in holding, gpus
    assert gpus.index(None) == len(holding) + 1 and set(gpus[len(holding) + 1:]) == {None}, gpus


@pytest.mark.parametrize("model, chip, length", [("llama-3.1-8b", "h200", 32768), ("qwen3-30b-a3b", "h100", 16384),
                                                 ("dsv3", "h200", 16384)])
def test_the_bounds_a_bounded_sweep_orders_by_are_above_every_row(model, chip, length):
    """A bounded sweep orders shapes by the most requests an instance may hold (`_Sweep.at_most`): each
    shape's `held_bound` (its budget at the highest utilization less its weights, over one request's
    bytes, × dp) and the whole model's (its GPUs' memory less the whole model's weights, over one
    request's bytes at tp 1): no row of the whole sweep holds more than either, for a dense model, an
    MoE (dp, expert parallel) and an MLA model (dcp)."""
    from planner.candidates.service import ResolvedService
    from planner.candidates.table import candidate_table, held_bound, priced_chip, start_table
    from planner.request import PoolLimits, ServiceSpec
    from planner.search.sweep_time import _Sweep

    limits = PoolLimits(chips=(chip,))
    spec = ServiceSpec(model=model, concurrency=8, context_length=length)
    request = (ResolvedService.of(spec, limits), priced_chip(chip, limits), limits)
    whole = candidate_table(*request)
    held = {}
    for row in whole.rows:
        held[row.shape] = max(held.get(row.shape, 0), row.concurrency)
    resolved, graph = request[0], request[0].graph
    _, table, found = start_table(*request)
    sweep = _Sweep((), request, graph, table, found, 1, 8)
    sweep.settle(3)  # the whole model's bytes
    assert sweep.whole is not None and len(held) > 3
    for shape in {v.shape for v in whole.verdicts}:
        bound = held_bound(graph, request[1], resolved.spec, shape, table)
        assert held.get(shape, 0) <= min(bound, sweep.at_most(shape)), (shape, held.get(shape), bound,
                                                                        sweep.at_most(shape))


@pytest.mark.parametrize("limit", [1.2, 1.8, 2.2])
def test_a_bounded_sweeps_plan_costs_no_less_than_the_whole_sweeps(tmp_path, ten_shapes_a_second, limit):
    """The shapes a bounded sweep prices are some of the whole sweep's, each judged alike (the coupled
    review needs no pipeline stage: none is kept), so its plan is one the whole sweep could choose:
    it costs no less than the whole sweep's optimum."""
    path = coupled_review(tmp_path)
    code, bounded = _json(["scenario", path, "--time-limit", f"{limit:g}", "--format", "json"])
    whole = _json(["scenario", path, "--format", "json"])[1]
    assert code == 0 and bounded["solver_status"] == "FEASIBLE" and bounded["sweep_bounded"][0] < 17, bounded
    assert whole["solver_status"] == "OPTIMAL" and bounded["cost_per_hour"] >= whole["cost_per_hour"]
