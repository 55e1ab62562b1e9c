"""What makes the command line fast, as properties (the timings themselves are bench/bench_cli.py's):
light commands import no solver or plotting library, oracle tables are shared between services,
a non-binding inventory is solved service by service, and the cost bound skips only shapes that
cannot be reported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from planner.app import fleet
from planner.app.plan import plan
from planner.candidates.service import ResolvedService
from planner.candidates.store import TableStore
from planner.candidates.table import candidate_table, priced_chip
from planner.defaults import load
from planner.request import PlanRequest, PoolLimits, ServiceSpec
from planner.scenario import Scenario
from planner.search import cpsat
from planner.search import fleet as search_fleet

ROOT = Path(__file__).resolve().parents[1]
PROBE = ("import sys, json\nfrom planner.cli import main\ncode = main(sys.argv[1:])\n"
         "print(json.dumps(sorted(m for m in ('ortools', 'matplotlib', 'pandas') + tuple(sys.argv[1:2] != ['memory'] "
         "and sys.argv[2:3] != ['--help'] and ('networkx', 'pricing.kernel', 'pricing.graph') or ()) "
         "if m in sys.modules)), "
         "file=sys.stderr)\nsys.exit(code)")


def imported(*args) -> list[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("args", [["--help"], ["models"], ["chips"], ["scenario", "--help"], ["compare", "--help"]])
def test_light_commands_import_neither_the_solver_nor_matplotlib(args):
    # nor networkx, the model graph or the kernel: printing text needs none of them
    assert imported(*args) == []


def test_the_listed_summaries_are_the_commands_own():
    import click

    from planner.cli import cli

    ctx = click.Context(cli)
    for name, summary in cli.summaries.items():
        assert " ".join(cli.get_command(ctx, name).help.split()).startswith(summary), name


def test_plan_memory_does_not_import_the_solver():
    assert "ortools" not in imported("memory", "--model", "llama-3.1-8b", "--chip", "h200")


def test_services_of_one_model_share_one_oracle_table():
    limits = PoolLimits(chips=("h200",))
    chip = priced_chip("h200", limits)
    a = ServiceSpec(model="llama-3.1-8b", concurrency=16, context_length=32768)
    b = ServiceSpec(model="llama-3.1-8b", concurrency=256, context_length=32768, headroom=20)
    c = ServiceSpec(model="llama-3.1-8b", concurrency=16, context_length=65536)
    with TableStore(load()) as tables:
        a, b, c = (ResolvedService.of(s, limits, tables=tables) for s in (a, b, c))
        assert candidate_table(a, chip, limits) is candidate_table(b, chip, limits)
        assert candidate_table(a, chip, limits) is not candidate_table(c, chip, limits)
    a = ResolvedService.of(a.spec, limits)
    assert candidate_table(a, chip, limits) is not candidate_table(a, chip, limits)  # outside a command: none kept


def test_a_table_at_another_price_is_the_same_sweep():
    """No row depends on the chip's price (only the solve reads it): inside a command, a service on a
    chip at another price gets the table already swept, under that priced chip, and it equals the table
    swept from scratch at that price."""
    listed, given = PoolLimits(chips=("h200",)), PoolLimits(chips=("h200",), prices={"h200": 2.0})
    spec = ServiceSpec(model="qwen3-30b-a3b", concurrency=64, context_length=32768)
    with TableStore(load()) as tables:
        service = ResolvedService.of(spec, listed, tables=tables)
        first = candidate_table(service, priced_chip("h200", listed), listed)
        again = candidate_table(service, priced_chip("h200", given), given)
        assert again.rows is first.rows and again.chip == priced_chip("h200", given) != first.chip
        assert candidate_table(service, priced_chip("h200", given), given) is again
    assert candidate_table(ResolvedService.of(spec, listed), priced_chip("h200", given), given) == again


def _review(inventory: dict) -> Scenario:
    return Scenario(review="t", inventory=inventory, services=[
        {"name": "a", "model": "llama-3.1-8b", "concurrency": 64, "context_length": 32768},
        {"name": "b", "model": "qwen3-32b", "concurrency": 32, "context_length": 32768},
        {"name": "c", "model": "llama-3.1-8b", "concurrency": 300, "context_length": 32768}])


def test_a_non_binding_inventory_is_solved_service_by_service_with_the_joint_optimum(monkeypatch):
    free = _review({"h200": {"gpus_per_node": 8}, "h100": {"gpus_per_node": 8}})
    apart = fleet.plan_scenario(free)
    assert apart.decomposed and apart.solver_status == "OPTIMAL"
    monkeypatch.setattr(search_fleet, "fits", lambda prepared, picks, scenario: False)
    joint = fleet.plan_scenario(free)
    assert not joint.decomposed
    assert apart.cost_per_hour == joint.cost_per_hour and apart.gpus == joint.gpus
    assert [(p.chip, p.gpus, p.tensor_parallel_size) for p in apart.services] == \
        [(p.chip, p.gpus, p.tensor_parallel_size) for p in joint.services]


def test_a_binding_inventory_is_solved_jointly():
    tight = fleet.plan_scenario(_review({"h200": {"gpus": 12, "gpus_per_node": 8}, "h100": {"gpus_per_node": 8}}))
    assert not tight.decomposed and tight.solver_status in ("OPTIMAL", "FEASIBLE") and tight.seconds > 0


@pytest.mark.parametrize("model, chips, concurrency", [("dsv4.1-flash", ("h200",), 64),
                                                       ("llama-3.1-70b", ("h200", "b200", "h100"), 64),
                                                       ("qwen3-235b-a22b", ("h200", "b200"), 128)])
def test_the_cost_bound_never_changes_the_reported_plans(monkeypatch, model, chips, concurrency):
    request = PlanRequest(service=ServiceSpec(model=model, concurrency=concurrency),
                          limits=PoolLimits(chips=chips))
    bounded = plan(request)
    full_tables = cpsat.tables_for
    monkeypatch.setattr(cpsat, "tables_for", lambda service, keep=None: full_tables(service))
    full = plan(request)
    assert full.search.shapes_skipped == 0
    if model == "dsv4.1-flash":  # 4 GPUs serve it: the 8- to 64-GPU instances are never evaluated
        assert bounded.search.shapes_skipped > 0
    assert [p.model_dump() for p in [bounded.best, *bounded.alternatives]] == \
        [p.model_dump() for p in [full.best, *full.alternatives]]


FREEZE_PROBE = (
    "import sys, json, gc\nimport planner.heap as heap\nfrom planner.cli import main\nseen = []\n"
    "def spy(freeze=heap.freeze_imported):\n"
    "    from pricing.kernel import kernel\n"
    "    priced = any(isinstance(o, kernel.Memo) for o in gc.get_objects())\n"
    "    seen.append({'solver': 'ortools.sat.python.cp_model' in sys.modules, 'priced': priced,\n"
    "                 'tracked': len(gc.get_objects())})\n"
    "    freeze()\n"
    "heap.freeze_imported = spy\ncode = main(sys.argv[1:])\n"
    "print(json.dumps({'calls': seen, 'frozen': gc.get_freeze_count()}), file=sys.stderr)\nsys.exit(code)")


@pytest.mark.parametrize("args, solver", [
    (["--model", "llama-3.1-8b", "--chip", "h200", "--concurrency", "16", "--context-length", "8192"], True),
    (["compare", "--model", "llama-3.1-8b", "--chip", "h200", "--concurrency", "16", "--concurrency", "32",
      "--context-length", "8192", "--format", "json"], True),
    (["memory", "--model", "llama-3.1-8b", "--chip", "h200"], False)])
def test_a_command_freezes_what_it_imported_before_its_work(args, solver):
    """Each garbage collection would otherwise walk OR-Tools', pandas' and pydantic's objects again
    (planner/heap.py): the freeze comes once the command's imports are done, before it prices anything."""
    done = subprocess.run([sys.executable, "-c", FREEZE_PROBE, *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    probe = json.loads(done.stderr.strip().splitlines()[-1])
    assert [{k: v for k, v in c.items() if k != "tracked"} for c in probe["calls"]] == \
        [{"solver": solver, "priced": False}]
    # every object tracked then is left out (but the probe's own few, freed before the freeze)
    assert probe["frozen"] >= 0.99 * probe["calls"][0]["tracked"] > 0


def test_the_cost_bound_stages_a_chip_only_where_the_whole_sweep_would():
    """A chip whose every single-stage shape the cost bound skips has no row yet; the whole sweep
    would find rows in a node there and stage nothing (planner/candidates/table.py
    `evaluate_staged`), so the bounded sweep evaluates the skipped shapes in a node, fewest GPUs
    first, until one holds requests, and no pipeline-staged shape (`stage_within`). Llama-3.1-70B
    with h200 at $0.50 and h100 at $100 an hour: 24 h200 GPUs ($12/hour) serve 64 requests, so
    every h100 instance ($100 and more) is beyond the bound; the h100 tp 4 row settles it."""
    service = ServiceSpec(model="llama-3.1-70b", concurrency=64)
    limits = PoolLimits(chips=("h200", "h100"), prices={"h100": 100, "h200": 0.5})
    bounded = {t.chip.id: t for t in cpsat.tables_for(ResolvedService.of(service, limits), keep=1)}
    full = {t.chip.id: t for t in cpsat.tables_for(ResolvedService.of(service, limits))}
    h100 = bounded["h100"]
    assert not any(v.shape.pp > 1 for t in full.values() for v in t.verdicts)  # the whole sweep stages nothing
    assert not any(v.shape.pp > 1 for v in h100.verdicts)
    assert [v.shape.tp for v in h100.verdicts] == [1, 2, 4] and h100.skipped == 1
    assert h100.in_a_node() and set(h100.rows) <= set(full["h100"].rows)
