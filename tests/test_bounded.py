"""One review (no variants) sweeps each service only as far as its own optimum can reach
(planner/search/fleet.py `bounded_tables`): the same answer as the whole sweep, on every key,
from fewer grid points; a review whose optima do not fit together, or a service whose rows change
after the sweep (latency targets), is swept whole."""

from __future__ import annotations

from dataclasses import replace

import pytest

from planner.app import fleet
from planner.candidates.store import TableStore
from planner.defaults import load
from planner.scenario import Scenario
from planner.search import fleet as search_fleet
from tests.helpers import planner_defaults

SERVICES = [
    {"name": "a", "model": "llama-3.1-8b", "concurrency": 64, "context_length": 32768, "chips": ["h200", "h100"]},
    {"name": "b", "model": "qwen3-32b", "concurrency": 32, "context_length": 32768, "chips": ["h200", "h100"]},
    {"name": "c", "model": "llama-3.1-8b", "concurrency": 300, "context_length": 32768, "chips": ["h200"]},
    {"name": "d", "model": "qwen3-30b-a3b", "concurrency": 128, "context_length": 16384, "chips": ["h100", "b200"]},
    {"name": "e", "model": "llama-3.1-70b", "concurrency": 16, "context_length": 8192, "chips": ["h200", "b200"]},
]


def review(h200: int | None, services=SERVICES) -> Scenario:
    stock = {"gpus_per_node": 8, **({"gpus": h200} if h200 else {})}
    return Scenario(review="t", inventory={"h200": stock, "h100": {"gpus_per_node": 8}, "b200": {"gpus_per_node": 8}},
                    services=services)


def answer(result) -> dict:
    """The result on every key but the counts of what was swept and the time it took."""
    data = result.model_dump()
    data.pop("seconds")
    data.pop("candidates_evaluated")
    return data


def both(scenario: Scenario):
    with TableStore(load()) as tables:
        bounded = fleet.plan_scenario(scenario, parallel_tables=False, bounded=True, tables=tables)
    with TableStore(load()) as tables:
        whole = fleet.plan_scenario(scenario, parallel_tables=False, tables=tables)
    return bounded, whole


@pytest.mark.parametrize("h200", [None, 200])
def test_the_bounded_sweep_gives_the_whole_sweeps_answer_from_fewer_points(h200):
    bounded, whole = both(review(h200))
    assert bounded.decomposed and whole.decomposed
    assert answer(bounded) == answer(whole)
    assert bounded.candidates_evaluated < whole.candidates_evaluated / 2


def test_optima_that_do_not_fit_are_swept_whole():
    bounded, whole = both(review(12))  # the own optima take 17+ h200 GPUs (tests/test_search_status.py)
    assert not bounded.decomposed and bounded.feasible
    assert answer(bounded) == answer(whole) and bounded.candidates_evaluated == whole.candidates_evaluated


def test_a_service_with_latency_targets_is_swept_whole():
    targeted = [*SERVICES[:2], {**SERVICES[2], "tpot_ms": 40}]
    spec = review(None, targeted)
    assert search_fleet.bounded_tables(spec, fleet.resolve_services(spec)[2]) is None
    bounded, whole = both(spec)
    assert answer(bounded) == answer(whole) and bounded.candidates_evaluated == whole.candidates_evaluated


@pytest.mark.parametrize("bounded", [True, False])
def test_a_sweep_in_workers_gives_the_same_answer(monkeypatch, bounded):
    """The tables built in worker processes (planner/candidates/parallel.py build_tables), the
    bounded sweep's and the whole sweep's, are kept in the command's store and answer as the
    tables built here do."""
    from planner.candidates import parallel

    planner_defaults(monkeypatch, {"parallel.min_tables": 1})
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    scenario = review(None)
    with TableStore(load()) as tables:
        pooled = fleet.plan_scenario(scenario, parallel_tables=True, bounded=bounded, tables=tables)
    with TableStore(load()) as tables:
        alone = fleet.plan_scenario(scenario, parallel_tables=False, bounded=bounded, tables=tables)
    assert answer(pooled) == answer(alone) and pooled.candidates_evaluated == alone.candidates_evaluated


STAGED = [  # one cheap chip bounds the other, whose smallest shapes cannot hold the model
    {"name": "f", "model": "llama-3.1-70b", "concurrency": 8, "context_length": 8192, "chips": ["mi325x", "h100"]},
    {"name": "g", "model": "qwen3-32b", "concurrency": 4, "context_length": 32768, "chips": ["b200", "a100-80gb"]},
    {"name": "h", "model": "llama-3.1-405b", "concurrency": 8, "context_length": 8192, "chips": ["b300", "h100"]},
]


@pytest.mark.parametrize("service", SERVICES + STAGED, ids=lambda s: s["name"])
def test_the_bounded_sweep_evaluates_only_what_the_whole_sweep_does(service):
    """Every shape the bounded sweep judges, the whole sweep judges too (pipeline stages included:
    only where no single-stage row fits in a node), with the same rows."""
    from planner.candidates.table import candidate_table

    scenario = Scenario(review="t", inventory={}, services=[service])
    (resolved,) = fleet.resolve_services(scenario)
    bounded = search_fleet.bounded_tables(scenario, resolved)
    with TableStore(load()) as tables:
        whole = [candidate_table(replace(s, tables=tables), chip, limits)
                 for s, chip, limits in search_fleet.table_requests(scenario, resolved)]
    for b, w in zip(bounded, whole, strict=True):
        assert {v.shape for v in b.verdicts} <= {v.shape for v in w.verdicts}, b.chip.id
        assert set(b.rows) <= set(w.rows)
        judged = {v.shape for v in b.verdicts}  # in the whole sweep's order, so that ties read alike
        assert [v for v in w.verdicts if v.shape in judged] == b.verdicts
        assert [r for r in w.rows if r.shape in judged] == b.rows
        assert len(b.verdicts) + b.skipped == len(w.verdicts) + w.skipped
