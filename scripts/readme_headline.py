"""README's headline example ("Planning a pool"), from the command's own output at 120 columns,
the winner's memory breakdown elided (the `plan memory` example beside it prints one):

    python scripts/readme_headline.py           # print it
    python scripts/readme_headline.py --write   # replace it in README.md, between its markers
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]
import readme_examples  # noqa: E402
import readme_section  # noqa: E402

COMMAND = ["--model", "dsv4.1-flash", "--chip", "h200", "--concurrency", "64"]
COLUMNS = 120
ELIDED = "(the winner's per-rank memory breakdown and KV cache groups, as `plan memory` prints them)"


def output() -> str:
    """What `plan` prints for the headline at COLUMNS columns (trailing blanks stripped)."""
    return readme_examples.output(COMMAND, COLUMNS)


def section() -> str:
    """The console block: the command, then its output with the memory breakdown elided (from the
    model's heading line to the node map)."""
    lines = output().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{COMMAND[1]} ("))
    end = next(i for i, line in enumerate(lines) if "node map:" in line)
    kept = lines[:start] + [ELIDED, ""] + lines[end:]
    return "```console\n$ plan " + " ".join(COMMAND) + "\n" + "\n".join(kept) + "\n```\n"


if __name__ == "__main__":
    readme_section.main("readme_headline", section, __doc__.splitlines()[0])
