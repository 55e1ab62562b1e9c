"""One JSON schema for `plan`, `plan scenario` and `plan compare` (`--schema`, planner/report/schema.py):
every report each prints validates against it with no key the schema does not name, keys are
identifiers, what a pool holds and what was asked are named apart, and `best` carries the breakdown
the text prints."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest

from tests.helpers import cli_stdout as run

ROOT = Path(__file__).resolve().parents[1]
MIXED = str(ROOT / "scenarios" / "mixed-fleet-shared-inventory.yaml")
INFEASIBLE = str(ROOT / "scenarios" / "infeasible-review.yaml")
PLAN = ["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "64", "--context-length", "8192"]
REPORTS = {
    "plan": PLAN + ["--json"],
    "plan, nothing fits": ["--model", "llama-3.1-70b", "--chip", "h100", "--concurrency", "8", "--context-length",
                           "131072", "--tp", "2", "--pp", "1", "--json"],
    "plan, service targets": ["--model", "llama-3.1-8b", "--chip", "h100", "--context-length", "8192", "--isl", "1024",
                              "--osl", "256", "--requests-per-second", "10", "--p99-ttft-ms", "2000", "--json"],
    "plan --serving auto": ["--model", "llama-3.1-8b", "--chip", "h100", "--isl", "1024", "--osl", "256",
                            "--requests-per-second", "10", "--ttft-ms", "500", "--serving", "auto", "--json"],
    "plan --serving disagg, nothing fits": ["--model", "llama-3.1-8b", "--chip", "h100", "--isl", "1024", "--osl",
                                            "256", "--requests-per-second", "10", "--ttft-ms", "5", "--serving",
                                            "disagg", "--json"],
    "scenario": ["scenario", MIXED, "--format", "json"],
    "scenario --variants": ["scenario", MIXED, "--variants", "--format", "json"],
    "scenario, infeasible": ["scenario", INFEASIBLE, "--format", "json"],
    "compare": ["compare", "--model", "llama-3.1-8b", "--chip", "h100", "--chip", "h200", "--concurrency", "64",
                "--context-length", "8192", "--json"],
}
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@pytest.fixture(scope="module")
def schema() -> dict:
    outs = {c: run([*c.split(), "--schema"] if c else ["--schema"]) for c in ("", "scenario", "compare")}
    assert {code for code, _ in outs.values()} == {0}
    assert len({text for _, text in outs.values()}) == 1  # one schema, whichever command prints it
    return json.loads(outs[""][1])


@pytest.fixture(scope="module")
def reports() -> dict[str, dict]:
    out = {}
    for name, argv in REPORTS.items():
        code, text = run(argv)
        assert code in (0, 1), name
        out[name] = json.loads(text)
    return out


def closed(node):
    """The schema with every object that lists its properties closed to others: a report key the
    schema does not name fails the validation."""
    node = copy.deepcopy(node)

    def close(n):
        if isinstance(n, dict):
            if "properties" in n and "additionalProperties" not in n:
                n["additionalProperties"] = False
            for v in n.values():
                close(v)
        elif isinstance(n, list):
            for v in n:
                close(v)

    close(node)
    return node


def keys(node, path=""):
    """Every (path, key) of a JSON document; a provenance row's value is registry data, kept as stored."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield path, k
            if not (k == "value" and "provenance" in path):
                yield from keys(v, f"{path}.{k}")
    elif isinstance(node, list):
        for v in node:
            yield from keys(v, f"{path}[]")


@pytest.mark.parametrize("name", list(REPORTS))
def test_every_report_validates_against_the_one_schema(schema, reports, name):
    validator = jsonschema.Draft202012Validator(closed(schema))
    validator.validate(reports[name])
    unnamed = copy.deepcopy(reports[name])
    unnamed["not_in_the_schema"] = 1
    assert not validator.is_valid(unnamed)  # the schema names every key a report prints


def test_the_schema_tells_the_reports_apart_by_kind(schema, reports):
    assert schema["discriminator"]["propertyName"] == "kind"
    kinds = {name: r["kind"] for name, r in reports.items()}
    assert kinds["plan"] == kinds["plan, nothing fits"] == "plan" and kinds["plan --serving auto"] == "plan_serving"
    assert kinds["scenario"] == kinds["scenario, infeasible"] == "scenario"
    assert kinds["scenario --variants"] == kinds["compare"] == "comparison"
    with pytest.raises(jsonschema.ValidationError):  # a plan is not a scenario's result
        jsonschema.validate({**reports["plan"], "kind": "scenario"}, schema)


@pytest.mark.parametrize("name", list(REPORTS))
def test_every_key_is_an_identifier(reports, name):
    bad = sorted({(p, k) for p, k in keys(reports[name]) if not IDENTIFIER.fullmatch(str(k))})
    assert bad == []


def test_held_and_asked_are_named_apart_and_the_target_is_one_object(reports):
    plan, scenario = reports["plan"], reports["scenario"]
    assert "concurrency" not in plan["best"] and "concurrency" not in plan["target"]
    assert plan["target"]["asked"] == 64 and plan["best"]["held"] >= plan["target"]["required"] == 64
    for s in scenario["services"]:
        assert isinstance(s["target"], dict) and s["asked"] == s["target"]["asked"] and s["held"] >= s["asked"]
        assert set(s["target"]) == set(plan["target"])  # the same object as plan's target
    # the scenario's analytics service (llama-3.1-70b, 64 at 32,768 tokens) asks what `plan` would be asked
    analytics = next(s for s in scenario["services"] if s["service"] == "analytics")
    _, text = run(["--model", "llama-3.1-70b", "--chip", "h200", "--concurrency", "64", "--context-length", "32768",
                   "--json"])
    assert analytics["target"] == json.loads(text)["target"]


def test_best_carries_the_breakdown_the_text_prints(reports):
    best = reports["plan"]["best"]
    memory = best["memory"]
    assert reports["plan"]["alternatives"] and all(a["memory"] is None for a in reports["plan"]["alternatives"])
    # the same deployment through `plan memory --json`: the breakdown is that one's, figure for figure
    flags = ["--tensor-parallel-size", str(best["tensor_parallel_size"]), "--gpu-memory-utilization",
             str(best["gpu_memory_utilization"]), "--max-num-batched-tokens", str(best["max_num_batched_tokens"]),
             "--max-num-seqs", str(best["max_num_seqs"]), "--max-model-len", str(best["max_model_len"]),
             "--tokens", str(best["max_model_len"])]
    code, text = run(["memory", "--model", "llama-3.1-8b", "--chip", "h100", *flags, "--json"])
    alone = json.loads(text)
    assert code == 0
    for key in ("fixed", "budget", "kv_pool", "num_blocks", "block_bytes", "kv_cache_tokens", "sequence"):
        assert memory[key] == alone[key], key
    assert memory["provenance"] == [] and reports["plan"]["provenance"]  # the plan's provenance, said once
    _, table = run(PLAN)
    gib = memory["fixed"]["total"] / 2**30
    assert re.search(rf"^fixed per rank\s+{gib:.2f} GiB$", table, re.M)  # the text prints this breakdown


def test_step_parts_are_keyed_by_identifiers_and_sum_to_the_step(reports):
    step = reports["plan"]["best"]["step"]
    parts = step["parts_ms"]
    assert {"attention_projections", "lm_head", "dense_mlp", "attention_over_the_context",
            "step_overhead"} <= set(parts)
    assert sum(parts.values()) == pytest.approx(step["step_ms"], abs=0.01)


def test_explanations_name_the_constraint_beside_the_sentence(reports):
    (e,) = reports["plan, nothing fits"]["explanations"]
    assert e["chip"] == "h100" and e["constraint"] == "context"
    assert e["text"].startswith("NVIDIA H100 SXM 80GB: one request at 131,072 tokens needs")


def test_a_disaggregated_plan_explains_itself_in_the_same_objects(schema, reports):
    # 5 ms to the first token: prefilling 1,024 tokens alone takes longer, a latency reason of the search's
    dis = reports["plan --serving disagg, nothing fits"]["serving"]["disaggregated"]
    (e,) = dis["explanations"]
    assert set(e) == set(reports["plan, nothing fits"]["explanations"][0]) == {"chip", "constraint", "text"}
    assert e["chip"] == "" and e["constraint"] == "latency"
    assert e["text"].startswith("ttft: the fastest pair") and e["text"].endswith("against 5 ms")
    defs = schema["$defs"]
    assert defs["DisaggPlan"]["properties"]["explanations"]["items"] == \
        defs["PlanResult"]["properties"]["explanations"]["items"] == {"$ref": "#/$defs/Explanation"}
