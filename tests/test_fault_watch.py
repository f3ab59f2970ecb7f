"""Watching a faulted run: the cable must carry packets again, and the I/O must move again.

Under TCG an emulated NIC's transmit queue can stall when its interface
goes down and up (the guest logs NETDEV WATCHDOG); no I/O can come back
over it, and fio used to wait out its 900 s limit.  ``faults.inject`` now
pings across the link after a flap and stops the run at once, naming the
link, so that ``sanlab run``'s link doctor can revive it and run the target
again.  Likewise a transport that never comes back (NVMe/RDMA over rxe whose
connection manager stopped receiving, seen under TCG) no longer holds fio for
900 s: once the faults are over, a device that completes no I/O for
``NO_PROGRESS_S`` stops the run.  These tests drive both with scripted hosts.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

import pytest

from sanlab.scenarios.schema import Fault
from sanlab.targets import faults
from sanlab.targets.host import StackError
from support import Reply


@dataclass
class ScriptedEnd:
    """A host that flaps its interface on cue and answers pings only when ``carries``."""

    name: str
    carries: bool = True
    scripts: list[str] = field(default_factory=list)

    def run(self, command: str | list[str], timeout: float = 60.0, stdin: str = "") -> Reply:
        text = command if isinstance(command, str) else shlex.join(command)
        self.scripts.append(text)
        if "ip link set" in text or "netem" in text:
            return Reply(stdout="100.0\n102.0\n")
        if "ping" in text:
            return Reply(0 if self.carries else 1)
        return Reply()


def _ends(carries: bool, interface: str = "roce") -> tuple[ScriptedEnd, ScriptedEnd, list[faults.LinkEnd]]:
    near, far = ScriptedEnd("initiator", carries), ScriptedEnd("target")
    ends = [faults.LinkEnd(near, interface, "10.0.0.1"), faults.LinkEnd(far, interface, "10.0.0.2")]
    return near, far, ends


FLAP = Fault.model_validate({"at": 2, "link": "roce", "for": 2})


def test_a_replugged_cable_that_carries_packets_gives_its_window():
    near, far, ends = _ends(carries=True)
    assert faults.inject(ends, FLAP) == faults.Window(100.0, 102.0)
    (ping,) = [s for s in near.scripts if "ping" in s]
    assert "-I roce 10.0.0.2" in ping  # out of the near end's interface, to the far end's address
    assert not any("ping" in s for s in far.scripts)


def test_a_replugged_cable_that_carries_nothing_stops_the_run_naming_the_link():
    _, _, ends = _ends(carries=False)
    with pytest.raises(StackError) as err:
        faults.inject(ends, FLAP)
    message = str(err.value)
    assert "link roce carries no packets after it came back up" in message
    assert "initiator got no answer from 10.0.0.2 over roce" in message


def test_a_burst_is_not_followed_by_a_ping():
    near, _, ends = _ends(carries=False)  # loss may well eat a ping: it is not asked for
    burst = Fault.model_validate({"at": 2, "link": "roce", "for": 2, "action": "loss", "loss": 5})
    faults.inject(ends, burst)
    assert not any("ping" in s for s in near.scripts)


def test_the_interface_reaches_the_ping_as_one_word():
    hostile = "roce; reboot"
    script = faults.carries_script(hostile, "10.0.0.2")
    assert shlex.quote(hostile) in script and "-I roce; reboot" not in script


def test_progress_stalls_only_after_standing_still_long_enough():
    watch = faults.Progress()
    assert not watch.stalled(100, now=0.0)
    assert not watch.stalled(100, now=faults.NO_PROGRESS_S - 1)
    assert not watch.stalled(101, now=faults.NO_PROGRESS_S)  # it moved: the clock starts again
    assert not watch.stalled(101, now=2 * faults.NO_PROGRESS_S - 1)
    assert watch.stalled(101, now=2 * faults.NO_PROGRESS_S)
    assert not faults.Progress().stalled(None, now=1e9)  # no count, no verdict


@dataclass
class FioHost:
    """fio still runs; the device has completed ``completed`` reads and as many writes."""

    completed: int = 7
    alive: bool = True
    name: str = "initiator"
    scripts: list[str] = field(default_factory=list)

    def run(self, command: str | list[str], timeout: float = 60.0, stdin: str = "") -> Reply:
        text = command if isinstance(command, str) else shlex.join(command)
        self.scripts.append(text)
        if not self.alive:
            return Reply(3)
        if "/stat" not in text:
            return Reply()
        return Reply(stdout=f"{2 * self.completed}\n")  # first_io.count_script: reads + writes


def test_a_poll_reads_the_block_layers_completed_reads_and_writes():
    host = FioHost(completed=7)
    assert faults._poll(host, 42, "/dev/nvme0n1") == (True, 14)
    assert faults._poll(FioHost(alive=False), 42, "/dev/nvme0n1") == (False, None)
    assert faults._poll(FioHost(), 42, None) == (True, None)  # nothing to watch


def test_a_device_that_stands_still_after_the_faults_stops_the_run(monkeypatch):
    clock = iter(range(0, 10_000, 10))
    monkeypatch.setattr(faults.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(faults.time, "sleep", lambda s: None)
    with pytest.raises(StackError) as err:
        faults._wait(FioHost(), 42, deadline=9_000.0, device="/dev/nvme0n1")
    assert "no I/O completed on /dev/nvme0n1" in str(err.value)
    assert "did not come back" in str(err.value)


def _completed(disk: str) -> int:
    fields = open(f"/sys/block/{disk}/stat").read().split()  # noqa: SIM115 - the kernel's, whole
    return int(fields[0]) + int(fields[4])


class _Here:
    """A host that is this machine: its scripts run in bash here."""

    name = "here"

    def run(self, command: str, timeout: float = 60.0, stdin: str = "") -> Reply:
        import subprocess

        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=timeout)
        return Reply(done.returncode, done.stdout, done.stderr)


@pytest.mark.subprocess  # the poll runs in a real shell, on this machine's own disk and processes
def test_a_poll_counts_what_a_linked_device_completed_while_fio_runs_and_not_after(tmp_path):
    """Behaviour, not the script's text: the count is the block layer's reads plus writes
    completed on the device a path names through links (/dev/disk/by-id/... are links), read
    while the shell's child runs; once it has ended the poll says so and counts nothing."""
    import os
    import signal
    import subprocess
    from pathlib import Path

    disks = [d.name for d in Path("/sys/block").iterdir() if Path(f"/dev/{d.name}").is_block_device()]
    disk = max(disks, key=_completed)  # the busiest: a count of 0 would tell little
    (tmp_path / "by-id").mkdir()
    link = tmp_path / "by-id" / "disk"
    link.symlink_to(tmp_path / "hop")
    (tmp_path / "hop").symlink_to(f"/dev/{disk}")  # two links deep, as udev's can be
    # Its child stands for fio; its own group, so both are ended together.
    shell = subprocess.Popen(["/bin/sh", "-c", "sleep 30; true"], start_new_session=True)
    try:
        before = _completed(disk)
        running, count = faults._poll(_Here(), shell.pid, str(link))
        after = _completed(disk)
        assert running and count is not None and before <= count <= after, (before, count, after)
        assert faults._poll(_Here(), shell.pid, str(tmp_path / "no-such-disk")) == (True, None)
    finally:
        os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()
    assert faults._poll(_Here(), shell.pid, str(link)) == (False, None)


@pytest.mark.subprocess  # the poll runs in a real shell, beside a real unreaped process
def test_a_poll_learns_of_fios_end_though_its_shell_is_left_a_zombie(tmp_path):
    """The agent reaps a spawned shell only at its next command: the poll must not take that
    zombie for a running fio and wait out its POLL_S (it did, a second or two a point)."""
    import os
    import signal
    import subprocess
    import time

    done = tmp_path / "x.rc"
    shell = subprocess.Popen(["/bin/sh", "-c", f"sleep 0.6; echo 0 > {done}"])  # not waited for
    try:
        began = time.monotonic()
        running = subprocess.run(["bash", "-c", faults.poll_script(shell.pid, str(done))], timeout=30)
        assert running.returncode == 3  # fio (sleep) ended within the poll, and was seen to
        assert time.monotonic() - began < faults.POLL_S - 0.5
        assert subprocess.run(["bash", "-c", f"kill -0 {shell.pid}"]).returncode == 0  # a zombie
    finally:
        shell.wait()
    slow = subprocess.Popen(["/bin/sh", "-c", f"sleep 20; echo 0 > {done}.2"], start_new_session=True)
    try:
        began = time.monotonic()
        still = subprocess.run(["bash", "-c", faults.poll_script(slow.pid, f"{done}.2")], timeout=30)
        assert still.returncode == 0 and time.monotonic() - began >= faults.POLL_S - 0.2
    finally:
        os.killpg(slow.pid, signal.SIGKILL)  # its own group: the shell and its sleep
        slow.wait()


def test_the_kept_directions_are_the_workloads_own():
    assert faults.directions("randwrite") == faults.directions("write") == {"1"}
    assert faults.directions("randread") == faults.directions("read") == {"0"}
    assert faults.directions("randrw") == faults.directions("rw") == {"0", "1"}
    log = "1000, 5, 1, 4096, 0\n2000, 5, 0, 4096, 0\n\n3500, 5, 1, 4096, 0, 0x0000\n"
    assert faults.completion_times(log, faults.directions("randwrite")) == [1.0, 3.5]
    assert faults.completion_times(log, faults.directions("randrw")) == [1.0, 2.0, 3.5]


@pytest.mark.subprocess  # fio itself, on a file here
def test_a_verified_writes_read_back_is_not_counted_as_its_io(tmp_path):
    """fio's completion log of a verified write holds its writes and then the read-back:
    only the writes are the workload, so a fault after the last write sees no I/O come back
    (recovery_s None), however long the read-back runs on."""
    import subprocess

    from support import require_tool

    fio = require_tool("fio")
    data, lat = tmp_path / "data", tmp_path / "lat"
    subprocess.run(
        [fio, "--name=w", f"--filename={data}", "--size=256k", "--bs=4k", "--rw=randwrite"]
        + ["--verify=crc32c", "--do_verify=1", f"--write_lat_log={lat}", "--log_avg_msec=0"]
        + ["--log_unix_epoch=1", "--output-format=json", "--verify_state_save=0"],
        check=True,
        capture_output=True,
        timeout=120,
        cwd=tmp_path,  # nothing of fio's lands in the directory the tests were started from
    )
    log = "".join(p.read_text() for p in tmp_path.glob("lat_lat.*.log"))
    writes = faults.completion_times(log, faults.directions("randwrite"))
    reads = faults.completion_times(log, faults.directions("randread"))
    assert len(writes) == len(reads) == 64 and max(writes) <= min(reads)
    after_the_writes = faults.Window(down=max(writes) + 0.001, up=max(writes) + 0.002)
    run = faults.FaultedRun("{}", 0, "", [after_the_writes], writes)
    assert run.recovery_s() is None
    # nor is the point a pass: its fault met none of the workload's I/O
    assert run.missed() is not None and "tested against no I/O" in (run.missed() or "")
    during_the_writes = faults.Window(down=min(writes), up=max(writes) + 0.002)
    assert faults.FaultedRun("{}", 0, "", [during_the_writes], writes).missed() is None


def test_a_fault_that_met_no_io_says_how_early_the_io_ended():
    window = faults.Window(down=110.0, up=113.0)
    early = faults.FaultedRun("{}", 0, "", [window], [100.0, 101.0, 108.75])
    assert "1.25 s before the fault began" in (early.missed() or "")
    assert faults.FaultedRun("{}", 0, "", [window], [100.0, 110.5]).missed() is None  # I/O met it
    assert faults.FaultedRun("{}", 0, "", [window], []).missed() is None  # no log: not judged here
    assert faults.FaultedRun("{}", 0, "", [], [100.0]).missed() is None  # no fault
    # two faults: I/O met the first and ended before the second, which tested nothing
    second = faults.Window(down=120.0, up=123.0)
    late = faults.FaultedRun("{}", 0, "", [window, second], [100.0, 110.5, 114.0])
    assert "6.00 s before the last fault began" in (late.missed() or "")


def test_a_faulted_verified_job_is_paced_past_its_last_faults_start():
    """However fast the host, the verified blocks are spread until a second past the last fault's
    start: in the workload's direction only, so a write's read-back runs at full speed."""
    from dataclasses import replace

    from sanlab.scenarios.loader import load_scenario
    from sanlab.targets.points import job_for, matrix
    from support import SCENARIOS

    burst = load_scenario(SCENARIOS / "burst.yaml")  # 16 MiB of 4 KiB writes; faults at 3 s and 8 s
    point = matrix(burst)[0].points[0]
    assert [f.at for f in point.faults] == [3.0, 8.0]
    assert "--rate_iops=,455" in job_for(point, "/dev/x").argv()  # 4,096 blocks over 9 s
    reads = replace(point, rw="randread")
    assert "--rate_iops=455," in job_for(reads, "/dev/x").argv()
    unfaulted = job_for(replace(point, faults=()), "/dev/x").argv()
    assert not any(a.startswith("--rate_iops") for a in unfaulted)


def test_io_that_comes_back_and_stops_again_is_told_and_a_steady_return_is_not():
    """recovery_s counts to the first completion after the cable returns; a transport that
    completes the I/O in flight and then stops to reconnect (a 6.1 run: I/O back 0.22 s after
    the flap, the NVMe reconnect 15 s later) would pass as quick.  The longest pause after the
    return must be no stall, measured against the longest pause before the fault."""
    window = faults.Window(110.0, 112.0)
    steady = [100.0 + 0.5 * k for k in range(20)] + [112.22 + 0.5 * k for k in range(20)]
    assert faults.FaultedRun("{}", 0, "", [window], steady).stalled_again() is None
    stalled = [100.0 + 0.5 * k for k in range(20)] + [112.22, 112.4, 127.2, 127.7, 128.2]
    run = faults.FaultedRun("{}", 0, "", [window], stalled)
    assert run.recovery_s() == 0.22
    told = run.stalled_again()
    assert told is not None and "stopped for 14.80 s from 0.40 s after it" in told and "0.50 s" in told
    # a slow emulated device whose usual pause is already long: 3 s is not a stall there
    slow = [100.0, 101.0, 102.0, 104.0, 109.0, 112.5, 115.5, 118.0]
    assert faults.FaultedRun("{}", 0, "", [window], slow).stalled_again() is None
    # I/O that never completed after the fault, or no fault: nothing to judge
    assert faults.FaultedRun("{}", 0, "", [window], steady[:20]).stalled_again() is None
    assert faults.FaultedRun("{}", 0, "", [], stalled).stalled_again() is None
