"""A fault's ``at`` counts from fio's first completed I/O, not from the moment fio was spawned.

Under load a TCG guest took more than the burst scenario's 2 s to start
fio: the loss burst then began before any write had completed, and the
record had no throughput before the fault to compare with (CI, under a
CPU hog).  The clock now starts when the device's completed-I/O count first
moves.  A host that answers like a guest shows it, without booting one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from sanlab.targets import faults


@dataclass
class Answer:
    rc: int
    stdout: str
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.rc == 0

    @property
    def timed_out(self) -> bool:
        return False


@dataclass
class SlowStartingGuest:
    """A guest whose fio completes its first I/O only on its ``idle``-th look at the device."""

    idle: int
    name: str = "initiator"
    looks: list[str] = field(default_factory=list)

    def run(self, command: str, timeout: float = 60.0, stdin: str = "") -> Answer:
        self.looks.append(command)
        done = 0 if len(self.looks) <= self.idle else 40
        return Answer(0, f"{done} 0 0 0 0 0 0 0 0 0 0\n")


def test_the_clock_waits_for_the_first_completed_io():
    guest = SlowStartingGuest(idle=5)
    began = faults._io_begun(guest, 1234, "/dev/nvme1n1", time.monotonic() + 60)
    assert len(guest.looks) == 6 and began <= time.monotonic()
    assert all("/sys/block/" in look and "tail -s" not in look for look in guest.looks)


def test_a_device_that_never_moves_lets_the_faults_go_ahead_at_the_deadline():
    guest = SlowStartingGuest(idle=10**9)
    started = time.monotonic()
    faults._io_begun(guest, 1234, "/dev/nvme1n1", started + 0.5)
    assert 0.5 <= time.monotonic() - started < 5


def test_fio_that_ends_before_any_io_ends_the_wait():
    class Ended(SlowStartingGuest):
        def run(self, command: str, timeout: float = 60.0, stdin: str = "") -> Answer:
            self.looks.append(command)
            return Answer(3, "")

    guest = Ended(idle=0)
    faults._io_begun(guest, 1234, "/dev/nvme1n1", time.monotonic() + 60)
    assert len(guest.looks) == 1
