"""What a long command is doing, for whoever shows it: the library names its stages
(`stage(store, "sweeping …")`) to the listener the command's store carries (planner/candidates/
store.py `TableStore.listener`, made once per command and handed down with its resolved services;
planner/commands/progress.py shows them on stderr when it is a terminal). No listener, or no store:
a stage is told to no one."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

Listener = Callable[[str], None]


class Told(Protocol):
    """What carries a command's listener: its store (planner/candidates/store.py TableStore)."""

    listener: Listener | None


def stage(store: Told | None, text: str) -> None:
    """The work now under way, in words with its counts ('CP-SAT: the best of 1,234 candidates'),
    told to `store`'s listener (the command's: None or none set, nothing is told)."""
    listener = store.listener if store is not None else None
    if listener is not None:
        listener(text)


@contextmanager
def listening(store: Told, listener: Listener) -> Iterator[None]:
    """Within the block, every stage of the work `store` serves is told to `listener`."""
    before, store.listener = store.listener, listener
    try:
        yield
    finally:
        store.listener = before
