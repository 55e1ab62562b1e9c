"""docs/step-model.md's table of vLLM's measured TPOT and TTFT at a fixed concurrency
(validation/vllm_silicon_points.yaml,
aiconfigurator's silicon data) beside the step model's at vLLM's own factors, by model, chip and release, with
what of them trains vLLM's CUDA factors and what measures them:

    python scripts/docs.py --only silicon-table   # rewrite it in docs/step-model.md, between its markers
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts" / "docgen"), str(ROOT / "scripts" / "fits")]
from fit_step import GRIDS  # noqa: E402

from pricing.step.rates import Efficiency  # noqa: E402
from pricing.step.silicon import SiliconPoint, load_silicon  # noqa: E402
from pricing.step.work import routes_experts  # noqa: E402

WITHIN = 0.10
LOOP_REQUESTS = (5, 20)  # a row simulated as a closed loop: 5 x its concurrency requests, at least 20
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


def closed_loop_tpot_errors(rows: list[SiliconPoint]) -> list[float]:
    """Each row's mean TPOT simulated as the benchmark ran it, a closed loop at its concurrency of equal
    requests (LOOP_REQUESTS of them: the file does not state the count), against the measured: the
    simulator's waves where the steady state mixes every prompt's chunks into the decodes."""
    from pricing.serving import ClosedLoop, Fixed, Instance, StepCost, Traffic, simulate
    from pricing.step import StepModel

    out = []
    for r in rows:
        kernel = r.kernel()
        inst = Instance.of(kernel)
        cost = StepCost.of(StepModel(kernel), inst)
        count = max(LOOP_REQUESTS[1], LOOP_REQUESTS[0] * r.concurrency)
        served = simulate(inst, cost, Traffic(ClosedLoop(r.concurrency), Fixed(r.isl), Fixed(r.osl), count=count))
        out.append(served.tpot.mean * 1e3 / r.tpot_ms - 1)
    return out


def _loop_figures(rows: list[SiliconPoint]) -> str:
    errors = closed_loop_tpot_errors(rows)
    return f"{statistics.median(map(abs, errors)):.1%} (signed {statistics.median(errors):+.1%})"


def _median_line(label: str, errors: list[float]) -> str:
    return (f"{label}: TPOT median |error| {statistics.median(map(abs, errors)):.1%}, signed "
            f"{statistics.median(errors):+.1%} ({len(errors)} rows)")


def section() -> str:
    table = groups()
    every = [row for rows in table.values() for row in rows]
    _, about = load_silicon()
    training = [row for row in every if row[0].training]
    held = [row for row in every if row[0].decode_dominated and row[0].held_back]
    longer = [row for row in every if not row[0].decode_dominated]
    lines = ["**vLLM's decode step and first token, measured at a fixed concurrency.** "
             f"`validation/vllm_silicon_points.yaml`: {len(every)} rows of vLLM in NVIDIA aiconfigurator's "
             f"measured silicon data ([silicon_sample.csv]({about['source']['url']}), "
             "`scripts/collectors/aiconfigurator_silicon_points.py`): closed-loop sweeps at a fixed concurrency and "
             "nominal prompt and output lengths, each row's TTFT and TPOT (the file does not say whether means or "
             "medians, "
             "nor the server's flags). Two thirds, by a hash of their id, of the rows whose decode dominates "
             f"(outputs at least as long as prompts) train vLLM's CUDA factors ({len(training)} rows, `python "
             "scripts/fits/fit_step.py --engine vllm --write`: the per-step, per-layer and per-request overheads, the "
             "fused-MoE kernels' expert reads by chip generation and experts' format, and MLA's floor per layer); two "
             "thirds of the rows at most 4 concurrent train its first token (the API server's time to it and an "
             "effective prefill efficiency by weight format; each row's closed loop run through the serving "
             "simulator as the file's `benchmark` block describes it, pricing/serving/silicon.py `Harness`); "
             f"the other third ({len(held)} rows) and the {len(longer)} rows of longer prompts measure them. "
             "Beside each row, the step model at vLLM's factors: TPOT, the steady step at the row's concurrency; "
             "TTFT, the prompt's chunked prefill beside those decodes (no queueing; the API server's time included), "
             "as a plan prices them. Median signed "
             "error (predicted / measured − 1) by model, chip and release, and of the rows held back:", "",
             "| model | chip | vLLM | rows | tp | concurrency | TPOT median error | held back (rows) | "
             "TPOT within 10 % | TTFT median error |",
             "| --- | --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: |"]
    for (model, fmt, chip, release), rows in sorted(table.items()):
        tpot = [t for _, t, _ in rows]
        ttft = [f for _, _, f in rows]
        back = [t for p, t, _ in rows if p.decode_dominated and p.held_back]
        name = f"{model} ({fmt})" if fmt else model
        lines.append(f"| {name} | {chip} | {release} | {len(rows)} | {_span([p.tp for p, _, _ in rows])} | "
                     f"{_span([p.concurrency for p, _, _ in rows])} | {statistics.median(tpot):+.0%} | "
                     + (f"{statistics.median(back):+.0%} ({len(back)})" if back else "-")
                     + f" | {sum(abs(t) <= WITHIN for t in tpot)} of {len(rows)} | {statistics.median(ttft):+.0%} |")
    tpot = [t for _, t, _ in every]
    ttft = [f for _, _, f in every]
    lines += ["", f"All {len(every)} rows: TPOT median |error| {statistics.median(map(abs, tpot)):.0%}, signed "
              f"{statistics.median(tpot):+.0%}, {sum(abs(t) <= WITHIN for t in tpot)} within 10 %; TTFT median |error| "
              f"{statistics.median(map(abs, ttft)):.0%}, signed {statistics.median(ttft):+.0%}. "
              + "; ".join(_median_line(label, [t for _, t, _ in rows]) for label, rows in
                          (("Training", training), ("held back", held), ("longer prompts, never fitted", longer)))
              + ". Rows left out: "
              + "; ".join(f"{reason} ({n})" for reason, n in about["left_out"].items()) + ".", "",
              "TPOT median signed error by concurrency, over the rows not fitted (held back and longer prompts):", "",
              "| models | " + " | ".join(f"{lo} to {hi}" if hi else f"{lo} or more" for lo, hi in BANDS) + " |",
              "| --- | " + " | ".join("---:" for _ in BANDS) + " |"]
    measured = held + longer
    for label, moe in (("dense", False), ("mixture of experts", True)):
        cells = []
        for lo, hi in BANDS:
            band = [t for p, t, _ in measured if routes_experts(p.kernel()) == moe
                    and lo <= p.concurrency <= (hi or p.concurrency)]
            cells.append(f"{statistics.median(band):+.0%} ({len(band)})" if band else "-")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    eff = Efficiency.from_registry(engine="vllm")
    rocm = Efficiency.from_registry(engine="vllm-rocm")
    before = [p.errors(rocm)[0] for p, _, _ in held]
    kernels = "; ".join(f"{k.fmt} experts on {k.generation} at {k.expert_bandwidth:g}" for k in eff.moe_kernels)
    top = GRIDS["memory_bandwidth"][-1]
    capped = [k for k in eff.moe_kernels if k.expert_bandwidth >= top]
    floors = "; ".join(f"{k.backend} on {k.generation} {k.layer_seconds * 1e6:.0f} us"
                       for k in eff.attention_kernels if k.provenance and "assumed" not in k.provenance[0].how)
    lines += ["", "vLLM's CUDA factors as fitted: per step "
              f"{eff.step_seconds * 1e3:.2f} ms, per decoder layer {eff.layer_seconds * 1e6:.0f} us, per request "
              f"{eff.per_request_seconds * 1e6:.0f} us (the ROCm set, the throughput points' fit: "
              f"{rocm.step_seconds * 1e3:.2f} ms, {rocm.layer_seconds * 1e6:.0f} us, "
              f"{rocm.per_request_seconds * 1e6:.0f} us); routed experts read at the fraction of peak bandwidth of "
              f"their fused-MoE kernel, {kernels}, any other format at {eff.expert_bandwidth:g}; MLA's own floor per "
              f"layer, {floors} (DeepSeek-V3.2's, V4's and V4.1's MLA-family layers take MLA's, an assumption "
              "step_model.yaml states). At the throughput fit's factors alone the held-back rows' TPOT was "
              f"{statistics.median(map(abs, before)):.0%} off, signed {statistics.median(before):+.0%}. "
              + "".join(f"The {k.fmt} kernel on {k.generation} sits at the grid's top ({top:g} of peak, the bound "
                        "memory reads get) and its rows stay pessimistic: the fixed costs every model shares are "
                        "likely too high for it. " for k in capped)
              + "The MLA floor rests on Kimi-K2.5's rows alone (DeepSeek-R1's vLLM runs below are held back and "
              "measure it); MoE formats no row runs (BF16 experts; block-scaled FP8 off Hopper and Blackwell; any AMD "
              "chip) keep the throughput fit's figure. The rows of longer prompts stay pessimistic: in a closed loop "
              "of equal requests the "
              "prompts arrive in waves and are prefilled together, so most decode steps carry no prefill, where the "
              "steady state mixes each prompt's chunks into the decodes. Their TTFT is the client's, from the closed "
              "loop (queueing and the front end in it), hence far above the bare prefill. Simulated as that closed "
              f"loop instead ({LOOP_REQUESTS[0]} times the concurrency in requests, at least {LOOP_REQUESTS[1]}: "
              f"the file does not state the count), the same {len(longer)} rows of longer prompts read a mean TPOT "
              + _loop_figures([p for p, _, _ in longer])
              + " off: the waves, not the step, are what the steady state misses.", ""]
    return "\n".join(lines)
