"""The search layer's honesty: the lexicographic solve reports what every stage proved, a stage
that ends without a solution keeps the previous stage's plan and says so, an impossible solver
state raises, and the services' own optima are the answer exactly when they fit the inventory."""

from __future__ import annotations

import random

import pytest

from planner import defaults
from planner.app import fleet
from planner.candidates.shapes import Row, Shape
from planner.report.words import solver_phrase
from planner.scenario import Scenario
from planner.search import cpsat
from planner.search import fleet as search_fleet
from planner.search.staged import Budget
from tests.helpers import planner_defaults, second_solve_unknown


def option(chip: str, gpus: int, held: int, price: float, rmin: int, rmax: int, rank: int) -> cpsat.Option:
    row = Row(chip, Shape(gpus, 1, False, 1, "auto"), 0.9, 2048, held, held)
    return cpsat.Option(row, price, round(price * defaults.value("solver.price_units_per_dollar")), rmin, rmax, rank)


def test_the_cheapest_pool_wins_and_both_stages_prove_it():
    """Worked by hand: 10 requests; 4 GPUs holding 4 at $2 need 3 replicas ($24/hour); 2 GPUs
    holding 1 at $1 need 10 ($20); 8 GPUs holding 12 at $1.2 need 1 ($9.60): the last is cheapest,
    and holds 12."""
    opts = [option("a", 4, 4, 2.0, 3, 10, 0), option("a", 2, 1, 1.0, 10, 20, 1), option("b", 8, 12, 1.2, 1, 4, 2)]
    sol = cpsat.solve(cpsat.build([opts], [10], reads=defaults.load()))
    (index, picked, replicas), = sol.picks
    assert (index, picked.row.chip, replicas) == (2, "b", 1)
    assert sol.status == "OPTIMAL" and [s.status for s in sol.stages] == ["OPTIMAL", "OPTIMAL"]
    assert (sol.stages[0].value, sol.stages[0].bound, sol.stages[0].gap) == (9.6, 9.6, 0.0)
    assert (sol.stages[1].value, sol.stages[1].bound) == (12, 12)


def test_stage_two_holds_stage_one_and_then_holds_the_most_requests():
    """Two options cost the same ($8/hour for 8 GPUs): stage two picks the one holding more."""
    opts = [option("a", 8, 10, 1.0, 1, 2, 0), option("a", 4, 6, 1.0, 2, 4, 1), option("a", 2, 1, 1.0, 10, 40, 2)]
    sol = cpsat.solve(cpsat.build([opts], [10], reads=defaults.load()))
    (index, _, replicas), = sol.picks
    assert (index, replicas) == (1, 2)  # 2 × 6 = 12 held beside 10 for the same $8
    assert sol.stages[1].value == 12


def coupled_fleet(services: int, seed: int = 7, per: int = 24,
                  slack: int = 6) -> tuple[list[list[cpsat.Option]], list[int], dict[str, int]]:
    """Many services over two chips of one inventory (`slack` GPUs of each chip per service) that
    cannot hold every service's cheapest pool: the second stage's knapsack is hard."""
    rng = random.Random(seed)
    fleet_opts, required = [], []
    for _ in range(services):
        opts = []
        need = rng.randint(50, 400)
        for rank in range(per):
            gpus = rng.choice((1, 2, 4, 8))
            held = rng.randint(4, 60) * gpus
            rmin = -(-need // held)
            opts.append(option(rng.choice(("a", "b")), gpus, held, rng.choice((1.0, 1.5, 2.0)), rmin, rmin + 6, rank))
        fleet_opts.append(opts)
        required.append(need)
    return fleet_opts, required, {"a": slack * services, "b": slack * services}


def limited(monkeypatch, work: float) -> None:
    """A time limit of 1 s worth `work` deterministic seconds, shared by every stage of a solve."""
    planner_defaults(monkeypatch, {"solver.deterministic_per_second": work})


class FirstSolutionAfterStageOne(Budget):
    """A budget whose stages after the first stop at their first solution, as a deterministic limit
    reached just after it would stop them (an injected parameter: synthetic models small enough for
    a test are proven too fast for a real limit to end them with a solution)."""

    def solver(self):
        sol = super().solver()
        sol.parameters.stop_after_first_solution = self.spent > 0
        return sol

    def spend(self, sol, finished):
        limit = super().spend(sol, finished)
        return limit and "deterministic"


def test_a_stage_that_cannot_finish_reports_feasible_with_its_gap():
    """A coupled model of 150 services whose stage one proves its optimum and whose stage two is
    stopped at its first solution: FEASIBLE, with stage two's value, bound and gap in the words
    every report prints."""
    opts, required, inventory = coupled_fleet(150)
    sol = cpsat.solve(cpsat.build(opts, required, inventory, reads=defaults.load()),
                      deadline=FirstSolutionAfterStageOne(10.0, defaults.load()))
    assert sol.picks and sol.status == "FEASIBLE"
    first, second = sol.stages
    assert first.status == "OPTIMAL" and first.gap == 0
    assert second.status == "FEASIBLE" and second.limit == "deterministic" and not second.kept_previous
    assert second.value < second.bound and second.gap == pytest.approx((second.bound - second.value) / second.bound,
                                                                       abs=1e-6)
    held = sum(o.row.concurrency * r for _, o, r in sol.picks)
    assert held == second.value
    assert sum(o.price * o.row.gpus * r for _, o, r in sol.picks) == pytest.approx(first.value)
    words = solver_phrase(sol.status, sol.stages)
    assert "optimum not proven" in words and f"gap {second.gap:.2%}" in words and "proven)" not in words
    assert "the time limit (as deterministic work) ended it" in words


def test_a_stage_two_its_limit_ends_before_any_solution_keeps_stage_one(monkeypatch):
    """150 services, 0.03 deterministic seconds in all: stage one proves its optimum in about 0.001,
    stage two's presolve runs past what is left (about 0.17) before any solution: stage one's plan."""
    limited(monkeypatch, 0.03)
    opts, required, inventory = coupled_fleet(150)
    sol = cpsat.solve(cpsat.build(opts, required, inventory, reads=defaults.load()), time_limit=1.0)
    assert sol.status == "FEASIBLE" and len(sol.picks) == 150
    assert sol.stages[0].status == "OPTIMAL"
    assert sol.stages[1].status == "UNKNOWN" and sol.stages[1].kept_previous
    assert sol.stages[1].limit == "deterministic"
    assert sum(o.price * o.row.gpus * r for _, o, r in sol.picks) == pytest.approx(sol.stages[0].value)


def test_a_second_stage_without_a_solution_keeps_the_first_stage_plan(monkeypatch):
    opts = [option("a", 4, 4, 2.0, 3, 10, 0), option("b", 8, 12, 1.2, 1, 4, 1)]
    second_solve_unknown(monkeypatch)
    sol = cpsat.solve(cpsat.build([opts], [10], reads=defaults.load()))
    assert sol.status == "FEASIBLE" and sol.picks[0][1].row.chip == "b"
    assert sol.stages[1].status == "UNKNOWN" and sol.stages[1].kept_previous
    assert "previous stage's plan is kept" in solver_phrase(sol.status, sol.stages)


def test_an_impossible_second_stage_raises(monkeypatch):
    """Stage one's solution satisfies stage two: an INFEASIBLE stage two is a defect, not an answer."""
    opts = [option("a", 4, 4, 2.0, 3, 10, 0)]
    second_solve_unknown(monkeypatch, "INFEASIBLE")
    with pytest.raises(cpsat.ImpossibleSolve):
        cpsat.solve(cpsat.build([opts], [10], reads=defaults.load()))


def review(h200: int | None) -> Scenario:
    """Own optima (worked by the search): a 3 h200 GPUs, b 4, c 10: 17 together; b may move to h100."""
    stock = {"gpus_per_node": 8, **({"gpus": h200} if h200 else {})}
    return Scenario(review="t", inventory={"h200": stock, "h100": {"gpus_per_node": 8}}, services=[
        {"name": "a", "model": "llama-3.1-8b", "concurrency": 64, "context_length": 32768, "chips": ["h200"]},
        {"name": "b", "model": "qwen3-32b", "concurrency": 32, "context_length": 32768, "chips": ["h200", "h100"]},
        {"name": "c", "model": "llama-3.1-8b", "concurrency": 300, "context_length": 32768, "chips": ["h200"]}])


def test_the_own_optima_are_taken_exactly_when_they_fit(monkeypatch):
    alone = fleet.plan_scenario(review(None))
    assert alone.decomposed and alone.gpus == 17 and alone.solver_status == "OPTIMAL"
    fit = fleet.plan_scenario(review(17))
    assert fit.decomposed and fit.solver_status == "OPTIMAL"
    assert [(p.chip, p.gpus, p.tensor_parallel_size, p.held) for p in fit.services] == \
        [(p.chip, p.gpus, p.tensor_parallel_size, p.held) for p in alone.services]
    short = fleet.plan_scenario(review(16))
    assert not short.decomposed and short.feasible and short.solver_status == "OPTIMAL"
    assert sum(p.gpus for p in short.services if p.chip == "h200") <= 16
    assert short.cost_per_hour > alone.cost_per_hour  # b moves to h100
    monkeypatch.setattr(search_fleet, "fits", lambda prepared, picks, scenario: False)
    joint = fleet.plan_scenario(review(17))  # the coupled model agrees with the decomposition on every key
    assert not joint.decomposed and joint.solver_status == "OPTIMAL"
    assert [(p.chip, p.gpus, p.tensor_parallel_size, p.held, p.max_num_batched_tokens,
             p.gpu_memory_utilization) for p in joint.services] == \
        [(p.chip, p.gpus, p.tensor_parallel_size, p.held, p.max_num_batched_tokens,
          p.gpu_memory_utilization) for p in fit.services]
