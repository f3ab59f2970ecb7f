"""How a run's guests started is read from the QEMUs it started (benchmarks/guest_starts.py):
the census must read sanlab's own command lines, and a restore that fell back to a cold boot
must count as cold, never as restored."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sanlab.emulator import snapshots
from sanlab.emulator.images import Image
from sanlab.emulator.qemu import NicSpec, Vm, VmSpec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import guest_starts  # noqa: E402
from guest_starts import Started, census, guest_start, summary  # noqa: E402

QEMU = "/usr/bin/qemu-system-x86_64"


def _argv(name: str, run_dir: Path, incoming: bool) -> list[str]:
    nics = [NicSpec("fabric", "52:54:00:00:00:01", run_dir / "a.sock", run_dir / "b.sock")]
    vm = Vm(VmSpec(name, nics=nics), Image("k", Path("/nonexistent")), "tcg", run_dir, QEMU)
    vm.incoming = incoming
    return vm.command()


@pytest.mark.parametrize("incoming", [True, False])
def test_a_guests_own_command_line_says_which_way_it_started(tmp_path, incoming):
    run_dir = tmp_path / "test-lab"
    assert guest_start(_argv("initiator", run_dir, incoming)) == ("initiator", "test-lab", incoming)


def test_a_snapshots_template_is_a_save_and_other_processes_are_nothing(tmp_path):
    template = snapshots._template_spec(snapshots.Shape("tcg", "max", 1, 1024, 2, ()), tmp_path)
    argv = Vm(template, Image("k", Path("/nonexistent")), "tcg", tmp_path, QEMU).command()
    name, _, incoming = guest_start(argv) or ("", "", True)
    assert name == guest_starts.TEMPLATE == snapshots.TEMPLATE_HOST and not incoming
    assert guest_start(["/usr/bin/python3", "-m", "pytest"]) is None
    assert guest_start([QEMU, "-accel", "kvm", "-serial", "file:x"]) is None  # the KVM probe
    assert guest_start([]) is None


def _start(name: str, lab: str, incoming: bool, first: float, last: float, parent: int = 1000) -> Started:
    return Started(0, parent, name, lab, incoming, first, last)


def test_a_restore_that_fell_back_counts_as_cold_not_restored():
    starts = [
        _start("initiator", "lab-a", True, 0.0, 100.0),
        _start("target", "lab-a", True, 0.0, 3.0),  # did not restore: stopped at 3 s
        _start("target", "lab-a", False, 3.4, 100.0),  # and booted cold at once
        _start("initiator", "lab-b", False, 5.0, 50.0),  # a lab that boots cold (a management NIC)
        _start("initiator", "lab-a", True, 101.0, 150.0),  # the same lab up again, restored
        _start("initiator", "lab-c", True, 0.0, 10.0),
        _start("initiator", "lab-c", False, 40.0, 90.0),  # long after: a new lab, not a fallback
        _start("initiator", "lab-d", True, 0.0, 1.0, parent=2000),  # a `lab up` process, stopped
        _start("initiator", "lab-d", False, 2.0, 9.0, parent=2001),  # the next one, cold: a new lab
        _start(guest_starts.TEMPLATE, ".k-1", False, 0.0, 30.0),
    ]
    assert census(starts) == {"restored": 4, "cold": 4, "fell back": 1, "saves": 1}
    lines = summary(starts)
    assert lines[0].startswith("guest starts: 4 restored, 4 cold (1 after a restore that failed), 1 template")
    assert "  lab-a: 2 restored, 1 cold (1 fell back)" in lines and not any(".k-1" in line for line in lines)


def test_a_process_seen_before_its_exec_is_looked_at_again(monkeypatch, tmp_path):
    """Popen forks, then execs QEMU: a sample between the two sees the parent's program, and
    that process (same PID and start time) must still be counted once it runs QEMU."""
    root, child = 10, 11
    running = {"comm": "python3", "argv": ["/usr/bin/python3"]}
    monkeypatch.setattr(guest_starts, "_pids", lambda: [root, child, 12])

    def stat(pid: int) -> tuple[str, int, int]:
        return (running["comm"], root, 777) if pid == child else ("bash", 1, 5)

    monkeypatch.setattr(guest_starts, "_stat", stat)
    monkeypatch.setattr(guest_starts, "_argv", lambda pid: running["argv"] if pid == child else ["bash"])
    watch = guest_starts.Watch(root)
    watch.sample(1.0)
    assert watch.starts() == []
    running.update(comm="qemu-system-x86", argv=_argv("target", tmp_path / "lab", incoming=True))
    watch.sample(2.0)
    watch.sample(3.0)
    assert [(s.pid, s.parent, s.name, s.incoming, s.first, s.last) for s in watch.starts()] == [
        (child, root, "target", True, 2.0, 3.0)
    ]


def test_only_the_runs_own_processes_are_counted(monkeypatch, tmp_path):
    monkeypatch.setattr(guest_starts, "_pids", lambda: [30])
    monkeypatch.setattr(guest_starts, "_stat", lambda pid: ("qemu-system-x86", 1, 9))
    monkeypatch.setattr(guest_starts, "_argv", lambda pid: _argv("target", tmp_path / "lab", incoming=False))
    watch = guest_starts.Watch(10)  # another user's QEMU, whose parent is init
    watch.sample(1.0)
    assert watch.starts() == []
