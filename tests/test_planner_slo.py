"""Service targets in the search: percentile targets at a request rate, sized by the serving
simulator. The plan meets them (re-simulated here), says which target sets the size, prints the
percentiles, goodput and cost per token; a higher rate or a tighter percentile never costs less."""

from __future__ import annotations

import json

import pytest

from planner.candidates import slo
from planner.cli import main
from planner.report.plan import plan
from planner.request import PlanRequest, PoolLimits, ServiceSpec, SloSpec, WorkloadSpec
from pricing.graph import load_model

DONE_WHEN = ["--model", "llama-3.1-70b", "--chip", "h100", "--chip", "h200", "--isl", "2000", "--osl", "500",
             "--requests-per-second", "20", "--p99-ttft-ms", "2000", "--p90-tpot-ms", "40"]


def _plan(rate=8.0, alternatives=0, **targets):
    targets = targets or {"p99_ttft_ms": 1000, "p90_tpot_ms": 15}
    service = ServiceSpec(model="llama-3.1-8b", concurrency=1, tp=(1,),
                          workload=WorkloadSpec(isl=1000, osl=200, requests_per_second=rate), slo=SloSpec(**targets))
    return plan(PlanRequest(service=service, limits=PoolLimits(chips=("h100",)), alternatives=alternatives))


def test_the_issue_command_plans_and_prints_the_percentiles_goodput_and_cost(capsys):
    assert main([*DONE_WHEN, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    best = out["best"]
    s = best["serving"]
    assert s["ttft_ms"]["p99"] <= 2000 and s["tpot_ms"]["p90"] <= 40
    assert set(s["ttft_ms"]) == set(s["tpot_ms"]) == {"p50", "p90", "p99"}
    assert s["requests_per_second_per_instance"] * best["replicas"] == pytest.approx(20)
    assert 0 < s["goodput"] <= 1
    # $/M tokens: the pool's cost over the tokens 20 requests/s bring an hour
    assert best["cost_per_million_output_tokens"] == pytest.approx(best["cost_per_hour"] / (20 * 500 * 3600) * 1e6,
                                                                    rel=1e-3)
    assert best["cost_per_million_input_tokens"] == pytest.approx(best["cost_per_hour"] / (20 * 2000 * 3600) * 1e6,
                                                                   rel=1e-3)
    assert best["binds"].startswith("service targets at 20 requests/s")
    # the context defaults to the workload's longest request
    assert best["max_model_len"] == 2500


def test_the_plan_meets_its_targets_when_simulated_again():
    result = _plan(alternatives=2)
    service = ServiceSpec(model="llama-3.1-8b", concurrency=1, tp=(1,),
                          workload=WorkloadSpec(isl=1000, osl=200, requests_per_second=8.0),
                          slo=SloSpec(p99_ttft_ms=1000, p90_tpot_ms=15))
    for pool in [result.best, *result.alternatives]:
        assert pool.serving.ttft_ms["p99"] <= 1000 and pool.serving.tpot_ms["p90"] <= 15
    best = result.best
    from planner.candidates.shapes import ChipTable, Row, Shape  # the chosen row, rebuilt from the plan
    from pricing.chips import get_chip

    table = ChipTable(get_chip("h100"), 8)
    row = Row(chip="h100", shape=Shape(best.tensor_parallel_size, best.data_parallel_size, best.enable_expert_parallel,
                                       best.decode_context_parallel_size, best.kv_cache_dtype,
                                       best.pipeline_parallel_size),
              gpu_memory_utilization=best.gpu_memory_utilization,
              max_num_batched_tokens=best.max_num_batched_tokens, max_num_seqs=best.max_num_seqs,
              held_per_rank=best.max_num_seqs)
    candidate = slo.Candidate(load_model("llama-3.1-8b"), table, service, row)
    assert not slo.misses(service, candidate.run(8.0 / best.replicas))
    if best.replicas > 1:  # one replica fewer misses a target: that is what binds says
        assert slo.misses(service, candidate.run(8.0 / (best.replicas - 1)))


@pytest.mark.parametrize("rates", [(2.0, 6.0, 18.0)])
def test_a_higher_rate_never_costs_less(rates):
    costs = [_plan(rate).best.cost_per_hour for rate in rates]
    assert costs == sorted(costs)
    assert costs[0] < costs[-1]


def test_a_tighter_percentile_never_costs_less():
    loose = _plan(p90_ttft_ms=1000, p90_tpot_ms=15).best.cost_per_hour
    tighter = _plan(p99_ttft_ms=1000, p90_tpot_ms=15).best.cost_per_hour  # p99 ≥ p90: a tighter target
    tightest = _plan(p99_ttft_ms=400, p99_tpot_ms=12).best.cost_per_hour
    assert loose <= tighter <= tightest


def test_text_output_prints_the_targets_and_the_cost_per_token(capsys):
    assert main(["--model", "llama-3.1-8b", "--chip", "h100", "--tp", "1", "--isl", "1000", "--osl", "200",
                 "--requests-per-second", "8", "--p99-ttft-ms", "1000", "--p90-tpot-ms", "15", "--goodput",
                 "0.9"]) == 0
    out = capsys.readouterr().out
    assert "p50/p90/p99 TTFT" in out and "TPOT" in out and "goodput" in out
    assert "per million output tokens" in out and "per million input tokens" in out
    assert "8 requests/s" in out


def test_a_target_nothing_meets_is_an_answer(capsys):
    assert main(["--model", "llama-3.1-8b", "--chip", "h100", "--tp", "1", "--isl", "4000", "--osl", "100",
                 "--requests-per-second", "1", "--p50-ttft-ms", "1"]) == 1


@pytest.mark.parametrize(("args", "field"), [
    (["--p99-ttft-ms", "100"], "--p99-ttft-ms"),  # no rate
    (["--isl", "10", "--osl", "10", "--requests-per-second", "1", "--goodput", "0.9"], "--goodput"),
    (["--isl", "10", "--osl", "10", "--requests-per-second", "1", "--p99-ttft-ms", "-1"], "--p99-ttft-ms"),
])
def test_bad_targets_are_one_line_exit_2(args, field, capsys):
    assert main(["--model", "llama-3.1-8b", "--chip", "h100", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and field in err
