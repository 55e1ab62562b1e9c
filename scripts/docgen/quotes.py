"""What the prose of docs/ quotes the tool as saying, each with the command that says it: a quote the
page no longer holds, or the command no longer prints, is untrue (`python scripts/docs.py --check`
and tests/test_docs.py say which). Prose cannot be regenerated; a quote is fixed by hand."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT)]


def said(argv: tuple[str, ...], columns: int = 400) -> tuple[int, str]:
    """`plan ARGV` run from the project's root: its exit status and all it printed (stdout, then stderr),
    each line's run of blanks as one."""
    from planner.cli import main

    out, err = io.StringIO(), io.StringIO()
    before, here = os.environ.get("COLUMNS"), Path.cwd()
    os.environ["COLUMNS"] = str(columns)
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
    finally:
        os.chdir(here)
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before
    return code, " ".join((out.getvalue() + "\n" + err.getvalue()).split())


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


QUOTES = (
    Quote("scenarios.md", "vLLM would not start: max_model_len 131072 exceeds the 40960 positions of qwen3-32b",
          ("compare", "--model", "qwen3-32b", "--chip", "h100", "--concurrency", "16", "--context-length", "32768",
           "--context-length", "131072"), status=1),
    Quote("reviewer.md", "did you mean 'dsv4.1-flash' or 'dsv4-flash'?",
          ("--model", "dsv4.1-flsh", "--chip", "h200", "--concurrency", "64"), status=2),
    Quote("reviewer.md", "note: --price b200=3 has no effect: b200 is not among the chips planned",
          ("--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "4", "--price", "b200=3")),
)
