"""A faulted run's faults are timed from its first completed I/O (targets/first_io.py).

On Debian 13 guests restored beside other work (load average 12, 2026-11-27) fio took
longer than a fault's 2-3 s ``at`` to complete its first write: the burst and the SCSI
path pull came before any I/O, and their records had no throughput dip.  The first test
drives the timeline with a scripted host whose first I/O comes 4 s after fio starts; timed
from fio's start, as before, its fault came at 2 s.  The others run the host's script in a
real shell, on this machine's own disk and processes.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sanlab.scenarios.schema import Fault
from sanlab.targets import faults, first_io
from support import Reply

FIRST_IO_AFTER_S = 4.0
AT_S = 2.0


@dataclass
class SlowStartingFio:
    """An initiator whose fio completes its first I/O ``FIRST_IO_AFTER_S`` after it is
    spawned, on the clock the test keeps; the device's count moves from 10 to 11 then."""

    clock: list[float]
    spawned: float | None = None
    scripts: list[str] = field(default_factory=list)
    name: str = "initiator"

    def spawn(self, command: str, log: str = "/dev/null") -> int:
        self.spawned = self.clock[0]
        return 4242

    def run(self, command: str | list[str], timeout: float = 60.0, stdin: str = "") -> Reply:
        text = command if isinstance(command, str) else " ".join(command)
        self.scripts.append(text)
        if self.spawned is None and "/stat" in text:
            return Reply(stdout="10\n")  # 6 reads + 4 writes before the run
        if self.spawned is not None and "while :" in text:  # first_io.script: waits in the host
            first = self.spawned + FIRST_IO_AFTER_S
            if self.clock[0] + first_io.LOOK_S < first:
                self.clock[0] += first_io.LOOK_S
                return Reply(1)
            self.clock[0] = max(self.clock[0], first)
            return Reply(0)
        if "kill -0" in text and "tail" in text:  # the poll: fio has ended
            return Reply(3)
        if text.startswith("cat /tmp/sanlab-faulted-") and ".json" in text:
            return Reply(stdout="{}\n---\n0\n---\n")
        return Reply()


def _fake_clock(monkeypatch) -> list[float]:
    clock = [1000.0]

    def sleep(seconds: float) -> None:
        clock[0] += max(0.0, seconds)

    monkeypatch.setattr(faults.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(faults.time, "sleep", sleep)
    monkeypatch.setattr(first_io.time, "monotonic", lambda: clock[0])
    return clock


def test_a_fault_comes_at_its_time_after_the_first_io_not_after_fios_start(monkeypatch):
    clock = _fake_clock(monkeypatch)
    host = SlowStartingFio(clock)
    injected: list[float] = []

    def inject(fault: Fault) -> faults.Window:
        injected.append(clock[0])
        return faults.Window(clock[0], clock[0] + fault.length)

    fault = Fault.model_validate({"at": AT_S, "link": "roce", "for": 2})
    faults.run_faulted(host, ["fio", "--name=x"], [fault], inject, lambda m: None, 900.0, "/dev/nvme0n1")
    assert host.spawned is not None and injected == [host.spawned + FIRST_IO_AFTER_S + AT_S]
    (look,) = [s for s in host.scripts if "while :" in s]
    assert "-gt 10 ]" in look and "kill -0 4242" in look  # the count before the run, fio's shell


@pytest.mark.parametrize(("restored", "said"), [(None, ""), (9.5, " (every path in use again by t+11.5s)")])
def test_a_replugged_cable_is_said_up_when_its_carrier_came_back(monkeypatch, restored, said):
    """The line a user compares the record's recovery time with: it counts from the carrier's
    return (the window's end), not from the injection's return, which proves the cable carries
    packets (2.6 s later under TCG, 20:28 on 2026-11-27, NVMe/TCP over rxe) and, for a
    multipath target, waits until every path is in use again."""
    clock = _fake_clock(monkeypatch)
    lines: list[str] = []

    def inject(fault: Fault) -> faults.Window:
        down = clock[0] + 5000.0  # the initiator's own clock: epoch seconds, not this one
        clock[0] += fault.length + 2.6 + (restored or 0.0)
        back = None if restored is None else down + restored
        return faults.Window(down, down + fault.length, back)

    fault = Fault.model_validate({"at": AT_S, "link": "roce", "for": 2})
    faults.run_faulted(SlowStartingFio(clock), ["fio"], [fault], inject, lines.append, 900.0, "/dev/nvme0n1")
    assert lines == ["t+2.0s: link roce down for 2s", f"t+4.0s: link roce up{said}"]


def test_without_a_device_or_its_count_the_faults_keep_fios_start(monkeypatch):
    clock = _fake_clock(monkeypatch)
    host = SlowStartingFio(clock)
    injected: list[float] = []

    def inject(fault: Fault) -> faults.Window:
        injected.append(clock[0])
        return faults.Window(clock[0], clock[0] + 1)

    fault = Fault.model_validate({"at": AT_S, "link": "roce", "for": 1})
    faults.run_faulted(host, ["fio"], [fault], inject, lambda m: None, 900.0, None)
    assert host.spawned is not None and injected == [host.spawned + AT_S]
    assert not any("while :" in s for s in host.scripts)


def test_a_first_io_that_never_comes_is_waited_for_a_bounded_time(monkeypatch):
    clock = _fake_clock(monkeypatch)
    looks: list[float] = []

    class NeverMoves:
        name = "initiator"

        def run(self, command: str, timeout: float = 60.0, stdin: str = "") -> Reply:
            looks.append(clock[0])
            clock[0] += first_io.LOOK_S
            return Reply(1)

    first_io.wait(NeverMoves(), "/dev/sda", 5, 4242, "/tmp/x.rc")
    assert clock[0] - 1000.0 == pytest.approx(first_io.FIRST_IO_S)
    assert len(looks) == first_io.FIRST_IO_S / first_io.LOOK_S


def _disk() -> tuple[str, int]:
    """A block device of this machine and its completed reads and writes."""
    for disk in sorted(Path("/sys/block").iterdir()):
        fields = (disk / "stat").read_text().split()
        if Path(f"/dev/{disk.name}").is_block_device() and len(fields) >= 5:
            return f"/dev/{disk.name}", int(fields[0]) + int(fields[4])
    pytest.skip("no block device here")


def _run(script: str) -> tuple[int, float]:
    began = time.monotonic()
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    return done.returncode, time.monotonic() - began


@pytest.mark.subprocess  # the host's script runs in a real shell, on this machine's disk
def test_the_hosts_look_ends_on_the_first_io_on_fios_end_or_after_its_time(tmp_path, monkeypatch):
    device, count = _disk()
    alive = os.getpid()  # stands for fio's shell, running
    assert first_io.completed(_Here(), device) is not None
    rc, seconds = _run(first_io.script(device, count - 1, alive, str(tmp_path / "rc")))
    assert rc == 0 and seconds < 2  # the count is past the one before the run: I/O has come
    ended = subprocess.Popen(["true"])
    ended.wait()
    rc, seconds = _run(first_io.script(device, 1 << 62, ended.pid, str(tmp_path / "rc")))
    assert rc == 3 and seconds < 2  # fio's shell is gone
    (tmp_path / "rc").write_text("0\n")
    rc, _ = _run(first_io.script(device, 1 << 62, alive, str(tmp_path / "rc")))
    assert rc == 3  # fio's shell wrote its exit code (the agent may not have reaped it yet)
    monkeypatch.setattr(first_io, "LOOK_S", 0.3)
    rc, seconds = _run(first_io.script(device, 1 << 62, alive, str(tmp_path / "none")))
    assert rc == 1 and 0.25 < seconds < 5  # neither, within the look's time


class _Here:
    name = "here"

    def run(self, command: str, timeout: float = 60.0, stdin: str = "") -> Reply:
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=timeout)
        return Reply(done.returncode, done.stdout, done.stderr)


def _stat(reads: int, writes: int) -> str:
    return f"{reads:8d} 0 {8 * reads} 3 {writes:8d} 0 {8 * writes} 9 0 12 12 0 0 0 0 0 0\n"


@pytest.mark.subprocess  # the count runs in a real shell, over a folder laid out as sysfs is
def test_an_nvme_heads_count_is_its_paths_whose_moves_end_the_wait(tmp_path, monkeypatch):
    """Linux 6.1 keeps no statistics on a native-multipath head: its own stat stays 0 while
    its paths (``nvme0c0n1``, ``nvme0c1n1``, beside it in /sys/block) count the I/O.  Read
    alone, the head's count never moved and every NVMe fault came after fio had ended
    (ec6dbb6).  Another subsystem's or namespace's paths are not the head's."""
    block = tmp_path / "sys block"  # a word to quote: the root is never split or globbed
    counts = {"nvme0n1": (0, 0), "nvme0c0n1": (5, 7), "nvme0c1n1": (2, 1), "nvme0c0n11": (90, 90)}
    counts |= {"nvme1c1n1": (40, 40), "nvme10c0n1": (30, 30), "sda": (50, 50)}
    for disk, (reads, writes) in counts.items():
        (block / disk).mkdir(parents=True)
        (block / disk / "stat").write_text(_stat(reads, writes))
    device = tmp_path / "dev" / "nvme0n1"
    device.parent.mkdir()
    device.symlink_to(block / "nvme0n1")  # a by-id link: the kernel's name is the link's end
    monkeypatch.setattr(first_io, "SYS_BLOCK", str(block))
    assert first_io.completed(_Here(), str(device)) == 15
    assert first_io.completed(_Here(), str(block / "nvme0c1n1")) == 3  # a path: itself alone
    assert first_io.completed(_Here(), str(block / "sda")) == 100
    alive = os.getpid()
    monkeypatch.setattr(first_io, "LOOK_S", 0.3)
    rc, _ = _run(first_io.script(str(device), 15, alive, str(tmp_path / "rc")))
    assert rc == 1  # nothing moved: the look ran out
    (block / "nvme0c1n1" / "stat").write_text(_stat(2, 2))  # one write on the second path
    rc, seconds = _run(first_io.script(str(device), 15, alive, str(tmp_path / "rc")))
    assert rc == 0 and seconds < 2
    assert first_io.completed(_Here(), str(tmp_path / "no-such-disk")) is None
