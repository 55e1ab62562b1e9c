"""A plan's planner defaults are provenance recorded from what it read (planner/defaults.py `Reads`):
every default a plan reads is listed, and the list does not depend on which plan of a command built
the candidate tables they share."""

from __future__ import annotations

import pytest

import planner
from planner import defaults
from planner.app.api import request_of, session


@pytest.fixture
def every_read(monkeypatch):
    """Every planner default read by any path (the module's own `sourced`, which views read through)."""
    seen: set[str] = set()
    shipped = defaults.sourced

    def noted(name):
        seen.add(name)
        return shipped(name)

    monkeypatch.setattr(defaults, "sourced", noted)
    return seen


def _listed(result) -> list[str]:
    return [p["name"] for p in result.model_dump()["provenance"] if p["name"].startswith("planner.")]


AT_A_CONCURRENCY = {"model": "llama-3.1-8b", "chip": "h100", "concurrency": 32, "context_length": 8192}
AT_A_RATE = {"model": "llama-3.1-8b", "chip": "h100", "concurrency": 1, "context_length": 8192,
             "workload": {"isl": 2000, "osl": 200, "requests_per_second": 5},
             "slo": {"p99_ttft_ms": 1500, "p99_tpot_ms": 30}}


@pytest.mark.parametrize("fields", [AT_A_CONCURRENCY, AT_A_RATE], ids=["concurrency", "rate"])
def test_every_default_a_plan_reads_is_in_its_provenance(every_read, fields):
    request = request_of(**fields)  # the input's own bounds (limits.*) are read validating it, not by the plan
    every_read.clear()
    result = planner.plan(request)
    assert result.feasible
    listed = _listed(result)
    assert listed == sorted(listed)  # by name: one order whatever read first
    assert {f"planner.{n}" for n in every_read} <= set(listed)
    # those the hand-kept list missed are there: the solver's and the launch's
    assert {"planner.solver.deterministic_per_second", "planner.solver.wall_backstop",
            "planner.solver.price_units_per_dollar", "planner.launch.host", "planner.launch.port",
            "planner.grids.max_num_batched_tokens"} <= set(listed)
    if fields is AT_A_RATE:  # the serving simulator's
        assert {"planner.serving.requests", "planner.serving.seed", "planner.serving.capacity_allowance"} <= set(listed)


def test_provenance_does_not_depend_on_which_plan_built_the_shared_tables():
    """Two plans of one service but their concurrency share their candidate tables within a session
    (under latency targets every shape is swept: planner/candidates/table.py `candidate_table`): each
    plan's provenance is the same whether it built them or found them built."""
    small, large = request_of(**AT_A_RATE), request_of(**{**AT_A_RATE, "concurrency": 64})

    def both(first, second):
        with session(None) as tables:
            a = planner.plan(first, tables=tables)
            b = planner.plan(second, tables=tables)
        return {first.service.concurrency: _listed(a), second.service.concurrency: _listed(b)}

    one, other = both(small, large), both(large, small)
    assert one == other
    assert "planner.grids.gpu_memory_utilization" in one[1] and "planner.grids.gpu_memory_utilization" in one[64]


def test_a_view_records_what_it_reads():
    reads = defaults.Reads()
    assert reads.value("launch.port") == defaults.value("launch.port")
    assert defaults.read(None, "report.alternatives") == defaults.value("report.alternatives")  # no record kept
    assert reads.names == {"launch.port"}
    assert [s.name for s in defaults.read_by(reads, defaults.Reads({"grids.spare_memory_bytes"}))] == [
        "grids.spare_memory_bytes", "launch.port"]
