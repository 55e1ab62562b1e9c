"""Print the calibration's residual table: the kernel (with the shipped registry, or an
overlay) against the training records of ../shared/calibration, by era and family, each record
predicted with its own release's rules pack.

    python scripts/fits/calibration_report.py [--registry overlay.yaml] [--weights auto|kernel|logged]
                                         [--by-release] [RECORDS.jsonl ...]

--weights auto (default) takes the weights as logged where the record logs them, so the table
judges the fixed-memory laws; --weights kernel predicts every part. --by-release prints the
markdown table of README's "Release packs" section: per pack, the records it predicted; then
each record of 0.21 and later, with its error or why it is not predicted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
TRAINING = ROOT.parent / "shared" / "calibration" / "vllm-startups-train.jsonl"


def by_release(predictions) -> str:
    """Available KV memory per GPU by rules pack: the records each pack predicted, their releases."""
    from pricing.calibration.residuals import kv_errors, stats
    from pricing.rules import PACKS

    pairs = kv_errors(predictions)
    lines = ["| pack | serves | records | releases logged | median \\|e\\| | within 3 % | mean | worst + |",
             "|---|---|---:|---|---:|---:|---:|---:|"]
    for pack in PACKS:
        mine = [(p, e) for p, e in pairs if p.kernel is not None and p.kernel.release.rules is pack.rules
                and not p.pack_note]
        logged = sorted({p.kernel.release.full_version for p, _ in mine}, key=lambda v: tuple(map(int, v.split("."))))
        s = stats([e for _, e in mine])
        cells = (f"{s.median_abs:.2%} | {s.within_3:.0%} | {s.mean_signed:+.2%} | {s.worst_optimistic:+.2%}"
                 if s.count else "— | — | — | —")
        lines.append(f"| {pack.name} | {pack.covers[0]}–{pack.covers[1]} | {s.count} | {', '.join(logged) or '—'} | "
                     f"{cells} |")
    s = stats([e for p, e in pairs if not p.pack_note])
    lines.append(f"| all | 0.10–0.33 | {s.count} | | {s.median_abs:.2%} | {s.within_3:.0%} | {s.mean_signed:+.2%} | "
                 f"{s.worst_optimistic:+.2%} |")
    return "\n".join(lines)


def later_records(predictions, since: tuple[int, int] = (0, 21)) -> str:
    """Each record whose release is `since` or later (stated, or stated as at least that), with its
    pack and its error, or why it is not predicted; a record the table leaves out is named with the
    reason, never dropped silently."""
    from pricing.calibration.predict import pack_for
    from pricing.calibration.residuals import kv_errors

    errors = {id(p): e for p, e in kv_errors(predictions)}
    lines = [f"Records of vLLM {since[0]}.{since[1]} and later, each predicted with its own release's pack or "
             "not, and why:", ""]
    for p in predictions:
        if not at_least(p.record.vllm_version, since):
            continue
        release = p.kernel.release if p.kernel is not None else pack_for(p.record.vllm_version)
        pack = release.name if release is not None else "no pack: release not stated"
        if id(p) in errors:
            said = f"{errors[id(p)]:+.2%}"
        elif p.skipped:
            said = f"not predicted: {p.skipped}"
        elif p.record.refused:
            said = "predicted; a refusal on record (not in the table)"
        else:
            said = "predicted; the record logs no available KV memory (not in the table)"
        lines.append(f"- `{p.record.id}` ({pack}): {said}")
    return "\n".join(lines)


def at_least(version: str | None, since: tuple[int, int]) -> bool:
    """Whether a record's vLLM release is `since` or later: its first x.y, or a text that states a
    lower bound ('>= v0.21')."""
    import re

    m = re.search(r"(\d+)\.(\d+)", version or "")
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= since


def main(argv=None) -> int:
    from pricing.calibration.predict import predict_all
    from pricing.calibration.records import load_records
    from pricing.calibration.residuals import table
    from pricing.registry import read_overlay, shipped

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", nargs="*", default=[str(TRAINING)])
    ap.add_argument("--registry", help="overlay YAML laid over the shipped registry")
    ap.add_argument("--weights", choices=("auto", "kernel", "logged"), default="auto")
    ap.add_argument("--by-release", action="store_true", help="the markdown table per rules pack")
    args = ap.parse_args(argv)
    reg = read_overlay(args.registry) if args.registry else shipped()
    predictions = predict_all(load_records(*args.records), reg, args.weights)
    print(f"{by_release(predictions)}\n\n{later_records(predictions)}" if args.by_release else table(predictions))
    return 0


if __name__ == "__main__":
    sys.exit(main())
