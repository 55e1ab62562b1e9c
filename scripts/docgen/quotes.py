"""What the prose of docs/ quotes the tool as saying, each with the command that says it (`Quote`), and
the figures it states from a command's `--json` (`Figure`): a quote the page no longer holds, or the
command no longer prints, is untrue (`python scripts/docs.py --check` and tests/test_docs.py say which).
Prose cannot be regenerated; a quote is fixed by hand."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "scripts" / "docgen")]


def said(argv: tuple[str, ...], columns: int = 400) -> tuple[int, str]:
    """`plan ARGV` run from the project's root: its exit status and all it printed (stdout, then stderr),
    each line's run of blanks as one."""
    from docgen.examples import run

    code, out, err = run(argv, columns)
    return code, " ".join((out + "\n" + err).split())


@dataclass(frozen=True)
class Quote:
    """`text`, as docs/`page` quotes it (its lines joined by one blank), is what `plan ARGV` prints, exiting
    `status`."""

    page: str
    text: str
    argv: tuple[str, ...]
    status: int = 0

    def untrue(self) -> str | None:
        """Why the quote is not true, or None."""
        prose = " ".join((ROOT / "docs" / self.page).read_text().split())
        if self.text not in prose:
            return f"docs/{self.page} no longer quotes {self.text!r}"
        code, printed = said(self.argv)
        if code != self.status:
            return f"plan {' '.join(self.argv)} exited {code}, not {self.status}"
        if self.text not in printed:
            return f"plan {' '.join(self.argv)} no longer prints {self.text!r}"
        return None


@dataclass(frozen=True)
class Figure:
    """docs/`page` states, as `shows` writes it, figures of what `plan ARGV` (a `--json` command) prints at
    `path` (keys and list indices)."""

    page: str
    argv: tuple[str, ...]
    path: tuple[str | int, ...]
    shows: Callable[[dict], str]

    def untrue(self) -> str | None:
        code, out = said_json(self.argv)
        if code != 0:
            return f"plan {' '.join(self.argv)} exited {code}"
        found = out
        for key in self.path:
            found = found[key]
        text = self.shows(found)
        prose = " ".join((ROOT / "docs" / self.page).read_text().split())
        return None if text in prose else f"docs/{self.page} does not say {text!r} (plan {' '.join(self.argv)})"


def said_json(argv: tuple[str, ...]) -> tuple[int, dict]:
    """`plan ARGV`'s exit status and the JSON object it printed."""
    from planner.cli import main

    out = io.StringIO()
    here = Path.cwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = main(list(argv))
    finally:
        os.chdir(here)
    return code, json.loads(out.getvalue()) if code == 0 else {}


DISAGG_5 = ("--model", "llama-3.1-8b", "--chip", "h100", "--isl", "2000", "--osl", "200", "--requests-per-second", "5",
            "--ttft-ms", "1500", "--tpot-ms", "30", "--context-length", "8192", "--serving", "disagg", "--json")
FIGURES = (
    Figure("disaggregated.md", DISAGG_5, ("serving", "disaggregated", "handover"),
           lambda h: f"hands {h['decode_rank_bytes']:,} bytes over in {h['transfer_ms']:.2f} ms"),
    Figure("disaggregated.md", ("scenario", "scenarios/disaggregated-chat-h200-b200.yaml", "--format", "json"),
           ("services", 0, "handover"),
           lambda h: f"its {h['decode_rank_bytes']:,} bytes per decode rank cross in {h['transfer_ms']:.2f} ms"),
    Figure("kernel.md", ("memory", "--model", "dsv4.1-flash", "--chip", "h200", "-tp", "8", "--kv-cache-dtype", "fp8",
                         "--num-speculative-tokens", "5", "--max-num-batched-tokens", "8192", "--json"), ("sequence",),
           lambda s: f"{s['fixed']:,} in steady decode (the spec's 5.73 MB), own pages {s['own_pages_steady']:,} "
                     f"(5.00 MB), {s['admission']:,} at admission (484 MB)"),
)

QUOTES = (
    Quote("scenarios.md", "vLLM would not start: max_model_len 131072 exceeds the 40960 positions of qwen3-32b",
          ("compare", "--model", "qwen3-32b", "--chip", "h100", "--concurrency", "16", "--context-length", "32768",
           "--context-length", "131072"), status=1),
    Quote("reviewer.md", "did you mean 'dsv4.1-flash' or 'dsv4-flash'?",
          ("--model", "dsv4.1-flsh", "--chip", "h200", "--concurrency", "64"), status=2),
    Quote("reviewer.md", "note: --price b200=3 has no effect: b200 is not among the chips planned",
          ("--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "4", "--price", "b200=3")),
)
