"""`plan --max-rate` (issue 38): the most requests per second a pool of --max-gpus GPUs serves
within service targets. Properties: a larger pool never serves less, a tighter target never
serves more, the rate reported meets the targets when simulated again and the next rate of the
grid does not, and the rate planned back with --requests-per-second needs no more GPUs than the pool."""

from __future__ import annotations

import json

import pytest

import planner
from planner.candidates import slo
from planner.candidates.slo import grid_index, grid_rate
from planner.cli import main
from planner.defaults import load
from planner.request import PlanRequest, PoolLimits, SloSpec

WORKLOAD = {"isl": 1000, "osl": 200}
TARGETS = {"p99_ttft_ms": 1000, "p90_tpot_ms": 15}


GRID = load()  # the planner defaults the rate grid is read from (serving.rate_digits, serving.lowest_rate)

def _most(max_gpus: int = 4, targets: dict | None = None, tp=(1, 2), chip: str = "h100"):
    return planner.max_rate(model="llama-3.1-8b", chip=chip, max_gpus=max_gpus, tp=tp, workload=WORKLOAD,
                            slo=targets or TARGETS)


def test_the_grid_steps_by_at_most_one_percent_and_indexes_back():
    ks = range(0, 9000, 7)
    for k in ks:
        low, high = grid_rate(k, GRID), grid_rate(k + 1, GRID)
        assert low < high <= low * 1.01 + 1e-12
        assert grid_index(low, GRID) == k
        assert grid_index((low + high) / 2, GRID) == k  # between two grid rates: the lower
    assert grid_rate(0, GRID) == 0.001 and grid_rate(2700, GRID) == 1.0 and grid_rate(2723, GRID) == 1.23


@pytest.mark.parametrize("step", [1, 3, 128])
def test_the_search_finds_the_highest_index_a_monotone_predicate_holds_at_whatever_the_start(step):
    top = 300
    for threshold in (-1, 0, 1, 7, 150, 299, 300):
        for start in (0, 5, 151, 300, 400):
            found = slo.highest_index(lambda k, t=threshold: k <= t, start, top, step)
            expected = (None, 0) if threshold < 0 else (top, None) if threshold >= top else (threshold, threshold + 1)
            assert found == expected, (threshold, start)


@pytest.mark.parametrize("smaller, larger", [(1, 2), (2, 4), (4, 8)])
def test_a_larger_pool_never_serves_less(smaller, larger):
    assert _most(larger).requests_per_second >= _most(smaller).requests_per_second > 0


@pytest.mark.parametrize("loose, tight", [
    ({"p99_ttft_ms": 1000, "p90_tpot_ms": 20}, {"p99_ttft_ms": 1000, "p90_tpot_ms": 15}),
    ({"p99_ttft_ms": 1000, "p90_tpot_ms": 15}, {"p99_ttft_ms": 150, "p90_tpot_ms": 15}),
    ({"p90_tpot_ms": 15}, {"p99_tpot_ms": 15}),  # a higher percentile under the same bound
])
def test_a_tighter_target_never_serves_more(loose, tight):
    assert _most(4, loose).requests_per_second >= _most(4, tight).requests_per_second


def test_the_binding_target_loosened_serves_more():
    """TPOT binds at 15 ms (the binds sentence says so): at 20 ms the pool serves strictly more."""
    tight = _most(4)
    assert "p90 TPOT" in tight.best.binds.rpartition("each:")[2]
    assert _most(4, {"p99_ttft_ms": 1000, "p90_tpot_ms": 20}).requests_per_second > tight.requests_per_second


def test_the_rate_meets_the_targets_simulated_again_and_the_next_grid_rate_misses():
    result = _most(4)
    best = result.best
    per_instance = result.requests_per_second / best.replicas
    assert best.serving.requests_per_second_per_instance == pytest.approx(per_instance)
    assert best.serving.ttft_ms["p99"] <= 1000 and best.serving.tpot_ms["p90"] <= 15
    assert result.shapes[0].requests_per_second == result.requests_per_second
    assert all(s.requests_per_second <= result.requests_per_second for s in result.shapes)
    # the binds sentence names the target missed one grid step (≤ 1 %) above, with its figure
    nxt = grid_rate(grid_index(per_instance, GRID) + 1, GRID)
    assert f"at {nxt:g} requests/s each:" in best.binds and "against ≤" in best.binds
    # every GPU of the pool is used by the best shape's replicas (tp 1 and tp 2 both pack 4 GPUs)
    assert best.gpus == 4 and best.gpus_per_replica * best.replicas == best.gpus


def test_replicas_share_the_rate_evenly_so_n_gpus_of_tp_1_serve_n_times_one():
    one = _most(1, tp=(1,)).requests_per_second
    assert one > 0
    assert _most(8, tp=(1,)).requests_per_second == pytest.approx(8 * one)


@pytest.mark.parametrize("max_gpus", [1, 2, 8])
def test_the_rate_planned_back_needs_no_more_gpus_than_the_pool(max_gpus):
    from planner.app.api import max_rate_request, request_of

    asked = request_of(model="llama-3.1-8b", chip="h100", max_gpus=max_gpus, tp=(1, 2), concurrency=1,
                       workload=WORKLOAD)
    request = max_rate_request(asked.service, SloSpec(**TARGETS), asked.limits)
    result = planner.max_rate(request)
    back = planner.plan(PlanRequest(service=request.at(result.requests_per_second),
                                    limits=PoolLimits(chips=("h100",))))
    assert back.feasible and back.best.gpus <= max_gpus


def test_cost_per_token_is_the_pool_cost_over_the_tokens_the_rate_brings():
    result = _most(2)
    best, rate = result.best, result.requests_per_second
    assert best.cost_per_million_output_tokens == pytest.approx(best.cost_per_hour / (rate * 200 * 3600) * 1e6,
                                                                rel=1e-3)
    assert best.cost_per_million_input_tokens == pytest.approx(best.cost_per_hour / (rate * 1000 * 3600) * 1e6,
                                                               rel=1e-3)


def test_the_command_prints_json_of_kind_max_rate(capsys):
    args = ["--model", "llama-3.1-8b", "--chip", "h100", "--tp", "1", "--tp", "2", "--max-gpus", "4", "--isl", "1000",
            "--osl", "200", "--p99-ttft-ms", "1000", "--p90-tpot-ms", "15", "--max-rate"]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "max_rate" and out["max_gpus"] == 4
    assert out["requests_per_second"] == _most(4).requests_per_second
    assert out["target"]["requests_per_second"] == out["requests_per_second"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"llama-3.1-8b (--max-gpus 4): at most {out['requests_per_second']:g} requests/s")
    assert "binds: --max-gpus 4 holds" in text


def test_the_json_validates_against_the_report_schema(capsys):
    jsonschema = pytest.importorskip("jsonschema")
    from planner.report.schema import report_schema

    assert main(["--model", "llama-3.1-8b", "--chip", "h100", "--tp", "1", "--max-gpus", "1", "--isl", "1000",
                 "--osl", "200", "--p99-ttft-ms", "1000", "--max-rate", "--json"]) == 0
    jsonschema.validate(json.loads(capsys.readouterr().out), report_schema())


@pytest.mark.parametrize("extra, flag", [
    ([], "--max-gpus"),  # no pool
    (["--max-gpus", "8", "--requests-per-second", "5"], "--requests-per-second"),
    (["--max-gpus", "8", "--concurrency", "5"], "--concurrency"),
    (["--max-gpus", "8", "--serving", "disagg"], "--serving"),
    (["--max-gpus", "8", "--tpot-ms", "20"], "--tpot-ms"),
    (["--max-gpus", "8", "--provenance"], "--provenance"),
    (["--max-gpus", "8", "--time-limit", "5"], "--time-limit"),
    (["--max-gpus", "8", "--format", "csv"], "--format"),
])
def test_inapplicable_combinations_are_one_line_exit_2(extra, flag, capsys):
    args = ["--model", "llama-3.1-8b", "--chip", "h100", "--isl", "1000", "--osl", "200", "--p99-ttft-ms", "1000",
            "--max-rate", *extra]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and flag in err and "Traceback" not in err


def test_without_targets_or_lengths_is_one_line_exit_2(capsys):
    assert main(["--model", "llama-3.1-8b", "--chip", "h100", "--max-gpus", "8", "--isl", "1000", "--osl", "200",
                 "--max-rate"]) == 2
    assert "--max-rate" in capsys.readouterr().err
    assert main(["--model", "llama-3.1-8b", "--chip", "h100", "--max-gpus", "8", "--p99-ttft-ms", "1000",
                 "--max-rate"]) == 2
    assert "--isl" in capsys.readouterr().err


def test_the_api_names_the_missing_field():
    with pytest.raises(planner.InputError) as err:
        planner.max_rate(model="llama-3.1-8b", chip="h100", workload=WORKLOAD, slo=TARGETS)
    assert err.value.field == "max_gpus"
    with pytest.raises(planner.InputError) as err:
        planner.max_rate(model="llama-3.1-8b", chip="h100", max_gpus=8, workload={**WORKLOAD,
                         "requests_per_second": 5}, slo=TARGETS)
    assert err.value.field == "requests_per_second"


def test_targets_one_request_alone_misses_are_an_answer_exit_1(capsys):
    assert main(["--model", "llama-3.1-8b", "--chip", "h100", "--tp", "1", "--max-gpus", "2", "--isl", "1000",
                 "--osl", "200", "--p99-tpot-ms", "1", "--max-rate", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert not out["feasible"] and out["requests_per_second"] == 0 and out["best"] is None
    assert "even one request at a time" in out["explanations"][0]["text"]
    assert out["shapes"][0]["misses_alone"][0].startswith("p99 TPOT")


# -- disaggregated: the most a prefill pool and a decode pool within --max-gpus serve ----------------------
DISAGG = {"serving": "disagg", "context_length": 8192, "ttft_ms": 1500, "tpot_ms": 30}


def _most_disagg(max_gpus: int = 8, **targets):
    return planner.max_rate(model="llama-3.1-8b", chip="h100", max_gpus=max_gpus, workload={"isl": 2000, "osl": 200},
                            **{**DISAGG, **targets})


def test_a_larger_disaggregated_pool_never_serves_less():
    rates = [_most_disagg(g).requests_per_second for g in (2, 4, 8)]
    assert 0 < rates[0] <= rates[1] <= rates[2]


def test_a_tighter_ttft_never_lets_a_disaggregated_fleet_serve_more():
    assert _most_disagg(8, ttft_ms=400).requests_per_second <= _most_disagg(8).requests_per_second


def test_the_disaggregated_rate_planned_back_needs_no_more_gpus_and_the_next_grid_rate_does_not_fit():
    result = _most_disagg(8)
    fleet = result.fleet
    assert result.feasible and fleet.gpus <= 8 and fleet.requests_per_second == result.requests_per_second
    back = planner.plan_serving(model="llama-3.1-8b", chip="h100", workload={"isl": 2000, "osl": 200,
                                "requests_per_second": result.requests_per_second}, **DISAGG).serving.disaggregated
    assert back.feasible and back.gpus <= 8
    above = grid_rate(grid_index(result.requests_per_second, GRID) + 1, GRID)
    beyond = planner.plan_serving(model="llama-3.1-8b", chip="h100", max_gpus=8, workload={
        "isl": 2000, "osl": 200, "requests_per_second": above}, **DISAGG).serving.disaggregated
    assert not beyond.feasible
    assert f"at {above:g} requests/s:" in result.binds


def test_the_command_answers_for_a_disaggregated_fleet(capsys):
    args = ["--model", "llama-3.1-8b", "--chip", "h100", "--max-gpus", "4", "--isl", "2000", "--osl", "200",
            "--context-length", "8192", "--ttft-ms", "1500", "--tpot-ms", "30", "--serving", "disagg", "--max-rate"]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "max_rate" and out["serving"] == "disagg" and out["best"] is None
    assert out["fleet"]["gpus"] <= 4 and out["requests_per_second"] == _most_disagg(4).requests_per_second


@pytest.mark.parametrize("extra, flag", [
    (["--serving", "disagg", "--tpot-ms", "30"], "--max-rate"),  # no --ttft-ms
    (["--serving", "auto", "--ttft-ms", "1500", "--p99-ttft-ms", "1000"], "--serving"),
    (["--ttft-ms", "1500", "--p99-ttft-ms", "1000"], "--ttft-ms"),  # an aggregated pool takes percentile targets
])
def test_inapplicable_disaggregated_combinations_are_one_line_exit_2(extra, flag, capsys):
    args = ["--model", "llama-3.1-8b", "--chip", "h100", "--isl", "2000", "--osl", "200", "--max-gpus", "8",
            "--max-rate", *extra]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and flag in err and "Traceback" not in err


def test_a_disaggregated_plan_prints_and_emits_cost_per_token_as_an_aggregated_one(capsys):
    """$/M tokens: both pools' cost over the tokens the rate brings an hour (5 requests/s × 200 output and
    2,000 input tokens), in the JSON and in the text, for the fleet and each alternative."""
    args = ["--model", "llama-3.1-8b", "--chip", "h100", "--isl", "2000", "--osl", "200", "--requests-per-second", "5",
            "--ttft-ms", "1500", "--tpot-ms", "30", "--context-length", "8192", "--serving", "disagg"]
    assert main([*args, "--json"]) == 0
    fleet = json.loads(capsys.readouterr().out)["serving"]["disaggregated"]
    for f in [fleet, *fleet["alternatives"]]:
        roles = [f["prefill"]["cost_per_million_output_tokens"], f["decode"]["cost_per_million_output_tokens"]]
        assert sum(roles) == pytest.approx(f["cost_per_million_output_tokens"], abs=2e-4)  # each role's share
        assert f["cost_per_million_output_tokens"] == pytest.approx(f["cost_per_hour"] / (5 * 200 * 3600) * 1e6,
                                                                    abs=1e-4)
        assert f["cost_per_million_input_tokens"] == pytest.approx(f["cost_per_hour"] / (5 * 2000 * 3600) * 1e6,
                                                                   abs=1e-4)
    assert main(args) == 0
    assert (f"cost per token: ${fleet['cost_per_million_output_tokens']:.3f} per million output tokens"
            in capsys.readouterr().out)


def test_every_rate_based_mode_takes_the_workloads_longest_request_as_its_default_context():
    """One rule (`--context-length`'s help): at a rate, max_model_len defaults to isl + osl (2,000 + 200),
    in an aggregated plan by mean or percentile targets, a disaggregated one, and --max-rate of either."""
    at_rate = {"isl": 2000, "osl": 200, "requests_per_second": 2}
    common = {"model": "llama-3.1-8b", "chip": "h100"}
    by_means = planner.plan(**common, ttft_ms=1500, tpot_ms=30, workload=at_rate)
    by_targets = planner.plan(**common, concurrency=1, workload=at_rate, slo={"p99_ttft_ms": 1500})
    fleet = planner.plan_serving(**common, ttft_ms=1500, tpot_ms=30, workload=at_rate).serving.disaggregated
    most = planner.max_rate(**common, max_gpus=2, workload={"isl": 2000, "osl": 200}, slo={"p99_ttft_ms": 1500})
    most_disagg = planner.max_rate(**common, max_gpus=2, serving="disagg", ttft_ms=1500, tpot_ms=30,
                                   workload={"isl": 2000, "osl": 200})
    lengths = [by_means.best.max_model_len, by_targets.best.max_model_len, fleet.prefill.max_model_len,
               fleet.decode.max_model_len, most.best.max_model_len, most_disagg.fleet.prefill.max_model_len,
               most_disagg.fleet.decode.max_model_len, by_means.target.context_length,
               most.target.context_length, most_disagg.target.context_length]
    assert lengths == [2200] * len(lengths)
    # without a rate, vLLM's default: the model's maximum position (131,072 for Llama 3.1)
    assert planner.plan(**common, concurrency=8).best.max_model_len == 131072


@pytest.mark.parametrize("model, chip, gpus, said", [
    ("llama-3.1-8b", "a10g", 2, "a10g: no vendor-sourced bf16_flops"),  # no step-model rates to simulate with
    ("llama-3.1-70b", "h100", 1, "no instance shape of llama-3.1-70b fits --max-gpus 1 on h100"),  # 141 GB of bf16
])
def test_a_pool_that_serves_no_rate_says_why_exit_1(model, chip, gpus, said, capsys):
    assert main(["--model", model, "--chip", chip, "--max-gpus", str(gpus), "--isl", "2000", "--osl", "200",
                 "--p99-ttft-ms", "1000", "--max-rate"]) == 1
    out = capsys.readouterr().out
    assert f"{model} (--max-gpus {gpus}): serves no rate within p99 TTFT ≤ 1,000 ms" in out and said in out


# -- --emit k8s: the pool the rate was found for --------------------------------------------------------------
def test_max_rate_emits_the_pool_it_sized(tmp_path, capsys):
    """The manifest is the best pool's: its replicas, its split and its max_num_seqs, as the JSON reports them."""
    yaml = pytest.importorskip("yaml")
    out = tmp_path / "k8s"
    args = ["--model", "llama-3.1-8b", "--chip", "h100", "--tp", "1", "--tp", "2", "--max-gpus", "4", "--isl", "1000",
            "--osl", "200", "--p99-ttft-ms", "1000", "--p90-tpot-ms", "15", "--max-rate"]
    assert main([*args, "--json", "--emit", "k8s", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    best = json.loads(captured.out)["best"]  # stdout stays JSON: what was written goes to stderr
    assert "wrote" in captured.err
    files = sorted(out.iterdir())
    assert len(files) == 1
    docs = [d for d in yaml.safe_load_all(files[0].read_text()) if d]
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    assert deployment["spec"]["replicas"] == best["replicas"] == 2
    argv = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    assert argv[argv.index("--max-num-seqs") + 1] == str(best["max_num_seqs"])


def test_max_rate_of_a_disaggregated_fleet_emits_both_pools_and_the_router(tmp_path, capsys):
    out = tmp_path / "k8s"
    assert main(["--model", "llama-3.1-8b", "--chip", "h100", "--max-gpus", "4", "--isl", "2000", "--osl", "200",
                 "--context-length", "8192", "--ttft-ms", "1500", "--tpot-ms", "30", "--serving", "disagg",
                 "--max-rate", "--emit", "k8s", "-o", str(out), "--router-image", "proxy:1"]) == 0
    capsys.readouterr()
    assert sorted(f.name for f in out.iterdir()) == ["llama-3-1-8b-decode.yaml", "llama-3-1-8b-prefill.yaml",
                                                     "llama-3-1-8b-router.yaml"]


def test_max_rate_that_serves_no_rate_writes_nothing_and_says_so(tmp_path, capsys):
    out = tmp_path / "k8s"
    assert main(["--model", "llama-3.1-8b", "--chip", "h100", "--tp", "1", "--max-gpus", "2", "--isl", "1000",
                 "--osl", "200", "--p99-tpot-ms", "1", "--max-rate", "--emit", "k8s", "-o", str(out)]) == 1
    assert "--emit k8s wrote nothing: no rate is served" in capsys.readouterr().err
    assert not out.exists()


# -- plan compare --max-rate: each point's most, side by side ----------------------------------------------------
COMPARE = ["compare", "--max-rate", "--model", "llama-3.1-8b", "--chip", "h100", "--chip", "h200", "--tp", "1",
           "--tp", "2", "--max-gpus", "4", "--isl", "1000", "--osl", "200", "--p99-ttft-ms", "1000",
           "--p90-tpot-ms", "15"]


def test_compare_max_rate_answers_each_chip_as_plan_max_rate_does(capsys):
    assert main([*COMPARE, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "max_rate_comparison"
    assert [p["label"] for p in out["points"]] == ["on h100", "on h200"]
    for point, chip in zip(out["points"], ("h100", "h200"), strict=True):
        assert point["values"]["chip"] == chip
        alone = _most(4, chip=chip)
        assert point["result"]["requests_per_second"] == alone.requests_per_second > 0
        assert point["result"]["best"]["chip"] == chip
    jsonschema = pytest.importorskip("jsonschema")
    from planner.report.schema import report_schema

    jsonschema.validate(out, report_schema())


def test_compare_max_rate_prints_a_row_per_point_with_what_binds(capsys):
    assert main(COMPARE) == 0
    text = capsys.readouterr().out
    h100, h200 = _most(4, chip="h100"), _most(4, chip="h200")
    for label, most in (("on h100", h100), ("on h200", h200)):
        row = next(line for line in text.splitlines() if line.strip().startswith(label))
        assert f"{most.requests_per_second:g}" in row and most.next_misses[0] in row
        assert most.next_misses[0].startswith("p90 TPOT")  # the binding target, as plan --max-rate's binds names it
    assert main([*COMPARE, "--format", "markdown"]) == 0
    assert f"| on h100 | {h100.requests_per_second:g} |" in capsys.readouterr().out


def test_compare_max_rate_with_a_point_that_serves_nothing_exits_1_and_says_why(capsys):
    assert main([*COMPARE, "--chip", "a10g"]) == 1
    out = capsys.readouterr().out
    assert "on a10g: a10g: no vendor-sourced bf16_flops" in out


@pytest.mark.parametrize("extra, flag", [
    (["--concurrency", "8"], "--concurrency"),
    (["--requests-per-second", "5"], "--requests-per-second"),
    (["--chart", "x.png"], "--chart"),
])
def test_compare_max_rate_refuses_a_load_in_one_line(extra, flag, capsys):
    assert main([*COMPARE, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and flag in err and "Traceback" not in err


# -- a disaggregated fleet's most under percentile targets ----------------------------------------------------
def _fleet_p99_ttft_ms(fleet, rate: float) -> float:
    """The fleet's p99 TTFT on the simulated arrivals at `rate` (planner/app/same_arrivals.py)."""
    from planner.app.same_arrivals import fleet_served
    from planner.request import ServiceSpec

    service = ServiceSpec(model="llama-3.1-8b", concurrency=1, context_length=8192,
                          workload={"isl": 2000, "osl": 200, "requests_per_second": rate})
    return fleet_served(service, fleet, rate, load()).ttft.percentile(99) * 1000


def test_a_disaggregated_fleet_under_a_percentile_target_serves_no_more_and_meets_it_simulated_again():
    """Sized by the means as before, each rate's fleet must also meet p99 TTFT ≤ 1,000 ms on the simulated
    arrivals: the rate is below the means' alone (there the fleet's p99 is past 1 s), its fleet meets p99
    when simulated again, and the fleet `plan --serving disagg` sizes one grid rate above misses it."""
    by_means = _most_disagg(4)
    assert _fleet_p99_ttft_ms(by_means.fleet, by_means.requests_per_second) > 1000
    tight = planner.max_rate(model="llama-3.1-8b", chip="h100", max_gpus=4, workload={"isl": 2000, "osl": 200},
                             slo={"p99_ttft_ms": 1000}, **DISAGG)
    rate = tight.requests_per_second
    assert 0 < rate < by_means.requests_per_second
    assert tight.target.service_targets == ["p99 TTFT ≤ 1,000 ms"]
    assert _fleet_p99_ttft_ms(tight.fleet, rate) <= 1000
    above = grid_rate(grid_index(rate, GRID) + 1, GRID)
    fleet = planner.plan_serving(model="llama-3.1-8b", chip="h100", max_gpus=4, workload={
        "isl": 2000, "osl": 200, "requests_per_second": above}, **DISAGG).serving.disaggregated
    assert _fleet_p99_ttft_ms(fleet, above) > 1000
    assert f"at {above:g} requests/s its fleet misses p99 TTFT" in tight.binds


def test_a_looser_percentile_target_never_lets_a_disaggregated_fleet_serve_less():
    rates = [planner.max_rate(model="llama-3.1-8b", chip="h100", max_gpus=4, workload={"isl": 2000, "osl": 200},
                              slo={"p99_ttft_ms": ms}, **DISAGG).requests_per_second for ms in (700, 1000, 5000)]
    assert rates[0] <= rates[1] <= rates[2]
