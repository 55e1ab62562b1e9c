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


# -- percentile targets and goodput on the same arrivals (hand-checked) ----------------------------------------
def _served(rows):
    from pricing.serving.simulate import Distribution, Served

    return Served(ttft=Distribution.of([r[0] for r in rows]), tpot=Distribution.of([r[1] for r in rows]),
                  itl=Distribution.of([0.01]), e2e=Distribution.of([r[2] for r in rows]), per_request=tuple(rows),
                  duration=10.0, requests=len(rows), input_tokens=0, output_tokens=0, preemptions=0)


PREFILL = [(0.100, 0.0, 0.100), (0.300, 0.0, 0.300), (0.200, 0.0, 0.200)]  # (ttft, tpot, e2e) s, one output token
DECODE = [(0.010, 0.020, 0.500), (0.030, 0.010, 0.400), (0.020, 0.030, 0.600)]  # arriving prefilled


def _service(**slo):
    from planner.request import ServiceSpec

    return ServiceSpec(model="llama-3.1-8b", concurrency=1, workload={"isl": 2000, "osl": 200,
                       "requests_per_second": 1}, ttft_ms=500, slo=slo or None)


def test_a_disaggregated_request_is_its_prefill_the_hand_over_and_its_decode():
    """Request i: TTFT = prefill TTFT + 5 ms + decode TTFT (115, 335, 225 ms); TPOT the decode's; E2E = prefill
    TTFT + 5 ms + decode E2E (605, 705, 805 ms). Percentiles as numpy's linear: p50 TTFT 225 ms, p90 TTFT
    225 + 0.8 × 110 = 313 ms, p90 TPOT 20 + 0.8 × 10 = 28 ms."""
    from planner.app.same_arrivals import disaggregated

    d = disaggregated(_served(PREFILL), _served(DECODE), 0.005)
    assert [round(r[0], 6) for r in d.per_request] == [0.115, 0.335, 0.225]
    assert [r[1] for r in d.per_request] == [0.020, 0.010, 0.030]
    assert [round(r[2], 6) for r in d.per_request] == [0.605, 0.705, 0.805]
    assert round(d.ttft.percentile(50), 6) == 0.225 and round(d.ttft.percentile(90), 6) == 0.313
    assert round(d.tpot.percentile(90), 6) == 0.028


def test_the_percentile_targets_the_slo_names_and_goodput_judge_a_plan():
    from planner.app.same_arrivals import disaggregated, simulated
    from planner.kinds import Serving

    d = disaggregated(_served(PREFILL), _served(DECODE), 0.005)
    met = simulated(_service(p50_ttft_ms=250, p90_tpot_ms=30), Serving.DISAGG, d)
    assert met.meets and met.percentiles == {"p50_ttft_ms": 225.0, "p90_tpot_ms": 28.0} and not met.misses
    assert met.ttft_ms == 225.0  # the mean of 115, 335 and 225 ms, within ttft_ms 500
    missed = simulated(_service(p50_ttft_ms=200), Serving.DISAGG, d)
    assert not missed.meets and missed.misses == ["p50 TTFT 225.0 ms against ≤ 200 ms"]
    # goodput: requests within every per-request bound (TTFT ≤ 250 ms): 115 and 225 ms, 2 of 3
    short = simulated(_service(p50_ttft_ms=250, goodput=0.9), Serving.DISAGG, d)
    assert short.goodput == round(2 / 3, 4) and short.misses == ["goodput 66.7% against ≥ 90.0%"]
    assert simulated(_service(p50_ttft_ms=250, goodput=0.6), Serving.DISAGG, d).meets


def test_a_cheaper_plan_that_misses_a_percentile_on_the_same_arrivals_loses():
    from planner.app.disagg_plan import _on_same_arrivals
    from planner.app.same_arrivals import SameArrivals, Simulated
    from planner.kinds import Serving

    agg = Simulated(serving=Serving.AGG, ttft_ms=200, tpot_ms=20, percentiles={"p99_ttft_ms": 900}, meets=True)
    dis = Simulated(serving=Serving.DISAGG, ttft_ms=150, tpot_ms=10, percentiles={"p99_ttft_ms": 1100},
                    misses=["p99 TTFT 1,100.0 ms against ≤ 1,000 ms"], meets=False)
    same = SameArrivals(requests_per_second=10, requests=1000, seed=0, aggregated=agg, disaggregated=dis)
    chosen, why = _on_same_arrivals(same, Serving.DISAGG, "disaggregated is cheaper")
    assert chosen == Serving.AGG and "only the aggregated plan meets the targets" in why
    assert "the disaggregated plan misses p99 TTFT 1,100.0 ms against ≤ 1,000 ms" in why


def test_auto_judges_both_plans_by_the_percentile_targets_it_is_given(capsys):
    """The fleet's p99 TTFT on the shared arrivals, read once under a loose target: a target just below it is
    missed, one at it met (the aggregated pool, sized by the serving simulator to the target, meets both)."""
    base = [*AUTO, "--requests-per-second", "10"]

    def choice(ms):
        assert main([*base, "--p99-ttft-ms", f"{ms:g}"]) == 0
        return json.loads(capsys.readouterr().out)["serving"]

    loose = choice(5000)["same_arrivals"]
    p99 = loose["disaggregated"]["percentiles"]["p99_ttft_ms"]
    assert set(loose["aggregated"]["percentiles"]) == {"p99_ttft_ms"} and loose["disaggregated"]["meets"]
    below = choice(p99 - 1)
    assert not below["same_arrivals"]["disaggregated"]["meets"]
    assert below["same_arrivals"]["disaggregated"]["misses"][0].startswith("p99 TTFT")
    assert below["same_arrivals"]["aggregated"]["meets"] and below["chosen"] == "agg"
    assert choice(p99 + 0.01)["same_arrivals"]["disaggregated"]["meets"]


# -- a scenario's `serving: auto` makes the same choice as `plan --serving auto` --------------------------------
def _scenario_roles(rate: int, tmp_path, capsys) -> tuple[list[tuple[str, int]], list[str]]:
    import yaml

    file = tmp_path / "auto.yaml"
    file.write_text(yaml.safe_dump({"review": "auto", "services": [{
        "name": "chat", "model": "llama-3.1-8b", "chips": ["h100"], "serving": "auto", "concurrency": 1,
        "ttft_ms": 500, "tpot_ms": 30, "context_length": 8192,
        "workload": {"isl": 2000, "osl": 200, "requests_per_second": rate}}]}))
    assert main(["scenario", str(file), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    return [(s["role"], s["gpus"]) for s in out["services"]], out["notes"]


def test_a_scenario_service_on_auto_makes_the_same_choice_as_the_command(tmp_path, capsys):
    """At 45 requests/s the aggregated pool is cheaper but only the fleet meets the targets on the same
    arrivals: the command and the scenario both plan the fleet, of the same pools; at 10 requests/s both
    meet them, and both keep the cheaper aggregated pool."""
    c = _choice(45, capsys)
    assert c["chosen"] == "disagg"
    roles, notes = _scenario_roles(45, tmp_path, capsys)
    dis = c["disaggregated"]
    assert roles == [("prefill", dis["prefill"]["gpus"]), ("decode", dis["decode"]["gpus"])]
    assert notes[0].startswith("chat: serving auto planned disaggregated: on the same simulated arrivals")
    assert "the aggregated one misses mean TTFT" in notes[0]
    c = _choice(10, capsys)
    assert c["chosen"] == "agg"
    roles, notes = _scenario_roles(10, tmp_path, capsys)
    assert roles == [("aggregated", c["aggregated"]["best"]["gpus"])] and not notes
