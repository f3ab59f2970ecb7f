"""fio in the background, watched (targets/faults.py ``run_watched``), on this machine.

Every verified point runs this way, so that a transport that stalls costs
``NO_PROGRESS_S`` rather than the initiator's own timeouts.  Here the host is
this machine itself: the same shell scripts a guest runs, real fio on a
scratch file, and a run stopped early must take fio (its whole process
group) with it and leave no file behind.
"""

from __future__ import annotations

import glob
import json
import subprocess
import time
from dataclasses import dataclass

import pytest

from sanlab.targets import faults
from sanlab.targets.host import StackError
from support import Reply, require_tool

pytestmark = pytest.mark.subprocess  # runs fio (or a shell) on this machine


@dataclass
class ThisMachine:
    """A Host that is this machine: bash for scripts, a new session for what is spawned,
    as the guest agent does."""

    name: str = "here"

    def run(self, command: str | list[str], timeout: float = 60.0, stdin: str = "") -> Reply:
        argv = ["bash", "-c", command] if isinstance(command, str) else command
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout)
        return Reply(done.returncode, done.stdout, done.stderr)

    def spawn(self, command: str, log: str = "/dev/null") -> int:
        with open(log, "ab") as out:
            child = subprocess.Popen(
                ["/bin/sh", "-c", command],
                stdout=out,
                stderr=out,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return child.pid

    def put(self, path: str, data: bytes, mode: int = 0o644) -> None:
        raise AssertionError("not used")

    def get(self, path: str) -> bytes:
        raise AssertionError("not used")


def _leftovers() -> list[str]:
    return glob.glob("/tmp/sanlab-faulted-*")


def test_a_watched_fio_gives_its_json_and_exit_code_and_leaves_no_file(tmp_path):
    fio = require_tool("fio")
    scratch = tmp_path / "scratch"
    argv = [fio, "--name=w", f"--filename={scratch}", "--size=1m", "--bs=4k", "--rw=write"]
    argv += ["--verify=crc32c", "--verify_state_save=0", "--output-format=json"]
    before = _leftovers()
    run = faults.run_watched(ThisMachine(), argv, timeout=120, device=None)
    assert run.exit_code == 0, run.stderr
    (job,) = json.loads(run.output)["jobs"]
    assert job["write"]["io_bytes"] == 1 << 20
    assert run.windows == [] and run.completions == []  # nothing to time without a fault
    assert _leftovers() == before


def test_a_failing_fio_gives_its_exit_code_and_what_it_said(tmp_path):
    fio = require_tool("fio")
    argv = [fio, "--name=w", f"--filename={tmp_path / 'scratch'}", "--size=1m", "--rw=sideways"]
    run = faults.run_watched(ThisMachine(), argv + ["--output-format=json"], timeout=120, device=None)
    assert run.exit_code != 0
    assert "sideways" in run.stderr  # fio's complaint, from the spawned command's log


def test_a_run_stopped_early_takes_its_whole_process_group_with_it():
    marker = f"{time.time_ns() % 10**6}.5"  # a sleep nobody else runs
    before = _leftovers()
    with pytest.raises(StackError, match="did not finish in time"):
        # bash -c takes fio's log options as its own $0 and $1; sleep runs on
        faults.run_watched(ThisMachine(), ["bash", "-c", f"sleep {marker}"], timeout=1, device=None)
    still = subprocess.run(["pgrep", "-f", f"^sleep {marker}$"], capture_output=True, text=True)
    assert still.stdout == "", "the spawned command outlived the run"
    assert _leftovers() == before
