"""Progress on stderr for work that takes longer than planner/defaults.yaml report.progress_after
seconds: rich's progress line with the stage the library names (planner/progress.py) and the
time taken, cleared when the work ends. Silent where stderr is not a terminal, and with --json
(a program reads the output; its stderr may be a terminal all the same)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from planner.progress import Told, listening


def wanted(as_json: bool = False) -> bool:
    """Progress is shown: stderr is a terminal and the output is not JSON."""
    return not as_json and sys.stderr.isatty()


class StageLine:
    """A transient progress line on stderr, shown once the work has taken `after` seconds."""

    def __init__(self, after: float):
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                            console=Console(stderr=True), transient=True)
        self.task = self.bar.add_task("planning", total=None)
        self.lock = threading.Lock()
        self.shown = False
        self.timer = threading.Timer(after, self.show)
        self.timer.daemon = True

    def show(self) -> None:
        with self.lock:
            if not self.shown:
                self.shown = True
                self.bar.start()

    def __call__(self, text: str) -> None:
        self.bar.update(self.task, description=text)

    def close(self) -> None:
        self.timer.cancel()
        with self.lock:
            if self.shown:
                self.bar.stop()
            self.shown = True  # a late timer shows nothing


@contextmanager
def progress(store: Told, as_json: bool = False) -> Iterator[None]:
    """The block's stages, told to the command's `store` (planner/progress.py), shown on stderr
    after the delay (where `wanted`), cleared at its end."""
    if not wanted(as_json):
        yield
        return
    line = StageLine(float(store.defaults.value("report.progress_after")))  # the command's defaults
    line.timer.start()
    try:
        with listening(store, line):
            yield
    finally:
        line.close()
