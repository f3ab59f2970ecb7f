"""Never destroy what sanlab did not make: user files, symlinks, and strangers' processes.

Each case plants what a careless (or malicious) user could leave where sanlab
writes or signals, runs the real command, and then checks that the plant is
untouched: the same bytes, the same symlink target, the same process alive.
No VM is needed: every refusal must come before anything would boot.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from sanlab.main import cli
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.results.outdir import MANIFEST, OutputFolder, claim_fresh
from sanlab.scenarios.results.records import RunJournal
from support import REPO, SCENARIOS


def sanlab(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sanlab", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


# --- run --out --force ------------------------------------------------------------


def test_force_keeps_a_users_captures_in_a_folder_sanlab_never_wrote(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    for name in ("customer-a.pcap", "customer-b.pcap"):
        (out / name).write_bytes(b"customer data")
    (out / "logs").mkdir()
    (out / "logs" / "app.log").write_text("mine")
    result = invoke("run", str(SCENARIOS / "smoke.yaml"), "--out", str(out), "--force")
    assert result.exit_code == 1 and "holds no sanlab manifest" in result.output
    assert (out / "customer-a.pcap").read_bytes() == b"customer data"
    assert (out / "logs" / "app.log").read_text() == "mine"


def _previous_run(out: Path) -> OutputFolder:
    """A folder as a finished run leaves it: results, fio JSON and a capture, all in the manifest."""
    folder = claim_fresh(out, "--out", force=False)
    journal = RunJournal(folder, "smoke", 1, lambda: folder.adopt("fio"))
    (out / "fio").mkdir()
    (out / "fio" / "p1.json").write_text("{}")
    folder.write_text("fabric.pcap", "pcap")
    journal.finish("complete")
    return folder


def test_force_replaces_a_previous_run_and_nothing_else(tmp_path):
    out = tmp_path / "out"
    _previous_run(out)
    assert OutputFolder.open(out, "--out").foreign() == []
    claim_fresh(out, "--out", force=True)
    assert sorted(os.listdir(out)) == [MANIFEST]


@pytest.mark.parametrize(
    "plant",
    ["user-file-beside", "user-file-in-fio", "changed-results", "symlinked-results", "user-pcap"],
)
def test_force_refuses_and_deletes_nothing_when_a_run_folder_holds_user_files(tmp_path, plant):
    out, outside = tmp_path / "out", tmp_path / "outside.json"
    outside.write_text("precious")
    _previous_run(out)
    if plant == "user-file-beside":
        (out / "notes.txt").write_text("mine")
    elif plant == "user-file-in-fio":
        (out / "fio" / "mine.json").write_text("mine")
    elif plant == "changed-results":
        (out / "results.json").write_text('{"mine": "edited after the run"}')
    elif plant == "symlinked-results":
        (out / "results.json").unlink()
        (out / "results.json").symlink_to(outside)
    elif plant == "user-pcap":
        (out / "customer.pcap").write_bytes(b"customer")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(SanlabError, match="did not write"):
        claim_fresh(out, "--out", force=True)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert outside.read_text() == "precious"


def test_a_forged_manifest_cannot_name_files_outside_the_folder(tmp_path):
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    out.mkdir()
    victim.write_text("precious")
    info = victim.stat()
    document = {
        "kind": "sanlab output manifest",
        "files": {"../victim.txt": [info.st_size, info.st_mtime_ns]},
    }
    (out / MANIFEST).write_text(json.dumps(document))
    (out / "x").write_text("")
    with pytest.raises(SanlabError, match="outside the folder"):
        claim_fresh(out, "--out", force=True)
    assert victim.read_text() == "precious"


# --- model --report and sweep --out ------------------------------------------------------


def test_report_never_replaces_a_users_file(tmp_path):
    report = tmp_path / "report"
    report.mkdir()
    (report / "table.txt").write_text("my own table")
    result = invoke("model", "--report", str(report))
    assert result.exit_code == 1 and "table.txt is a file sanlab did not write" in result.output
    assert (report / "table.txt").read_text() == "my own table"
    assert not (report / "chart.png").exists()


def test_report_never_writes_through_a_symlink(tmp_path):
    report, outside = tmp_path / "report", tmp_path / "outside.txt"
    report.mkdir()
    outside.write_text("precious")
    (report / "results.json").symlink_to(outside)
    result = invoke("model", "--report", str(report))
    assert result.exit_code == 1 and "results.json is a symlink" in result.output
    assert outside.read_text() == "precious" and (report / "results.json").is_symlink()


@pytest.mark.slow  # seconds of fitting, projecting or waiting
def test_report_replaces_its_own_files_beside_the_users(tmp_path):
    report = tmp_path / "report"
    report.mkdir()
    (report / "mine.txt").write_text("mine")
    assert invoke("model", "--report", str(report)).exit_code == 0
    assert invoke("model", "--report", str(report)).exit_code == 0  # its own files, replaced
    assert (report / "mine.txt").read_text() == "mine"
    assert OutputFolder.open(report, "--report").foreign() == ["mine.txt"]


@pytest.mark.subprocess  # the sweep starts Dask workers
def test_sweep_never_writes_through_a_symlinked_table(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "axes:\n  transport: [nvme-rdma]\n  iodepth: [1, 4]\nfixed:\n  rw: randread\n  bs: 4k\n  numjobs: 1\n"
        "pareto: {iops: max}\n"
    )
    out, outside = tmp_path / "sweep", tmp_path / "outside.csv"
    outside.write_text("precious")
    assert invoke("sweep", str(spec), "--out", str(out), "--serial").exit_code == 0
    (out / "results.csv").unlink()
    (out / "results.csv").symlink_to(outside)
    result = invoke("sweep", str(spec), "--out", str(out), "--serial")
    assert result.exit_code == 1 and "results.csv is a symlink" in result.output
    assert outside.read_text() == "precious"


# --- lab down and keepers ------------------------------------------------------------


@pytest.fixture
def stranger():
    """A process sanlab did not start, as the PID a planted keeper file names."""
    proc = subprocess.Popen(["sleep", "300"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.subprocess  # starts sanlab, a tool or a helper as a process
def test_lab_down_checks_the_name_before_it_reads_or_signals(tmp_path, stranger):
    runtime = tmp_path / "run"
    victim = tmp_path / "victim"
    victim.mkdir()
    planted = victim / "keeper-x-export.json"
    planted.write_text(json.dumps({"pid": stranger.pid, "state": "ready"}))
    result = sanlab("lab", "down", "../../victim", env={"XDG_RUNTIME_DIR": str(runtime)})
    assert result.returncode == 1 and "is not allowed" in result.stderr
    assert stranger.poll() is None and planted.exists()


@pytest.mark.parametrize("started", [None, 12345])
@pytest.mark.subprocess  # starts sanlab, a tool or a helper as a process
def test_a_stale_keeper_file_never_gets_a_stranger_killed(tmp_path, stranger, started):
    runtime = tmp_path / "run"
    env = {"XDG_RUNTIME_DIR": str(runtime)}
    lab_dir = runtime / "sanlab-labs" / "mylab"
    lab_dir.mkdir(parents=True)
    (lab_dir / "state.json").write_text(json.dumps({"hosts": {}}))
    status = {"pid": stranger.pid, "state": "ready", "started": started}
    (lab_dir / "keeper-t-export.json").write_text(json.dumps(status))
    result = sanlab("lab", "down", "mylab", env=env)
    assert result.returncode == 0, result.stderr
    assert stranger.poll() is None


# --- a real host's own iSCSI initiator name ----------------------------------------


@pytest.mark.subprocess  # runs the host recipe through a shell
def test_the_initiator_name_file_of_a_host_is_never_replaced(tmp_path):
    """On a real machine /etc/iscsi/initiatorname.iscsi is the owner's identity (its
    target's ACLs may name it); sanlab's name travels in its own iface record instead."""
    from sanlab.targets.iscsi_initiator import name_file_script

    owned = tmp_path / "initiatorname.iscsi"
    owned.write_text("InitiatorName=iqn.1993-08.org.debian:01:owner\n")
    subprocess.run(["bash", "-c", name_file_script("iqn.2026-11.org.sanlab:x", str(owned))], check=True)
    assert owned.read_text() == "InitiatorName=iqn.1993-08.org.debian:01:owner\n"

    fresh = tmp_path / "fresh guest" / "initiatorname.iscsi"
    fresh.parent.mkdir()
    hostile = "iqn.x:$(touch pwned);`touch pwned`"
    subprocess.run(["bash", "-c", name_file_script(hostile, str(fresh))], check=True, cwd=tmp_path)
    assert fresh.read_text() == f"InitiatorName={hostile}\n"
    assert not (tmp_path / "pwned").exists()


def test_logout_removes_only_the_iface_record_sanlab_made_for_that_target():
    from sanlab.targets.dryrun import DryRunHost
    from sanlab.targets.iscsi_initiator import Session, iface_name, logged_in

    host = DryRunHost("initiator")
    session = Session("iqn.2026-11.org.sanlab:lio", "iqn.2026-11.org.sanlab:initiator", iser=True)
    with logged_in(host, session, "192.0.2.1:3260"):  # type: ignore[arg-type]
        pass
    sent = "\n".join(host.commands)
    assert "initiatorname.iscsi" not in sent
    assert f"-I {iface_name(session.iqn)} -o update -n iface.initiatorname" in sent
    assert "-I default" not in sent and "-I iser " not in sent
    deleted = [line for line in sent.splitlines() if "-m iface" in line and "-o delete" in line]
    assert deleted and all(iface_name(session.iqn) in line for line in deleted)
    assert iface_name(session.iqn) != iface_name("iqn.2026-11.org.sanlab:tgt")


# --- images clean on a cache folder that holds a user's own images/ (issue #45) ---------------


@pytest.mark.parametrize("everything", [False, True], ids=["stale", "all"])
@pytest.mark.parametrize("variable", ["SANLAB_CACHE", "XDG_CACHE_HOME"])
def test_images_clean_keeps_a_users_folders_under_images(tmp_path, monkeypatch, variable, everything):
    from sanlab.emulator import images

    monkeypatch.delenv("SANLAB_CACHE", raising=False)
    monkeypatch.setenv(variable, str(tmp_path / "cache"))
    base = images.images_dir()
    for user in ("holiday-photos", "thesis"):
        (base / user).mkdir(parents=True)
        (base / user / "chapter-1.tex").write_text("years of work\n")
    (base / "IMG_0001.jpg").write_bytes(b"jpeg")
    notes: list[str] = []
    removed = images.clean_images(everything, note=notes.append)
    assert removed == []
    for user in ("holiday-photos", "thesis"):
        assert (base / user / "chapter-1.tex").read_text() == "years of work\n"
    assert (base / "IMG_0001.jpg").read_bytes() == b"jpeg"
    assert len(notes) == 2 and all("not sanlab's" in n for n in notes)
