"""A ``pass`` is earned: real fio on a file on this host, judged as a run's points are.

The runs are tiny (a few MiB) and use the same argument vectors the
initiator runs on a VM; only the device is a local file.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sanlab.targets.fio import FioJob, judge, parse
from support import require_tool

pytestmark = pytest.mark.subprocess  # runs fio (or a shell) on this machine

MIB = 1 << 20


def _device(tmp_path: Path, size: int = 16 * MIB) -> str:
    path = tmp_path / "lun.img"
    with open(path, "wb") as handle:
        handle.truncate(size)
    return str(path)


def _fio(argv: list[str]) -> subprocess.CompletedProcess[str]:
    require_tool("fio")
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def _judged(job: FioJob, argv: list[str] | None = None):
    run = _fio(argv or job.argv())
    return judge(job, run.returncode, parse(run.stdout, job.rw))


@pytest.mark.parametrize("numjobs", [1, 2])
def test_a_size_bounded_verified_write_reads_back_every_byte(tmp_path, numjobs):
    job = FioJob(_device(tmp_path), "randwrite", 4096, 4, numjobs, 3.0, True, 4 * MIB)
    check = _judged(job)
    assert check.verify == "pass" and check.problem is None
    assert check.verified_bytes == job.covered_bytes == 4 * MIB * numjobs


def test_a_read_back_cut_short_is_not_a_pass(tmp_path):
    """What the smoke run did before: a runtime that ends before fio has read everything back."""
    job = FioJob(_device(tmp_path), "randwrite", 4096, 1, 1, 1.0, True, 8 * MIB)
    cut_short = job.argv() + ["--runtime=1", "--rate_iops=400"]  # 2048 writes need 5 s at 400/s
    check = _judged(job, cut_short)
    assert check.verify == "fail"
    assert check.verified_bytes is not None and check.verified_bytes < job.covered_bytes
    assert "cut short" in (check.problem or "") or "wrote" in (check.problem or "")


def test_a_verified_read_checks_what_the_fill_wrote_and_catches_corruption(tmp_path):
    device = _device(tmp_path)
    job = FioJob(device, "randread", 4096, 4, 1, 3.0, True, 4 * MIB)
    assert _fio(job.fill_argv()).returncode == 0
    assert _judged(job).verify == "pass"
    with open(device, "r+b") as handle:  # one block of garbage where fio wrote block 100
        handle.seek(100 * 4096)
        handle.write(bytes(range(256)) * 16)
    check = _judged(job)
    assert check.verify == "fail" and "error" in (check.problem or "")


def test_an_unverified_run_is_off_and_claims_nothing(tmp_path):
    job = FioJob(_device(tmp_path), "randread", 4096, 1, 1, 1.0, False, 4 * MIB)
    check = _judged(job)
    assert check.verify == "off" and check.verified_bytes is None
