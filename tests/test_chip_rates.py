"""Every chip of chips.yaml either has its peak rates in chip_rates.yaml, each figure with its
source, or is listed under `unsourced` with the figures missing and why; a plan on one of the
chips added for issue 12 prices its step, and a chip without rates says which figure is missing."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from planner.cli import cli
from pricing.chips import chip_ids, get_chip
from pricing.registry import load
from pricing.step import chip_rates, has_rates, missing_rates
from pricing.step.rates import RATE_FIELDS


def _rows() -> tuple[dict, dict]:
    raw = load().raw["chip_rates"]
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


def _plan_json(chip: str) -> dict:
    result = CliRunner().invoke(cli, ["--model", "llama-3.1-8b", "--chip", chip, "--concurrency", "16",
                                      "--context-length", "8192", "--tpot-ms", "50", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_plan_with_a_latency_target_on_l40_gives_figures():
    step = _plan_json("l40")["best"]["step"]
    assert 0 < step["tpot_ms"] <= 50 and step["ttft_ms"] > 0 and step["output_tokens_per_second"] > 0
    # floor derived by hand: a decode step reads every decoder layer's and the LM head's bf16
    # weights and each request's KV cache at no more than the L40's 864 GB/s (Llama-3.1-8B config:
    # hidden 4096, 32 layers, 8 KV heads of 128, MLP 14336, vocabulary 128256, untied head)
    hidden, layers, kv, mlp, vocab = 4096, 32, 8 * 128, 14336, 128256
    layer = hidden * hidden * 2 + hidden * kv * 2 + 3 * hidden * mlp + 2 * hidden
    weight_bytes = 2 * (layers * layer + hidden * vocab + hidden)
    kv_bytes = step["batch_per_rank"] * 8192 * (2 * layers * kv * 2)  # K and V, bf16, every layer
    floor_ms = (weight_bytes + kv_bytes) / 864.0e9 * 1e3
    assert step["tpot_ms"] >= floor_ms
    assert step["tpot_ms"] < 2 * floor_ms  # memory-bound: the peak rate, not an overhead, sets the step
    assert step["step_bound"] == "memory"


@pytest.mark.parametrize("chip", ["rtx-pro-6000"])
def test_a_chip_without_sourced_rates_says_which_figure_is_missing(chip):
    reason = missing_rates(get_chip(chip))
    assert "bf16_flops" in reason and "data sheet" in reason
    result = CliRunner().invoke(cli, ["--model", "llama-3.1-8b", "--chip", chip, "--concurrency", "4",
                                      "--context-length", "4096"])
    assert "speed: unknown" in result.output and "no vendor-sourced bf16_flops" in result.output
