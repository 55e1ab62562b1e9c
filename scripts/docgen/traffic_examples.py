"""The traffic pages' examples (docs/traffic.md, docs/fleet-over-time.md), from the tool's own output
on scenarios/diurnal-three-services.yaml: a service's schedule, the fleet over the day, and the
KEDA ScaledObject `--emit k8s --autoscaler keda` writes with the note beside it."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts" / "docgen")]

from examples import GAP, output, run  # noqa: E402  (the in-process `plan` runner of every docs example)

SCENARIO = "scenarios/diurnal-three-services.yaml"
COLUMNS = 120


def _lines() -> list[str]:
    return output(["scenario", SCENARIO], COLUMNS).splitlines()


def _between(lines: list[str], first: str, keep: tuple[str, ...]) -> list[str]:
    """From the line that begins with `first`, the table under it and then every line that begins
    with one of `keep`, up to the first line that does not."""
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    shown, in_table = [], True
    for line in lines[start:]:
        if in_table:
            if line.startswith(keep):
                in_table = False
            else:
                shown.append(line)
                continue
        if not line.startswith(keep):
            break
        shown.append(line)
    return [line for line in shown if line.strip()]


def schedule() -> str:
    """docs/traffic.md: the chat service's schedule and what it says of it."""
    shown = _between(_lines(), "chat — schedule", ("chat:",))
    return "```console\n" + "\n".join([f"$ plan scenario {SCENARIO}", GAP, *shown, GAP]) + "\n```\n"


def fleet() -> str:
    """docs/fleet-over-time.md: the fleet over the day."""
    shown = _between(_lines(), "fleet over the day", ("fleet:",))
    return "```console\n" + "\n".join([f"$ COLUMNS={COLUMNS} plan scenario {SCENARIO}", GAP, *shown]) + "\n```\n"


def keda() -> str:
    """docs/fleet-over-time.md: chat's ScaledObject and the note `--emit k8s` prints beside it."""
    argv = ["scenario", str(ROOT / SCENARIO), "--emit", "k8s", "-o", "k8s", "--autoscaler", "keda",
            "--namespace", "llm"]
    with tempfile.TemporaryDirectory() as folder:
        code, out, err = run(argv, COLUMNS, Path(folder))
        if code != 0:
            raise SystemExit(f"plan {' '.join(argv)} exited {code}: {err}")
        docs = [d for d in yaml.safe_load_all(Path(folder, "k8s", "chat.yaml").read_text()) if d]
    scaled = next(d for d in docs if d.get("kind") == "ScaledObject")
    note = next(line.removeprefix("note: ") for line in (out + err).splitlines()
                if "chat: the ScaledObject" in line)
    return ("`chat.yaml`'s ScaledObject, with `--autoscaler keda --namespace llm`:\n\n```yaml\n"
            + yaml.safe_dump(scaled, sort_keys=False, width=120) + "```\n\nand the note beside it: `"
            + note + "`\n")
