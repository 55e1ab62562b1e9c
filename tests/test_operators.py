"""The measured operator tables (pricing/registry/operators_<chip>.yaml, reduced by
scripts/operators/reduce.py from aiconfigurator-core's vLLM tables) reproduce rows of their own
tables that the reduction never saw (tests/fixtures/operators/<chip>.yaml: held-out shapes, as
measured). (h100_bf16_mlp_llama70b_tp4.yaml, the measured GEMMs of Llama-3.1-70B's MLP at tp 4, waits
for a step model built from these operators: see pricing/step/operators.py.)"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from pricing import yaml_fast
from pricing.chips import get_chip
from pricing.registry import shipped
from pricing.step.operators import OperatorTables
from pricing.step.rates import chip_rates
from pricing.step.roofline import Curve, gemm_roofline

FIXTURES = Path(__file__).parent / "fixtures" / "operators"
CHIPS = sorted(p.stem for p in FIXTURES.glob("*.yaml") if not p.stem.startswith("h100_bf16_mlp"))
MEDIAN, P90 = 0.08, 0.20  # issue 38: median |error| <= 8 %, 90th percentile <= 20 %, per chip and format


def _rows(chip: str, op: str) -> dict[str, list[dict]]:
    doc = yaml_fast.load((FIXTURES / f"{chip}.yaml").read_text())
    table = doc.get(op) or {"columns": [], "rows": []}
    out: dict[str, list[dict]] = {}
    for row in table["rows"]:
        r = dict(zip(table["columns"], row, strict=True))
        out.setdefault(r["format"], []).append(r)
    return out


# Reductions that miss the target on their held-out rows (scripts/operators/reduce.py prints the figures):
# B200's per-tensor FP8 CUTLASS GEMM changes tile configuration abruptly between neighbouring shapes
# (m = 128: 0.019 ms, m = 256: 0.052 ms, m = 512: 0.039 ms at 8192 x 8192), which a smooth curve over
# held-out n, k does not follow: median 7.2 %, 90th percentile 24 %. Not met; kept visible, not loosened.
MISSED = {("b200", "fp8_tensor"): "B200 FP8 CUTLASS GEMM: held-out p90 24 % > 20 % (issue 38 target not met)"}


def _gemm_cases():
    for chip in CHIPS:
        for fmt in sorted(_rows(chip, "gemm")):
            marks = [pytest.mark.xfail(reason=MISSED[(chip, fmt)], strict=True)] if (chip, fmt) in MISSED else []
            yield pytest.param(chip, fmt, id=f"{chip}-{fmt}", marks=marks)


def _errors(chip: str, fmt: str) -> list[float]:
    reg = shipped()
    entry = reg[f"operators_{chip}.gemm.{fmt}"]
    curve = Curve.of(entry.value)
    rates = chip_rates(get_chip(chip), reg)
    peak = rates.flops_for(fmt)
    out = []
    for r in _rows(chip, "gemm")[fmt]:
        roof = gemm_roofline(r["m"], r["n"], r["k"], entry.value["weight_bytes"], peak, rates.memory_bandwidth)
        out.append(abs(roof * curve.ratio(r["m"], r["n"], r["k"]) / r["seconds"] - 1))
    return out


def test_fixtures_cover_the_four_chips():
    assert {"h100", "h200", "b200", "b300"} <= set(CHIPS)
    for chip in ("h100", "h200", "b200", "b300"):
        assert len(next(iter(_rows(chip, "gemm").values()))) >= 150


@pytest.mark.parametrize(("chip", "fmt"), list(_gemm_cases()))
def test_gemm_reduction_reproduces_held_out_rows(chip, fmt):
    errors = _errors(chip, fmt)
    assert len(errors) >= 50
    assert statistics.median(errors) <= MEDIAN
    assert statistics.quantiles(errors, n=10)[-1] <= P90


def test_gemm_at_decode_sizes_is_memory_bound_and_large_m_compute_bound():
    """A property of the measured data the curve must keep: a GEMM of a few tokens reads its weights
    (its time hardly moves from m = 1 to m = 32); at thousands of tokens it grows with m."""
    reg = shipped()
    ops = OperatorTables.of(get_chip("h100"), reg)
    rates = chip_rates(get_chip("h100"), reg)

    def t(m):
        return ops.gemm_seconds(m, 8192, 8192, "bf16", 2.0, rates.bf16_flops, rates.memory_bandwidth)

    assert t(64) < 1.3 * t(1)
    assert 3.0 < t(8192) / t(2048) < 5.0
    weights = 8192 * 8192 * 2 / rates.memory_bandwidth
    assert weights < t(1) < 5 * weights  # the weights' read time, plus the kernel's fixed cost
