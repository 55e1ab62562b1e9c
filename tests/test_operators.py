"""The measured operator tables (pricing/registry/operators_<chip>.yaml, reduced by
scripts/operators/reduce.py from aiconfigurator-core's vLLM tables) reproduce rows of their own
tables that the reduction never saw (tests/fixtures/operators/<chip>.yaml: held-out rows, as
measured), per chip and format: GEMM (shapes n, k held out), each measured fused-MoE shape's curve in
tokens, context and generation attention by head shape on batch x tokens, and the MLA and DeepSeek
sparse-attention modules. `reduce.py --check` judges the whole tables the same way (side venv).
(h100_bf16_mlp_llama70b_tp4.yaml, the measured GEMMs of Llama-3.1-70B's MLP at tp 4, waits for a
step model built from these operators: see pricing/step/operators.py.)"""

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


# Reductions that miss the target on the held-out rows of their fixture sample (strict: a fix that meets it
# shows as XPASS and must drop its line). scripts/operators/reduce.py --check prints the whole tables' figures.
# Why they miss: the measured tables jump between neighbouring points where a kernel changes tile or
# algorithm, and a held-out point between two measured ones cannot know it: B200's per-tensor FP8 CUTLASS GEMM
# (m = 128: 0.019 ms, m = 256: 0.052 ms, m = 512: 0.039 ms at 8192 x 8192), DeepEP's all-to-all (low-latency
# mode and V2 on H100), DSA context modules on Blackwell (FlashInfer's sparse MLA), W4A16/MXFP4 fused MoE, and
# decode attention on the L40S and RTX PRO 6000. Not met; kept visible, not loosened.
MISSED = {
    ("b200", "gemm", "fp8_tensor"): "median 7.1%, p90 24.9% over 100 held-out rows",
    ("b200", "moe", "int4"): "median 4.9%, p90 22.0% over 50 held-out rows",
    ("b200", "dsa_context", "deepseek-v3.2_bfloat16_bfloat16"): "median 1.7%, p90 21.9% over 20 held-out rows",
    ("b200", "dsa_context", "deepseek-v3.2_fp8_bfloat16"): "median 3.9%, p90 31.8% over 20 held-out rows",
    ("b200", "dsa_context", "deepseek-v3.2_fp8_fp8_block"): "median 3.1%, p90 28.6% over 20 held-out rows",
    ("b200", "dsa_context", "deepseek-v3.2_fp8_nvfp4"): "median 4.3%, p90 21.7% over 20 held-out rows",
    ("b200", "dsa_context", "glm-5_fp8_bfloat16"): "median 4.9%, p90 26.8% over 20 held-out rows",
    ("b200", "all_to_all", "deepep_ht_dispatch"): "median 2.5%, p90 88.0% over 9 held-out rows",
    ("b200", "all_to_all", "deepep_ll_combine"): "median 8.8%, p90 36.2% over 17 held-out rows",
    ("b200", "all_to_all", "deepep_ll_dispatch"): "median 10.1%, p90 26.1% over 17 held-out rows",
    ("b300", "moe", "fp8_tensor"): "median 4.0%, p90 20.1% over 50 held-out rows",
    ("b300", "moe", "int4"): "median 5.1%, p90 22.6% over 50 held-out rows",
    ("b300", "moe", "nvfp4"): "median 6.7%, p90 22.3% over 50 held-out rows",
    ("b300", "dsa_context", "deepseek-v3.2_bfloat16_bfloat16"): "median 2.5%, p90 21.2% over 20 held-out rows",
    ("b300", "dsa_context", "deepseek-v3.2_fp8_bfloat16"): "median 4.6%, p90 32.3% over 20 held-out rows",
    ("b300", "dsa_context", "deepseek-v3.2_fp8_fp8_block"): "median 6.3%, p90 27.4% over 20 held-out rows",
    ("b300", "dsa_context", "deepseek-v3.2_fp8_nvfp4"): "median 3.4%, p90 25.7% over 20 held-out rows",
    ("b300", "dsa_context", "glm-5_fp8_bfloat16"): "median 4.4%, p90 32.3% over 20 held-out rows",
    ("b300", "dsa_context", "glm-5_fp8_nvfp4"): "median 7.0%, p90 20.1% over 20 held-out rows",
    ("b300", "all_to_all", "deepep_ll_combine"): "median 9.6%, p90 43.1% over 17 held-out rows",
    ("b300", "all_to_all", "deepep_ll_dispatch"): "median 11.5%, p90 44.4% over 17 held-out rows",
    ("gb200", "moe", "int4"): "median 4.2%, p90 21.8% over 50 held-out rows",
    ("gb200", "moe", "nvfp4"): "median 6.0%, p90 23.7% over 50 held-out rows",
    ("gb200", "dsa_context", "deepseek-v3.2_bfloat16_bfloat16"): "median 9.9%, p90 23.4% over 20 held-out rows",
    ("gb200", "dsa_context", "deepseek-v3.2_bfloat16_fp8_block"): "median 4.1%, p90 20.6% over 20 held-out rows",
    ("gb200", "dsa_context", "deepseek-v3.2_bfloat16_nvfp4"): "median 3.0%, p90 20.7% over 20 held-out rows",
    ("gb200", "dsa_context", "deepseek-v3.2_fp8_bfloat16"): "median 5.9%, p90 22.9% over 20 held-out rows",
    ("gb200", "dsa_context", "deepseek-v3.2_fp8_fp8_block"): "median 5.1%, p90 26.2% over 20 held-out rows",
    ("gb200", "dsa_context", "deepseek-v3.2_fp8_nvfp4"): "median 7.4%, p90 23.6% over 20 held-out rows",
    ("gb200", "dsa_context", "glm-5_bfloat16_fp8_block"): "median 8.0%, p90 22.2% over 20 held-out rows",
    ("gb200", "dsa_context", "glm-5_bfloat16_nvfp4"): "median 6.0%, p90 21.0% over 20 held-out rows",
    ("gb200", "dsa_context", "glm-5_fp8_bfloat16"): "median 9.2%, p90 32.8% over 20 held-out rows",
    ("gb200", "dsa_context", "glm-5_fp8_fp8_block"): "median 4.2%, p90 24.2% over 20 held-out rows",
    ("gb200", "dsa_context", "glm-5_fp8_nvfp4"): "median 5.9%, p90 20.7% over 20 held-out rows",
    ("gb200", "all_to_all", "deepep_ht_combine"): "median 7.0%, p90 43.2% over 24 held-out rows",
    ("gb200", "all_to_all", "deepep_ht_dispatch"): "median 17.8%, p90 84.0% over 24 held-out rows",
    ("gb200", "all_to_all", "deepep_ll_combine"): "median 10.5%, p90 31.3% over 25 held-out rows",
    ("gb200", "all_to_all", "deepep_ll_dispatch"): "median 10.9%, p90 40.9% over 25 held-out rows",
    ("gb300", "moe", "int4"): "median 3.7%, p90 21.8% over 50 held-out rows",
    ("gb300", "dsa_context", "deepseek-v3.2_bfloat16_bfloat16"): "median 7.5%, p90 57.4% over 20 held-out rows",
    ("gb300", "dsa_context", "deepseek-v3.2_bfloat16_fp8_block"): "median 15.7%, p90 35.3% over 20 held-out rows",
    ("gb300", "dsa_context", "deepseek-v3.2_bfloat16_nvfp4"): "median 12.5%, p90 59.1% over 20 held-out rows",
    ("gb300", "dsa_context", "deepseek-v3.2_fp8_bfloat16"): "median 13.1%, p90 90.6% over 20 held-out rows",
    ("gb300", "dsa_context", "deepseek-v3.2_fp8_fp8_block"): "median 22.0%, p90 36.1% over 20 held-out rows",
    ("gb300", "dsa_context", "deepseek-v3.2_fp8_nvfp4"): "median 13.5%, p90 32.6% over 20 held-out rows",
    ("gb300", "dsa_context", "glm-5_bfloat16_bfloat16"): "median 15.2%, p90 46.2% over 20 held-out rows",
    ("gb300", "dsa_context", "glm-5_bfloat16_fp8_block"): "median 13.0%, p90 43.6% over 20 held-out rows",
    ("gb300", "dsa_context", "glm-5_bfloat16_nvfp4"): "median 4.2%, p90 38.4% over 20 held-out rows",
    ("gb300", "dsa_context", "glm-5_fp8_bfloat16"): "median 19.6%, p90 53.3% over 20 held-out rows",
    ("gb300", "dsa_context", "glm-5_fp8_fp8_block"): "median 12.4%, p90 57.3% over 20 held-out rows",
    ("gb300", "dsa_context", "glm-5_fp8_nvfp4"): "median 16.1%, p90 64.8% over 20 held-out rows",
    ("gb300", "all_to_all", "deepep_ht_combine"): "median 5.3%, p90 35.8% over 24 held-out rows",
    ("gb300", "all_to_all", "deepep_ht_dispatch"): "median 5.3%, p90 27.6% over 24 held-out rows",
    ("gb300", "all_to_all", "deepep_ll_combine"): "median 6.7%, p90 46.3% over 25 held-out rows",
    ("gb300", "all_to_all", "deepep_ll_dispatch"): "median 8.5%, p90 35.4% over 25 held-out rows",
    ("h100", "moe", "mxfp4"): "median 5.9%, p90 24.1% over 50 held-out rows",
    ("h100", "dsa_context", "deepseek-v3.2_bfloat16_fp8_block"): "median 1.6%, p90 29.1% over 20 held-out rows",
    ("h100", "all_to_all", "deepep_ht_dispatch"): "median 8.7%, p90 29.1% over 9 held-out rows",
    ("h100", "all_to_all", "deepep_ll_combine"): "median 5.5%, p90 44.7% over 17 held-out rows",
    ("h100", "all_to_all", "deepep_ll_dispatch"): "median 8.5%, p90 26.9% over 17 held-out rows",
    ("h100", "all_to_all", "deepep_v2_context_combine"): "median 16.5%, p90 59.2% over 9 held-out rows",
    ("h100", "all_to_all", "deepep_v2_context_dispatch"): "median 7.5%, p90 20.9% over 9 held-out rows",
    ("h100", "all_to_all", "deepep_v2_generation_combine"): "median 31.9%, p90 84.7% over 17 held-out rows",
    ("h100", "all_to_all", "deepep_v2_generation_dispatch"): "median 36.6%, p90 95.2% over 17 held-out rows",
    ("h200", "moe", "int4"): "median 4.9%, p90 20.7% over 50 held-out rows",
    ("h200", "moe", "mxfp4"): "median 5.3%, p90 25.1% over 50 held-out rows",
    ("h200", "dsa_context", "deepseek-v3.2_bfloat16_fp8_block"): "median 3.3%, p90 23.9% over 20 held-out rows",
    ("h200", "dsa_context", "glm-5_bfloat16_bfloat16"): "median 2.7%, p90 23.7% over 20 held-out rows",
    ("h200", "all_to_all", "deepep_ll_combine"): "median 10.9%, p90 33.8% over 17 held-out rows",
    ("h200", "all_to_all", "deepep_ll_dispatch"): "median 9.7%, p90 37.9% over 17 held-out rows",
    ("l40s", "moe", "bf16"): "median 5.8%, p90 34.9% over 50 held-out rows",
    ("l40s", "moe", "fp8_tensor"): "median 4.3%, p90 32.6% over 50 held-out rows",
    ("l40s", "moe", "mxfp4"): "median 4.9%, p90 24.4% over 50 held-out rows",
    ("l40s", "attention_generation", "bfloat16"): "median 8.4%, p90 47.1% over 50 held-out rows",
    ("l40s", "attention_generation", "fp8"): "median 2.8%, p90 45.9% over 50 held-out rows",
    ("rtx-pro-6000", "moe", "fp8_tensor"): "median 4.9%, p90 27.7% over 50 held-out rows",
    ("rtx-pro-6000", "moe", "mxfp4"): "median 7.2%, p90 27.8% over 50 held-out rows",
    ("rtx-pro-6000", "attention_generation", "bfloat16"): "median 6.0%, p90 30.6% over 50 held-out rows",
    ("rtx-pro-6000", "attention_generation", "fp8"): "median 5.8%, p90 31.3% over 50 held-out rows",
    ("rtx-pro-6000", "mla_generation", "deepseek-v3_bfloat16_nvfp4"): "median 4.8%, p90 21.4% over 20 held-out rows",
}


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


def _moe_errors(chip: str, fmt: str) -> list[float]:
    ops = OperatorTables.of(get_chip(chip), shipped())
    out = []
    for r in _rows(chip, "moe")[fmt]:
        measured = ops.moe_measured_seconds(r["tokens"], r["hidden"], r["inter"] / r["tp"], r["top_k"], r["experts"],
                                            r["ep"], fmt)
        assert measured is not None, r  # a held-out row's shape is a measured one: its own curve prices it
        out.append(abs(measured[0] / r["seconds"] - 1))
    return out


def _attention_errors(chip: str, phase: str, kv: str) -> list[float]:
    ops = OperatorTables.of(get_chip(chip), shipped())
    out = []
    for r in _rows(chip, f"attention_{phase}")[kv]:
        measured = ops.attention_seconds(phase, r["batch"], r["tokens"], r["heads"], r["kv_heads"], r["head_dim"], kv)
        assert measured is not None, r
        out.append(abs(measured[0] / r["seconds"] - 1))
    return out


def _cases(op: str):
    shaped = op.startswith(("mla", "dsa", "all_to_all"))
    for chip in CHIPS:
        for fmt in sorted(_rows(chip, op)):
            missed = MISSED.get((chip, op, fmt))
            marks = [pytest.mark.xfail(reason=missed, strict=True)] if missed else []
            label = f"{op}:{fmt}" if shaped else fmt
            yield pytest.param(chip, label, id=f"{chip}-{label}", marks=marks)


def _meets(errors: list[float]) -> None:
    assert len(errors) >= 40
    assert statistics.median(errors) <= MEDIAN
    assert statistics.quantiles(errors, n=10)[-1] <= P90


@pytest.mark.parametrize(("chip", "fmt"), list(_cases("moe")))
def test_moe_reduction_reproduces_held_out_rows(chip, fmt):
    """Each measured MoE shape's curve in tokens reproduces the rows held out of it (rows, not shapes:
    a shape the table does not hold is priced by the general curve, `moe.<format>`)."""
    _meets(_moe_errors(chip, fmt))


@pytest.mark.parametrize(("chip", "kv"), list(_cases("attention_context")))
def test_context_attention_reproduces_held_out_rows(chip, kv):
    _meets(_attention_errors(chip, "context", kv))


@pytest.mark.parametrize(("chip", "kv"), list(_cases("attention_generation")))
def test_generation_attention_reproduces_held_out_rows(chip, kv):
    _meets(_attention_errors(chip, "generation", kv))


def _shape_errors(chip: str, op: str, label: str) -> list[float]:
    ops = OperatorTables.of(get_chip(chip), shipped())
    out = []
    for r in _rows(chip, op)[label]:
        if op == "all_to_all":
            measured = ops.all_to_all_seconds(label, r["tokens"], r["ep"], r["hidden"], r["top_k"], r["experts"])
        else:
            module, phase = op.split("_")
            measured = ops.module_seconds(module, phase, label, r["batch"], r["tokens"], r["heads"])
        assert measured is not None, (chip, op, label, r)
        out.append(abs(measured[0] / r["seconds"] - 1))
    return out


@pytest.mark.parametrize("op", ["mla_context", "mla_generation", "dsa_context", "dsa_generation", "all_to_all"])
def test_the_tables_hold_modules_and_all_to_all(op):
    assert sum(len(_rows(chip, op)) for chip in CHIPS) >= 4


@pytest.mark.parametrize(("chip", "label"), [p for op in ("mla_context", "mla_generation", "dsa_context",
                                                          "dsa_generation", "all_to_all") for p in _cases(op)])
def test_modules_and_all_to_all_reproduce_held_out_rows(chip, label):
    """MLA and DeepSeek sparse-attention modules (per model, cache dtype and GEMM format, by heads on
    batch x tokens) and MoE all-to-all (per DeepEP backend and phase, by shape in tokens)."""
    op, label = label.split(":")
    errors = _shape_errors(chip, op, label)
    assert len(errors) >= 8
    assert statistics.median(errors) <= MEDIAN
    assert statistics.quantiles(errors, n=10)[-1] <= P90


def test_measured_tables_hold_only_their_shapes():
    """A shape the table never measured is not priced as if measured (None), and past the grid's last
    node the time grows in proportion (twice the longest measured context: twice the time)."""
    ops = OperatorTables.of(get_chip("h100"), shipped())
    assert ops.attention_seconds("generation", 8, 1024, 3, 3, 96, "bfloat16") is None
    assert ops.moe_measured_seconds(64, 4095, 1536, 8, 128, 1, "bf16") is None
    last = ops.attention_seconds("generation", 8, 131072, 32, 8, 128, "bfloat16")[0]  # the longest measured
    assert ops.attention_seconds("generation", 8, 2 * 131072, 32, 8, 128, "bfloat16")[0] == pytest.approx(2 * last)


def test_fixtures_cover_the_four_chips():
    assert {"h100", "h200", "b200", "b300"} <= set(CHIPS)
    for chip in ("h100", "h200", "b200", "b300"):
        assert len(next(iter(_rows(chip, "gemm").values()))) >= 90


@pytest.mark.parametrize(("chip", "fmt"), list(_cases("gemm")))
def test_gemm_reduction_reproduces_held_out_rows(chip, fmt):
    _meets(_errors(chip, fmt))


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


@pytest.mark.parametrize(("chip", "fp8_small", "block_large"),
                         [("h100", 9.98e-6, 911.3e-6), ("h200", 9.07e-6, 919.7e-6)])
def test_block_fp8_on_hopper_is_priced_as_a_cuda_graph_replays_it(chip, fp8_small, block_large):
    """aiconfigurator times block FP8 alone outside CUDA graphs: at m = 8 its rows are the host's eager
    launch (58 us on H100, 64 us on H200 for 7168 x 2048), which a step replayed from vLLM's graph does not
    pay. Block-FP8 weights are priced by the per-tensor FP8 GEMM's curve (measured in graphs): near the
    per-tensor row at m = 8 (`fp8_small`, measured), and near the block-FP8 row where it is the GPU's
    (m = 8192, 8192 x 8192: DeepGEMM, `block_large`, measured)."""
    reg = shipped()
    ops = OperatorTables.of(get_chip(chip), reg)
    rates = chip_rates(get_chip(chip), reg)

    def t(m, n, k):
        return ops.gemm_seconds(m, n, k, "fp8_block", 1.0, rates.fp8_flops, rates.memory_bandwidth)

    assert t(8, 7168, 2048) == pytest.approx(fp8_small, rel=0.2)
    assert t(8192, 8192, 8192) == pytest.approx(block_large, rel=0.2)


@pytest.mark.parametrize(("tokens", "touched"), [(1, 1.0), (8, 28.71 / 32), (32, 81.66 / 128), (64, 111.22 / 128),
                                                 (4096, 1.0)])
def test_measured_moe_is_priced_at_a_served_steps_routing(tokens, touched):
    """The fused-MoE tables route `balanced` (aiconfigurator's balanced_logits: every token-expert assignment its
    own expert until all are used, min(E, n k) distinct); a served step's router picks about uniformly, E (1 - (1 -
    k/E)^n) distinct. gpt-oss-120b's experts on an H200 (128 of them, top-4, MXFP4, read-bound up to thousands of
    tokens): the step prices the measured seconds times the experts it reads over the experts the table read,
    worked by hand: 8 tokens 28.71 of 32, 32 tokens 81.66 of 128, 64 tokens 111.22 of 128; one token and 4096
    tokens read the same experts both ways."""
    reg = shipped()
    ops = OperatorTables.of(get_chip("h200"), reg)
    rates = chip_rates(get_chip("h200"), reg)
    measured = ops.moe_measured_seconds(tokens, 2880, 2880, 4, 128, 1, "mxfp4")[0]
    priced = ops.moe_seconds(tokens, 2880, 2880, 4, 128, 1, "mxfp4", 0.53125, rates.bf16_flops,
                             rates.memory_bandwidth)
    assert priced / measured == pytest.approx(touched, rel=0.01)
