"""What a long command is doing, for whoever shows it: the library names its stages
(`stage("sweeping …")`), a command shows them (planner/commands/progress.py, on stderr when it
is a terminal), and without a listener a stage costs one lookup."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_listener: ContextVar[Callable[[str], None] | None] = ContextVar("progress", default=None)


def stage(text: str) -> None:
    """The work now under way, in words with its counts ('CP-SAT: the best of 1,234 candidates')."""
    listener = _listener.get()
    if listener is not None:
        listener(text)


@contextmanager
def listening(listener: Callable[[str], None]) -> Iterator[None]:
    """Within the block, every stage is told to `listener`."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)
