"""The process's heap after a command's imports.

What a command has imported by the time it starts its work (modules, classes, functions, their
tables: OR-Tools, pandas and pydantic's among them) lives as long as the process. Python's cyclic
garbage collector would still traverse all of it at each full collection, tens of milliseconds a
pass in a plan. `gc.freeze()` (Python's `gc` module documentation) moves every object tracked so
far into a permanent generation the collector skips; whatever the work allocates is collected as
usual. bench/bench_cli.py measures what it saves.
"""

from __future__ import annotations

import gc


def freeze_imported() -> None:
    """Leave what has been imported so far out of every later garbage collection."""
    gc.freeze()


def freeze_for_fork() -> None:
    """Before forking workers that inherit this heap: everything allocated so far (the candidate
    tables a pool's workers read, above all) out of every later collection, here and in the
    workers, so that a worker's collection neither walks the inherited objects nor, by touching
    their headers, copies the pages they are on (Python's `gc.freeze` documentation: freeze right
    before fork)."""
    gc.freeze()
