"""`sanlab run scenarios/smoke.yaml`: every transport x soft-RDMA combination, verified.

One boot of two VMs under TCG; each combination runs short fio jobs with
crc32c verification against the real kernel (or tgt) target.  A ``pass``
must have read back and checked every byte the job wrote: the records say
how many (``verified_bytes``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import pytest

from support import REPO

pytestmark = pytest.mark.vm
# What smoke.yaml's workloads write and read back per job (verify_size).
VERIFIED = {"randwrite": 8 << 20, "randread": 4 << 20}

EXPECTED = {
    ("iscsi", "lio", "eth", None),
    ("iscsi", "tgt", "eth", None),
    ("iser", "lio", "roce", "rxe"),
    ("iser", "tgt", "iwarp", "siw"),
    ("srp", "lio", "roce", "rxe"),
    ("nvme-tcp", "nvmet", "eth", None),
    ("nvme-rdma", "nvmet", "roce", "rxe"),
    ("nvme-rdma", "nvmet", "iwarp", "siw"),
}


@pytest.fixture(scope="module")
def smoke(guest_image, tmp_path_factory):
    out = tmp_path_factory.mktemp("smoke")
    result = subprocess.run(
        [sys.executable, "-m", "sanlab", "run", "scenarios/smoke.yaml", "--out", str(out), "--json"],
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=REPO,
    )
    return out, result


def test_run_succeeds(smoke):
    _, result = smoke
    assert result.returncode == 0, result.stderr[-4000:]


def test_every_combination_reports_iops_with_verify_pass(smoke):
    out, result = smoke
    records = json.loads(result.stdout)["results"]
    combos = {(r["transport"], r["target_stack"], r["fabric"], r["rdma_driver"]) for r in records}
    assert combos == EXPECTED
    failed = [
        f"{r['target_stack']} {r['transport']} {r['fabric']}: {r['error']}" for r in records if r["error"]
    ]
    assert not failed, "\n".join(failed)
    for r in records:
        assert r["mode"] == "emulated"
        assert r["iops"] > 0 and r["verify"] == "pass", r
        assert r["verified_bytes"] == VERIFIED[r["rw"]] * r["numjobs"], r
        if r["note"]:  # a target that was run again after its link stalled: pass, but be seen
            warnings.warn(f"{r['target_stack']} {r['transport']} {r['fabric']}: {r['note']}", stacklevel=1)
    document = json.loads((out / "results.json").read_text())
    assert document["results"] == records
    assert document["run"]["status"] == "complete" and document["run"]["planned_points"] == len(records)


def test_a_rerun_into_the_same_folder_is_refused_before_booting(smoke):
    out, _ = smoke
    before = (out / "results.json").read_bytes()
    again = subprocess.run(
        [sys.executable, "-m", "sanlab", "run", "scenarios/smoke.yaml", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert again.returncode == 1 and "is not empty" in again.stderr
    assert (out / "results.json").read_bytes() == before


def test_output_files_have_one_mode(smoke):
    """Every writer (the records, the captures, fio's own output, the logs) gives its files
    one mode, the process's (0o666 less the umask): none readable more widely, or less."""
    out, _ = smoke
    files = [p.relative_to(out) for p in out.rglob("*") if p.is_file()]
    kinds = {f.parts[0] if len(f.parts) > 1 else f.suffix for f in files}
    assert {".json", ".pcap", "fio", "logs"} <= kinds, sorted(map(str, files))  # not one file alone
    umask = os.umask(0o022)
    os.umask(umask)
    modes = {str(f): oct((out / f).stat().st_mode & 0o777) for f in files}
    assert set(modes.values()) == {oct(0o666 & ~umask)}, modes


def test_pcaps_logs_and_raw_fio_are_written(smoke):
    out, _ = smoke
    for link in ("roce", "iwarp"):
        pcap = out / f"{link}.pcap"
        assert pcap.stat().st_size > 10_000
        assert pcap.read_bytes()[:4] in (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4")
    assert len(list((out / "fio").glob("*.json"))) == 24
    assert (out / "logs" / "target.dmesg").read_text()


def test_nothing_is_left_behind(smoke):
    # Only this run's lab (run-smoke-PID): other VM tests may have labs up beside it.
    leftovers = subprocess.run(["pgrep", "-f", "labs/run-smoke"], capture_output=True, text=True)
    assert leftovers.stdout == ""
