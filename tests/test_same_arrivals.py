"""`--serving auto` under one queueing model (issue 38): the aggregated pool (sized by its throughput
at the rate, no queueing) and the disaggregated fleet (sized with an M/D/1 prefill queue) are judged
again on the same simulated Poisson arrivals before the cheaper is kept."""

from __future__ import annotations

import json

from planner.cli import main

AUTO = ["--model", "llama-3.1-8b", "--chip", "h100", "--isl", "2000", "--osl", "200", "--ttft-ms", "500",
        "--tpot-ms", "30", "--context-length", "8192", "--serving", "auto", "--json"]


def _choice(rate: int, capsys) -> dict:
    assert main([*AUTO, "--requests-per-second", str(rate)]) == 0
    return json.loads(capsys.readouterr().out)["serving"]


def test_a_cheaper_aggregated_pool_that_queues_past_the_ttft_on_the_same_arrivals_loses(capsys):
    """At 45 requests/s the aggregated pool sized by throughput is cheaper, but its instances, loaded near
    their throughput, queue prompts: on the shared arrivals its mean TTFT is past 500 ms, the fleet's is not."""
    c = _choice(45, capsys)
    agg, dis, same = c["aggregated"]["best"], c["disaggregated"], c["same_arrivals"]
    assert agg["cost_per_hour"] < dis["cost_per_hour"]
    assert same["aggregated"]["ttft_ms"] > 500 and not same["aggregated"]["meets"]
    assert same["disaggregated"]["ttft_ms"] <= 500 and same["disaggregated"]["tpot_ms"] <= 30
    assert same["disaggregated"]["meets"]
    assert c["chosen"] == "disagg" and c["why"].startswith("only the disaggregated plan meets the targets")
    assert same["requests"] == 1000 and same["requests_per_second"] == 45


def test_when_both_meet_the_targets_on_the_same_arrivals_the_cheaper_is_kept(capsys):
    c = _choice(10, capsys)
    same = c["same_arrivals"]
    assert same["aggregated"]["meets"] and same["disaggregated"]["meets"]
    assert c["chosen"] == "agg" and c["aggregated"]["best"]["cost_per_hour"] <= c["disaggregated"]["cost_per_hour"]
    assert "Both meet the targets on the same simulated arrivals" in c["why"]


def test_the_disaggregated_ttft_on_the_same_arrivals_is_at_least_its_parts_without_queueing(capsys):
    """A request's TTFT in the fleet is never below its prefill alone plus the hand-over and one decode step."""
    c = _choice(10, capsys)
    t = c["disaggregated"]["ttft"]
    assert c["same_arrivals"]["disaggregated"]["ttft_ms"] >= t["prefill_ms"] + t["transfer_ms"]
