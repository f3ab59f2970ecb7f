"""Ctrl-C in the middle of ``sanlab run``: every finished point is kept, the run says it was cut.

A real run (two VMs, NVMe/RDMA over rxe) is interrupted with SIGINT once
its first point is in results.json.  The file must then be valid, hold
every point that finished, say ``interrupted``, and the VMs must be gone.
A second run into the same folder is refused, so the two never mix; and
``sanlab run --resume`` runs only the missing points, keeping the others.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
import yaml

from sanlab.scenarios.results.records import ResultRecord
from support import INTERRUPTIBLE, REPO, SCENARIOS

pytestmark = pytest.mark.vm


def _scenario(tmp_path):
    data = yaml.safe_load((SCENARIOS / "pair-rxe.yaml").read_text())
    data["capture"] = False
    data["workloads"] = [
        {
            "rw": "randwrite",
            "bs": ["4k", "16k", "64k"],  # three points: one kept, the rest resumed
            "iodepth": 4,
            "verify": "crc32c",
            "verify_size": "4m",
        }
    ]
    path = tmp_path / "interrupt-me.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _records(results):
    try:
        return json.loads(results.read_text())["results"]
    except (OSError, ValueError, KeyError):
        return []


def test_an_interrupted_run_keeps_its_finished_points(guest_image, tmp_path):
    scenario, out = _scenario(tmp_path), tmp_path / "out"
    results = out / "results.json"
    run = subprocess.Popen(
        [sys.executable, "-m", "sanlab", "run", str(scenario), "--out", str(out)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **INTERRUPTIBLE,
    )
    deadline = time.monotonic() + 600
    while not _records(results) and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert run.poll() is None, run.communicate()[1][-3000:]
    run.send_signal(signal.SIGINT)
    _, stderr = run.communicate(timeout=180)
    assert run.returncode == 130, stderr[-3000:]
    document = json.loads(results.read_text())
    assert document["run"]["status"] == "interrupted" and document["run"]["planned_points"] == 3
    finished = [ResultRecord.model_validate(r) for r in document["results"]]
    assert 1 <= len(finished) < 3
    assert all(r.verify == "pass" and r.verified_bytes == 4 << 20 for r in finished)
    assert f"{len(finished)} of 3 points" in stderr
    left = subprocess.run(["pgrep", "-f", "labs/run-interrupt-me"], capture_output=True, text=True)
    assert left.stdout == ""

    again = subprocess.run(
        [sys.executable, "-m", "sanlab", "run", str(scenario), "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 1 and "is not empty" in again.stderr
    assert json.loads(results.read_text()) == document
    (out / "notes.txt").write_text("mine")
    forced = subprocess.run(
        [sys.executable, "-m", "sanlab", "run", str(scenario), "--out", str(out), "--force"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert forced.returncode == 1 and "did not write (notes.txt)" in forced.stderr
    assert (out / "notes.txt").read_text() == "mine" and json.loads(results.read_text()) == document

    (out / "notes.txt").unlink()
    resumed = subprocess.run(
        [sys.executable, "-m", "sanlab", "run", "--resume", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"{len(finished)} of 3 points are kept, {3 - len(finished)} to run" in resumed.stderr
    whole = json.loads(results.read_text())
    assert whole["run"]["status"] == "complete" and whole["run"]["resumed_after"] == len(finished)
    records = [ResultRecord.model_validate(r) for r in whole["results"]]
    assert [r.bs for r in records] == [4096, 16384, 65536]  # each point once, in order
    assert records[: len(finished)] == finished  # the kept points, as they were
    assert all(r.verify == "pass" and r.verified_bytes == 4 << 20 for r in records)
