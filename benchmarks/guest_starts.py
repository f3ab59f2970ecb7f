"""Which way each guest of a test run started: restored from a snapshot, or booted cold.

A run of the VM tests says nothing of it where a test keeps the lab's lines to itself, and a
restore that fails falls back to a cold boot with one line only the test sees.  So this
watches the processes instead: each QEMU that the run's own processes start, read once from
``/proc`` as it appears.  Its command line says the path it took (emulator/qemu.py):
``-incoming defer`` is a guest started to load a snapshot; without it the guest boots; the
``template`` guest is a snapshot being saved.  A restore that failed shows as a guest of the
same lab and name, started by the same process, that starts cold within seconds of the
restoring QEMU's end (snapshots.py stops it, then boots cold), so a silent cold boot cannot
pass for a restore.

    with Watch(os.getpid()) as watch: ...; print(*summary(watch.starts()), sep="\\n")
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

QEMU = "qemu-system-x86_64"
TEMPLATE = "template"  # snapshots.TEMPLATE_HOST: the guest a snapshot is saved from
# A failed restore's QEMU is stopped (1 s grace) and the cold one started at once.
FALLBACK_GAP_S = 5.0
EVERY_S = 0.2


@dataclass
class Started:
    """One QEMU the run started: its parent (the process that runs the lab), its guest's
    name, its lab (the run folder), whether it was started to load a snapshot, and when it
    was first and last seen (monotonic s)."""

    pid: int
    parent: int
    name: str
    lab: str
    incoming: bool
    first: float
    last: float


def guest_start(argv: list[str]) -> tuple[str, str, bool] | None:
    """(guest name, lab folder's name, started to restore) of a sanlab guest's QEMU argv;
    None for any other process (the KVM probe has no monitor and is not a guest)."""
    if not argv or Path(argv[0]).name != QEMU:
        return None
    try:
        name = argv[argv.index("-name") + 1].split(",")[0]
        monitor = argv[argv.index("-qmp") + 1]
    except (ValueError, IndexError):
        return None
    if not name.startswith("sanlab-") or not monitor.startswith("unix:"):
        return None
    socket = Path(monitor.removeprefix("unix:").split(",")[0])
    return name.removeprefix("sanlab-"), socket.parent.name, "-incoming" in argv


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(comm, parent PID, start time in clock ticks) of ``pid``; None once it has gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return raw[raw.index("(") + 1 : raw.rindex(")")], int(fields[1]), int(fields[19])


def _descends(pid: int, root: int) -> bool:
    for _ in range(64):  # a bounded walk up the parents
        if pid == root:
            return True
        stat = _stat(pid)
        if stat is None or stat[1] <= 1:
            return False
        pid = stat[1]
    return False


def _pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _argv(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


class Watch:
    """Samples ``/proc`` every ``EVERY_S`` for QEMUs descended from ``root`` (the run's
    process), in a thread, for as long as the ``with`` block lasts.  A process is known by
    its PID and start time, so a reused PID is a new process; one seen between its fork and
    its exec is looked at again once its name changes."""

    def __init__(self, root: int):
        self.root = root
        self._seen: dict[tuple[int, int], Started] = {}
        self._other: dict[tuple[int, int], str] = {}  # not a guest, as of the name it runs
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def starts(self) -> list[Started]:
        return sorted(self._seen.values(), key=lambda s: s.first)

    def _loop(self) -> None:
        while not self._stop.wait(EVERY_S):
            self.sample(time.monotonic())

    def sample(self, now: float) -> None:
        for pid in _pids():
            if (stat := _stat(pid)) is None:
                continue
            comm, parent, began = stat
            key = (pid, began)
            if key in self._seen:
                self._seen[key].last = now
            elif self._other.get(key) != comm:  # new, or it has since exec'd another program
                start = guest_start(_argv(pid)) if _descends(pid, self.root) else None
                if start is None:
                    self._other[key] = comm
                else:
                    self._seen[key] = Started(pid, parent, *start, now, now)


def census(starts: list[Started]) -> Counter[str]:
    """Guest starts by the path taken: ``restored``; ``cold``, of which ``fell back`` after a
    restore that failed; and ``saves`` (template guests booted to save a snapshot)."""
    guests = [s for s in starts if s.name != TEMPLATE]
    restores = [s for s in guests if s.incoming]
    colds = [s for s in guests if not s.incoming]

    def follows(cold: Started, restore: Started) -> bool:
        gap = cold.first - restore.last
        same = (restore.lab, restore.name, restore.parent) == (cold.lab, cold.name, cold.parent)
        return same and 0 <= gap <= FALLBACK_GAP_S

    failed = sum(any(follows(c, r) for c in colds) for r in restores)
    counts: Counter[str] = Counter(restored=len(restores) - failed, cold=len(colds))
    counts["fell back"] = sum(any(follows(c, r) for r in restores) for c in colds)
    counts["saves"] = len(starts) - len(guests)
    return counts


def summary(starts: list[Started]) -> list[str]:
    """Lines for the run's output: the totals, then each lab's guests by path."""
    total = census(starts)
    lines = [
        f"guest starts: {total['restored']} restored, {total['cold']} cold "
        f"({total['fell back']} after a restore that failed), "
        f"{total['saves']} template boots to save a snapshot"
    ]
    for lab in sorted({s.lab for s in starts if s.name != TEMPLATE}):
        counts = census([s for s in starts if s.lab == lab])
        lines.append(
            f"  {lab}: {counts['restored']} restored, {counts['cold']} cold ({counts['fell back']} fell back)"
        )
    return lines
