"""Service targets in the search: percentile targets at a request rate, sized by the serving
simulator. The plan meets them (re-simulated here), says which target sets the size, prints the
percentiles, goodput and cost per token; a higher rate or a tighter percentile never costs less."""

from __future__ import annotations

import json
import re

import pytest

from planner.app.plan import plan
from planner.candidates import slo
from planner.cli import main
from planner.defaults import load
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
    assert s["requests_per_second_per_instance"] * best["replicas"] == pytest.approx(20, rel=1e-3)
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
    from planner.candidates.shapes import ChipTable, Row, Shape, context_length  # the chosen row, rebuilt
    from pricing.chips import get_chip

    table = ChipTable(get_chip("h100"), 8, context_length(load_model("llama-3.1-8b"), service), defaults=load().reads())
    row = Row(chip="h100", shape=Shape(best.tensor_parallel_size, best.data_parallel_size, best.enable_expert_parallel,
                                       best.decode_context_parallel_size, best.kv_cache_dtype,
                                       best.pipeline_parallel_size),
              gpu_memory_utilization=best.gpu_memory_utilization,
              max_num_batched_tokens=best.max_num_batched_tokens, max_num_seqs=best.max_num_seqs,
              held_per_rank=best.max_num_seqs, flags=best.deployment)
    candidate = slo.Candidate(load_model("llama-3.1-8b"), table, service, row, load())
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


def test_a_target_nothing_meets_is_an_answer_saying_what_one_request_alone_measures(capsys):
    """p50 TTFT under 1 ms for a 4,000-token prompt: even alone, prefill runs 2 x 8.0e9 weights x
    4,000 tokens = 64 TFLOP, at least 65 ms at the H100's 989 TFLOP/s bf16 peak. The explanation
    names the service targets (not the GPUs), the figure one request alone measures, and a bound
    at least that loose."""
    assert main(["--model", "llama-3.1-8b", "--chip", "h100", "--tp", "1", "--isl", "4000", "--osl", "100",
                 "--requests-per-second", "1", "--p50-ttft-ms", "1", "--json"]) == 1
    (why,) = json.loads(capsys.readouterr().out)["explanations"]
    assert why["constraint"] == "service_targets"
    assert "even one request at a time misses" in why["text"]
    alone = float(re.search(r"p50 TTFT ([\d,.]+) ms against ≤ 1 ms", why["text"]).group(1).replace(",", ""))
    assert alone > 2 * 8.0e9 * 4000 / 989e12 * 1000
    suggested = int(re.search(r"no tighter than --p50-ttft-ms (\d+)", why["text"]).group(1))
    assert suggested >= alone


def test_a_pool_wider_than_memory_needs_says_which_target_the_narrower_split_misses(capsys):
    """At 10 requests/s of 1,000/200 tokens Llama-3.1-8B needs one replica for memory (one H100
    holds 399 requests), yet the plan takes two GPUs (1 × tp 2): the one-GPU pool misses p90 TPOT.
    binds says so (not the KV cache), with the figure `plan --tp 1 --max-gpus 1` reports (p90 TPOT ≤ 20 ms:
    vLLM's CUDA factors put one H100's at about 21 ms there)."""
    args = ["--model", "llama-3.1-8b", "--chip", "h100", "--isl", "1000", "--osl", "200",
            "--requests-per-second", "10", "--p99-ttft-ms", "1000", "--p90-tpot-ms", "20", "--json"]
    assert main(["--tp", "1", "--tp", "2", *args]) == 0
    best = json.loads(capsys.readouterr().out)["best"]
    assert (best["gpus"], best["replicas"], best["tensor_parallel_size"]) == (2, 1, 2)
    said = re.match(r"service targets at 10 requests/s: on fewer GPUs, tp 1 \(the narrowest split simulated\) "
                    r"misses them at 1 replica \(10\.00 requests/s each\): p90 TPOT ([\d.]+) ms against ≤ 20 ms; "
                    r"at 1 × tp 2", best["binds"])
    assert said and float(said.group(1)) > 20
    assert main(["--tp", "1", "--max-gpus", "1", *args]) == 1
    (why,) = json.loads(capsys.readouterr().out)["explanations"]
    assert f"p90 TPOT {said.group(1)} ms against ≤ 20 ms" in why["text"]


def test_a_one_gpu_pool_at_a_rate_says_it_meets_the_targets_not_what_concurrency_it_holds(capsys):
    """At 4 requests/s one H100 serves Llama-3.1-8B within the targets: binds says that with the
    figures the serving line prints, not 'holds 399 of the 1 asked' (no concurrency was asked)."""
    assert main(["--model", "llama-3.1-8b", "--chip", "h100", "--tp", "1", "--isl", "1000", "--osl", "200",
                 "--requests-per-second", "4", "--p99-ttft-ms", "1000", "--p90-tpot-ms", "15", "--json"]) == 0
    best = json.loads(capsys.readouterr().out)["best"]
    assert best["gpus"] == 1 and "asked" not in best["binds"]
    said = re.match(r"service targets at 4 requests/s: met by 1 × tp 1 \(4\.00 requests/s each\), the fewest of "
                    r"this split: p99 TTFT ([\d,.]+) ms, p90 TPOT ([\d.]+) ms$", best["binds"])
    assert said, best["binds"]
    assert float(said.group(1).replace(",", "")) == pytest.approx(best["serving"]["ttft_ms"]["p99"], abs=0.06)
    assert float(said.group(2)) == pytest.approx(best["serving"]["tpot_ms"]["p90"], abs=0.06)


def test_too_few_gpus_for_the_rate_name_the_target_and_a_max_gpus_that_fits(capsys):
    """Llama-3.1-8B at 10 requests/s of 1,000/200 tokens on one H100 (tp 1): one instance holds
    399 requests, far above the one the rate asks to hold, so memory is not what binds; the p90
    TPOT target is. The explanation says so, with the figure at one replica, and the --max-gpus it
    proposes plans."""
    args = ["--model", "llama-3.1-8b", "--chip", "h100", "--tp", "1", "--isl", "1000", "--osl", "200",
            "--requests-per-second", "10", "--p99-ttft-ms", "1000", "--p90-tpot-ms", "20", "--json"]
    assert main([*args, "--max-gpus", "1"]) == 1
    (why,) = json.loads(capsys.readouterr().out)["explanations"]
    assert why["constraint"] == "service_targets"
    got = float(re.search(r"p90 TPOT ([\d,.]+) ms against ≤ 20 ms", why["text"]).group(1))
    assert got > 20
    gpus = int(re.search(r"Nearest fit: --max-gpus (\d+)", why["text"]).group(1))
    assert gpus > 1
    assert main([*args, "--max-gpus", str(gpus)]) == 0
    assert json.loads(capsys.readouterr().out)["best"]["gpus"] <= gpus
    assert main([*args, "--max-gpus", str(gpus - 1)]) == 1


@pytest.mark.parametrize(("args", "field"), [
    (["--p99-ttft-ms", "100"], "--p99-ttft-ms"),  # no rate
    (["--isl", "10", "--osl", "10", "--requests-per-second", "1", "--goodput", "0.9"], "--goodput"),
    (["--isl", "10", "--osl", "10", "--requests-per-second", "1", "--p99-ttft-ms", "-1"], "--p99-ttft-ms"),
])
def test_bad_targets_are_one_line_exit_2(args, field, capsys):
    assert main(["--model", "llama-3.1-8b", "--chip", "h100", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and field in err


def test_the_pareto_front_is_the_cheapest_pool_for_each_p99_tpot_and_marks_the_plan(tmp_path, capsys):
    chart = tmp_path / "front.svg"
    assert main(["--model", "llama-3.1-8b", "--chip", "h100", "--tp", "1", "--isl", "1000", "--osl", "200",
                 "--requests-per-second", "8", "--p99-ttft-ms", "1000", "--p90-tpot-ms", "15", "--json",
                 "--chart", str(chart)]) == 0
    best = json.loads(capsys.readouterr().out)["best"]
    points = best["serving"]["pareto"]
    assert points and sum(p["chosen"] for p in points) == 1
    chosen = next(p for p in points if p["chosen"])
    assert (chosen["replicas"], chosen["chip"]) == (best["replicas"], "h100")
    assert chosen["cost_per_million_output_tokens"] == pytest.approx(best["cost_per_million_output_tokens"], rel=1e-3)
    for p in points:  # a front point: nothing both faster (or as fast) and cheaper
        faster = [q for q in points if q["p99_tpot_ms"] < p["p99_tpot_ms"]]
        cheaper_and_faster = any(q["cost_per_million_output_tokens"] <= p["cost_per_million_output_tokens"]
                                 for q in faster)
        assert p["front"] == (not cheaper_and_faster)
    text = chart.read_text()
    assert 'id="chosen-' in text and 'id="front-' in text


def test_compare_sweeps_the_rate_and_charts_cost_per_token(tmp_path):
    from click.testing import CliRunner

    from planner.cli import cli

    chart = tmp_path / "rate.svg"
    result = CliRunner().invoke(cli, ["compare", "--model", "llama-3.1-8b", "--chip", "h100", "--tp", "1", "--isl",
                                      "1000", "--osl", "200", "--requests-per-second", "4", "--requests-per-second",
                                      "16", "--p99-ttft-ms", "1000", "--p90-tpot-ms", "15", "--format", "json",
                                      "--chart", str(chart)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    low, high = (r["services"][0] for r in [data["base"], *data["variants"]])
    assert low["serving"]["requests_per_second"] == 4 and high["serving"]["requests_per_second"] == 16
    assert high["cost_per_hour"] >= low["cost_per_hour"]
    text = chart.read_text()
    assert 'id="rate-llama-3.1-8b"' in text and text.count('id="chosen-') == 2


def test_a_chart_without_service_targets_is_a_one_line_error(capsys, tmp_path):
    assert main(["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "4", "--chart",
                 str(tmp_path / "x.png")]) == 2
    assert "--chart" in capsys.readouterr().err


def test_a_scenario_service_takes_an_slo_block_and_the_review_charts_its_cost(tmp_path):
    from click.testing import CliRunner

    from planner.cli import cli

    review = tmp_path / "review.yaml"
    review.write_text("""review: chat at a rate
services:
  - {name: chat, model: llama-3.1-8b, chips: [h100], tp: [1], workload: {isl: 1000, osl: 200, requests_per_second: 8},
     slo: {p99_ttft_ms: 1000, p90_tpot_ms: 15}}
variants:
  busy: {services.chat.workload: {isl: 1000, osl: 200, requests_per_second: 16}}
""")
    chart = tmp_path / "review.svg"
    result = CliRunner().invoke(cli, ["scenario", str(review), "--variants", "--format", "json",
                                      "--chart", str(chart)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    base, busy = data["base"]["services"][0], data["variants"][0]["services"][0]
    assert base["serving"]["tpot_ms"]["p90"] <= 15 and busy["serving"]["ttft_ms"]["p99"] <= 1000
    assert busy["serving"]["requests_per_second"] == 16
    assert busy["cost_per_hour"] >= base["cost_per_hour"]
    cost = (tmp_path / "review-cost.svg").read_text()
    assert 'id="rate-chat"' in cost and 'id="chosen-chat"' in cost
    assert 'id="bars-h100-' in chart.read_text()


def test_a_scenario_service_sized_by_its_rate_has_no_concurrency_asked_nor_headroom(tmp_path, capsys):
    """A service with targets at a rate and no concurrency: the review's table and markdown say
    what the pool holds, and '-' for what was asked and for the headroom over it (as `plan` does),
    not '/ 1' and a headroom of thousands of percent."""
    review = tmp_path / "review.yaml"
    review.write_text("""services:
  - {name: chat, model: llama-3.1-8b, chips: [h100], tp: [1], workload: {isl: 1000, osl: 200, requests_per_second: 8},
     slo: {p99_ttft_ms: 1000, p90_tpot_ms: 15}}
""")
    assert main(["scenario", str(review), "--format", "markdown"]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| chat |")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    held, asked = cells[5].split(" / ")
    assert int(held.replace(",", "")) > 1 and asked == "-" and cells[6] == "-"
    assert main(["scenario", str(review)]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.lstrip().startswith("chat ")]
    assert f"{held} / -" in line and "%" not in line


def test_a_scenario_slo_without_a_rate_is_an_error_naming_the_path(tmp_path, capsys):
    review = tmp_path / "review.yaml"
    review.write_text("services:\n  - {name: chat, model: llama-3.1-8b, chips: [h100], slo: {p99_ttft_ms: 100}}\n")
    assert main(["scenario", str(review)]) == 2
    assert "review.yaml:2: services.chat.slo" in capsys.readouterr().err  # the service by name, with its line


@pytest.mark.parametrize("lo, hi", [(0, 1), (0, 2), (3, 100), (0, 1000)])
def test_the_bisection_finds_the_boundary_asking_only_midpoints(lo, hi):
    for last in range(lo, hi):  # the predicate holds up to `last` and not above
        asked = []

        def holds(k, last=last, asked=asked):
            asked.append(k)
            return k <= last

        assert slo.bisect(holds, lo, hi) == (last, last + 1)
        assert all(lo < k < hi for k in asked) and len(asked) <= max(0, (hi - lo - 1).bit_length())


@pytest.mark.parametrize("estimate", [0.5, 7.0, 30.0, 1000.0])
def test_sizing_finds_the_fewest_replicas_that_meet_from_any_estimate(monkeypatch, estimate):
    """size() on an instance that meets the targets up to `cap` requests/s: the fewest replicas is
    ceil(rate / cap) whether the closed-form estimate starts it above the answer or below it."""
    from types import SimpleNamespace

    rate = 100.0

    class Instance:
        service = SimpleNamespace(workload=SimpleNamespace(requests_per_second=rate))
        reads = load()  # the shipped planner defaults, unrecorded (no plan's provenance kept)

        def run(self, per_instance, count=None):
            return per_instance  # None: one request at a time

        def estimate(self):
            return estimate

    for cap in (0.9, 3.0, 7.5, 13.0, 40.0, 100.0):
        monkeypatch.setattr(slo, "misses", lambda service, served, cap=cap: [] if served is None or served <= cap
                            else ["missed"])
        sizing = slo.size(Instance(), memory=1, cap=None)
        assert sizing.replicas == -(-rate // cap) and not slo.misses(None, sizing.served), (cap, estimate)
        assert sizing.replicas == 1 or slo.misses(None, sizing.at(sizing.replicas - 1))
