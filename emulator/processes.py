"""Which process is ours: the one home of process identity, for every signal sanlab sends.

A PID written in a file (a lab's state, a keeper's status) outlives its
process, and Linux hands the number to the next one.  So a process is ours
only when two facts both hold:

- its start time (``/proc/PID/stat`` field 22, clock ticks since boot) is
  the one recorded when it started: with the PID it names one process for
  the machine's life; and
- its command line names what only our process names: one of our exact
  socket or run-folder paths as a whole argument, or as the exact value of
  one ``key=value`` component of a QEMU option (parsed, never a substring:
  lab ``pl``'s folder is a prefix of lab ``pl-b``'s), or, for a process
  whose arguments are all ours, exactly those arguments.

Signals go through a pidfd opened *before* the check, so the process
checked is the one signalled even if its PID is reused in between.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Recorded:
    """A process as sanlab wrote it down when it started: its PID and its start time."""

    pid: int
    started: int


def recorded(pid: object, started: object) -> Recorded | None:
    """The identity read back from a file, if both values have the right type (a JSON
    ``true``, a string or a negative number is no PID)."""
    if type(pid) is not int or type(started) is not int or pid <= 0 or started < 0:
        return None
    return Recorded(pid, started)


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie child counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def process_argv(pid: int) -> list[str] | None:
    """The command line ``pid`` runs, word by word; None if there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [word.decode(errors="replace") for word in raw.split(b"\0")[:-1]]


def process_start(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (set at fork, kept across exec)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def me() -> Recorded:
    """This process, as whoever signals it later must find it."""
    started = process_start(os.getpid())
    assert started is not None  # /proc/self always exists on Linux
    return Recorded(os.getpid(), started)


def option_components(word: str) -> list[str]:
    """A QEMU option string split as QEMU's option parser splits it: at each ``,`` that is not
    doubled (``,,`` is a comma inside a value)."""
    parts, current, i = [], [], 0
    while i < len(word):
        if word[i] == "," and word[i + 1 : i + 2] == ",":
            current.append(",")
            i += 2
        elif word[i] == ",":
            parts.append("".join(current))
            current, i = [], i + 1
        else:
            current.append(word[i])
            i += 1
    return [*parts, "".join(current)]


def option_values(word: str) -> list[str]:
    """The values of a QEMU option string: each ``key=value`` component's value, and the path
    of the legacy ``unix:PATH`` first component (``-qmp unix:PATH,server=on``)."""
    parts = option_components(word)
    values = [part.split("=", 1)[1] for part in parts if "=" in part]
    if parts[0].startswith("unix:") and "=" not in parts[0]:
        values.append(parts[0].removeprefix("unix:"))
    return values


def names_path(argv: Sequence[str], path: str | Path) -> bool:
    """Whether a command line names ``path`` exactly: as a whole argument, or as the whole value
    of one component of an option string.  ``/run/labs/pl`` is not named by ``/run/labs/pl-b``."""
    want = str(path)
    return any(word == want or want in option_values(word) for word in argv[1:])


def is_ours(
    who: Recorded | None, paths: Sequence[str | Path] = (), argv_tail: Sequence[str] | None = None
) -> bool:
    """Whether ``who`` still runs as we recorded it: same start time, and a command line that
    names one of ``paths`` exactly (``names_path``) or whose arguments after the program are
    exactly ``argv_tail``."""
    if who is None or not pid_alive(who.pid):
        return False
    argv = process_argv(who.pid)
    if not argv or process_start(who.pid) != who.started:
        return False
    if argv_tail is not None and argv[1:] == list(argv_tail):
        return True
    return any(names_path(argv, path) for path in paths)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except OSError:  # gone (ESRCH); no pidfd support is not met on sanlab's kernels
        return None


def signal_ours(
    who: Recorded | None,
    signum: int,
    paths: Sequence[str | Path] = (),
    argv_tail: Sequence[str] | None = None,
) -> bool:
    """Send ``signum`` to ``who`` if it is ours (``is_ours``); True if it was sent.  The pidfd is
    opened before the check, so a PID reused after the check is never the one signalled."""
    if who is None:
        return False
    fd = _pidfd(who.pid)
    if fd is None:
        return False
    try:
        if not is_ours(who, paths, argv_tail):
            return False
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(fd, signum)
            return True
        return False
    finally:
        os.close(fd)


def stop_ours(
    who: Recorded | None,
    paths: Sequence[str | Path] = (),
    argv_tail: Sequence[str] | None = None,
    grace: float = 3.0,
) -> bool:
    """SIGTERM to ``who`` if it is ours, then SIGKILL after ``grace`` seconds if it has not
    gone; True if it was ours.  Both signals go through one pidfd, opened before the check."""
    if who is None or (fd := _pidfd(who.pid)) is None:
        return False
    try:
        if not is_ours(who, paths, argv_tail):
            return False
        try:
            signal.pidfd_send_signal(fd, signal.SIGTERM)
        except ProcessLookupError:
            return True
        if not _exits(fd, who.pid, grace):
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            _exits(fd, who.pid, 5.0)
        return True
    finally:
        os.close(fd)


def _exits(fd: int, pid: int, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for the pidfd's process to end (a child of ours that has
    ended but is not reaped yet counts as ended)."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if select.select([fd], [], [], max(0.0, min(left, 0.05)))[0] or not pid_alive(pid):
            return True
        if left <= 0:
            return False


def stop_pid(pid: int, grace: float = 3.0) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds, to a child this process started and holds
    (``Popen``): only for those, whose PID cannot be reused before they are reaped."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
