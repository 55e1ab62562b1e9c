"""Every chip of pricing/registry/chips/ either has its peak rates in its file, each figure with its
source, or an `unsourced` entry with the figures missing and why; the rows read off vendors'
data sheets hold the sheets' figures (dense = sparse / 2 where a sheet prints only the sparse one);
a plan on a rated chip prices its step, and a chip without rates says which figure is missing."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from planner.cli import cli
from pricing.chips import chip_ids, get_chip
from pricing.registry import shipped
from pricing.step import chip_rates, has_rates, missing_rates
from pricing.step.rates import RATE_FIELDS


def _rows() -> tuple[dict, dict]:
    raw = shipped().raw["chip_rates"]
    return raw["chip_rates"], raw.get("unsourced", {})


def test_every_chip_has_rates_or_a_reason():
    rows, unsourced = _rows()
    for chip in chip_ids():
        assert (chip in rows) != (chip in unsourced), f"{chip}: needs exactly one of a rate row or an unsourced entry"
        if chip in unsourced:
            entry = unsourced[chip]
            assert entry["value"] and set(entry["value"]) <= set(RATE_FIELDS), chip
            assert entry["source"].strip() and entry["how"].strip(), chip
            assert not has_rates(get_chip(chip))
    assert set(rows) <= set(chip_ids()) and set(unsourced) <= set(chip_ids()), "rates keyed by an unknown chip id"


def test_every_rate_row_is_whole_and_sourced():
    rows, _ = _rows()
    for chip, row in rows.items():
        assert set(row) == set(RATE_FIELDS), chip
        for field in RATE_FIELDS:
            assert row[field]["source"].strip() and row[field]["how"].strip(), (chip, field)
            assert row[field]["value"] is not None and float(row[field]["value"]) >= 0, (chip, field)
        rates = chip_rates(get_chip(chip))
        assert rates.bf16_flops > 0 and rates.memory_bandwidth > 0 and rates.scale_up_bandwidth > 0, chip
        # a narrower operand never runs slower where the chip has it natively
        assert rates.fp8_flops == 0 or rates.fp8_flops >= rates.bf16_flops, chip
        assert rates.fp4_flops == 0 or rates.fp4_flops >= rates.fp8_flops, chip


def test_new_chip_rates_read_off_their_sheets():
    """Values checked by hand against the pages the rows cite (dense = sparse / 2)."""
    l40 = chip_rates(get_chip("l40"))
    assert (l40.bf16_flops, l40.fp8_flops, l40.memory_bandwidth) == (181.05e12, 362.0e12, 864.0e9)
    assert l40.scale_up_bandwidth == 64e9 / 2  # PCIe Gen4 x16, 64 GB/s bidirectional
    h100_pcie = chip_rates(get_chip("h100-pcie"))
    assert (h100_pcie.bf16_flops, h100_pcie.fp8_flops) == (1513e12 / 2, 3026e12 / 2)
    assert h100_pcie.memory_bandwidth == 2.0e12
    assert chip_rates(get_chip("l4")).fp8_flops == 485e12 / 2
    # MI250X: one GCD is one GPU; ROCm's 1024 BF16 FLOP/clock/CU x 110 CUs x 1.7 GHz
    assert chip_rates(get_chip("mi250x")).bf16_flops == pytest.approx(1024 * 110 * 1.7e9)


def test_former_unsourced_chips_read_off_their_sheets():
    """Issue 14: the twelve chips once listed as unsourced, checked by hand against the documents
    their rows cite (NVIDIA/AMD data sheets, product briefs, architecture whitepapers)."""
    def rates(chip):
        return chip_rates(get_chip(chip))

    # NVIDIA H100 data sheet, H100 NVL column (sparse only) and product brief PB-11773-001
    nvl = rates("h100-nvl")
    assert (nvl.bf16_flops, nvl.fp8_flops) == (1671e12 / 2, 3341e12 / 2)
    assert nvl.memory_bandwidth == 3938e9 and nvl.scale_up_bandwidth == 600e9 / 2
    # H200 product page, H200 NVL column: the NVL card's own (lower) tensor rates, H200's memory
    h200_nvl = rates("h200-nvl")
    assert (h200_nvl.bf16_flops, h200_nvl.fp8_flops) == (1671e12 / 2, 3341e12 / 2)
    assert h200_nvl.bf16_flops < rates("h200").bf16_flops
    assert (h200_nvl.memory_bandwidth, h200_nvl.scale_up_bandwidth) == (4.8e12, 900e9 / 2)
    # GH200 data sheet prints dense | sparse; one compute column for both memory options
    for chip in ("gh200-96gb", "gh200-144gb"):
        gh = rates(chip)
        assert (gh.bf16_flops, gh.fp8_flops) == (990e12, 1979e12)
        assert gh.bf16_flops == pytest.approx(1979e12 / 2, rel=1e-3)
    assert rates("gh200-96gb").memory_bandwidth == 4.0e12
    assert rates("gh200-144gb").memory_bandwidth == 9.8e12 / 2  # the NVL2 column is two superchips
    # A10 data sheet: 125 | 250* TFLOPS = 72 SMs x 1,695 MHz x 1,024 FLOP/clock; no FP8
    a10 = rates("a10")
    assert a10.bf16_flops == 250e12 / 2 == pytest.approx(72 * 1695e6 * 1024, rel=1e-3)
    assert (a10.fp8_flops, a10.memory_bandwidth, a10.scale_up_bandwidth) == (0, 600e9, 64e9 / 2)
    # Ada whitepaper Appendix A: dense/sparse pairs, FP32 accumulate
    rtx4090 = rates("rtx-4090")
    assert (rtx4090.bf16_flops, rtx4090.fp8_flops) == (330.4e12 / 2, 660.6e12 / 2)
    assert rtx4090.memory_bandwidth == 1008e9
    # RTX Blackwell whitepaper Table 3: 170 SMs x 512 FLOP/clock x 2,407 MHz for BF16
    rtx5090 = rates("rtx-5090")
    assert rtx5090.bf16_flops == 419e12 / 2 == pytest.approx(170 * 512 * 2.407e9, rel=1e-4)
    assert (rtx5090.fp8_flops, rtx5090.fp4_flops) == (838e12 / 2, 3352e12 / 2)
    assert (rtx5090.memory_bandwidth, rtx5090.scale_up_bandwidth) == (1792e9, 128e9 / 2)
    # RTX PRO 6000 Server Edition: derived from its data sheet's 120 FP32 TFLOPS (the clock) and the
    # RTX Blackwell PRO whitepaper's dense per-SM rates (BF16 1,024, FP8 2,048, FP4 4,096 per clock)
    clock = 120e12 / (24064 * 2)
    pro = rates("rtx-pro-6000")
    assert (pro.bf16_flops, pro.fp8_flops, pro.fp4_flops) == pytest.approx(
        (188 * 1024 * clock, 188 * 2048 * clock, 188 * 4096 * clock))
    assert pro.memory_bandwidth == 1597e9  # the Server Edition's, not the Workstation's 1,792 GB/s
    # AMD CDNA 3 white paper Table 2: 228 CUs x 2.1 GHz x 2,048 (BF16) / 4,096 (FP8) FLOP/clock/CU
    mi300a = rates("mi300a")
    assert mi300a.bf16_flops == pytest.approx(228 * 2.1e9 * 2048, rel=1e-4)
    assert mi300a.fp8_flops == pytest.approx(228 * 2.1e9 * 4096, rel=1e-4)
    assert (mi300a.memory_bandwidth, mi300a.scale_up_bandwidth) == (5.3e12, 384e9 / 2)


def test_derived_and_bounded_figures_say_so():
    """A figure not printed by a sheet (derived, or an upper bound) says how it was obtained."""
    raw = shipped().raw["chip_rates"]["chip_rates"]
    for chip, field in (("rtx-pro-6000", "bf16_flops"), ("rtx-pro-6000", "fp8_flops"), ("rtx-pro-6000", "fp4_flops"),
                        ("gh200-96gb", "scale_up_bandwidth")):
        assert raw[chip][field]["how"].startswith("DERIVED"), (chip, field)
    assert raw["gh200-144gb"]["scale_up_bandwidth"]["how"].startswith("UPPER BOUND")


def _plan_json(chip: str) -> dict:
    result = CliRunner().invoke(cli, ["--model", "llama-3.1-8b", "--chip", chip, "--concurrency", "16",
                                      "--context-length", "8192", "--tpot-ms", "50", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("chip", ["l40", "rtx-4090"])
def test_plan_with_a_latency_target_gives_figures(chip):
    best = _plan_json(chip)["best"]
    step, tp = best["step"], best["tensor_parallel_size"]
    assert 0 < step["tpot_ms"] <= 50 and step["ttft_ms"] > 0 and step["output_tokens_per_second"] > 0
    # floor derived by hand: a decode step reads every decoder layer's and the LM head's bf16
    # weights and each request's KV cache at no more than the chip's data-sheet bandwidth, each of
    # the tp ranks its share (Llama-3.1-8B config: hidden 4096, 32 layers, 8 KV heads of 128, MLP
    # 14336, vocabulary 128256, untied head; tp divides the weights and the 8 KV heads)
    bandwidth = {"l40": 864.0e9, "rtx-4090": 1008e9}[chip]
    hidden, layers, kv, mlp, vocab = 4096, 32, 8 * 128, 14336, 128256
    layer = hidden * hidden * 2 + hidden * kv * 2 + 3 * hidden * mlp + 2 * hidden
    weight_bytes = 2 * (layers * layer + hidden * vocab + hidden)
    kv_bytes = step["batch_per_rank"] * 8192 * (2 * layers * kv * 2)  # K and V, bf16, every layer
    floor_ms = (weight_bytes + kv_bytes) / tp / bandwidth * 1e3
    assert step["tpot_ms"] >= floor_ms
    assert step["tpot_ms"] < 2 * floor_ms  # memory-bound: the peak rate, not an overhead, sets the step
    assert step["step_bound"] == "memory"


@pytest.mark.parametrize("chip", ["a10g", "dgx-spark", "h20-141gb"])
def test_a_chip_without_sourced_rates_says_which_figure_is_missing(chip):
    entry = shipped().raw["chip_rates"]["unsourced"][chip]
    reason = missing_rates(get_chip(chip))
    assert f"no vendor-sourced {', '.join(entry['value'])}" in reason and entry["how"] in reason
    result = CliRunner().invoke(cli, ["--model", "llama-3.1-8b", "--chip", chip, "--concurrency", "4",
                                      "--context-length", "4096"])
    assert "speed: unknown" in result.output and "no vendor-sourced bf16_flops" in result.output
