"""docs/disaggregated.md's comparison with the one public disaggregated run found with its setup
stated (InferenceX's DeepSeek-R1 on H100, SemiAnalysisAI/InferenceX issue 1580): the decode side's TPOT
as `plan memory` prices it, without a drafter and with 1 and 3 MTP tokens, against the run's published
and reproduced figures; `python scripts/docs.py --only inferencex-disagg` rewrites it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "scripts" / "docgen")]
from examples import output  # noqa: E402

# the run, as SemiAnalysisAI/InferenceX issue 1580 publishes it and as the reproduction measured it
PUBLISHED_TPOT_MS = 36.99
PUBLISHED_TTFT_MS = 1662.6
PUBLISHED_TOKENS_PER_SECOND = 1564.8
REPRODUCED_TPOT_MS = (19.35, 21.60)
REPRODUCED_TOKENS_PER_SECOND = (2639, 2940)
CONCURRENCY, OSL = 64, 1024

DECODE = ["memory", "--model", "dsr1", "--chip", "h100", "-tp", "1", "-dp", "16", "--enable-expert-parallel",
          "--max-model-len", "4096", "--batch", "4", "--isl", "1024", "--osl", "1024"]


def tpot_ms(drafts: int) -> float:
    """The decode step's TPOT at `drafts` MTP tokens, as `plan memory` prints it."""
    argv = DECODE + (["--num-speculative-tokens", str(drafts), "--speculative-method", "mtp"] if drafts else [])
    line = next(line for line in output(argv, 200).splitlines() if line.startswith("speed (step model):"))
    return float(re.search(r"([\d.]+) ms per output token", line).group(1))


def _percent(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.0f} %".replace("-", "−")


def section() -> str:
    plain, one, three = tpot_ms(0), tpot_ms(1), tpot_ms(3)
    low, high = sorted(one / t for t in REPRODUCED_TPOT_MS)
    rate = CONCURRENCY * OSL / (PUBLISHED_TTFT_MS / 1000 + OSL * one / 1000)
    against = sorted(rate / t for t in REPRODUCED_TOKENS_PER_SECOND)
    return (f"`plan memory {' '.join(DECODE[1:])}` (64 requests over 16 ranks) prices TPOT at {plain:.1f} ms without a "
            f"drafter and {one:.1f} ms with one MTP token (`--num-speculative-tokens 1 --speculative-method mtp`; "
            f"{three:.1f} ms with 3), at the step model's vLLM factors (the run is SGLang's): "
            f"{_percent(plain / PUBLISHED_TPOT_MS)} against the published TPOT without MTP, {_percent(low)} to "
            f"{_percent(high)} against the reproduction with one MTP token (the MTP depth the run used is not "
            f"stated). The closed loop's throughput, 64 × 1,024 / (TTFT + 1,024 × TPOT), at the published TTFT and "
            f"the one-token-MTP TPOT is {rate:,.0f} tokens/s: {_percent(rate / PUBLISHED_TOKENS_PER_SECOND)} against "
            f"the published figure and {_percent(against[1])} to {_percent(against[0])} against the reproduction.\n")
