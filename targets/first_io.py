"""A faulted run's timeline starts at its first completed I/O, not at fio's start.

A scenario's fault comes ``at`` seconds into the workload, and the dip compares the
completion rate while the fault lasts with the rate before it.  Timed from fio's start, on
a loaded 2-core TCG host the fault could come before the first write had completed: fio
took longer than the 2-3 s of a burst's or a path pull's ``at`` to get going (Debian 13
guests, load average 12, 2026-11-27), so there was no rate before the fault and the dip was
None, the record saying nothing of the fault it was made for.  So ``faults`` waits for the
device's block-layer count of completed reads and writes to move first.  On real hosts fio
starts in milliseconds and nothing changes.
"""

from __future__ import annotations

import shlex
import time

from sanlab.targets.host import Host

# How long to wait for the run's first I/O at most, and how long one look in the host polls.
FIRST_IO_S = 120.0
LOOK_S = 10.0


def stat_path(device: str) -> str:
    """The shell word for ``device``'s block-layer statistics, through any links (by-id, mapper)."""
    return f"/sys/block/$(basename $(readlink -f {shlex.quote(device)}))/stat"


def completed(host: Host, device: str | None) -> int | None:
    """The reads and writes ``device`` has completed so far; None when its count cannot be read
    (or there is no device to read it of)."""
    if not device:
        return None
    fields = host.run(f"cat {stat_path(device)}", timeout=30).stdout.split()
    return int(fields[0]) + int(fields[4]) if len(fields) >= 5 and fields[0].isdigit() else None


def wait(host: Host, device: str | None, before: int | None, pid: int, done: str) -> None:
    """Until ``device`` has completed more I/Os than ``before`` (the run's first), or fio's
    shell ``pid`` has ended (written ``done``), or ``FIRST_IO_S`` has passed.  At once when
    there is no count to watch: the faults are then timed from fio's start, as before."""
    if not device or before is None:
        return
    deadline = time.monotonic() + FIRST_IO_S
    while time.monotonic() < deadline:
        if host.run(script(device, before, pid, done), timeout=LOOK_S + 30).rc != 1:
            return


def script(device: str, before: int, pid: int, done: str) -> str:
    """Polls ``device``'s completed reads and writes every tenth of a second for up to
    ``LOOK_S``: exits 0 once they exceed ``before``, 3 once fio's shell has ended (``done``
    written, or the process gone), 1 when neither happened in that time."""
    looks = int(LOOK_S * 10)
    return (
        f"s={stat_path(device)}; i=0; while :; do "
        f'set -- $(cat "$s" 2>/dev/null); [ $(( ${{1:-0}} + ${{5:-0}} )) -gt {before} ] && exit 0; '
        f"{{ [ -e {shlex.quote(done)} ] || ! kill -0 {pid} 2>/dev/null; }} && exit 3; "
        f"[ $i -ge {looks} ] && exit 1; sleep 0.1; i=$((i + 1)); done"
    )
