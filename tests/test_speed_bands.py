"""The validated band beside every speed figure a plan prints (issue 38): the step model's error on the
rows it was not fitted on, in the figure's regime, read from pricing/registry/speed_bands.yaml, which
scripts/fits/speed_bands.py computes from the held-back rows of validation/vllm_silicon_points.yaml."""

from __future__ import annotations

import importlib.util
import statistics
from pathlib import Path

import pytest

import planner
from pricing.registry import overlay_from, shipped

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("speed_bands", ROOT / "scripts" / "fits" / "speed_bands.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_reproduces_the_data_file_from_the_held_back_rows(capsys):
    assert _script().main(["--check"]) == 0
    assert "as computed" in capsys.readouterr().out


def test_the_quantile_is_numpys_linear_one():
    q = _script().quantile
    assert q(list(range(1, 11)), 0.9) == pytest.approx(9.1)  # 9 + 0.1 × (10 - 9)
    assert q([0.3, 0.1, 0.2], 0.5) == 0.2 and q([5.0], 0.9) == 5.0


def test_every_band_is_the_held_back_rows_of_its_regime_never_a_training_row():
    """Recounted by hand from the rows: TPOT bands over the held-back decode-dominated rows by concurrency,
    the TTFT band over the held-back rows at most 4 concurrent; the counts add up to the held-back set the
    fit's provenance states (step_model.yaml: 145 held-back decode-dominated rows)."""
    from pricing.step.silicon import load_silicon

    rows, _ = load_silicon()
    held = [r for r in rows if r.decode_dominated and r.held_back]
    reg = shipped()
    tpot = [reg.value(n) for n in reg.names("speed_bands.tpot.")]
    assert sum(b["rows"] for b in tpot) == len(held) == 145
    for b in tpot:
        mine = [r for r in held if b["requests_from"] <= r.concurrency <= (b["requests_to"] or 10**9)]
        assert len(mine) == b["rows"] and not any(r.training for r in mine)
        assert max(r.isl + r.osl // 2 for r in mine) == b["context_to"]
        errors = [abs(r.errors()[0]) for r in mine]
        assert b["median_abs_error"] == round(statistics.median(errors), 4)
        assert min(errors) <= b["p90_abs_error"] <= max(errors)
    ttft = reg.value("speed_bands.ttft.requests_1_4")
    assert ttft["rows"] == len([r for r in rows if r.held_back and r.concurrency <= 4])
    assert "held back" in reg["speed_bands.ttft.requests_1_4"].source


def _speed(**kw) -> str:
    from planner.report.render import speed_lines

    return speed_lines(planner.plan(model="llama-3.1-8b", chip=kw.pop("chip", "h100"), **kw).best)[0]


def test_the_printed_band_is_the_regimes_as_the_data_file_gives_it():
    reg = shipped()
    low, ttft = reg.value("speed_bands.tpot.requests_1_8"), reg.value("speed_bands.ttft.requests_1_4")
    line = _speed(concurrency=2, workload={"isl": 1000, "osl": 200})
    assert (f"per output token (held-out rows at 1-8 requests: median |error| {low['median_abs_error']:.0%}, "
            f"p90 {low['p90_abs_error']:.0%}, n = {low['rows']})") in line
    assert (f"prompt in 85.0 ms (held-out rows at 1-4 requests: median |error| {ttft['median_abs_error']:.0%}, "
            f"p90 {ttft['p90_abs_error']:.0%}, n = {ttft['rows']})") in line


def test_the_band_follows_the_data_file_not_a_copy_of_it():
    """An overlay of the file's value changes what is printed: the band is read, not typed."""
    value = {**shipped().value("speed_bands.tpot.requests_1_8"), "median_abs_error": 0.5, "p90_abs_error": 0.75}
    reg = overlay_from({"speed_bands": {"tpot": {"requests_1_8": {"value": value, "source": "test", "how": "test"}}}})
    line = _speed(concurrency=2, workload={"isl": 1000, "osl": 200}, registry=reg)
    assert "median |error| 50%, p90 75%" in line


def test_a_context_beyond_the_rows_or_an_amd_chip_prints_no_band():
    long = planner.plan(model="llama-3.1-8b", chip="h100", concurrency=2).best.step  # 131,072 tokens of context
    assert long.tpot_band is not None and not long.tpot_band.applies
    assert "no held-out band: the held-out rows at 1-8 requests reach only 5,120 tokens" in _speed(concurrency=2)
    amd = planner.plan(model="llama-3.1-8b", chip="mi300x", concurrency=2, workload={"isl": 1000, "osl": 200})
    assert amd.best.step.tpot_band is None and "held-out" not in _speed(chip="mi300x", concurrency=2)
    busy = planner.plan(model="llama-3.1-8b", chip="h100", concurrency=64, workload={"isl": 1000, "osl": 200})
    assert busy.best.step.ttft_band is None  # no held-out row measures a first token beside a running batch
    assert busy.best.step.tpot_band.source == "speed_bands.tpot.requests_32_up"


def test_a_disaggregated_fleet_prints_its_decode_tpots_band(capsys):
    from planner.cli import main
    from planner.numbers import duration

    args = ["--model", "llama-3.1-8b", "--chip", "h100", "--isl", "2000", "--osl", "200", "--requests-per-second", "5",
            "--ttft-ms", "1500", "--tpot-ms", "30", "--context-length", "8192", "--serving", "disagg"]
    fleet = planner.plan_serving(model="llama-3.1-8b", chip="h100", ttft_ms=1500, tpot_ms=30, context_length=8192,
                                 workload={"isl": 2000, "osl": 200, "requests_per_second": 5},
                                 serving="disagg").serving.disaggregated
    batch = fleet.decode_batch_per_rank
    regime = shipped().value(fleet.tpot_band.source)
    assert regime["requests_from"] <= batch <= (regime["requests_to"] or batch) and fleet.tpot_band.applies
    assert main(args) == 0
    out = capsys.readouterr().out
    assert (f"time per output token (step model): {duration(fleet.tpot_ms)} ({fleet.tpot_band.words()}) at {batch} "
            "running requests per decode rank") in " ".join(out.split())
