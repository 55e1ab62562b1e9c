"""N+1 spare capacity (`--spare N`, a scenario's `spare:`) is a constraint of the search: on a chip
whose inventory is limited (`--max-gpus`, a scenario's `gpus:`), the spare whole nodes come out of
that inventory inside the CP-SAT model (planner/search/cpsat.py, planner/search/fleet.py), so a plan
never needs more nodes than the inventory has once its spares are counted; one that cannot keep them
is an answer that says so. The figures are derived by hand from two facts the planner's own kernel
gives: one llama-3.1-8b instance at 8,192 tokens on one H100 holds PER_H100 requests (so 400
requests take ceil(400 / PER_H100) = 7 of them), and the inventories are whole 8-GPU nodes."""

from __future__ import annotations

import json

import pytest

from planner.cli import main
from planner.search.placement import ChipNodes, PoolShape, place

PLAN = ["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "400", "--context-length", "8192"]


def _plan(capsys, *extra) -> tuple[int, dict, str]:
    code = main([*PLAN, *extra, "--json"])
    out = capsys.readouterr()
    return code, json.loads(out.out), out.err


def test_spare_nodes_come_out_of_max_gpus(capsys):
    code, free, _ = _plan(capsys, "--max-gpus", "8")
    assert code == 0
    best = free["best"]
    per = best["held"] // best["replicas"]
    assert best["gpus_per_replica"] == 1 and best["replicas"] == -(-400 // per) == 7  # 7 × 1 GPU on one node
    # --max-gpus 8 is one node: with --spare 1 it is the spare, and no GPU is left for the pool
    code, kept, err = _plan(capsys, "--max-gpus", "8", "--spare", "1")
    assert code == 1 and not kept["feasible"]
    (why,) = [e["text"] for e in kept["explanations"]]
    assert "--spare 1" in why and "leaves no GPU for the pool" in why
    assert "Nearest fit: --max-gpus 15" in why  # 7 GPUs for the pool + 8 of the spare node, by hand
    # 15 GPUs: one whole node kept free, 7 left: exactly the pool
    code, fits, _ = _plan(capsys, "--max-gpus", "15", "--spare", "1")
    assert code == 0 and fits["best"]["gpus"] == 7
    nodes = fits["best"]["nodes"]
    assert [(n["node"], n["spare"]) for n in nodes] == [("h100-0", False), ("h100-1", True)]
    on = {s["node"] for i in fits["best"]["instances"] for s in i["slots"]}
    assert on == {"h100-0"}
    # without an inventory the spare node is one beyond the pool's, as before
    code, beyond, _ = _plan(capsys, "--spare", "1")
    assert code == 0 and [n["spare"] for n in beyond["best"]["nodes"]] == [False, True]


def test_the_spare_line_keeps_the_cost_apart(capsys):
    assert main([*PLAN, "--max-gpus", "16", "--spare", "1"]) == 0
    out = capsys.readouterr().out
    assert "spare: 1 h100 node (8 GPUs) kept free (--spare), $" in out and "beyond the pool's cost" in out


SCENARIO = """
review: "spare nodes out of the inventory"
inventory:
  h100: {gpus: 16, gpus_per_node: 8, price: 2.0}
  h200: {gpus: 16, gpus_per_node: 8, price: 4.0}
services:
  - {name: chat, model: llama-3.1-8b, concurrency: 400, context_length: 8192, chips: [h100, h200]}
  - {name: chat2, model: llama-3.1-8b, concurrency: 400, context_length: 8192, chips: [h100, h200]}
"""


def _review(tmp_path, spare: int):
    from planner.report.fleet import plan_scenario
    from planner.scenario import load_scenario

    path = tmp_path / "spare.yaml"
    path.write_text(SCENARIO)
    scenario = load_scenario(path)
    return plan_scenario(scenario.model_copy(update={"spare": spare}), parallel_tables=False)


@pytest.fixture(scope="module")
def h200_alone():
    """The chat service's cheapest pool on H200 alone (the planner's own answer for that chip)."""
    from planner.report.plan import plan
    from planner.request import PlanRequest, PoolLimits, ServiceSpec

    service = ServiceSpec(model="llama-3.1-8b", concurrency=400, context_length=8192)
    result = plan(PlanRequest(service=service, limits=PoolLimits(chips=("h200",), price=4.0)))
    return result.best.gpus


def test_spare_moves_a_pool_off_a_full_chip(tmp_path, h200_alone):
    """Two 7-GPU pools fit the 16 H100 GPUs together (14); with one spare node per chip in use, 8
    H100 GPUs are left: one pool stays there and the other goes to H200, whose 16 GPUs less its own
    spare node hold it (the cheaper of the two ways: 7 × $2 + H200's pool, not both on H200)."""
    free = _review(tmp_path, 0)
    assert free.feasible and [(s.chip, s.gpus) for s in free.services] == [("h100", 7), ("h100", 7)]
    kept = _review(tmp_path, 1)
    assert kept.feasible and sorted(s.chip for s in kept.services) == ["h100", "h200"]
    assert sorted(s.gpus for s in kept.services) == sorted([7, h200_alone])
    assert kept.cost_per_hour == pytest.approx(7 * 2.0 + h200_alone * 4.0)
    spares = [n.node for n in kept.nodes if n.spare]
    assert spares == ["h100-1", "h200-1"] and kept.placement_notes == []  # the last whole node of each chip
    held = {s.node for p in kept.services for i in p.instances for s in i.slots}
    assert not held & set(spares)


def test_spares_that_leave_no_room_are_an_answer(tmp_path):
    """Two spare nodes per chip are each chip's whole inventory: nothing is served, and the reason
    says the spares are counted."""
    short = _review(tmp_path, 2)
    assert not short.feasible and short.short
    assert all("less 2 spare nodes of each chip in use" in s.reason for s in short.short)


def test_placement_keeps_the_last_whole_nodes_as_spares():
    """20 GPUs in 8-GPU nodes: x-0 and x-1 whole, x-2 of 4. One spare: x-1 (the last whole node);
    three 4-GPU instances fill x-0 and x-2 around it."""
    laid = place([PoolShape("p", "x", 3, 4, 4)], {"x": ChipNodes("x", 8, 8, 20)}, spare=1)
    assert [(n.node, n.gpus, n.spare) for n in laid.nodes] == [("x-0", 8, False), ("x-1", 8, True),
                                                              ("x-2", 4, False)]
    assert sorted(s.node for i in laid.instances for s in i.slots) == ["x-0", "x-0", "x-2"]
    assert laid.notes == []


def test_a_disaggregated_plan_without_room_for_its_spares_is_refused():
    """plan --serving disagg's search does not count the spares yet: pools of 4 + 6 H100 GPUs beside
    one 8-GPU spare node need 18 GPUs, more than --max-gpus 16, so the plan is refused, saying so;
    within 18 it stands."""
    from types import SimpleNamespace

    from planner.report.disagg_plan import spares_beyond
    from planner.request import PoolLimits

    roles = [(SimpleNamespace(chip="h100", gpus=4), None, 8), (SimpleNamespace(chip="h100", gpus=6), None, 8)]
    (why,) = spares_beyond(roles, PoolLimits(chips=("h100",), max_gpus=16, spare=1))
    assert "take 10 GPUs" in why and "leaves 8" in why and "raise --max-gpus to 18" in why
    assert spares_beyond(roles, PoolLimits(chips=("h100",), max_gpus=18, spare=1)) == []
    assert spares_beyond(roles, PoolLimits(chips=("h100",), max_gpus=16)) == []
