"""One staged solver for every search (planner/search/staged.py): the prefill × decode search keeps
stage one's plan when its stage two runs out of time, every stage and alternative of a search draws
on one budget, and the budget is deterministic work, so an answer does not depend on the machine's
load."""

from __future__ import annotations

import time

import pytest

from planner import defaults
from planner.candidates.service import ResolvedService
from planner.request import PoolLimits
from planner.search import cpsat, disagg, staged
from planner.search.staged import Budget
from tests.helpers import planner_defaults, second_solve_unknown
from tests.test_search_status import coupled_fleet
from tests.test_spare import _pair

PRICES = {"a": 2.0, "b": 4.0}
NODES = {"a": 8, "b": 8}


def pairs():
    """By hand (tests/test_spare.py): at 1 request/s, A (a, a) at 5 + 4 GPUs is $18/hour, C (a, b)
    at 6 + 2 is $20, B (b, b) at 3 + 3 is $24."""
    return [_pair(("a", "a"), PRICES, 5, 4, 0), _pair(("a", "b"), PRICES, 6, 2, 1), _pair(("b", "b"), PRICES, 3, 3, 2)]


class StageOneOnly(Budget):
    """A budget that stage one spends whole: whatever comes after it has no time left."""

    def spend(self, sol, finished):
        limit = super().spend(sol, finished)
        self.spent = self.work
        return limit


def test_a_disaggregated_stage_two_out_of_time_keeps_stage_one_plan():
    """Stage one (cost) proves $18/hour for A at its fewest counts; stage two (GPUs, then rank) gets
    no time: the answer is stage one's plan, FEASIBLE, with stage one's value, bound and gap, and
    stage two says it kept it. Today's solver raised AssertionError here."""
    a, c, b = pairs()
    limits = PoolLimits(chips=("h100",), max_gpus=16)
    status, stages, ranked = disagg.ranked_fleets([a, c, b], 1.0, limits, 1, NODES, StageOneOnly(1.0, defaults.load()))
    assert status == "FEASIBLE" and ranked == [(a, 5, 4)]
    first, second = stages
    assert (first.stage, first.status, first.value, first.bound, first.gap) == ("cost", "OPTIMAL", 18.0, 18.0, 0.0)
    assert second.status == "UNKNOWN" and second.kept_previous and second.limit == "deterministic"


def test_a_disaggregated_stage_two_the_solver_ends_without_a_solution_keeps_stage_one(monkeypatch):
    """The same through the solver itself: its second solve returns UNKNOWN (as a time limit
    would). Break-check: on the code before this change (planner/search/disagg.py `_solve`) this
    raised AssertionError("stage 1's solution satisfies stage 2")."""
    second_solve_unknown(monkeypatch)
    status, ranked = disagg.build_and_solve(pairs(), 1.0, PoolLimits(chips=("h100",), max_gpus=16), 1, NODES,
                                           Budget(None, defaults.load()))
    assert status == "FEASIBLE" and [(q.rank, p, d) for q, p, d in ranked] == [(0, 5, 4)]


def test_every_stage_and_alternative_of_a_search_draws_on_one_budget(monkeypatch):
    """Three fleets (the best and two alternatives), two stages each: six solves, whose
    deterministic limits are what is left of one budget, each less than the one before."""
    given = []
    real = Budget.solver

    def recording(self):
        sol = real(self)
        given.append(sol.parameters.max_deterministic_time)
        return sol

    monkeypatch.setattr(Budget, "solver", recording)
    budget = Budget(2.0, defaults.load())
    status, stages, ranked = disagg.ranked_fleets(pairs(), 1.0, PoolLimits(chips=("h100",)), 3, NODES, budget)
    assert status == "OPTIMAL" and [q.rank for q, _, _ in ranked] == [0, 1, 2]
    assert len(given) == 6 and given[0] == pytest.approx(2.0 * defaults.value("solver.deterministic_per_second"))
    assert all(later < earlier for earlier, later in zip(given, given[1:], strict=False))
    assert budget.spent == pytest.approx(given[0] - budget.work_left())


def test_a_spent_budget_starts_no_stage():
    """Nothing left: stage one is UNKNOWN (the deterministic budget ended it), and no plan."""
    budget = Budget(1.0, defaults.load())
    budget.spent = budget.work
    sol = cpsat.solve(cpsat.build(*coupled_fleet(3)[:2], reads=defaults.load()), deadline=budget)
    assert sol.status == "UNKNOWN" and sol.picks == []
    assert [(s.status, s.limit, s.kept_previous) for s in sol.stages] == [("UNKNOWN", "deterministic", False)]


def test_the_answer_does_not_depend_on_the_wall_clock(monkeypatch):
    """A coupled model whose second stage the budget ends: the same answer, status and figures on a
    quiet machine and with two threads burning the CPU beside the solve. Break-check: with the
    budget spent as wall-clock seconds instead (max_time_in_seconds = the work left, no
    deterministic limit) this fails: 0.03 s of wall clock end stage one before any plan."""
    planner_defaults(monkeypatch, {"solver.deterministic_per_second": 0.03})
    opts, required, inventory = coupled_fleet(150)

    def answer():
        sol = cpsat.solve(cpsat.build(opts, required, inventory, reads=defaults.load()), time_limit=1.0)
        return sol.status, [(i, r) for i, _, r in sol.picks], [s.model_dump() for s in sol.stages]

    quiet = answer()
    assert quiet[0] == "FEASIBLE" and quiet[2][1]["limit"] == "deterministic"  # ended by the budget
    import threading

    stop = threading.Event()

    def burn():
        while not stop.is_set():
            sum(i * i for i in range(10_000))

    neighbours = [threading.Thread(target=burn) for _ in range(2)]
    for t in neighbours:
        t.start()
    try:
        loaded = answer()
    finally:
        stop.set()
        for t in neighbours:
            t.join()
    assert loaded == quiet


def test_the_wall_clock_backstop_is_said_when_it_ends_a_stage(monkeypatch):
    """A backstop already spent: the stage is ended by the wall clock, and says 'time' (the
    report's words: the wall-clock backstop), never 'deterministic'."""
    budget = Budget(1.0, defaults.load())
    budget.end = time.monotonic()
    sol = cpsat.solve(cpsat.build(*coupled_fleet(3)[:2], reads=defaults.load()), deadline=budget)
    assert sol.status == "UNKNOWN" and sol.stages[0].limit == "time"


def _ratio(real, value):
    return lambda name: value if name == "solver.deterministic_per_second" else real(name)


def test_staged_reads_the_planner_defaults_it_names():
    budget = staged.Budget(2.0, defaults.load())
    assert budget.work == pytest.approx(2.0 * defaults.value("solver.deterministic_per_second"))
    assert budget.wall == pytest.approx(2.0 * defaults.value("solver.wall_backstop"))


@pytest.mark.parametrize("seed", range(4))
def test_leaving_out_dominated_options_keeps_the_optimum(seed):
    """A scenario's coupled model holds only the options no other option of the service dominates
    (planner/search/fleet.py `undominated`): on coupled fleets of 40 services over a tight inventory
    the optimum (the picks, every stage's value) is the whole model's, and most options go.
    Break-check: folding the rank with the count of options kept instead of the largest rank
    (cpsat._weights, the fold this change corrected) picks fewer requests held."""
    from planner.search.fleet import undominated

    opts, required, inventory = coupled_fleet(40, seed=seed)
    whole = cpsat.solve(cpsat.build(opts, required, inventory, reads=defaults.load()), time_limit=60.0)
    kept = [undominated(o, {}) for o in opts]
    pruned = cpsat.solve(cpsat.build([[o[i] for i in k] for o, k in zip(opts, kept, strict=True)], required,
                                     inventory, reads=defaults.load()), time_limit=60.0)
    assert whole.status == pruned.status == "OPTIMAL"
    assert [(s.value, s.bound) for s in whole.stages] == [(s.value, s.bound) for s in pruned.stages]
    assert [(i, r) for i, _, r in whole.picks] == [(k[i], r) for k, (i, _, r) in zip(kept, pruned.picks, strict=True)]
    assert sum(map(len, kept)) < sum(map(len, opts)) / 2


def test_a_search_solves_within_the_budget_it_is_given():
    """`plan` hands its search one budget (a command running several searches may share one): a
    budget already spent leaves the search without a plan, UNKNOWN, said as the time limit's."""
    from planner.request import PlanRequest, ServiceSpec

    spent = Budget(1.0, defaults.load())
    spent.spent = spent.work
    request = PlanRequest(service=ServiceSpec(model="qwen3-8b", concurrency=8, context_length=8192),
                          limits=PoolLimits(chips=("h100",)))
    resolved = ResolvedService.of(request.service, request.limits)
    found = cpsat.search(resolved, budget=spent)
    assert found.status == "UNKNOWN" and found.ranked == [] and found.stages[0].limit == "deterministic"
    assert cpsat.search(resolved).status == "OPTIMAL"


def test_the_wall_clock_backstop_counts_from_the_first_solve(monkeypatch):
    """Building the model is Python's work, which a loaded machine slows: the backstop's clock starts
    with the first solve, so a model that took longer to build than the backstop still gets its
    deterministic work (issue 39: the 500-service review answered UNKNOWN beside CPU burners when the
    clock started with the budget). Break-check: starting it in Budget.__init__ fails this."""
    clock = [1000.0]
    monkeypatch.setattr(staged.time, "monotonic", lambda: clock[0])
    budget = Budget(1.0, defaults.load())
    clock[0] += 100 * budget.wall  # the model built on a very slow machine
    sol = cpsat.solve(cpsat.build(*coupled_fleet(3)[:2], reads=defaults.load()), deadline=budget)
    assert sol.status == "OPTIMAL" and not budget.backstop_hit, sol.stages
