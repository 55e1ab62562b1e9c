"""One lexicographic CP-SAT solve for every search (planner/search/cpsat.py, disagg.py, fleet.py), under
one budget of time (chips-and-solver.md §2.2 item 7a; the cpsat-primer's lexicographic pattern).

The stages are solved in order on one model: each minimises its key, then holds its optimum (a
constraint switched on by an assumption literal, so the model stays reusable for re-solves) and
hands its solution to the next stage as a hint. Every stage and every re-solve of one search draws
on one `Budget`. A stage that ends without a solution keeps the previous stage's plan and says so;
a later stage the model makes impossible (the previous stage's solution satisfies it) raises.

Honest time (chips-and-solver.md §2.3): CP-SAT stops on deterministic time with one worker, so
the same input gives the same answer and status on an idle or a loaded machine. --time-limit T
becomes T × solver.deterministic_per_second of deterministic work, shared by the stages; a
wall-clock backstop of T × solver.wall_backstop seconds stops a solve the machine slows beyond
that (counted from the first solve, so that building the model is not), and the stage that it ends
says so (`StageStatus.limit` 'time').
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from planner.defaults import View
from planner.search.status import StageStatus, overall

if TYPE_CHECKING:  # pragma: no cover  (OR-Tools is imported where a model is solved)
    from ortools.sat.python import cp_model

SMALLEST_STAGE = 1e-3  # deterministic seconds: below this a stage is not started (its budget is spent)


class ImpossibleSolve(RuntimeError):
    """A solver state the model rules out (a defect of the model, never an answer)."""


class Budget:
    """What one search may spend solving, shared by its stages and re-solves: --time-limit (or
    planner/defaults.yaml solver.max_time_in_seconds) as deterministic work, with a wall-clock
    backstop."""

    def __init__(self, time_limit: float | None, reads: View):
        self.given = time_limit is not None
        self.reads = reads  # the solver's defaults, read through the caller's view (a Reads records them)
        self.limit = time_limit or reads.value("solver.max_time_in_seconds")
        self.work = self.limit * reads.value("solver.deterministic_per_second")
        self.wall = self.limit * reads.value("solver.wall_backstop")
        self.spent = 0.0  # deterministic seconds the stages used so far
        self.end: float | None = None  # the backstop's clock starts with the first solve (`solver`): building the
        # model before it is Python's work, which a loaded machine slows but the answer does not depend on
        self.backstop_hit = False

    def work_left(self) -> float:
        return max(0.0, self.work - self.spent)

    def wall_left(self) -> float:
        return self.wall if self.end is None else max(0.0, self.end - time.monotonic())

    def exhausted(self) -> bool:
        return self.work_left() < SMALLEST_STAGE or self.wall_left() <= 0

    def solver(self) -> cp_model.CpSolver:
        """A CP-SAT solver with the planner's explicit parameters (one worker, a fixed seed), bounded
        by what is left of the budget."""
        from ortools.sat.python import cp_model  # OR-Tools is imported when a model is solved (bench/bench_cli.py)
        if self.end is None:
            self.end = time.monotonic() + self.wall
        sol = cp_model.CpSolver()
        sol.parameters.num_workers = self.reads.value("solver.num_workers")
        sol.parameters.random_seed = 0
        sol.parameters.catch_sigint_signal = False  # a SIGINT ends the command, never the search as if in time
        sol.parameters.max_deterministic_time = max(self.work_left(), SMALLEST_STAGE)
        sol.parameters.max_time_in_seconds = max(self.wall_left(), SMALLEST_STAGE)
        return sol

    def spend(self, sol: cp_model.CpSolver, finished: bool) -> str | None:
        """Count a solve's work; for one that did not finish (its optimum or infeasibility not
        proven), which limit ended it: 'deterministic' (the budget) or 'time' (the wall-clock
        backstop, noted as hit)."""
        self.spent += sol.deterministic_time
        if finished:
            return None
        if sol.deterministic_time >= sol.parameters.max_deterministic_time * 0.99:
            return "deterministic"
        self.backstop_hit = True
        return "time"


@dataclass(frozen=True)
class Stage:
    """One key of a lexicographic objective: its name (planner/search/status.py), the integer
    expression minimised, and `read`, which turns the stage's objective and proven bound into the
    reviewer's value and bound; `larger_is_better` says which way the gap is taken."""

    name: str
    objective: cp_model.LinearExprT
    read: Callable[[int, int], tuple[float, float]] = lambda value, bound: (value, bound)
    larger_is_better: bool = False


@dataclass
class Solved:
    """What a staged solve found: the overall status, what every stage proved, and the solver
    whose response holds the answer (the last stage with a solution; None when none had one)."""

    status: str
    stages: list[StageStatus] = field(default_factory=list)
    solver: cp_model.CpSolver | None = None

    def value(self, var) -> int:
        return int(self.solver.value(var))

    def boolean_value(self, var) -> bool:
        return bool(self.solver.boolean_value(var))


def solve_lexicographic(model: cp_model.CpModel, stages: list[Stage], budget: Budget) -> Solved:
    """Solve `stages` in order on `model` within `budget` (the module's docstring). The model's
    objective, hints and assumptions are cleared when it returns, so that a caller may add a
    constraint and solve it again."""
    from ortools.sat.python import cp_model  # OR-Tools is imported when a model is solved (bench/bench_cli.py)
    found: list[StageStatus] = []
    incumbent = None
    try:
        for i, stage in enumerate(stages):
            model.minimize(stage.objective)
            if incumbent is not None:
                _hint(model, incumbent)
            if budget.exhausted():  # nothing left to start the stage with
                limit = "deterministic" if budget.work_left() < SMALLEST_STAGE else "time"
                budget.backstop_hit |= limit == "time"
                found.append(StageStatus(stage=stage.name, status="UNKNOWN", kept_previous=incumbent is not None,
                                         limit=limit))
                break
            sol = budget.solver()
            status = sol.solve(model)
            limit = budget.spend(sol, status in (cp_model.OPTIMAL, cp_model.INFEASIBLE, cp_model.MODEL_INVALID))
            if status == cp_model.MODEL_INVALID:
                raise ImpossibleSolve(f"stage {stage.name!r}: the model is invalid ({model.validate()})")
            if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
                incumbent = sol
                found.append(_status(stage, sol, status, limit))
                if i + 1 < len(stages):
                    hold = model.new_bool_var(f"hold_{i}_{len(model.proto.constraints)}")
                    model.add(stage.objective <= int(sol.value(stage.objective))).only_enforce_if(hold)
                    model.add_assumptions([hold])
                continue
            if status == cp_model.INFEASIBLE and incumbent is not None:
                raise ImpossibleSolve(f"stage {stage.name!r} is INFEASIBLE, but the previous stage's solution "
                                      "satisfies it")
            found.append(StageStatus(stage=stage.name, status=sol.status_name(status),
                                     kept_previous=incumbent is not None,
                                     limit=limit))
            break
    finally:
        model.clear_assumptions()
        model.clear_hints()
        model.clear_objective()
    return Solved(overall(found), found, incumbent)


def _hint(model: cp_model.CpModel, sol: cp_model.CpSolver) -> None:
    """The previous stage's solution as the next stage's starting point (every variable it solved)."""
    model.clear_hints()
    values = sol.response_proto.solution
    hint = model.proto.solution_hint
    hint.vars.extend(range(len(values)))
    hint.values.extend(values)


def _status(stage: Stage, sol: cp_model.CpSolver, status: int, limit: str | None) -> StageStatus:
    """The stage's status in the reviewer's units: its integer objective (exact: the float may
    round) and proven bound read back through the stage."""
    objective = int(sol.value(stage.objective))
    bound = min(objective, math.ceil(sol.best_objective_bound - 1e-6))  # the objective is an integer
    value, least = stage.read(objective, bound)
    if stage.larger_is_better:
        gap = round((least - value) / least, 6) if least else 0.0
    else:
        gap = round((value - least) / value, 6) if value else 0.0
    return StageStatus(stage=stage.name, status=sol.status_name(status), value=value, bound=least, gap=gap,
                       limit=limit)
