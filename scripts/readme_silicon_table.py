"""The README's table of vLLM's measured TPOT and TTFT at a fixed concurrency (validation/vllm_silicon_points.yaml,
aiconfigurator's silicon data) beside the step model's at vLLM's own factors, by model, chip and release:

    python scripts/readme_silicon_table.py           # print it
    python scripts/readme_silicon_table.py --write   # replace it in README.md, between its markers
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]
import readme_section  # noqa: E402

from pricing.step.measured import load_points  # noqa: E402
from pricing.step.rates import Efficiency  # noqa: E402
from pricing.step.silicon import SiliconPoint, load_silicon  # noqa: E402
from pricing.step.work import routes_experts  # noqa: E402

WITHIN = 0.10
BANDS = ((1, 8), (9, 32), (33, None))  # concurrencies the TPOT error is shown by


def groups() -> dict[tuple, list[tuple[SiliconPoint, float, float]]]:
    """(model, served format, chip, release) -> each row with its TPOT and TTFT error."""
    points, _ = load_silicon()
    out: dict[tuple, list] = {}
    for p in points:
        out.setdefault((p.model, p.quantization or "", p.chip, p.release or "not stated"), []).append((p, *p.errors()))
    return out


def _span(values: list[int]) -> str:
    return f"{min(values)}" if min(values) == max(values) else f"{min(values)}-{max(values)}"


def section() -> str:
    table = groups()
    every = [row for rows in table.values() for row in rows]
    _, about = load_silicon()
    lines = ["**vLLM's decode step and first token, measured at a fixed concurrency.** "
             f"`validation/vllm_silicon_points.yaml`: {len(every)} rows of vLLM in NVIDIA aiconfigurator's "
             f"measured silicon data ([silicon_sample.csv]({about['source']['url']}), "
             "`scripts/aiconfigurator_silicon_points.py`): closed-loop sweeps at a fixed concurrency and nominal "
             "prompt and output lengths, each row's TTFT and TPOT (the file does not say whether means or medians, "
             "nor the server's flags). None is in the step model's fit. Beside each, the step model at vLLM's "
             "factors: TPOT, the steady step at the row's concurrency; TTFT, the prompt's chunked prefill beside "
             "those decodes (no queueing, no front end). Median signed error (predicted / measured − 1) by model, "
             "chip and release:", "",
             "| model | chip | vLLM | rows | tp | concurrency | TPOT median error | TPOT within 10 % | "
             "TTFT median error |",
             "| --- | --- | --- | ---: | --- | --- | ---: | ---: | ---: |"]
    for (model, fmt, chip, release), rows in sorted(table.items()):
        tpot = [t for _, t, _ in rows]
        ttft = [f for _, _, f in rows]
        name = f"{model} ({fmt})" if fmt else model
        lines.append(f"| {name} | {chip} | {release} | {len(rows)} | {_span([p.tp for p, _, _ in rows])} | "
                     f"{_span([p.concurrency for p, _, _ in rows])} | {statistics.median(tpot):+.0%} | "
                     f"{sum(abs(t) <= WITHIN for t in tpot)} of {len(rows)} | {statistics.median(ttft):+.0%} |")
    tpot = [t for _, t, _ in every]
    ttft = [f for _, _, f in every]
    lines += ["", f"All {len(every)} rows: TPOT median |error| {statistics.median(map(abs, tpot)):.0%}, signed "
              f"{statistics.median(tpot):+.0%}, {sum(abs(t) <= WITHIN for t in tpot)} within 10 %; TTFT median |error| "
              f"{statistics.median(map(abs, ttft)):.0%}, signed {statistics.median(ttft):+.0%}. Rows left out: "
              + "; ".join(f"{reason} ({n})" for reason, n in about["left_out"].items()) + ".", "",
              "TPOT median signed error by concurrency:", "",
              "| models | " + " | ".join(f"{lo} to {hi}" if hi else f"{lo} or more" for lo, hi in BANDS) + " |",
              "| --- | " + " | ".join("---:" for _ in BANDS) + " |"]
    for label, moe in (("dense", False), ("mixture of experts", True)):
        cells = []
        for lo, hi in BANDS:
            band = [t for p, t, _ in every if routes_experts(p.kernel()) == moe
                    and lo <= p.concurrency <= (hi or p.concurrency)]
            cells.append(f"{statistics.median(band):+.0%} ({len(band)})")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    eff = Efficiency.from_registry(engine="vllm")
    train = [q for q in load_points()[0] if q.engine.split()[0] == "vllm" and not q.held_back]
    wide = [q for q in train if q.concurrency > 64]
    where = sorted({f"{q.model} on an {q.chip.upper()}" for q in wide})
    lines += ["", "The error grows with the requests a step holds, dense models too: vLLM's fitted per-request "
              f"overhead ({eff.per_request_seconds * 1e6:.0f} us a request a step, with a per-step "
              f"{eff.step_seconds * 1e3:.2f} ms) and routed-expert read ({eff.expert_bandwidth:g} of peak bandwidth) "
              f"come from {len(train)} training points (README's table above), {len(wide)} of them at more than 64 "
              f"requests, {' and '.join(where)}. These rows are not fitted here. Fitted on two thirds of "
              "them (tried, issue 21's closing note), vLLM's factors bring the other third's TPOT to about 13 % "
              "but leave the DeepSeek-architecture rows (Kimi-K2.5: MLA, 384 experts) and DeepSeek-R1's measured "
              "vLLM runs (the spot check below) a quarter to a half faster than measured: one set of factors "
              "prices every architecture's decode, and the DeepSeek family's runs slower than the others' at the "
              "same bytes. A capacity plan must not be optimistic, so the six-point factors stay until the step "
              "model prices that difference. Their TTFT is the client's, from "
              "a closed loop (queueing and the front end in it), hence far above the bare prefill.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    readme_section.main("readme_silicon_table", section, __doc__.splitlines()[0])
