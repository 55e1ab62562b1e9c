"""The headline example (docs/planning.md, "Planning a pool"), from the command's own output at 120
columns, the winner's memory breakdown elided (the `plan memory` examples print one); `python
scripts/docs.py --only headline` rewrites it."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "scripts" / "docgen")]
import examples  # noqa: E402

COMMAND = ["--model", "dsv4.1-flash", "--chip", "h200", "--concurrency", "64"]
COLUMNS = 120
ELIDED = "(the winner's per-rank memory breakdown and KV cache groups, as `plan memory` prints them)"


def output() -> str:
    """What `plan` prints for the headline at COLUMNS columns (trailing blanks stripped)."""
    return examples.output(COMMAND, COLUMNS)


def section() -> str:
    """The console block: the command, then its output with the memory breakdown elided (from the
    model's heading line to the node map)."""
    lines = output().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{COMMAND[1]} ("))
    end = next(i for i, line in enumerate(lines) if "node map:" in line)
    kept = lines[:start] + [ELIDED, ""] + lines[end:]
    return "```console\n$ plan " + " ".join(COMMAND) + "\n" + "\n".join(kept) + "\n```\n"
