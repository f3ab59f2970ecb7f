"""Files that sanlab reads from or writes for its user, in bounded time and memory.

Anything a user points sanlab at may be a FIFO (reading it blocks for ever),
a device, a folder, or a file of gigabytes.  Each is refused by name in one
line before a byte is read, and a regular file is read only up to a limit.
Writes are atomic: a crash never leaves half a file behind.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.writing import write_file


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def regular_file(path: Path, what: str) -> os.stat_result:
    """``path``'s stat if it is a regular file (a symlink to one is fine); else a one-line error."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise SanlabError(f"{what} {path}: cannot read it ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise SanlabError(f"{what} {path}: is {_kind(info.st_mode)}; give a regular file")
    return info


def read_bounded(path: Path, limit: int, what: str) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, never blocking on a FIFO."""
    info = regular_file(path, what)
    if info.st_size > limit:
        raise SanlabError(f"{what} {path}: is {info.st_size:,} bytes; at most {limit:,} are read")
    with _opened(path, what) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise SanlabError(f"{what} {path}: is over {limit:,} bytes; at most that is read")
    return data


@contextmanager
def open_regular(path: Path, what: str) -> Iterator[BinaryIO]:
    """A regular file opened to be streamed in fixed chunks (a .deb, an image): refused in one
    line when it is a FIFO, a device or a folder, and never blocking on one swapped in."""
    regular_file(path, what)
    with _opened(path, what) as handle:
        yield handle


@contextmanager
def _opened(path: Path, what: str) -> Iterator[BinaryIO]:
    """``path`` opened for reading once ``regular_file`` passed it.  O_NONBLOCK: should the
    file be swapped for a FIFO after the check, opening it does not wait; the open file is
    checked again, so what is read is the regular file or nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise SanlabError(f"{what} {path}: cannot read it ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise SanlabError(f"{what} {path}: is not a regular file; give a regular file")
        yield handle


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` in one step (scenarios/writing.py): a link there is replaced, never
    followed; a full or read-only disk is one line and leaves nothing behind."""
    write_file(path, text)
