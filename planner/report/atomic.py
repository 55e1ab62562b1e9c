"""Output written whole or not at all: the one way every writer of this tool puts a file or a
folder in place (`--emit k8s -o DIR`, `--chart FILE`, `plan calibrate --out FILE`).

- The new content is written into a temporary sibling of the target (`.NAME.*.part`, in the same
  folder, so on the same file system), then renamed over the target in one step (rename(2) replaces
  a file atomically; a folder is swapped whole with renameat2(RENAME_EXCHANGE), and the old folder,
  now at the temporary name, removed: files of the old DIR never stay beside the new ones).
- Two runs writing one target take turns: each holds an exclusive flock(2) on the sibling lock
  file `.NAME.lock` while it writes, the second waits; the holder removes the lock file when done
  (a waiter that then finds the path gone or renewed takes the lock again), so none is left.
- SIGINT and SIGTERM while a write is under way remove the temporary sibling and exit 130 or 143
  (128 + the signal, the shell's convention); the creation of the temporary sibling, the swap and
  the clean-up run with both signals blocked, so a signal at any moment leaves the target as it
  was or complete, and no debris.
- An error of the system (a folder it cannot write, a full disk) leaves the target as it was and
  is one line naming the option (`InputError(flag, ...)`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from pricing.errors import InputError

SIGNALS = (signal.SIGINT, signal.SIGTERM)
RENAME_EXCHANGE = 2  # linux/fs.h: renameat2 swaps the two paths
AT_FDCWD = -100  # linux/fcntl.h: paths relative to the working folder
SLOW_WRITES = "DEPLOYMENT_PLANNER_TEST_SLOW_WRITES"  # tests: seconds to sleep after each file a folder gets


class Interrupted(SystemExit):
    """SIGINT or SIGTERM arrived while a write was under way: exit 128 + the signal."""


def _interrupted(signum, frame) -> None:
    raise Interrupted(128 + signum)


@contextlib.contextmanager
def _blocked() -> Iterator[None]:
    """SIGINT and SIGTERM held back (delivered when the block ends)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def _signals_exit() -> Iterator[None]:
    """SIGINT and SIGTERM raise `Interrupted` (the clean-up runs, then the process exits 130 or 143);
    in the main thread only, where Python runs signal handlers (elsewhere the caller's stay)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, _interrupted) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _sibling(target: Path) -> Path:
    return target.parent if str(target.parent) else Path(".")


@contextlib.contextmanager
def _locked(target: Path) -> Iterator[None]:
    """An exclusive flock on `.NAME.lock` beside `target`, waited for; the lock file removed by its holder."""
    path = _sibling(target) / f".{target.name}.lock"
    while True:
        with _blocked():
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(path))
            except FileNotFoundError:
                same = False  # its holder removed it: take the lock on a new one
        except BaseException:
            with _blocked():
                _drop_unheld(fd, path)
            raise
        if same:
            break
        os.close(fd)
    try:
        yield
    finally:
        with _blocked():
            with contextlib.suppress(OSError):
                os.unlink(path)
            os.close(fd)


def _drop_unheld(fd: int, path: Path) -> None:
    """A waiter interrupted: the lock file it may have made is removed only when no one holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.path.samestat(os.fstat(fd), os.stat(path)):
            os.unlink(path)
    except OSError:
        pass
    finally:
        os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2 RENAME_EXCHANGE); False where the system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.renameat2
    except (OSError, AttributeError):
        return False
    if call(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _mode(path: Path, mode: int) -> None:
    """As a file or folder the user creates (mkstemp and mkdtemp make them private)."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(path, mode & ~mask)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


def _system_error(flag: str, err: OSError, target: Path | None = None) -> InputError:
    return InputError(flag, f"cannot write {target or err.filename}: {err.strerror or err}; nothing was written",
                      "name a place you can write, on a disk with room")


def write_folder(target: str | Path, files: dict[str, Callable[[], bytes | str]], flag: str) -> list[Path]:
    """The folder `target` holding exactly `files` (name -> its content, made when written), swapped
    in whole; the paths written."""
    target = Path(target)
    parent = _sibling(target)
    slow = float(os.environ.get(SLOW_WRITES) or 0)
    part = None
    try:
        with _signals_exit(), _locked(target):
            try:
                with _blocked():
                    part = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".part", dir=parent))
                _mode(part, 0o777)
                for name, content in files.items():
                    data = content()
                    (part / name).write_bytes(data.encode() if isinstance(data, str) else data)
                    if slow:
                        time.sleep(slow)
                with _blocked():
                    part = _swap(part, target)
            finally:
                if part is not None:
                    with _blocked():
                        _remove(part)
    except OSError as err:
        raise _system_error(flag, err, target) from None
    return [target / name for name in files]


def _swap(part: Path, target: Path) -> Path | None:
    """`part` put in place of `target` in one step; what is left to remove (the old folder), or None."""
    if not target.is_dir() or target.is_symlink():
        os.replace(part, target)
        return None
    if _exchange(part, target):
        return part  # the old folder, now at the temporary name
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=_sibling(target)))
    os.replace(target, old)  # onto the empty folder just made
    try:
        os.replace(part, target)
    except OSError:
        os.replace(old, target)
        raise
    return old


class Files:
    """Files written together (`with Files(field) as files: files.add(path, write)`): each into a
    temporary sibling by `write(stream)`, under its lock; all renamed over their targets when the
    block ends, or, on an error or a signal in any, none (every target as it was, no part left). A
    system error is one line naming `field`."""

    def __init__(self, field: str):
        self.field = field
        self.parts: list[tuple[Path, Path]] = []
        self.current: Path | None = None  # the file being written
        self.locks = contextlib.ExitStack()
        self.handlers = _signals_exit()

    def __enter__(self) -> Files:
        self.handlers.__enter__()
        return self

    def add(self, target: str | Path, write: Callable[[object], None]) -> None:
        target = Path(target)
        self.current = target
        self.locks.enter_context(_locked(target))
        with _blocked():
            fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=_sibling(target))
            self.parts.append((Path(name), target))
        with os.fdopen(fd, "wb") as out:
            write(out)
        _mode(Path(name), 0o666)

    def __exit__(self, kind, error, trace) -> None:
        failed = error if isinstance(error, OSError) else None
        try:
            try:
                if kind is None:
                    with _blocked():
                        for part, target in self.parts:
                            os.replace(part, target)
                        self.parts = []
            except OSError as err:
                failed = err
                self.current = Path(err.filename) if err.filename else None
            finally:
                with _blocked():  # a signal now is delivered once the parts are gone and the locks given back
                    for part, _ in self.parts:
                        _remove(part)
                    self.locks.close()
        finally:
            self.handlers.__exit__(None, None, None)
        if failed is not None:
            raise _system_error(self.field, failed, self.current) from None


def write_file(target: str | Path, write: Callable[[object], None], field: str) -> None:
    """The file `target` replaced in one rename by what `write(stream)` writes (bytes)."""
    with Files(field) as files:
        files.add(target, write)
