"""The step from measured operators against the fitted step, on data neither fitted (issue 38):

    python scripts/operators/validate.py            # print the tables (markdown)
    python scripts/operators/validate.py --fresh    # only the held-out runs collected for issue 38

Each step prices (a) the held-back rows of validation/vllm_silicon_points.yaml (a third of the rows by a hash
of their id: neither step's constants were fitted on them), closed loops at a fixed concurrency, each run through
the serving simulator as the file's `benchmark` block describes it (pricing/serving/silicon.py `Harness`), its TPOT and
TTFT read as that block says; (b) the public `vllm bench serve` runs (validation/
vllm_serving_runs.yaml, vllm_spot_check_runs.yaml, vllm_published_runs.yaml), each through the serving
simulator, p50 TPOT and TTFT; (c) the held-out runs of validation/vllm_fresh_runs.yaml, collected after the
step models were built and never looked at against them, as their own rows (all of them, and those whose source the
project had never read), printed only with --fresh (docs/operator_step's generated section shows (a) and (b)).
Errors are predicted / measured − 1 (negative: optimistic, a plan that
under-provisions), summarised as median |error| and signed median, by concurrency bin (1–8, 9–31, ≥ 32;
a run at a request rate apart), model family, chip and weight format. No constant is fitted here.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pricing.registry import shipped  # noqa: E402
from pricing.serving.silicon import Harness, closed_loop_errors  # noqa: E402
from pricing.serving.validation import FRESH, PUBLISHED, RUNS, SPOT_CHECK, compared, runs, seen_before  # noqa: E402
from pricing.step.composed import FITTED, OPERATORS, with_composition  # noqa: E402
from pricing.step.silicon import load_silicon  # noqa: E402
from pricing.step.step import StepModel  # noqa: E402

MODES = (FITTED, OPERATORS)
BINS = ((1, 8, "1–8"), (9, 31, "9–31"), (32, 10**9, "≥ 32"))
LOW = 8  # TTFT is judged at this many concurrent requests or fewer (a prompt beside few others)


def bin_of(concurrency: int) -> str:
    return next(label for lo, hi, label in BINS if lo <= concurrency <= hi)


def family(model: str) -> str:
    name = model.split("/")[-1].lower()
    for prefix in ("meta-llama", "llama", "qwen", "deepseek", "gpt-oss", "kimi", "minimax", "glm", "mistral",
                   "mixtral", "gemma", "phi", "nemotron"):
        if name.startswith(prefix) or prefix in name:
            return prefix.replace("meta-", "")
    return name.split("-")[0]


def weight_format(kernel) -> str:
    """The format most of a prompt's FLOPs run in (the step model's own count)."""
    flops = StepModel(kernel).prompt_flops_by_format()
    return max(flops, key=lambda f: flops[f])


def silicon(mode: str) -> list[dict]:
    """The held-back silicon rows priced by the `mode` step, each row's closed loop simulated."""
    rows, about = load_silicon()
    harness = Harness.of(about)
    out = []
    reg = with_composition(shipped(), mode, "scripts/operators/validate.py")
    for r in rows:
        if not r.held_back:
            continue
        kernel = r.kernel(reg)
        tpot, ttft = closed_loop_errors(r, harness, registry=reg)
        out.append({"id": r.id, "concurrency": r.concurrency, "family": family(r.model), "chip": r.chip,
                    "format": weight_format(kernel), "tpot": tpot, "ttft": ttft,
                    "composition": StepModel(kernel).composition})
    return out


def public(mode: str, paths: tuple[Path, ...] = (RUNS, SPOT_CHECK, PUBLISHED)) -> list[dict]:
    """The public runs of `paths` priced by the `mode` step through the simulator."""
    out = []
    reg = with_composition(shipped(), mode, "scripts/operators/validate.py")
    for path in paths:
        for run in runs(path):
            b = run.benchmark
            rate = b["request_rate"] != "inf"
            _, err = compared(run, run.simulate(registry=reg))
            kernel = run.kernel(reg)
            out.append({"id": run.id, "concurrency": b.get("max_concurrency") or b["num_prompts"], "rate": rate,
                        "family": family(run.model), "chip": run.chip, "format": weight_format(kernel),
                        "tpot": err.get("p50_tpot_ms"), "ttft": err.get("p50_ttft_ms"),
                        "composition": StepModel(kernel).composition})
    return out


def summary(errors: list[float]) -> str:
    errors = [e for e in errors if e is not None]
    if not errors:
        return "–"
    return (f"{statistics.median(abs(e) for e in errors):.1%} ({statistics.median(errors):+.1%}), "
            f"n = {len(errors)}")


def headline(sil: dict[str, list[dict]], pub: dict[str, list[dict]]) -> list[str]:
    """The before/after table: each line's median |error| (signed median), n, for each step."""
    lines = ["| data, figure, bin | fitted step | operator step |", "|---|---|---|"]

    def line(label: str, pick) -> None:
        lines.append(f"| {label} | " + " | ".join(summary(pick(m)) for m in MODES) + " |")

    for lo, hi, label in BINS:
        line(f"silicon held-out TPOT, {label} req", lambda m, lo=lo, hi=hi: [
            r["tpot"] for r in sil[m] if lo <= r["concurrency"] <= hi])
    line(f"silicon held-out TTFT, ≤ {LOW} req", lambda m: [r["ttft"] for r in sil[m] if r["concurrency"] <= LOW])
    for lo, hi, label in BINS:
        line(f"public closed loops TPOT, {label} req", lambda m, lo=lo, hi=hi: [
            r["tpot"] for r in pub[m] if not r["rate"] and lo <= r["concurrency"] <= hi])
    line(f"public closed loops TTFT, ≤ {LOW} req", lambda m: [
        r["ttft"] for r in pub[m] if not r["rate"] and r["concurrency"] <= LOW])
    line("public runs at a request rate, TPOT", lambda m: [r["tpot"] for r in pub[m] if r["rate"]])
    line("public runs at a request rate, TTFT", lambda m: [r["ttft"] for r in pub[m] if r["rate"]])
    return lines


def fresh_table(fresh: dict[str, list[dict]], seen: set[str]) -> list[str]:
    """The held-out runs (validation/vllm_fresh_runs.yaml): each line's median |error| (signed median), n, for each
    step, over all of them and over those whose source the project had never read (`seen_before` left out)."""
    lines = ["| fresh held-out runs, figure, bin | fitted step | operator step |", "|---|---|---|"]
    figures = [(f"closed loops TPOT, {label} req", "tpot", False, lo, hi) for lo, hi, label in BINS]
    figures += [(f"closed loops TTFT, ≤ {LOW} req", "ttft", False, 1, LOW),
                ("at a request rate, TPOT", "tpot", True, 1, 10**9),
                ("at a request rate, TTFT", "ttft", True, 1, 10**9)]
    for subset, keep in (("all", set()), ("source never read before", seen)):
        for name, figure, rate, lo, hi in figures:
            picks = [[r[figure] for r in fresh[m] if r["id"] not in keep and r["rate"] == rate
                      and (rate or lo <= r["concurrency"] <= hi)] for m in MODES]
            lines.append(f"| {name} ({subset}) | " + " | ".join(summary(p) for p in picks) + " |")
    return lines


def fresh_tables() -> str:
    """The held-out runs (validation/vllm_fresh_runs.yaml): their table, and TPOT by family, chip and format."""
    fresh = {m: public(m, (FRESH,)) for m in MODES}
    out = fresh_table(fresh, set(seen_before(FRESH)))
    out.append("")
    out.append("Median |error| (signed median), n; negative = optimistic. The runs were collected on 2026-12-08, after "
               "both steps were built, and chosen without simulating them.")
    for key in ("family", "chip", "format"):
        out += ["", *breakdown("fresh held-out TPOT", fresh, key, "tpot")]
    return "\n".join(out) + "\n"


def breakdown(title: str, data: dict[str, list[dict]], key: str, figure: str) -> list[str]:
    """Median |error| (signed) of `figure` by `key` (family, chip, format) and concurrency bin, each step."""
    lines = [f"| {title} by {key} | bin | fitted step | operator step |", "|---|---|---|---|"]
    values = sorted({r[key] for r in data[FITTED]})
    for v in values:
        for lo, hi, label in BINS:
            picks = {m: [r[figure] for r in data[m] if r[key] == v and lo <= r["concurrency"] <= hi
                         and not r.get("rate")] for m in MODES}
            if picks[FITTED]:
                lines.append(f"| {v} | {label} | {summary(picks[FITTED])} | {summary(picks[OPERATORS])} |")
    return lines


def tables() -> str:
    sil = {m: silicon(m) for m in MODES}
    pub = {m: public(m) for m in MODES}
    fitted_chips = sorted({r["chip"] for r in sil[OPERATORS] + pub[OPERATORS] if r["composition"] == FITTED})
    out = headline(sil, pub)
    out.append("")
    out.append("Median |error| (signed median), n; negative = optimistic. Chips priced by the fitted step in both "
               f"columns (no operator tables): {', '.join(fitted_chips) or 'none'}.")
    for title, data, figure in (("silicon held-out TPOT", sil, "tpot"), ("public closed loops TPOT", pub, "tpot")):
        for key in ("family", "chip", "format"):
            out += ["", *breakdown(title, data, key, figure)]
    return "\n".join(out) + "\n"


def main() -> None:
    if sys.argv[1:] == ["--fresh"]:
        print(fresh_tables(), end="")
        return
    if sys.argv[1:]:
        print("usage: scripts/operators/validate.py [--fresh]: no other argument (fix: drop it)", file=sys.stderr)
        sys.exit(2)
    print(tables(), end="")


if __name__ == "__main__":
    main()
