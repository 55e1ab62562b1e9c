"""Each older release pack against that release's own KV-cache planner, case for case.

tests/golden/vllm-<release>/ holds what vLLM <release> itself computed (scripts/fixtures/golden_vllm_release.py
runs the release's own planning functions in a venv of that release; the case inputs are those of
scripts/fixtures/golden_vllm.py, built from the published configs). For each fixture the kernel is built for
the fixture's `project` under `--vllm-version <release>` and must give exactly that release's groups
in its order (layers, spec class, block tokens, page_size_bytes, blocks per request at max_model_len),
the pool block, num_blocks, the logged "GPU KV cache size" and "Maximum concurrency", or its refusal.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pricing.chips import get_chip
from pricing.kernel import Deployment, Kernel
from pricing.rules import get
from tests.helpers import script
from tests.test_golden import layer_key, resolve_model

GOLDEN = Path(__file__).resolve().parent / "golden"
RELEASE_DIRS = sorted(p for p in GOLDEN.glob("vllm-*") if p.name != "vllm-0.33")
FIXTURES = [path for d in RELEASE_DIRS for path in sorted(d.glob("*.json"))]


def kernel_for(case: dict) -> Kernel:
    p = case["project"]
    deployment = Deployment(**p["deployment"], kv_cache_memory_bytes=p["available_memory_bytes"])
    return Kernel.of(resolve_model(p["model"]), deployment, get_chip(p["chip"]), release=p["vllm_version"])


def ours(k: Kernel) -> list[dict]:
    e = k.engine
    return [{"layers": [layer_key(s.id) for s in g.members], "spec": g.vllm_class, "block_size": g.block_tokens,
             "page_size_bytes": g.page_bytes, "blocks_per_request": k._blocks(g, e.max_model_len,
                                                                              e.max_in_flight_tokens)}
            for g in k.layout().groups]


def theirs(vllm: dict) -> list[dict]:
    return [{"layers": [layer_key(n) for n in g["layers"]], "spec": g["spec"], "block_size": g["block_size"],
             "page_size_bytes": g["page_size_bytes"], "blocks_per_request": g["blocks_per_request"]}
            for g in vllm["groups"]]


def test_every_pack_has_its_fixtures():
    """At least 15 fixtures per older pack, each from a release that pack serves."""
    by_pack: dict[str, int] = {}
    for d in RELEASE_DIRS:
        release = d.name.removeprefix("vllm-")
        by_pack[get(release).name] = by_pack.get(get(release).name, 0) + len(list(d.glob("*.json")))
    assert by_pack and all(n >= 15 for n in by_pack.values()), by_pack


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_pack_agrees_with_its_release(path: Path):
    case = json.loads(path.read_text())
    vllm = case["vllm"]
    assert case["vllm_version"] == path.parent.name.removeprefix("vllm-")
    k = kernel_for(case)
    if vllm["error"]:
        assert not k.instance.fits_one_request(), f"vLLM {case['vllm_version']} refuses: {vllm['error']}"
        return
    assert k.instance.fits_one_request()
    assert ours(k) == theirs(vllm)
    assert k.layout().bytes_per_block == vllm["bytes_per_block"]
    assert k.instance.num_blocks() == vllm["num_blocks"]
    assert k.instance.kv_cache_tokens() == vllm["kv_cache_size_tokens"]
    assert f"{k.instance.max_concurrency():.2f}" == f"{vllm['max_concurrency']:.2f}"
    for line in vllm["log_lines"]:  # as the release logged them (from 0.28 both figures on one line)
        if line.startswith("GPU KV cache size"):
            assert re.sub(r"[\d,]+ tokens", f"{k.instance.kv_cache_tokens():,} tokens", line, count=1) == line
        if "Maximum concurrency" in line:
            assert f"{k.instance.max_concurrency():.2f}x" in line


LOGS = Path(__file__).resolve().parent / "fixtures" / "startup_logs"


def test_plan_memory_predicts_a_held_out_019_log():
    """A vLLM 0.19.0 start-up that is not a training record (llm-d-planner's Llama-3.1-8B on H100 at
    16,384 tokens; tests/fixtures/startup_logs/INDEX.yaml), asked as its team would ask: `plan memory
    --vllm-version 0.19.0` with the log's own flags predicts its available KV memory, tokens and
    concurrency within 0.5 %, where 0.33's rules (the graphs taken from the budget) miss by > 1 %."""
    from click.testing import CliRunner

    from planner.cli import cli
    from pricing.calibration.startup_log import parse
    from pricing.units import GiB

    log = parse((LOGS / "v0.19.0-llmd-planner-h100-llama31-8b-16k-heldout.log").read_text())
    assert log.deployment["max_model_len"] == 16384 and log.deployment["gpu_memory_utilization"] == 0.95
    flags = ["memory", "--model", "llama-3.1-8b", "--chip", "h100", "--max-model-len", "16384",
             "--gpu-memory-utilization", "0.95", "--no-enable-prefix-caching", "--json"]

    def answer(release: str) -> dict:
        done = CliRunner().invoke(cli, [*flags, "--vllm-version", release])
        assert done.exit_code == 0, done.output
        return json.loads(done.stdout)

    logged = {"kv_pool": log.observed["available_kv_gib"] * GiB, "kv_cache_tokens": log.observed["kv_cache_tokens"],
              "max_concurrency": log.observed["max_concurrency"]}
    old, new = answer("0.19.0"), answer("0.33")
    for key, value in logged.items():
        assert abs(old[key] - value) / value < 0.005, (key, old[key], value)
    assert abs(new["kv_pool"] - logged["kv_pool"]) / logged["kv_pool"] > 0.01


def test_a_release_names_its_pack_and_others_are_refused(capsys):
    from click.testing import CliRunner

    from planner.cli import cli, main

    served = {"0.19.1": "vllm-0.19", "0.27": "vllm-0.26", "0.10.1.1": "vllm-0.10", "0.33": "vllm-0.33"}
    assert {asked: get(asked).name for asked in served} == served
    done = CliRunner().invoke(cli, ["memory", "--model", "llama-3.1-8b", "--chip", "h100", "--vllm-version", "0.27"])
    assert done.exit_code == 0 and "vLLM 0.27 (pack vllm-0.26)" in done.output
    assert main(["memory", "--model", "llama-3.1-8b", "--chip", "h100", "--vllm-version", "0.9"]) == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and "--vllm-version" in said[0] and "0.10 to 0.33" in said[0]


def test_compare_and_variants_take_the_release_as_an_axis(tmp_path):
    """`plan compare --vllm-version A --vllm-version B` sweeps releases; a scenario variant sets
    `vllm_version` as any service field ("what does upgrading from 0.19 to 0.33 buy us?")."""
    from click.testing import CliRunner

    from planner.cli import cli

    done = CliRunner().invoke(cli, ["compare", "--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "16",
                                    "--context-length", "32768", "--vllm-version", "0.19.0", "--vllm-version", "0.33",
                                    "--time-limit", "5", "--format", "json"])
    assert done.exit_code == 0, done.output
    c = json.loads(done.stdout)
    assert [c["base"]["variant"], *(v["variant"] for v in c["variants"])] == ["vLLM 0.19.0", "vLLM 0.33.0"]
    review = tmp_path / "upgrade.yaml"
    review.write_text("review: upgrade\ninventory:\n  h100: {gpus: 16, gpus_per_node: 8}\nservices:\n"
                      "  - {name: chat, model: llama-3.1-8b, concurrency: 16, context_length: 32768, "
                      "vllm_version: '0.19.0'}\nvariants:\n  upgraded: {vllm_version: '0.33'}\n")
    done = CliRunner().invoke(cli, ["compare", str(review), "--time-limit", "5", "--format", "json"])
    assert done.exit_code == 0, done.output
    assert [v["variant"] for v in json.loads(done.stdout)["variants"]] == ["upgraded"]


def test_readme_shows_the_calibration_by_pack():
    """docs/releases.md's per-pack table is what scripts/fits/calibration_report.py --by-release prints."""
    from pricing.calibration.predict import predict_all
    from pricing.calibration.records import load_records

    root = Path(__file__).resolve().parents[1]
    training = root.parent / "shared" / "calibration" / "vllm-startups-train.jsonl"
    if not training.exists():
        pytest.skip("no ../shared/calibration")
    report = script("fits/calibration_report")
    predictions = predict_all(load_records(training))
    readme = (root / "docs" / "releases.md").read_text()
    assert report.by_release(predictions) in readme
    assert report.later_records(predictions) in readme
