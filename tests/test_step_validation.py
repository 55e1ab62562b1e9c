"""The step model against public measurements (validation/measured_points.yaml): the data file's
shape, and the held-back error the registry and README state, recomputed; aiconfigurator's
predictions of the same points (validation/aiconfigurator_points.yaml, written outside CI by
scripts/collectors/aiconfigurator_points.py) and the errors README states for them, recomputed from the files."""

import re
import statistics
from pathlib import Path

import yaml

from pricing.registry import shipped
from pricing.step.measured import load_points, relative_error
from pricing.step.rates import Efficiency

ROOT = Path(__file__).resolve().parents[1]
AIC = ROOT / "validation" / "aiconfigurator_points.yaml"


def test_at_least_30_points_from_3_sources_each_dated_and_sourced():
    points, sources = load_points()
    assert len(points) >= 30
    used = {p.source for p in points}
    assert len(used) >= 3 and used <= set(sources)
    assert len({p.id for p in points}) == len(points)
    for p in points:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", p.date), p.id
        assert p.measured > 0 and p.concurrency >= 1 and p.isl >= 1 and p.osl >= 1
    for s in sources.values():
        assert s["url"].startswith("https://") and s["title"] and s["how"]
    held = [p for p in points if p.held_back]
    assert 0 < len(held) < len(points) / 2


def test_the_stated_held_back_error_is_what_the_model_gives():
    """step_model.yaml records the held-back median absolute error of the fit that produced it;
    the factors it holds must reproduce that figure (a refit must rewrite it)."""
    points, _ = load_points()
    held = [p for p in points if p.held_back]
    how = shipped()["step_model.efficiency.memory_bandwidth"].how
    stated = re.search(r"held-back (\d+) points: ([\d.]+)%", how)
    assert stated, how
    assert int(stated.group(1)) == len(held)
    shared = Efficiency.from_registry()  # the shared fit's figure is over every point at the shared factors
    error = statistics.median(abs(relative_error(p, shared)) for p in held)
    assert abs(error * 100 - float(stated.group(2))) < 2.0  # a stale figure fails; kernel drift of a point does not
    assert error <= 0.20  # issue 14's target; the README states the figure whatever it is


def test_vllms_own_factors_meet_the_held_back_target_they_state():
    """vLLM's factors in step_model.yaml (engines.vllm-rocm, and engines.vllm refitted from it on the
    silicon rows): fitted on vLLM's training points alone; on its held-back points, each at its chip's
    factor set, the median |error| of output tokens/s per GPU is at most 10 % and the signed median
    within ±5 % (the figure the fit's provenance states, reproduced within 2 points)."""
    points, _ = load_points()
    held = [p for p in points if p.held_back and p.engine.startswith("vllm")]
    how = shipped()["step_model.engines.vllm.efficiency.memory_bandwidth"].how
    stated = re.search(r"its (\d+) held-back points: ([\d.]+)%", how)
    assert stated, how
    assert int(stated.group(1)) == len(held) >= 4
    errors = [relative_error(p) for p in held]  # each point at its engine's factors: vLLM's own
    assert abs(statistics.median(abs(e) for e in errors) * 100 - float(stated.group(2))) < 2.0
    assert statistics.median(abs(e) for e in errors) <= 0.10
    assert abs(statistics.median(errors)) <= 0.05
    shared = Efficiency.from_registry()
    assert statistics.median(abs(relative_error(p, shared)) for p in held) > 0.10  # the shared factors missed them


def test_vllms_cuda_factors_meet_the_held_back_silicon_figure_they_state():
    """engines.vllm's overheads, fused-MoE kernels and MLA floor are fitted on two thirds of the
    decode-dominated silicon rows; the held-back third's TPOT error, at the registry's factors, is
    the figure their provenance states, at most 10 %, signed within ±5 %; the rows of longer prompts
    and the throughput points are not in that fit."""
    from pricing.step.silicon import load_silicon

    rows, _ = load_silicon()
    held = [r for r in rows if r.decode_dominated and r.held_back]
    train = [r for r in rows if r.training]
    assert not {r.id for r in held} & {r.id for r in train} and len(held) >= 50
    reg = shipped()
    for name in ("step_model.engines.vllm.overhead.step_seconds",
                 "step_model.engines.vllm.moe_kernels.sm90.mxfp4.expert_bandwidth",
                 "step_model.engines.vllm.attention_kernels.sm90.mla.layer_seconds"):
        how = reg[name].how
        stated = re.search(r"on the TPOT of (\d+) training rows .* its (\d+) held-back decode-dominated rows: "
                           r"([\d.]+)%, signed ([+-][\d.]+)%", how)
        assert stated, how
        assert (int(stated.group(1)), int(stated.group(2))) == (len(train), len(held))
    errors = [r.errors()[0] for r in held]
    median, signed = statistics.median(abs(e) for e in errors), statistics.median(errors)
    assert abs(median * 100 - float(stated.group(3))) < 0.5 and abs(signed * 100 - float(stated.group(4))) < 0.5
    assert median <= 0.10 and abs(signed) <= 0.05
    rocm = Efficiency.from_registry(reg, "vllm-rocm")
    assert statistics.median(abs(r.errors(rocm)[0]) for r in held) > 0.15  # the throughput fit alone missed them


def test_vllms_cuda_first_token_meets_the_held_back_silicon_figure_it_states():
    """engines.vllm's API-server time to a first token, interconnect and GEMM kernels are fitted on the
    TTFT of two thirds of the silicon rows at most 4 concurrent, each row's closed loop simulated as the file's
    benchmark block says; the held-back third's TTFT error at the registry's factors is the figure their
    provenance states, and far below the throughput fit's alone (the ROCm set without the API server's time)."""
    from pricing.serving.silicon import Harness, closed_loop_errors
    from pricing.step.silicon import load_silicon

    rows, about = load_silicon()
    harness = Harness.of(about)
    low = [r for r in rows if r.concurrency <= 4]
    held, train = [r for r in low if r.held_back], [r for r in low if not r.held_back]
    reg = shipped()
    for name in ("step_model.engines.vllm.overhead.first_token_seconds",
                 "step_model.engines.vllm.gemm_kernels.sm90.fp8_tensor.tensor_compute"):
        stated = re.search(r"on the TTFT of (\d+) training rows .* at most 4 concurrent .* its (\d+) held-back rows: "
                           r"([\d.]+)%, signed ([+-][\d.]+)%", reg[name].how)
        assert stated, reg[name].how
        assert (int(stated.group(1)), int(stated.group(2))) == (len(train), len(held))
    errors = [closed_loop_errors(r, harness)[1] for r in held]
    median, signed = statistics.median(abs(e) for e in errors), statistics.median(errors)
    assert abs(median * 100 - float(stated.group(3))) < 0.5 and abs(signed * 100 - float(stated.group(4))) < 0.5
    alone = Efficiency.from_registry(reg, "vllm-rocm").replaced(first_token_seconds=0.0)
    assert median < statistics.median(abs(closed_loop_errors(r, harness, alone)[1]) for r in held) - 0.10


def test_aiconfigurator_file_answers_every_measured_point_with_its_provenance():
    points, _ = load_points()
    doc = yaml.safe_load(AIC.read_text())
    assert [r["id"] for r in doc["points"]] == [p.id for p in points]  # a new measured point needs a rerun
    assert doc["aiconfigurator"] and doc["command"] and doc["mapping"]
    chip = {p.id: p.chip for p in points}
    for r in doc["points"]:
        if not r["supported"]:
            assert r["reason"], r["id"]
            if "ships no system for chip" in r["reason"]:
                assert chip[r["id"]] not in doc["mapping"]["system_of_chip"]
            continue
        assert r["output_tokens_per_second_per_gpu"] > 0 and r["tpot_ms"] > 0, r["id"]
        assert doc["mapping"]["system_of_chip"][chip[r["id"]]] == r["system"]
        assert r["database_version"] in doc["databases"][r["system"]][r["backend"]], r["id"]
        assert r["command"].startswith("aiconfigurator cli estimate ") and f"--model {r['model']} " in r["command"]
        assert f"--system {r['system']} --backend {r['backend']} --backend-version {r['database_version']} " \
            in r["command"]


def test_readme_states_the_aiconfigurator_errors_the_data_files_give():
    """README's comparison table, recomputed from the two data files: aiconfigurator's median
    absolute error exactly as printed (a regenerated file with another figure fails until README
    is rewritten), the step model's within 2 points (kernel drift of a point does not fail it)."""
    points, _ = load_points()
    predicted = {r["id"]: r["output_tokens_per_second_per_gpu"]
                 for r in yaml.safe_load(AIC.read_text())["points"] if r["supported"]}
    priced = [p for p in points if p.id in predicted]
    subsets = {"held back": [p for p in priced if p.held_back],
               "training": [p for p in priced if not p.held_back],
               "all (training and held back)": priced}
    readme = (ROOT / "docs" / "step-model.md").read_text()
    assert f"It prices {len(priced)} of the {len(points)} points" in readme
    for label, subset in subsets.items():
        row = re.search(rf"^\| {re.escape(label)} \| (\d+) \| ([\d.]+)% \| ([\d.]+)% \|$", readme, re.M)
        assert row, label
        theirs = statistics.median(abs(predicted[p.id] / p.measured - 1) for p in subset)
        assert int(row.group(1)) == len(subset)
        assert row.group(2) == f"{theirs * 100:.1f}", label
        ours = statistics.median(abs(relative_error(p)) for p in subset)
        assert abs(float(row.group(3)) - ours * 100) < 2.0, label


def test_the_project_never_imports_aiconfigurator():
    """aiconfigurator is a comparison run outside the project (its own venv), never a dependency."""
    for package in ("pricing", "planner"):
        for path in (ROOT / package).rglob("*.py"):
            assert not re.search(r"^\s*(import|from)\s+aiconfigurator", path.read_text(), re.M), path


def _silicon_row(**fields) -> dict:
    row = {"backend": "vllm", "mode": "agg", "model_path": "meta-llama/Llama-3.1-70B", "system": "h200_sxm",
           "precision": "fp8", "pp_size": "1", "attention_dp_size": "1", "tp_size": "4", "moe_ep_size": "1",
           "backend_version": "", "batch_size": "16", "isl": "1024", "osl": "1024", "silicon_ttft_ms": "120.5",
           "silicon_tpot_ms": "12.25", "id": "row",
           "silicon_data_source": "source_file=x.csv; measured=2025-10-29T00:00:00Z"}
    return row | fields


def test_the_silicon_collector_keeps_what_it_can_price_and_counts_what_it_leaves_out():
    """scripts/collectors/aiconfigurator_silicon_points.py on rows written here: a Llama-3.1-70B FP8 row at tp 4 on an
    H200 is kept with its own figures; its FP4 twin (the checkpoint named is FP8), a row whose first token
    came after more than the whole decode (1,024 x 12.25 ms = 12.5 s), Qwen3-235B-A22B-FP8 at tp 1 on one
    H200 (its weights alone exceed the GPU), another backend, a checkpoint without a card and a second listing of
    the kept row's run (another id and source, the same deployment, workload and figures) are left out."""
    from tests.helpers import script

    collector = script("collectors/aiconfigurator_silicon_points")
    rows = [_silicon_row(), _silicon_row(precision="fp4"), _silicon_row(silicon_ttft_ms="12600"),
            _silicon_row(model_path="Qwen/Qwen3-235B-A22B-FP8", tp_size="1"), _silicon_row(backend="sglang"),
            _silicon_row(model_path="zai-org/GLM-4.6"),
            _silicon_row(id="row-listed-again", silicon_data_source="db-dump/2026-04-27; config_id=7")]
    points, left_out = collector.collect(rows)
    assert points == [{"id": "row", "model": "llama-3.1-70b", "quantization": "fp8", "chip": "h200", "release": None,
                       "image": None, "tensor_parallel_size": 4, "enable_expert_parallel": False, "concurrency": 16,
                       "isl": 1024, "osl": 1024, "ttft_ms": 120.5, "tpot_ms": 12.25, "measured_on": "2025-10-29",
                       "source_file": "x.csv"}]
    assert sum(left_out.values()) == 5 and len(left_out) == 5
    assert any("queued for admission" in reason for reason in left_out)
    assert any("the same measurement as an earlier row" in reason for reason in left_out)
    assert any("would not start" in reason for reason in left_out)


def test_the_silicon_rows_are_sourced_and_readme_shows_them():
    from pricing.step.silicon import load_silicon
    from tests.helpers import script

    points, about = load_silicon()
    assert len(points) >= 300 and len({p.id for p in points}) == len(points)
    url = about["source"]["url"]
    assert re.fullmatch(r"https://github.com/ai-dynamo/aiconfigurator/blob/[0-9a-f]{40}/\S+\.csv", url)
    for p in points:
        assert p.ttft_ms <= p.osl * p.tpot_ms and p.concurrency >= 1 and p.tpot_ms > 0, p.id
    # no run twice: one copy could train the fit while the other is held back from it
    runs = {(p.model, p.quantization, p.chip, p.release, p.tp, p.ep, p.concurrency, p.isl, p.osl, p.ttft_ms, p.tpot_ms)
            for p in points}
    assert len(runs) == len(points)
    measured_ids = {p.id for p in load_points()[0]}
    assert not measured_ids & {p.id for p in points}  # none of them is in the fit
    assert script("docgen/silicon_table").section() == script("docgen/generated").shown("silicon-table")
