"""N+1 spare capacity (`--spare N`, a scenario's `spare:`) is a constraint of the search: on a chip
whose inventory is limited (`--max-gpus`, a scenario's `gpus:`), the spare whole nodes come out of
that inventory inside the CP-SAT model (planner/search/cpsat.py, planner/search/fleet.py), so a plan
never needs more nodes than the inventory has once its spares are counted; one that cannot keep them
is an answer that says so. The figures are derived by hand from two facts the planner's own kernel
gives: one llama-3.1-8b instance at 8,192 tokens on one H100 holds PER_H100 requests (so 400
requests take ceil(400 / PER_H100) = 7 of them), and the inventories are whole 8-GPU nodes."""

from __future__ import annotations

import json
import math

import pytest

from planner.candidates.service import ResolvedService
from planner.cli import main
from planner.defaults import load
from planner.search.placement import ChipNodes, PoolShape, place
from planner.search.staged import Budget

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
    from planner.app.fleet import plan_scenario
    from planner.scenario import load_scenario

    path = tmp_path / "spare.yaml"
    path.write_text(SCENARIO)
    scenario = load_scenario(path)
    return plan_scenario(scenario.model_copy(update={"spare": spare}), parallel_tables=False)


@pytest.fixture(scope="module")
def h200_alone():
    """The chat service's cheapest pool on H200 alone (the planner's own answer for that chip)."""
    from planner.app.plan import plan
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
    laid = place([PoolShape("p", "x", 3, 4, 4)], {"x": ChipNodes("x", 8, 8, 20)}, 1, load())
    assert [(n.node, n.gpus, n.spare) for n in laid.nodes] == [("x-0", 8, False), ("x-1", 8, True),
                                                              ("x-2", 4, False)]
    assert sorted(s.node for i in laid.instances for s in i.slots) == ["x-0", "x-0", "x-2"]
    assert laid.notes == []


def _pair(chips: tuple[str, str], prices: dict[str, float], prefill: int, decode: int, rank: int):
    """A prefill × decode pair of 1-GPU instances whose fewest counts at 1 request/s are `prefill`
    and `decode` (each prefill instance hands over 1/s; each decode instance serves 1/decode per
    second), priced per GPU-hour by chip."""
    from types import SimpleNamespace

    from planner.search.disagg import RATE_UNITS, Pair

    def one(role):
        return SimpleNamespace(row=SimpleNamespace(gpus=1, shape=(role, rank)))

    chip = {c: SimpleNamespace(id=c, price_per_gpu_hour=prices[c]) for c in chips}
    return Pair(prefill=one("prefill"), prefill_chip=chip[chips[0]], decode=one("decode"), decode_chip=chip[chips[1]],
                handover=None,
                prefill_min=prefill, prefill_link=RATE_UNITS, decode_serve=-(-RATE_UNITS // decode),
                decode_link=RATE_UNITS * 100, queue_seconds=0.0, rank=rank)


def test_the_disaggregated_search_keeps_the_spare_nodes_of_the_chips_it_uses():
    """By hand, chips a ($2/GPU-hour) and b ($4), 8-GPU nodes, --max-gpus 16 on each:
    A: 5 prefill + 4 decode on a = 9 GPUs, $18;  C: 6 prefill on a + 2 decode on b, $12 + $8 = $20;
    B: 3 + 3 on b = 6 GPUs, $24. Without spares A is the cheapest. With --spare 1 each chip in use
    keeps 8 of its 16 GPUs: A (9 on a) no longer fits, C (6 on a, 2 on b) does and beats B. At
    --max-gpus 17 A fits beside one spare node of a (9 + 8 = 17): one spare per chip, not per pool.
    With --spare 2 nothing fits 16 beside 16 spare GPUs; the nearest fit is B's 6 + 16 = 22."""
    from planner.request import PoolLimits
    from planner.search.disagg import beyond_inventory, build_and_solve

    prices = {"a": 2.0, "b": 4.0}
    a, c, b = (_pair(("a", "a"), prices, 5, 4, 0), _pair(("a", "b"), prices, 6, 2, 1),
               _pair(("b", "b"), prices, 3, 3, 2))
    nodes = {"a": 8, "b": 8}

    def chosen(max_gpus, spare):
        limits = PoolLimits(chips=("h100",), max_gpus=max_gpus, spare=spare)
        status, ranked = build_and_solve([a, c, b], 1.0, limits, 1, nodes, Budget(None, load()))
        return (status, ranked[0]) if ranked else (status, None)

    assert chosen(16, 0) == ("OPTIMAL", (a, 5, 4))
    assert chosen(16, 1) == ("OPTIMAL", (c, 6, 2))
    assert chosen(17, 1) == ("OPTIMAL", (a, 5, 4))
    assert chosen(16, 2) == ("INFEASIBLE", None)
    why = beyond_inventory([a, c, b], 1.0, PoolLimits(chips=("h100",), max_gpus=16, spare=2), nodes)
    from pricing.errors import render

    assert "spare 2 whole nodes kept free" in render(why) and render(why).endswith("nearest fit: max_gpus 22")
    flags = render(why, {"spare": "--spare", "max_gpus": "--max-gpus"}.get)  # as `plan` names them
    assert "--spare 2 whole nodes kept free" in flags and flags.endswith("nearest fit: --max-gpus 22")


PD = dict(model="llama-3.1-8b", concurrency=1, context_length=8192, ttft_ms=1500.0, tpot_ms=30.0, serving="disagg",
          tp=(1, 2), max_num_batched_tokens=(8192,), gpu_memory_utilization=(0.9,))


def _on_chips(plan) -> dict[str, int]:
    """A disaggregated plan's GPUs on each chip it uses."""
    use = {plan.prefill.chip: plan.prefill.gpus}
    use[plan.decode.chip] = use.get(plan.decode.chip, 0) + plan.decode.gpus
    return use


def test_spares_move_a_disaggregated_fleet_within_max_gpus():
    """plan --serving disagg on H100 and H200 at 60 requests/s within --max-gpus 16: the cheapest
    fleet takes more than 8 GPUs of one chip, so with --spare 1 (8 of each chip's 16 kept free) it
    no longer fits. The plan is then, by the law of the search, the cheapest of every priced
    prefill × decode pair at its fewest counts whose GPUs on each chip it uses are at most 16 − 8;
    placement keeps each chip's last node as its spare, off the pools."""
    from planner.app.disagg_plan import plan_disagg
    from planner.request import PoolLimits, ServiceSpec, WorkloadSpec
    from planner.search import disagg

    service = ServiceSpec(**PD, workload=WorkloadSpec(isl=2000, osl=200, requests_per_second=60.0))
    chips = ("h100", "h200")
    free = plan_disagg(ResolvedService.of(service, PoolLimits(chips=chips, max_gpus=16)))
    assert free.feasible and max(_on_chips(free).values()) > 8
    found = disagg.search(ResolvedService.of(service, PoolLimits(chips=chips)), alternatives=0)
    units = math.ceil(60.0 * disagg.RATE_UNITS)

    def on_chips(pair) -> dict[str, int]:
        p, d = pair.fewest(units)
        use = {pair.prefill_chip.id: p * pair.prefill.row.gpus}
        use[pair.decode_chip.id] = use.get(pair.decode_chip.id, 0) + d * pair.decode.row.gpus
        return use

    fitting = [q for q in found.pairs if max(on_chips(q).values()) <= 16 - 8]
    cheapest = min(round(q.cost(units), 4) for q in fitting)
    kept = plan_disagg(ResolvedService.of(service, PoolLimits(chips=chips, max_gpus=16, spare=1)))
    assert kept.feasible and kept.cost_per_hour == pytest.approx(cheapest)
    use = _on_chips(kept)
    assert use in [on_chips(q) for q in fitting if round(q.cost(units), 4) == cheapest]
    assert kept.cost_per_hour > free.cost_per_hour
    spares = {n.node for n in kept.nodes if n.spare}
    assert spares == {f"{c}-1" for c in use}  # each chip's last node of its 16
    held = {s.node for pool in (kept.prefill, kept.decode) for i in pool.instances for s in i.slots}
    assert not held & spares
    assert all(max(_on_chips(alt).values()) <= 8 for alt in kept.alternatives)  # they keep the spares' room too
