"""A plan's planner defaults are provenance recorded from what it read (planner/defaults.py `Reads`):
every default a plan reads is listed, and the list does not depend on which plan of a command built
the candidate tables they share. The defaults are handed down, never read from a module-level
function below the entry points that make the view (issue 40)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import planner
from planner import defaults
from planner.app.api import request_of, session


@pytest.fixture
def every_read(monkeypatch):
    """Every planner default read by any path (the table's own `sourced`, which every view reads through)."""
    seen: set[str] = set()
    shipped = defaults.Defaults.sourced

    def noted(self, name):
        seen.add(name)
        return shipped(self, name)

    monkeypatch.setattr(defaults.Defaults, "sourced", noted)
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
    table = defaults.load()
    reads = table.reads()
    assert reads.value("launch.port") == table.value("launch.port") == 8000  # planner/defaults.yaml launch.port
    assert reads.unrecorded.value("report.alternatives") == 5  # no record kept
    assert reads.names == {"launch.port"}
    assert [s.name for s in defaults.read_by(reads, defaults.Reads(table, {"grids.spare_memory_bytes"}))] == [
        "grids.spare_memory_bytes", "launch.port"]
    assert defaults.load() is table  # one table, read once


ROOT = Path(__file__).resolve().parents[1]
# the loader, and the entry points that make the view a command hands down: the API's store (planner/app/
# api.py table_store), the click commands (their options' help, their console and pages), a service
# resolved without a store (planner/candidates/service.py, as its registry's None is the shipped one),
# and the input's bounds the request schemas are classes of (planner/limits.py, read at import)
ENTRY_POINTS = {"planner/defaults.py", "planner/app/api.py", "planner/candidates/service.py", "planner/limits.py"}
READERS = {"load", "value", "sourced", "read", "_read", "_values"}


def _reads_the_module(path: Path) -> list[str]:
    """How a module reaches planner/defaults.py's module-level readers: importing the module itself
    (`from planner import defaults`, `import planner.defaults`), or a reader by name."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module == "planner" and any(a.name == "defaults"
                                                                                 for a in node.names):
            out.append(f"line {node.lineno}: from planner import defaults")
        elif isinstance(node, ast.Import) and any(a.name == "planner.defaults" for a in node.names):
            out.append(f"line {node.lineno}: import planner.defaults")
        elif isinstance(node, ast.ImportFrom) and node.module == "planner.defaults":
            out += [f"line {node.lineno}: from planner.defaults import {a.name}" for a in node.names
                    if a.name in READERS]
    return out


def test_no_library_module_reads_the_defaults_from_a_module_function():
    """Below the entry points every module is handed its view of the planner defaults (a resolved
    service's, a candidate table's, the command's store's, a renderer's options or result): it
    imports only the view classes (Defaults, Reads, View, read_by), never the loader or a reader."""
    files = sorted((ROOT / "planner").rglob("*.py"))
    assert len(files) > 80
    found = {str(p.relative_to(ROOT)): hits for p in files if (hits := _reads_the_module(p))}
    allowed = {k: v for k, v in found.items() if k in ENTRY_POINTS or k.startswith("planner/commands/")
               or k == "planner/cli.py"}
    assert {k: v for k, v in found.items() if k not in allowed} == {}
    assert {"planner/app/api.py", "planner/limits.py", "planner/commands/emit.py"} <= set(allowed)  # it sees them
