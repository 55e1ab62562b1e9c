"""The submodels one by one (planner/search/submodels.py), each on a model small enough to work by
hand, solved through the staged solver with one stage."""

from __future__ import annotations

from ortools.sat.python import cp_model

from planner.defaults import load
from planner.search.staged import Budget, Stage, solve_lexicographic
from planner.search.submodels import Inventory, NodePacking, PoolChoice
from tests.test_search_status import option


def solve(m: cp_model.CpModel, objective) -> object:
    return solve_lexicographic(m, [Stage("cost", objective)], Budget(10.0, load()))


def test_a_pool_choice_takes_one_option_at_its_fewest_replicas():
    """Options (4 GPUs, 3 replicas at $2) and (8 GPUs, 1 replica at $1.2): one is taken, at rmin."""
    m = cp_model.CpModel()
    pool = PoolChoice(m, [option("a", 4, 4, 2.0, 3, 10, 0), option("b", 8, 12, 1.2, 1, 4, 1)], 0, required=10)
    solved = solve(m, pool.cost)
    assert solved.status == "OPTIMAL"
    index, picked, replicas = pool.picked(solved)
    assert (index, picked.row.chip, replicas) == (1, "b", 1)


def test_an_optional_pool_may_go_unserved():
    m = cp_model.CpModel()
    pool = PoolChoice(m, [option("a", 4, 4, 2.0, 3, 10, 0)], 0, optional=True)
    solved = solve(m, pool.cost)
    assert pool.picked(solved) is None and solved.value(pool.served) == 0


def test_the_inventory_keeps_the_spare_nodes_of_a_chip_in_use():
    """Chip a holds 16 GPUs, 8 of them a spare node when a is used: two services of 4 × 2 GPUs each
    (8 GPUs apiece) cannot both be on a; the dearer chip b takes one. Without the spare both fit a."""
    def services():
        return [[option("a", 4, 4, 1.0, 2, 2, 0), option("b", 4, 4, 3.0, 2, 2, 1)] for _ in range(2)]

    for spare, on_b in ((8, 1), (0, 0)):
        m = cp_model.CpModel()
        pools = [PoolChoice(m, opts, s, required=8) for s, opts in enumerate(services())]
        inventory = Inventory(m, pools, {"a": 16}, {"a": spare})
        solved = solve(m, sum(p.cost for p in pools))
        assert [p.picked(solved)[1].row.chip for p in pools].count("b") == on_b
        assert ("a" in inventory.used) == bool(spare)


def test_node_packing_gives_an_instance_larger_than_a_node_whole_nodes():
    """8-GPU nodes, 24 GPUs: a 12-GPU instance takes 2 whole nodes, so one fits (2 of 3 nodes) and
    two do not (4 nodes), although 24 GPUs would hold them by count."""
    for replicas, feasible in ((1, True), (2, False)):
        m = cp_model.CpModel()
        pool = PoolChoice(m, [option("a", 12, 10, 1.0, replicas, replicas, 0)], 0)
        NodePacking(m, [pool], {"a": (24, 8)}, 0, {})
        solved = solve(m, pool.cost)
        assert (solved.status == "OPTIMAL") is feasible, (replicas, solved.status)
