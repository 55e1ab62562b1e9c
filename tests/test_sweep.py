"""The oracle's sweep of one shape (planner/candidates/table.py `evaluate_shape`: one kernel per token
budget, each utilization read off it) equals the sweep that builds one kernel per grid point, on
every card: the same rows, the same verdict, the same count of points judged."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.candidates.service import ResolvedService
from planner.candidates.shapes import ChipTable, Row, Shape, context_length, deployment_for, shapes
from planner.candidates.table import _record, evaluate_shape, shape_grid
from planner.defaults import load
from planner.request import ServiceSpec
from pricing.chips import get_chip
from pricing.graph import load_model
from pricing.kernel import Kernel
from pricing.kernel.capacity import Capacity

CARDS = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "pricing" / "cards").glob("*.yaml"))
CHIPS = ("h200", "h100", "b200", "a100-80gb", "l40s", "mi300x", "gb200")
CONTEXTS = (4096, 8192, 32768, 131072)
UTILIZATIONS = (0.5, 0.7, 0.8, 0.85, 0.9, 0.92, 0.95, 0.97, 0.99)
BUDGETS = (512, 2048, 8192, 16384, 65536)


def point_by_point(model, chip, service: ServiceSpec, shape, table: ChipTable) -> None:
    """The sweep as the spec reads: a kernel for every (token budget, utilization) point, the
    utilizations from the highest down until one holds fewer requests than the one above it. The
    grid (and a shape refused before any point) is the table's own `shape_grid`: what is checked
    here is the reading of each point off one kernel."""
    grid = shape_grid(model, chip, service, shape, table)
    if grid is None:
        return
    verdict, length, budgets, utils = grid.verdict, grid.length, grid.budgets, grid.utils
    for mbt in budgets:
        top = 0
        for util in utils:
            kernel = Kernel.of(model, deployment_for(shape, service, length, gpu_memory_utilization=util,
                                                     max_num_batched_tokens=mbt), chip)
            table.evaluated += 1
            held = Capacity(kernel).requests_held(service.kv_margin(kernel.reg))
            if mbt == budgets[0] and util == utils[0]:
                _record(verdict, kernel, held, util)  # the kernel at its own utilization
            if held < top or held == 0:
                break
            top = held
            table.rows.append(Row(chip.id, shape, util, mbt, min(held, mbt), min(held, mbt)))


@pytest.mark.parametrize("card", CARDS)
@settings(max_examples=3, deadline=None, derandomize=True, database=None)
@given(data=st.data())
def test_fast_sweep_equals_point_by_point(card, data):
    model = load_model(card)
    chip = get_chip(data.draw(st.sampled_from(CHIPS), label="chip"))
    length = data.draw(st.sampled_from([c for c in CONTEXTS if c <= model.max_position]), label="context")
    utils = data.draw(st.none() | st.lists(st.sampled_from(UTILIZATIONS), min_size=1, max_size=4, unique=True),
                      label="utilizations")
    budgets = data.draw(st.none() | st.lists(st.sampled_from(BUDGETS), min_size=1, max_size=3, unique=True),
                        label="token budgets")
    service = ServiceSpec(model=card, concurrency=1, context_length=length,
                          gpu_memory_utilization=tuple(utils) if utils else None,
                          max_num_batched_tokens=tuple(budgets) if budgets else None)
    found, _ = shapes(model, chip, service, None, chip.gpus_per_node, load().reads())
    if not found:
        return
    picked = data.draw(st.lists(st.sampled_from(found), min_size=1, max_size=3, unique=True), label="shapes")
    for shape in picked:
        at = context_length(model, service)
        fast, slow = (ChipTable(chip, chip.gpus_per_node, at, defaults=load().reads())
                      for _ in range(2))
        evaluate_shape(model, chip, service, shape, fast)
        point_by_point(model, chip, service, shape, slow)
        assert fast.rows == slow.rows, shape
        assert fast.verdicts == slow.verdicts, shape
        assert fast.evaluated == slow.evaluated, shape


def test_the_verdict_is_the_stage_that_binds_at_its_own_utilization():
    """dsv3.2 on B200 as tp 8 × pp 2: get_pp_indices splits its 61 layers 61 // 2 = 30 per stage,
    the one left over going to the second-to-last partition: stage 0 holds the embeddings and layers
    0-30 (31), stage 1 layers 31-60 (30), the final norm and the LM head (vLLM's DeepSeek drops the
    MTP layer without speculative decoding). The two stages' blocks differ in size, so which holds
    fewer depends on the budget: at the probe's 0.92 it is stage 1, at the verdict's 0.97 stage 0.
    The verdict is vLLM's engine at 0.97: stage 0's weights (41,725,373,472 bytes), not stage 1's
    (44,362,751,296)."""
    model, chip = load_model("dsv3.2"), get_chip("b200")
    service = ServiceSpec(model="dsv3.2", concurrency=1, context_length=4096)
    shape = Shape(tp=8, dp=1, ep=False, dcp=1, kv_cache_dtype="auto", pp=2)
    grid = shape_grid(model, chip, service, shape, ChipTable(chip, chip.gpus_per_node, 4096, defaults=load().reads()))
    assert [(r.stage.first_layer, r.stage.end_layer) for r in grid.probe.instance.ranks] == [(0, 31), (31, 61)]
    assert (grid.budgets[0], grid.utils[0], grid.probe.stage.index) == (2048, 0.97, 1)
    fast, slow = (ChipTable(chip, chip.gpus_per_node, 4096, defaults=load().reads()) for _ in range(2))
    evaluate_shape(model, chip, service, shape, fast)
    point_by_point(model, chip, service, shape, slow)
    assert fast.verdicts[0].weights == slow.verdicts[0].weights == 41_725_373_472
    assert fast.verdicts == slow.verdicts and fast.rows == slow.rows


def test_the_fast_sweep_reads_lower_utilizations_off_one_kernel():
    """A shape whose pool holds the same requests at the two highest utilizations keeps both rows
    (the lower one is the row `dominant` prefers), as the point-by-point sweep does."""
    model = load_model("llama-3.1-8b")
    chip = get_chip("h200")
    service = ServiceSpec(model="llama-3.1-8b", concurrency=1, context_length=131072,
                          gpu_memory_utilization=(0.9, 0.9001), max_num_batched_tokens=(2048,))
    found, _ = shapes(model, chip, service, None, 8, load().reads())
    fast, slow = (ChipTable(chip, 8, 131072, defaults=load().reads()) for _ in range(2))
    evaluate_shape(model, chip, service, found[0], fast)
    point_by_point(model, chip, service, found[0], slow)
    assert [r.gpu_memory_utilization for r in fast.rows] == [0.9001, 0.9]
    assert fast.rows == slow.rows


@pytest.mark.parametrize("card,tps", [
    ("llama-3.1-8b", {1, 2, 4, 8}),  # 32 heads, 8 KV heads: every power of two within the 8-GPU domain
    ("qwen2.5-7b", {1, 2, 4}),  # 28 heads, 4 KV heads: 7 divides the heads, but neither divides the other's KV
])
def test_the_shapes_offer_only_the_tensor_parallel_sizes_vllm_accepts(card, tps):
    """The candidate shapes' tp filter is the kernel's rule (check_tensor_parallel), worked out here
    by hand from each config's heads on an 8-GPU NVLink domain."""
    model, chip = load_model(card), get_chip("h200")
    found, _ = shapes(model, chip, ServiceSpec(model=card, concurrency=1, context_length=4096), None, 8,
                      load().reads())
    assert {s.tp for s in found} == tps


def test_a_table_sent_from_a_worker_arrives_whole():
    """A candidate table built in a worker goes back to the parent pickled (planner/candidates/parallel.py),
    its rows packed as tuples: it arrives equal in every field, rows in their order, rows of one shape
    sharing that shape."""
    import pickle

    from planner.candidates.table import candidate_table
    from planner.request import PoolLimits

    chip = get_chip("h200")
    service = ServiceSpec(model="qwen3-30b-a3b", concurrency=64, context_length=32768, ttft_ms=2000)
    limits = PoolLimits(chips=("h200",))
    table = candidate_table(ResolvedService.of(service, limits), chip, limits)
    assert len(table.rows) > 10 and table.latency
    back = pickle.loads(pickle.dumps(table))
    assert back == table
    assert [r.shape for r in back.rows] == [r.shape for r in table.rows]
    assert all(a.shape is b.shape for a, b in zip(back.rows, back.rows[1:], strict=False) if a.shape == b.shape)


def test_a_built_tables_dominant_rows_are_each_shapes_best_and_travel_with_it():
    """A built table is sealed (planner/candidates/shapes.py `ChipTable.seal`): its dominant rows are
    found once and kept as indices. They are, shape by shape, the row holding the most requests,
    then with the larger token budget, then at the lower utilization (derived here from the rows
    themselves), in the shapes' order; the same after the table is pickled to or from a worker; and a
    table not sealed finds the same rows each time it is asked."""
    import pickle
    from dataclasses import replace

    from planner.candidates.table import candidate_table
    from planner.request import PoolLimits

    chip = get_chip("h200")
    service = ServiceSpec(model="qwen3-30b-a3b", concurrency=64, context_length=32768)
    limits = PoolLimits(chips=("h200",))
    table = candidate_table(ResolvedService.of(service, limits), chip, limits)
    assert table.best is not None and len(table.rows) > len(table.best) > 1
    by_shape: dict = {}
    for row in table.rows:
        by_shape.setdefault(row.shape, []).append(row)
    expected = [max(rows, key=lambda r: (r.concurrency, r.max_num_batched_tokens, -r.gpu_memory_utilization))
                for _, rows in sorted(by_shape.items())]
    assert table.dominant() == expected
    assert pickle.loads(pickle.dumps(table)).dominant() == expected
    assert replace(table, best=None).dominant() == expected
