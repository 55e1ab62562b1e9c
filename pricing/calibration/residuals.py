"""The residuals of a calibration: available KV memory per GPU, predicted against logged.

error = (predicted − observed) / observed; positive is optimistic (the plan promises more KV
memory than the engine had). Statistics over the records that started and logged their
available KV memory; verdicts (starts / refuses) over every record that states one.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from pricing.calibration.predict import Prediction


@dataclass(frozen=True)
class Stats:
    count: int
    median_abs: float
    within_3: float  # share of records within ±3 %
    mean_signed: float
    worst_optimistic: float
    p90_optimistic: float  # 90th percentile of the optimistic error (0 when none is optimistic)

    @property
    def meets_targets(self) -> bool:
        """Issue 11's targets: median |e| ≤ 1.5 %, ≥ 80 % within 3 %, mean signed within ±1 %."""
        return self.median_abs <= 0.015 and self.within_3 >= 0.8 and abs(self.mean_signed) <= 0.01


def kv_errors(predictions: list[Prediction]) -> list[tuple[Prediction, float]]:
    out = []
    for p in predictions:
        if p.usable and not p.record.refused and p.observed.get("available_kv") and p.observed["available_kv"] > 0:
            e = p.error("available_kv")
            if e is not None:
                out.append((p, e))
    return out


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def stats(errors: list[float]) -> Stats:
    if not errors:
        return Stats(0, 0.0, 0.0, 0.0, 0.0, 0.0)
    optimistic = [e for e in errors if e > 0]
    return Stats(len(errors), statistics.median(abs(e) for e in errors),
                 sum(abs(e) <= 0.03 for e in errors) / len(errors), statistics.fmean(errors),
                 max(optimistic, default=0.0), percentile([max(e, 0.0) for e in errors], 0.9))


def verdicts(predictions: list[Prediction]) -> list[tuple[Prediction, bool]]:
    """(prediction, agrees) for each predicted record that states a verdict."""
    out = []
    for p in predictions:
        if p.usable and p.record.verdict_stated and p.starts is not None:
            out.append((p, p.starts != p.record.refused))
    return out


def by_group(pairs: list[tuple[Prediction, float]]) -> dict[tuple[str, str], Stats]:
    groups: dict[tuple[str, str], list[float]] = {}
    for p, e in pairs:
        groups.setdefault((p.era.label, p.family), []).append(e)
        groups.setdefault((p.era.label, "all"), []).append(e)
    return {k: stats(v) for k, v in sorted(groups.items())}


def table(predictions: list[Prediction]) -> str:
    """The residual table by era and family, every record's error, and the verdicts (text)."""
    pairs = kv_errors(predictions)
    lines = ["available KV memory per GPU: (predicted − logged) / logged; + = optimistic", "",
             f"{'era':<8} {'family':<7} {'n':>3} {'median|e|':>10} {'≤3 %':>6} {'mean':>7} {'worst +':>8}"]
    for (era, family), s in by_group(pairs).items():
        lines.append(f"{era:<8} {family:<7} {s.count:>3} {s.median_abs:>9.2%} {s.within_3:>6.0%} "
                     f"{s.mean_signed:>+7.2%} {s.worst_optimistic:>+8.2%}")
    s = stats([e for _, e in pairs])
    lines += [f"{'all':<8} {'all':<7} {s.count:>3} {s.median_abs:>9.2%} {s.within_3:>6.0%} {s.mean_signed:>+7.2%} "
              f"{s.worst_optimistic:>+8.2%}", ""]
    lines.append(f"{'record':<58} {'era':<6} {'W':<6} {'pred GiB':>8} {'log GiB':>8} {'error':>7}")
    for p, e in sorted(pairs, key=lambda t: -t[1]):
        pred, logged = p.predicted["available_kv"] / 2**30, p.observed["available_kv"] / 2**30
        lines.append(f"{p.record.id[:58]:<58} {p.era.label:<6} {p.weights_source:<6} {pred:>8.2f} {logged:>8.2f} "
                     f"{e:>+7.2%}")
    v = verdicts(predictions)
    lines += ["", f"start-up verdicts: {sum(ok for _, ok in v)} of {len(v)} agree"]
    for p, ok in v:
        if not ok or p.record.refused:
            said = "refused" if p.record.refused else "started"
            lines.append(f"  {'ok  ' if ok else 'DIFF'} {p.record.id[:58]:<58} logged {said}; predicted "
                         f"{'starts' if p.starts else 'refuses: ' + (p.refusal or '')}")
    skipped: dict[str, int] = {}
    for p in predictions:
        if not p.usable:
            skipped[p.skipped] = skipped.get(p.skipped, 0) + 1
    ranked = sorted(skipped.items(), key=lambda t: -t[1])
    lines += ["", "not predicted: " + "; ".join(f"{n} × {why}" for why, n in ranked)]
    return "\n".join(lines)
