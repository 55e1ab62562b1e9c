"""SIGINT and SIGTERM at any moment of a command: one line on stderr, exit 128 + the signal (130,
143, the shell's convention), no traceback. The exit unwinds the command like an exception, so
what is under way cleans up as it would on an error: a write removes its temporary sibling
(planner/report/atomic.py, whose own handler raises the same `Interrupted`), a pool of workers is
ended by its `with` block (planner/candidates/parallel.py `fork_pool`), and nothing half-written
stays. A worker forked from the command leaves quietly: the command says it, once. While the
command's own modules are still being imported (before `main` runs), there is nothing to clean up:
the line is written and the process exits at once (`while_starting`).

CP-SAT would catch SIGINT itself and end its search as if its time limit were reached, which would
print a truncated answer as a true one (SatParameters.catch_sigint_signal, true by default); the
planner's solvers turn that off (planner/search/staged.py Budget.solver), so the signal waits for
the solve in progress, bounded by its deterministic limit, and then ends the command."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

from planner.report.atomic import SIGNALS, Interrupted

_OWNER: list[int] = []  # the process that installed the handlers (a forked worker is not it)


def said(code: int) -> str:
    """The line a command stopped by a signal ends with."""
    return f"plan: stopped by {signal.Signals(code - 128).name}"


def _stop(signum, frame) -> None:
    if _OWNER and os.getpid() != _OWNER[-1]:  # a forked worker: its parent says it and ends the pool
        os._exit(128 + signum)
    raise Interrupted(128 + signum)


def _worker_defaults() -> None:
    """In a process forked from the command (a pool's worker), SIGINT and SIGTERM end it at once,
    as the system's default does, wherever it is blocked: the pool's terminate() stops its workers
    with SIGTERM, and a Python-level handler would wait for the interpreter to run."""
    for s in SIGNALS:
        if signal.getsignal(s) in (_stop, _stop_starting):
            signal.signal(s, signal.SIG_DFL)


@contextlib.contextmanager
def exit_on_signals() -> Iterator[None]:
    """Inside the block, SIGINT and SIGTERM raise `Interrupted` (in the main thread, where Python
    runs signal handlers; elsewhere the caller's handlers stay)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, _stop) for s in _heard()}
    _OWNER.append(os.getpid())
    try:
        yield
    finally:
        _OWNER.pop()
        for s, handler in old.items():
            signal.signal(s, handler)


def interrupted_in(err: BaseException) -> Interrupted | None:
    """The `Interrupted` a signal raised, where Python wrapped it in another exception on its way out
    (raised inside a class body's `__set_name__`, it comes back as a RuntimeError whose cause it is);
    None when the chain holds none."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, Interrupted):
            return err
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return None


def _stop_starting(signum, frame) -> None:
    os.write(2, f"{said(128 + signum)}\n".encode())
    os._exit(128 + signum)


_STARTED_AS_COMMAND: list[bool] = []


def while_starting() -> None:
    """SIGINT and SIGTERM while the command's modules load: the line, then exit (nothing is under way)."""
    _STARTED_AS_COMMAND.append(True)
    for s in _heard():
        signal.signal(s, _stop_starting)


def when_done() -> None:
    """The command has answered and exits: SIGINT and SIGTERM are ignored from here on, so that one
    arriving while the interpreter shuts down (which puts back the system's default for a handler
    Python set, and would end the process by the signal after its answer was given) changes
    nothing. Only where the process was started as the command (`while_starting`), never in a
    caller's process."""
    if _STARTED_AS_COMMAND:
        for s in _heard():
            signal.signal(s, signal.SIG_IGN)


def _heard() -> list[int]:
    """SIGINT and SIGTERM, less one the command was started ignoring (a shell script's `plan ... &`
    ignores SIGINT, as nohup ignores SIGHUP): an ignored signal stays ignored."""
    return [s for s in SIGNALS if signal.getsignal(s) != signal.SIG_IGN]


os.register_at_fork(after_in_child=_worker_defaults)
