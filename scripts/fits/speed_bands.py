"""The step model's measured error where it was not fitted, by regime: the band a plan prints beside
its TPOT and TTFT (pricing/registry/speed_bands.yaml, read by planner/candidates/speed_band.py).

The rows are validation/vllm_silicon_points.yaml's (vLLM's TPOT and TTFT at a fixed concurrency, in
NVIDIA aiconfigurator's measured silicon data), priced at vLLM's CUDA factors (step_model.yaml
engines.vllm), only those held back from the fit (pricing/step/silicon.py: a third of the rows, by a
hash of their id):

- TPOT: the held-back rows whose decode dominates (outputs at least as long as prompts, the regime the
  factors are fitted and judged in), by concurrency: 1-8, 9-31 and 32 or more requests.
- TTFT: the held-back rows at most 4 concurrent (the regime its API-server time is fitted in); no band
  above it (no row measures the step model's first token beside a running batch).

Each band also records the longest context its rows reach (`context_to`): a plan priced beyond it is
outside what the rows measure, and says so instead of printing the band.

Each band: the median and the 90th percentile (linear, as numpy's default) of |predicted / measured - 1|
over its rows, and their count.

    python scripts/fits/speed_bands.py          # rewrite pricing/registry/speed_bands.yaml
    python scripts/fits/speed_bands.py --check  # recompute and compare, write nothing (exit 1 on a difference)
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

OUT = ROOT / "pricing" / "registry" / "speed_bands.yaml"
TPOT_BINS = ((1, 8), (9, 31), (32, None))  # concurrent requests per rank, inclusive; None: no top
TTFT_BINS = ((1, 4),)
CONTEXT_WORDS = {"tpot": "context its TPOT is priced at (isl + osl / 2)", "ttft": "prompt"}
SOURCE = ("validation/vllm_silicon_points.yaml (vLLM in NVIDIA aiconfigurator's silicon_sample.csv), its rows "
          "held back from the step model's fit")


def quantile(values: list[float], q: float) -> float:
    """The q-quantile, linear between order statistics (numpy's default)."""
    v = sorted(values)
    x = q * (len(v) - 1)
    i = int(x)
    return v[i] if i + 1 >= len(v) else v[i] + (v[i + 1] - v[i]) * (x - i)


def key(low: int, high: int | None) -> str:
    return f"requests_{low}_{high}" if high is not None else f"requests_{low}_up"


def within(concurrency: int, low: int, high: int | None) -> bool:
    return low <= concurrency and (high is None or concurrency <= high)


def bands() -> dict:
    """{metric: {bin key: {value, source, how}}} from the held-back rows."""
    from pricing.step.silicon import load_silicon

    rows, _ = load_silicon()
    held = [r for r in rows if r.held_back]
    errors = {r.id: r.errors() for r in held}
    out: dict = {"tpot": {}, "ttft": {}}
    for metric, index, bins, chosen, words, context in (
            ("tpot", 0, TPOT_BINS, [r for r in held if r.decode_dominated],
             "held-back rows whose outputs are at least as long as their prompts",
             lambda r: r.isl + r.osl // 2),  # the context its TPOT is priced at (SiliconPoint.predicted)
            ("ttft", 1, TTFT_BINS, held, "held-back rows", lambda r: r.isl)):  # the prompt its TTFT is priced for
        for low, high in bins:
            mine = [r for r in chosen if within(r.concurrency, low, high)]
            got = [abs(errors[r.id][index]) for r in mine]
            span = f"{low} to {high}" if high is not None else f"{low} or more"
            out[metric][key(low, high)] = {
                "value": {"requests_from": low, "requests_to": high, "context_to": max(map(context, mine)),
                          "median_abs_error": round(statistics.median(got), 4),
                          "p90_abs_error": round(quantile(got, 0.9), 4), "rows": len(got)},
                "source": SOURCE,
                "how": (f"scripts/fits/speed_bands.py: the {words} at {span} concurrent requests ({len(got)}), "
                        "each priced by the step model at vLLM's CUDA factors (pricing/step/silicon.py "
                        "SiliconPoint.errors); "
                        f"|predicted / measured - 1| of {metric.upper()}, its median and 90th percentile (linear); "
                        f"context_to: the longest {CONTEXT_WORDS[metric]} of those rows")}
    return out


HEADER = """\
# The step model's measured error where it was not fitted, by regime: the band a plan prints beside its
# TPOT and TTFT (planner/candidates/speed_band.py). Written by scripts/fits/speed_bands.py from the held-back
# rows of validation/vllm_silicon_points.yaml; do not edit by hand:
#   python scripts/fits/speed_bands.py          # rewrite this file
#   python scripts/fits/speed_bands.py --check  # recompute and compare
"""


def text() -> str:
    import yaml

    return HEADER + yaml.safe_dump(bands(), sort_keys=False, allow_unicode=True, width=1000)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="recompute and compare; write nothing")
    args = parser.parse_args(argv)
    new = text()
    if args.check:
        same = OUT.exists() and OUT.read_text() == new
        print(f"{OUT.relative_to(ROOT)}: {'as computed' if same else 'differs from what the rows give'}")
        return 0 if same else 1
    OUT.write_text(new)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
