"""The silicon rows' closed loops through the serving simulator (pricing/serving/silicon.py `Harness`,
`closed_loop`): the benchmark block the data file states and its collector writes, a lone client
against the step model's own first token and decode, a first wave of clients sent at once queueing FCFS
behind each other's prefill, and the reason the block gives for reading means, on a sample of training rows."""

from __future__ import annotations

import statistics
from dataclasses import replace

import pytest
import yaml

from pricing.serving.silicon import Harness, closed_loop, simulated
from pricing.step.serving import ttft
from pricing.step.silicon import SILICON, load_silicon
from pricing.step.step import StepModel
from tests.helpers import script

ROWS, ABOUT = load_silicon()
ALONE = Harness(1, 1.0, "mean", "test: one request a client, nominal lengths")


def _row(model: str = "qwen3-32b", chip: str = "h100"):
    return next(r for r in ROWS if r.model == model and r.chip == chip)


def test_the_benchmark_block_is_the_collectors_and_reads_as_a_harness():
    """The file's `benchmark` block is the one scripts/collectors/aiconfigurator_silicon_points.py writes (a
    regenerated file keeps it), says it is assumed, and reads as 10 prompts a client, lengths in [0.8 n, n],
    means; a statistic other than mean or median is refused."""
    collector = script("collectors/aiconfigurator_silicon_points")
    block = yaml.safe_load(SILICON.read_text())["benchmark"]
    assert block == collector.BENCHMARK and block["how"].startswith("assumed, not stated by the source")
    h = Harness.of(ABOUT)
    assert (h.prompts_per_client, h.length_floor, h.statistic) == (10, 0.8, "mean")
    assert (h.lengths(1024).low, h.lengths(1024).high) == (819, 1024)  # int(0.8 × 1024), the old convention
    with pytest.raises(ValueError):
        Harness(10, 0.8, "p90", "")


def test_a_lone_client_is_the_step_models_own_first_token_and_decode():
    """One client, one request of nominal lengths: nothing else runs, so its TTFT is the step model's
    chunked prefill of the prompt beside no decodes (pricing/step/serving.py `ttft`, the API server's time
    included) and its TPOT the decode step's mean over the output's contexts, within the simulator's table
    interpolation (3 %)."""
    row = replace(_row(), concurrency=1, isl=4096, osl=256)
    tpot, first = closed_loop(row, ALONE)
    model = StepModel(row.kernel())
    assert first == pytest.approx(ttft(model, 1, row.isl, row.isl), rel=0.03)
    decode = statistics.fmean(model.time(model.decode_step(1, row.isl + i)).seconds for i in range(1, row.osl))
    assert tpot == pytest.approx(decode, rel=0.03)


def test_a_first_wave_sent_at_once_queues_behind_the_other_prompts():
    """Eight clients sent at once, each prompt a whole token budget: vLLM admits them first come first
    served, one prompt's prefill a step, so the k-th first token waits for about k prefills; the mean over
    the wave is at least 0.9 × (8 + 1) / 2 lone prefills, each TTFT later than the one sent before it."""
    row = _row()
    budget = StepModel(row.kernel()).engine.max_num_batched_tokens
    wave = replace(row, concurrency=8, isl=budget, osl=64)
    lone = closed_loop(replace(wave, concurrency=1), ALONE)[1]
    served = simulated(wave, ALONE)
    firsts = [t for t, _, _ in served.per_request]
    assert all(a < b for a, b in zip(firsts, firsts[1:], strict=False))
    assert served.ttft.mean >= 0.9 * (8 + 1) / 2 * lone


def test_means_not_medians_as_the_block_says_on_training_rows():
    """The block's reason for reading means: on the training rows (a sample, every fifth; the held-back
    rows are not read) the median of the simulated TTFT leaves the first, synchronised wave out and is
    optimistic by more than 10 % (signed median) in every concurrency bin, the mean less so."""
    h = Harness.of(ABOUT)
    sample = [r for r in ROWS if not r.held_back][::5]
    bins: dict[str, list[tuple[float, float]]] = {}
    for r in sample:
        served = simulated(r, h)
        label = "1-8" if r.concurrency <= 8 else "9-31" if r.concurrency < 32 else "32+"
        bins.setdefault(label, []).append((served.ttft.mean * 1e3 / r.ttft_ms - 1,
                                           served.ttft.percentile(50) * 1e3 / r.ttft_ms - 1))
    assert set(bins) == {"1-8", "9-31", "32+"}
    for label, errors in bins.items():
        mean, median = (statistics.median(e[i] for e in errors) for i in (0, 1))
        assert median < -0.10 and abs(mean) < abs(median), (label, mean, median)
