"""The chip catalogue: every chip issue 12 names is listed with its sources, estimated prices are
marked wherever a price is printed, parts without NVLink run tp over PCIe, and a plan runs on each."""

import json

import pytest

from planner.app.plan import plan
from planner.candidates.service import ResolvedService
from planner.cli import main
from planner.request import PlanRequest, PoolLimits, ServiceSpec
from pricing.chips import chip_ids, get_chip

ISSUE_12 = ("gh200-96gb", "gh200-144gb", "h100-pcie", "h100-nvl", "h200-nvl", "h20-141gb", "a100-40gb",
            "a100-40gb-pcie", "a10", "a10g", "l4", "l40", "rtx-4090", "rtx-5090", "dgx-spark", "mi250x", "mi300a")


def test_every_issue_12_chip_is_listed_with_a_source_for_each_value(capsys):
    assert main(["chips", "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    for chip in ISSUE_12:
        row = rows[chip]
        for field in ("memory_bytes", "nvlink_domain", "gpus_per_node", "interconnect", "fp8", "fp4",
                      "price_per_gpu_hour"):
            assert row["sources"][field].strip(), (chip, field)
        assert row["memory_bytes"] % 2**20 == 0
        if row["price_estimate"]:
            assert row["sources"]["price_per_gpu_hour"].startswith("ESTIMATE"), chip
            assert row["price_as_of"]


def test_estimates_say_so_in_the_yaml_and_in_the_table(capsys):
    estimated = [c for c in chip_ids() if get_chip(c).price_estimate]
    quoted = [c for c in chip_ids() if not get_chip(c).price_estimate]
    assert "l4" in estimated and "h100" in quoted
    for c in chip_ids():  # the flag and the ESTIMATE word in the source agree
        chip = get_chip(c)
        source = next(p.source for p in chip.provenance if p.name.endswith("price_per_gpu_hour"))
        assert source.startswith("ESTIMATE") == chip.price_estimate, c
    assert main(["chips"]) == 0
    out = capsys.readouterr().out
    assert "0.70*" in out and "2.99 " in out and "an estimate, not a quote" in out


def test_a_user_price_is_no_estimate():
    chip = get_chip("l4").with_overrides(price=0.5)
    assert not chip.price_estimate and chip.price_label == "0.50"


@pytest.mark.parametrize("chip,domain,link", [("l4", 8, "PCIe"), ("a10", 4, "PCIe"), ("h100", 8, "NVLink"),
                                              ("h100-nvl", 2, "NVLink"), ("gh200-96gb", 1, "one GPU per node"),
                                              ("mi250x", 8, "xGMI"), ("gb200", 72, "NVLink")])
def test_tp_spans_the_nvlink_domain_or_the_pcie_node(chip, domain, link):
    c = get_chip(chip)
    assert (c.tp_domain, c.tp_link) == (domain, link)


def test_a_pcie_chip_plans_tp_over_pcie_and_says_so():
    """Llama-3.1-70B bf16 (131 GiB of weights) cannot fit one L40S: without pipeline stages, tp 4
    over PCIe serves it; with them, pipeline stages within the node do (vLLM's advice for GPUs
    without NVLink)."""
    req = PlanRequest(service=ServiceSpec(model="llama-3.1-70b", concurrency=4, context_length=8192, pp=(1,)),
                      limits=PoolLimits(chips=("l40s",)))
    result = plan(req)
    assert result.feasible and result.best.tensor_parallel_size >= 4
    free = plan(req.model_copy(update={"service": req.service.model_copy(update={"pp": None})}))
    assert free.best.gpus_per_replica >= 4 and free.best.nodes_per_replica == 1
    from planner.candidates.table import candidate_table
    table = candidate_table(ResolvedService.of(req.service, req.limits), get_chip("l40s"), req.limits)
    assert any("over PCIe" in note for note in table.excluded)


@pytest.mark.parametrize("chip", chip_ids())
def test_a_plan_runs_on_every_chip(chip):
    req = PlanRequest(service=ServiceSpec(model="qwen2.5-7b", concurrency=4, context_length=4096,
                                          max_num_batched_tokens=(2048,)),
                      limits=PoolLimits(chips=(chip,)))
    result = plan(req)
    assert result.feasible, result.explanations
    best = result.best
    assert best.held >= 4 and best.price_estimate == get_chip(chip).price_estimate
    assert best.cost_per_hour == pytest.approx(best.gpus * get_chip(chip).price_per_gpu_hour, abs=1e-4)


def test_plan_table_marks_estimated_prices(capsys):
    assert main(["--model", "qwen2.5-7b", "--chip", "l4", "--concurrency", "4", "--context-length", "4096"]) == 0
    out = capsys.readouterr().out
    assert "* l4: $0.70/GPU-hour is an estimate as of 2026-05-01" in out
