"""A device's completed I/Os, and a faulted run's timeline starting at its first one.

A scenario's fault comes ``at`` seconds into the workload, and the dip compares the
completion rate while the fault lasts with the rate before it.  Timed from fio's start, on
a loaded 2-core TCG host the fault could come before the first write had completed: fio
took longer than the 2-3 s of a burst's or a path pull's ``at`` to get going (Debian 13
guests, load average 12, 2026-11-27), so there was no rate before the fault and the dip was
None, the record saying nothing of the fault it was made for.  So ``faults`` waits for the
device's count of completed reads and writes to move first (a signal, not a clock).  On
real hosts fio starts in milliseconds and nothing changes.

The count is the one home of "how many I/Os has this device completed", which the stall
watch reads too.  It sums the device's block-layer statistics and, for an NVMe native
multipath head (``nvme0n1``), its paths' (``nvme0c0n1``, ``nvme0c1n1``: one per controller,
in /sys/block beside it): Linux 6.1 keeps no statistics on the head itself and has no
``multipath/`` folder under it (seen in the default guest, 2026-11-27), so a first attempt
that read the head alone (ec6dbb6) waited for a count that never moved and put every NVMe
fault after fio had ended.  Summing is safe where the head counts too (later kernels): the
wait needs the count to move, not its value.
"""

from __future__ import annotations

import shlex
import time

from sanlab.targets.host import Host

# How long to wait for the run's first I/O at most, and how long one look in the host polls.
FIRST_IO_S = 120.0
LOOK_S = 10.0


def _resolve(device: str) -> str:
    """Sets ``b`` to the kernel's name of ``device``, through any links (by-id, mapper)."""
    return f'b=$(basename "$(readlink -f {shlex.quote(device)})"); '


# Where the kernel lists block devices (a test points it at a folder laid out alike).
SYS_BLOCK = "/sys/block"


def _sum() -> str:
    """Sums reads (field 1) and writes (field 5) completed over the device ``b`` and, where it
    is an NVMe head (``nvmeSnN``), its paths (``nvmeScCnN``, one per controller) into ``n``;
    ``k`` says whether any statistics file was there to read."""
    root = shlex.quote(SYS_BLOCK)
    return (
        'p=; case "$b" in nvme*c*) ;; '
        'nvme*n*) s=${b#nvme}; p="nvme${s%%n*}c*n${b##*n}";; esac; '  # the paths' glob
        f'n=0; k=0; for f in {root}/"$b"/stat {root}/$p/stat; do '
        '[ -r "$f" ] && read -r r _ _ _ w _ < "$f" && n=$((n + r + w)) && k=1; done; '
    )


def count_script(device: str) -> str:
    """Prints the reads and writes ``device`` has completed (failed ones included, so a
    transport that fails its I/O still counts as moving); prints nothing when the device has
    no statistics."""
    return f'{_resolve(device)}{_sum()}[ "$k" = 1 ] && echo "$n"; true'


def parse_count(stdout: str) -> int | None:
    """The count ``count_script`` printed last in ``stdout``; None when it printed none."""
    words = stdout.split()
    return int(words[-1]) if words and words[-1].isdigit() else None


def completed(host: Host, device: str | None) -> int | None:
    """The reads and writes ``device`` has completed so far; None when its count cannot be read
    (or there is no device to read it of)."""
    if not device:
        return None
    return parse_count(host.run(count_script(device), timeout=30).stdout)


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
        f"{_resolve(device)}i=0; while :; do {_sum()}"
        f'[ "$n" -gt {before} ] && exit 0; '
        f"{{ [ -e {shlex.quote(done)} ] || ! kill -0 {pid} 2>/dev/null; }} && exit 3; "
        f"[ $i -ge {looks} ] && exit 1; sleep 0.1; i=$((i + 1)); done"
    )
