"""A build's or a snapshot save's mark names the PID that writes there; cleaning keeps the folder
while that PID runs.  ``kill(pid, 0)`` also answers for a zombie (a child that exited but was
not reaped), so a dead build's folder used to be kept for as long as its parent lived.  The one
probe is ``processes.pid_alive``, which reads the process state; these tests make a real zombie.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sanlab.emulator import images, snapshots
from sanlab.emulator.processes import pid_alive

pytestmark = pytest.mark.subprocess


@pytest.fixture
def zombie() -> Iterator[int]:
    """A child that has exited and is not reaped yet: its PID is a zombie until ``wait``."""
    child = subprocess.Popen(["true"])
    state = ""
    for _ in range(500):
        try:
            state = Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            break
        if state == "Z":
            break
        time.sleep(0.01)
    assert state == "Z", f"the child never became a zombie (state {state!r})"
    yield child.pid
    child.wait()


@pytest.fixture
def sleeper() -> Iterator[int]:
    child = subprocess.Popen(["sleep", "60"])
    yield child.pid
    child.kill()
    child.wait()


def test_a_zombie_is_not_alive_and_a_sleeper_is(zombie, sleeper):
    assert not pid_alive(zombie)
    assert pid_alive(sleeper)


def test_a_build_whose_pid_is_a_zombie_is_cleaned_and_a_live_one_kept(tmp_path, monkeypatch, zombie, sleeper):
    monkeypatch.setenv("SANLAB_CACHE", str(tmp_path))
    folder = images.images_dir()
    folder.mkdir(parents=True)
    dead, live = folder / f".build-abc-{zombie}", folder / f".build-def-{sleeper}"
    for build, pid in ((dead, zombie), (live, sleeper)):
        build.mkdir()
        (build / images.BUILD_MARK).write_text(f"{pid}\n")
        (build / "rootfs.tar").write_bytes(b"\0")

    removed = images.clean_images()

    assert removed == [dead] and not dead.exists()
    assert (live / "rootfs.tar").is_file()


def test_a_snapshot_save_whose_pid_is_a_zombie_is_stale_and_a_live_one_is_not(
    tmp_path, monkeypatch, zombie, sleeper
):
    monkeypatch.setenv("SANLAB_CACHE", str(tmp_path))
    folder = snapshots.snapshots_dir()
    folder.mkdir(parents=True, exist_ok=True)
    dead, live = folder / ".k-dead-x1", folder / ".k-live-x2"
    for half, pid in ((dead, zombie), (live, sleeper)):
        half.mkdir()
        (half / snapshots.SAVING).write_text(f"{pid}\n")
        (half / snapshots.RAM_FILE).write_bytes(b"\0")

    removed = snapshots.clean_snapshots(set(), "QEMU 10")

    assert removed == [dead]
    assert (live / snapshots.RAM_FILE).is_file()
