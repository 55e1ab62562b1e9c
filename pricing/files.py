"""A user's input file read as text: a regular file only (a FIFO, /dev/zero or another device is
refused before it is opened, since reading one blocks or never ends), at most `cap` bytes (a file
that grows past the cap while read is refused too), UTF-8. Every failure is one `InputError`
naming `field` and the file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pricing.errors import InputError


def read_text(path: str | Path, field: str, cap: int, what: str = "file", lenient: bool = False) -> str:
    """The text of `path` (`what` says what the file should be, for the fix; `lenient`: bytes that
    are not UTF-8 read as U+FFFD, for logs whose lines the tool only searches)."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        raise InputError(field, f"cannot read {path}: {err.strerror}", f"give a {what}") from None
    if stat.S_ISDIR(mode):
        raise InputError(field, f"{path} is a folder", f"give a {what}")
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else \
            "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
        raise InputError(field, f"{path} is {kind}, not a regular file", f"give a {what}")
    try:
        with open(path, "rb") as f:
            data = f.read(cap + 1)
    except OSError as err:
        raise InputError(field, f"cannot read {path}: {err.strerror}", f"give a {what}") from None
    if len(data) > cap:
        raise too_large(field, str(path), cap, what)
    try:
        return data.decode("utf-8", errors="replace" if lenient else "strict")
    except UnicodeDecodeError as err:
        raise InputError(field, f"{path} is not UTF-8 text (byte {err.start}: {err.reason})",
                         f"save the {what} as UTF-8") from None


def too_large(field: str, name: str, cap: int, what: str) -> InputError:
    return InputError(field, f"{name} is larger than the {cap:,} bytes an input file may hold",
                      f"give a {what} (pricing/registry/input_limits.yaml file_bytes)")


def read_stream(stream, field: str, cap: int, what: str) -> str:
    """Standard input as text, at most `cap` characters (more is refused, never read whole)."""
    text = stream.read(cap + 1)
    if len(text) > cap:
        raise too_large(field, "standard input", cap, what)
    return text
