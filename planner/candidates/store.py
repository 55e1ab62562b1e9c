"""The store of what one command's services and variants share (planner/candidates/service.py
`sweep_model`, planner/candidates/table.py `candidate_table`): made once per command and handed
down with its resolved services, never found in ambient state."""

from __future__ import annotations

import os
from itertools import count
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from planner.defaults import Defaults
    from planner.progress import Listener


class TableStore:
    """What one command's services and variants share, made once per command (the CLI's, or each
    use case's when the Python API is called without one, planner/app/api.py) and handed down with
    its resolved services: the planner defaults it made (`defaults`, planner/defaults.py), one
    graph per model (`sweep_model`), the candidate tables by `sweep_key` (planner/candidates/
    table.py `candidate_table`) and the listener told the stages of the work (planner/progress.py;
    None: no one). When the command ends it goes.

    Pickled (with a service, to a worker) as its token: a worker forked from the command's process
    holds the very store it had at the fork (its tables and graphs, copy-on-write), so the token
    finds it there; any other process (a Ray worker) gets an empty store of its own, one per
    message, that the services sent together share, with the command's defaults and no listener."""

    _tokens = count()
    _made: dict[tuple[int, int], TableStore] = {}  # this process's stores by token (a forked child holds the parent's)

    def __init__(self, defaults: Defaults, findable: bool = True, listener: Listener | None = None) -> None:
        self.items: dict = {}
        self.defaults = defaults  # the planner defaults the command made (planner/defaults.py), handed down whole
        self.listener = listener  # who is told the stages of the work (planner/progress.py); None: no one
        self.token = (os.getpid(), next(TableStore._tokens))
        if findable:  # a store made in a worker for its message is not (it goes with the message's services)
            TableStore._made[self.token] = self

    def close(self) -> None:
        """The command is done: its graphs and tables go (the token no longer finds them)."""
        self.items.clear()
        TableStore._made.pop(self.token, None)

    def __enter__(self) -> TableStore:
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def get(self, key):
        return self.items.get(key)

    def keep(self, key, value) -> None:
        self.items[key] = value

    def __reduce__(self):
        return _found, (self.token, self.defaults)


def _found(token: tuple[int, int], defaults: Defaults) -> TableStore:
    """The store of `token` in this process: inherited at a fork, else a new one (a Ray worker's)."""
    return TableStore._made.get(token) or TableStore(defaults, findable=False)
