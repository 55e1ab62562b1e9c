"""Scenario files and capacity reviews (issue: scenario files, capacity reviews, what-ifs)."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from planner.app.fleet import plan_scenario, resolve_services
from planner.app.plan import plan
from planner.cli import cli, main
from planner.request import PlanRequest
from planner.scenario import Scenario, file_key, load_scenario
from planner.search.fleet import prepare
from pricing.errors import render

SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("*.yaml"))


def test_there_are_at_least_six_scenarios():
    assert len(SCENARIOS) >= 6


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_every_scenario_runs(path):
    result = CliRunner().invoke(cli, ["scenario", str(path), "--variants", "--format", "json"])
    data = json.loads(result.stdout)
    results = [data["base"]] + data["variants"]
    assert [r["variant"] for r in results] == ["base"] + list(load_scenario(path).variants)
    assert result.exit_code == (0 if all(r["feasible"] for r in results) else 1)
    for r in results:
        if not r["feasible"]:  # not every service served: no totals (null, not zeros)
            assert r["cost_per_hour"] is None and r["gpus"] is None and r["services"] == []
            continue
        assert r["cost_per_hour"] == pytest.approx(sum(s["cost_per_hour"] for s in r["services"]))
        assert r["gpus"] == sum(s["gpus"] for s in r["services"])
        for s in r["services"]:
            assert s["held"] >= s["asked"]
            words = s["vllm_serve"].split(" ")
            assert words[0].startswith("CUDA_VISIBLE_DEVICES=")
            program = next(i for i, w in enumerate(words) if "=" not in w)  # after its environment (a role's NIXL)
            assert " ".join(words[program:]).startswith("vllm serve ")


def _single_service_runs():
    for path in SCENARIOS:
        scenario = load_scenario(path)
        for name in ["base"] + list(scenario.variants):
            varied = scenario if name == "base" else scenario.apply(name)
            if len(varied.services) == 1 and all(s.gpus is None for s in varied.inventory.values()):
                yield pytest.param(varied, id=f"{path.stem}:{name}")


@pytest.mark.parametrize("scenario", list(_single_service_runs()))
def test_single_service_answers_match_plan(scenario: Scenario):
    service = scenario.services[0]
    fleet = plan_scenario(scenario)
    alone = plan(PlanRequest(service=scenario.service_spec(service), limits=scenario.limits(service)))
    assert fleet.feasible == alone.feasible
    if alone.feasible:
        got, want = fleet.services[0], alone.best
        assert got.cost_per_hour == pytest.approx(want.cost_per_hour)
        assert (got.chip, got.gpus, got.replicas, got.tensor_parallel_size, got.data_parallel_size) == (
            want.chip, want.gpus, want.replicas, want.tensor_parallel_size, want.data_parallel_size)
        assert got.vllm_serve == want.vllm_serve


SMALL_INVENTORY = {
    "review": "brute force",
    "inventory": {"h200": {"gpus": 8, "gpus_per_node": 8}, "b200": {"gpus": 4, "gpus_per_node": 4}},
    "services": [
        {"name": "chat", "model": "dsv4.1-flash", "concurrency": 64, "context_length": 131072,
         "kv_cache_dtype": "fp8"},
        {"name": "llama", "model": "llama-3.1-70b", "concurrency": 48, "context_length": 32768},
        {"name": "oss", "model": "gpt-oss-120b", "concurrency": 64, "context_length": 131072},
    ],
}


def test_shared_inventory_matches_brute_force():
    """Every combination of one candidate per service at its fewest replicas (more replicas only
    add cost), filtered by the inventory: the solver's total is the cheapest that fits."""
    scenario = Scenario(**SMALL_INVENTORY)
    result = plan_scenario(scenario)
    prepared = [prepare(scenario, s) for s in resolve_services(scenario)]
    best = None
    for combo in itertools.product(*[p.options for p in prepared]):
        use = {"h200": 0, "b200": 0}
        for o in combo:
            use[o.row.chip] += o.row.gpus * o.rmin
        if use["h200"] > 8 or use["b200"] > 4:
            continue
        cost = sum(o.price * o.row.gpus * o.rmin for o in combo)
        best = cost if best is None else min(best, cost)
    assert best is not None and result.feasible
    assert result.cost_per_hour == pytest.approx(best)
    assert sum(u.gpus for u in result.chips if u.chip == "h200") <= 8
    assert sum(u.gpus for u in result.chips if u.chip == "b200") <= 4


def test_a_short_inventory_names_the_short_service():
    data = json.loads(json.dumps(SMALL_INVENTORY))
    data["inventory"] = {"h200": {"gpus": 4, "gpus_per_node": 8}}
    data["services"][1]["concurrency"] = 2000
    result = plan_scenario(Scenario(**data))
    assert not result.feasible
    assert "llama" in {s.service for s in result.short}
    reason = next(s.reason for s in result.short if s.service == "llama")
    assert "h200" in reason and "needs" in reason


def test_a_services_own_max_gpus_caps_its_pool_as_plan_max_gpus_does():
    """Llama-3.1-8B at 1,000 concurrent requests of 1,200 tokens on H100s at tp 1: one instance
    holds 399 (its KV pool), so the pool needs 3 replicas, 3 GPUs. A service's max_gpus of 2 is
    short, as `plan --max-gpus 2` is, and the reason names it; at 3 both plan the same pool."""
    def scenario(cap):
        return Scenario(review="cap", services=[{"name": "chat", "model": "llama-3.1-8b", "chips": ["h100"],
                                                 "tp": [1], "concurrency": 1000, "context_length": 1200,
                                                 "max_gpus": cap}])

    for cap, feasible in ((2, False), (3, True)):
        sc = scenario(cap)
        fleet = plan_scenario(sc)
        alone = plan(PlanRequest(service=sc.service_spec(sc.services[0]), limits=sc.limits(sc.services[0])))
        assert fleet.feasible is alone.feasible is feasible
        if feasible:
            assert fleet.services[0].gpus == alone.best.gpus == 3
        else:
            (short,) = fleet.short
            assert "within its max_gpus 2" in render(short.reason) and "needs 3 h100" in short.brief


def test_a_service_whose_targets_no_split_meets_says_so():
    """A p90 TPOT under 2 ms for Llama-3.1-8B at tp 1 on an H100: one decode step reads 16 GB of
    weights, at least 4.8 ms at the chip's 3.35 TB/s, so even one request alone misses it; the
    review says that, not that no configuration fits whatever the inventory, and names the bound
    that would be met as the file's key."""
    sc = Scenario(review="fast", services=[{"name": "chat", "model": "llama-3.1-8b", "chips": ["h100"], "tp": [1],
                                            "workload": {"isl": 1000, "osl": 200, "requests_per_second": 8},
                                            "slo": {"p90_tpot_ms": 2}}])
    (short,) = plan_scenario(sc).short
    assert "even one request at a time misses the service targets" in short.reason
    got = float(short.reason.split("p90 TPOT ")[1].split(" ms")[0])
    assert got > 16.06e9 / 3.35e12 * 1000
    assert short.brief == "no chip meets its targets"
    # the bound it names is the file's own key, at the figure one request alone gets (rounded up)
    assert f"slo.p90_tpot_ms {math.ceil(got)} (what one request alone meets" in render(short.reason, file_key)


def test_variants_override_what_they_name():
    scenario = load_scenario(SCENARIOS[0])
    assert scenario.apply("b200").merged(scenario.apply("b200").services[0]).chips == ["b200"]
    mixed = load_scenario(next(p for p in SCENARIOS if "mixed" in p.stem))
    assert mixed.apply("cheaper-h200").inventory["h200"].price == 3.10
    assert mixed.apply("no-b200").inventory["b200"].gpus == 0


BAD = [
    ({"services": [{"name": "a", "model": "llama-3.1-8b", "concurrency": 4, "chips": ["h200"], "colour": "red"}]},
     "services.a.colour", "unknown key"),
    ({"services": [{"name": "a", "model": "llama-3.1-8b", "concurrency": "many", "chips": ["h200"]}]},
     "services.a.concurrency", "integer"),
    ({"services": [{"name": "a", "model": "llama-3.1-8b", "concurrency": 4, "chips": ["h200"]},
                   {"name": "b", "model": "llama-3.1-8b", "concurrency": -3, "chips": ["h200"]}]},
     "services.b.concurrency", "greater than or equal to 1"),
    ({"services": [{"name": "a", "model": "no-such-model", "concurrency": 4, "chips": ["h200"]}]},
     "services.a.model", "unknown model"),
    ({"services": [{"name": "a", "model": "llama-3.1-8b", "concurrency": 4, "chips": ["tpu9"]}]},
     "services.a.chips", "unknown chip"),
    ({"inventory": {"tpu9": {"gpus": 8}},
      "services": [{"name": "a", "model": "llama-3.1-8b", "concurrency": 4, "chips": ["h200"]}]},
     "inventory.tpu9", "unknown chip"),
    ({"services": [{"name": "a", "model": "llama-3.1-8b", "concurrency": 4, "chips": ["h200"]}],
      "variants": {"what-if": {"colour": "red"}}}, "variants.what-if.colour", "not a field"),
    ({"services": [{"name": "a", "model": "llama-3.1-8b", "concurrency": 4, "chips": ["h200"]}],
      "variants": {"what-if": {"services.b.concurrency": 3}}}, "variants.what-if", "no service named"),
    ({"services": [{"name": "a", "model": "llama-3.1-8b", "chips": ["h100"], "serving": "disagg", "ttft_ms": 1000,
                    "tpot_ms": 50, "workload": {"isl": 1000, "osl": 200, "requests_per_second": 8},
                    "slo": {"p99_ttft_ms": 1000}}]},
     "services.a.serving", "disagg would size the fleet without them"),
    ({"services": [{"name": "a", "model": "llama-3.1-8b", "chips": ["h100"], "context_length": 4096,
                    "workload": {"isl": 8000, "osl": 200, "requests_per_second": 8}, "slo": {"p99_ttft_ms": 1000}}]},
     "services.a.workload", "raise context_length to at least 8,200"),
]


@pytest.mark.parametrize("data, path, expected", BAD, ids=[b[1] for b in BAD])
def test_malformed_scenarios_are_rejected_before_planning(tmp_path, capsys, data, path, expected):
    file = tmp_path / "review.yaml"
    file.write_text(yaml.safe_dump(data))
    code = main(["scenario", str(file)])
    err = capsys.readouterr()
    assert code == 2 and err.out == ""
    lines = [line for line in err.err.strip().splitlines() if line]
    assert any(str(file) in line and path in line and expected in line for line in lines), lines
    assert "Traceback" not in err.err


def test_every_error_of_a_file_is_listed(tmp_path, capsys):
    file = tmp_path / "review.yaml"
    file.write_text(yaml.safe_dump({"services": [
        {"name": "a", "model": "llama-3.1-8b", "concurrency": -1, "chips": ["h200"]},
        {"name": "b", "model": "llama-3.1-8b", "concurrency": 4, "chips": ["h200"], "extra": 1}]}))
    assert main(["scenario", str(file)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and "services.a.concurrency" in lines[0] and "services.b.extra" in lines[1]


def test_unsafe_yaml_is_not_executed(tmp_path, capsys):
    file = tmp_path / "review.yaml"
    file.write_text("services: !!python/object/apply:os.system ['echo pwned']\n")
    assert main(["scenario", str(file)]) == 2
    assert "pwned" not in capsys.readouterr().out


def test_schema_is_published():
    result = CliRunner().invoke(cli, ["scenario", "--file-schema"])
    schema = json.loads(result.stdout)
    assert {"services", "inventory", "variants", "defaults"} <= set(schema["properties"])
    assert schema["required"] == ["services"]


def test_markdown_rows():
    path = next(p for p in SCENARIOS if "kv-cache" in p.stem)
    out = CliRunner().invoke(cli, ["scenario", str(path), "--variants", "--format", "markdown"]).output
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    header = rows[0]
    assert header.startswith("| variant | h200 GPUs | $/hour |")
    base = next(r for r in rows if r.startswith("| base |"))
    fp8 = next(r for r in rows if r.startswith("| fp8-kv |"))
    scenario = load_scenario(path)
    want_base = plan_scenario(scenario)
    want_fp8 = plan_scenario(scenario.apply("fp8-kv"))
    assert f"| {want_base.gpus} | {want_base.cost_per_hour:,.2f} |" in base
    assert f"| {want_fp8.gpus} | {want_fp8.cost_per_hour:,.2f} |" in fp8
    assert "%" in fp8.split("|")[5]


@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_chart_has_one_line_per_chip(tmp_path, suffix):
    path = next(p for p in SCENARIOS if "chat-dsv4.1" in p.stem)
    out = tmp_path / f"chart.{suffix}"
    result = CliRunner().invoke(cli, ["scenario", str(path), "--variants", "--chart", str(out)])
    assert result.exit_code == 0, result.output
    data = out.read_bytes()
    if suffix == "png":
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
    else:
        text = data.decode()
        assert text.lstrip().startswith("<?xml") and "<svg" in text
        # categorical variants are bars (issue 13): the base on h200, the variant on b200, nothing else
        assert text.count('id="bars-h200-0-chat"') == 1 and text.count('id="bars-b200-1-chat"') == 1
        assert 'id="bars-h200-1' not in text and 'id="bars-b200-0' not in text and 'id="line-' not in text


def test_compare_from_the_command_line(tmp_path):
    chart = tmp_path / "sweep.svg"
    result = CliRunner().invoke(cli, ["compare", "--model", "llama-3.1-70b", "--chip", "h200", "--chip", "b200",
                                      "--concurrency", "16", "--context-length", "8192", "--context-length", "32768",
                                      "--format", "json", "--chart", str(chart)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    results = [data["base"]] + data["variants"]
    assert len(results) == 4 and all(r["feasible"] for r in results)
    svg = chart.read_text()
    assert svg.count('id="line-h200"') == 1 and svg.count('id="line-b200"') == 1
    gpus = {r["variant"]: r["gpus"] for r in results}
    assert gpus["@ 8k on h200"] <= gpus["@ 32k on h200"]


def test_compare_needs_a_file_or_an_axis(capsys):
    assert main(["compare"]) == 2
    assert "compare" in capsys.readouterr().err


def test_a_relative_model_path_is_the_files_own(tmp_path, monkeypatch, shared_models):
    """`model: models/mine` in review/review.yaml is review/models/mine, wherever the review runs
    from; the launch command names it as a path that works from there."""
    folder = tmp_path / "review" / "models" / "mine"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text((shared_models / "Qwen--Qwen3-8B.json").read_text())
    review = tmp_path / "review" / "review.yaml"
    review.write_text("services:\n  - {name: mine, model: models/mine, concurrency: 4, context_length: 8192, "
                      "chips: [h100]}\nvariants:\n  again: {services.mine.model: models/mine}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    scenario = load_scenario(review)
    assert scenario.services[0].model == str(review.parent / "models" / "mine")
    assert scenario.variants["again"]["services.mine.model"] == str(review.parent / "models" / "mine")
    result = CliRunner().invoke(cli, ["scenario", str(review), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert f"vllm serve {review.parent / 'models' / 'mine'} " in result.output


def test_a_reviews_notes_are_said_in_text_as_in_json(tmp_path):
    """Input that had no effect (a tp beyond the NVLink domain) is a note in the JSON and a line on
    stderr beside the table, named as the file writes it."""
    path = tmp_path / "notes.yaml"
    path.write_text("review: notes\nservices:\n  - {name: a, model: llama-3.1-70b, concurrency: 16, "
                    "context_length: 8192, chips: [h100], tp: [4, 16]}\n")
    text = CliRunner().invoke(cli, ["scenario", str(path)])
    assert text.exit_code == 0
    assert "plan: note: tp 16 exceeds the NVLink domain of 8 GPUs" in text.stderr
    assert "(tp 8 pp 2, or leave tp and pp out)" in text.stderr  # the file's keys, not plan's flags
    as_json = CliRunner().invoke(cli, ["scenario", str(path), "--format", "json"])
    assert any(n.startswith("tp 16 exceeds") for n in json.loads(as_json.stdout)["notes"])


def test_plan_scenario_registry_overlay_changes_the_plan(tmp_path):
    """`plan scenario --registry` lays the overlay under the review (issue 40): cost_model_memory.kv_pool_margin
    0.25 instead of the shipped 0.009 holds back a quarter of each rank's KV pool. Llama-3.1-70B at 128k on tp 8
    H200 ranks: shipped, 0.95 utilization, a 112.74 GiB pool of 5.00 GiB requests, 22.55 × 0.991 -> 22 a rank
    (44 held); with the overlay the search moves to 0.97, 115.56 GiB, 23.11 × 0.75 -> 17 a rank (34 held, still
    over the 32 asked). Each binds line states its pool, and the count is floor(pool / each × (1 - margin))."""
    import re

    from tests.helpers import cli as run

    overlay = tmp_path / "margin.yaml"
    overlay.write_text("cost_model_memory:\n  kv_pool_margin: {value: 0.25, source: test, how: test}\n")
    argv = ["scenario", str(SCENARIOS[0].parent / "kv-cache-fp8-vs-bf16.yaml"), "--format", "json"]
    code, plain, _ = run(argv)
    code_laid, laid, err = run([*argv, "--registry", str(overlay)])
    assert (code, code_laid) == (0, 0), err
    plain, laid = json.loads(plain)["services"][0], json.loads(laid)["services"][0]
    figures = {k: (plain[k], laid[k]) for k in ("gpu_memory_utilization", "max_num_seqs", "held", "gpus")}
    assert figures == {"gpu_memory_utilization": (0.95, 0.97), "max_num_seqs": (22, 17), "held": (44, 34),
                       "gpus": (16, 16)}
    for service, margin in ((plain, 0.009), (laid, 0.25)):
        pool, each = map(float, re.search(r"\(([\d.]+) GiB pool, ([\d.]+) GiB each", service["binds"]).groups())
        assert math.floor(pool / each * (1 - margin)) == service["max_num_seqs"], service["binds"]
    assert "--max-num-seqs 17 " in laid["vllm_serve"] and "--gpu-memory-utilization 0.97 " in laid["vllm_serve"]
