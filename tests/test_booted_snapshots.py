"""Guests restored from a booted snapshot are each themselves, and a bad snapshot costs only a
cold boot with one line (emulator/snapshots.py).

The VM tests restore two guests of one pair from one snapshot and check what a cold boot
would have made different: host names, MACs, the wall clock, the kernel's random numbers
(reseeded through vmgenid) and the RDMA GIDs built on them.  Then they corrupt the snapshot,
and change QEMU's version in its key, and the lab comes up each time.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from sanlab.emulator import snapshots
from sanlab.emulator.accel import choose
from sanlab.emulator.images import Image
from sanlab.emulator.kernel_image import require_scenario_image
from sanlab.emulator.lab import Lab, running_lab
from sanlab.emulator.qemu import NicSpec, VmSpec, qemu_binary
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.loader import parse_scenario
from support import SCENARIOS

SHAPE = snapshots.Shape("tcg", "max", 1, 1024, 1, ())


def test_a_snapshot_key_changes_with_the_image_qemu_and_shape(monkeypatch):
    monkeypatch.setattr(snapshots, "version_line", lambda qemu: "QEMU emulator version 10.0.2")
    image = Image("aaaa", Path("/nonexistent"))
    key = snapshots.snapshot_key(image, "qemu", SHAPE)
    assert key == snapshots.snapshot_key(image, "qemu", SHAPE)
    assert key != snapshots.snapshot_key(Image("bbbb", Path("/nonexistent")), "qemu", SHAPE)
    assert key != snapshots.snapshot_key(image, "qemu", snapshots.Shape("tcg", "max", 1, 1024, 2, ()))
    assert key != snapshots.snapshot_key(image, "qemu", snapshots.Shape("tcg", "max", 1, 1024, 1, ("a=1",)))
    monkeypatch.setattr(snapshots, "version_line", lambda qemu: "QEMU emulator version 10.1.0")
    assert key != snapshots.snapshot_key(image, "qemu", SHAPE)


def test_a_guest_with_a_management_nic_boots_cold():
    assert snapshots.shape_of(VmSpec("h", ssh_port=2222), "tcg") is None
    assert snapshots.shape_of(VmSpec("h"), "tcg") is not None


@pytest.mark.parametrize("value", ["yes", "0", "", "OFF "])
def test_the_switch_takes_on_or_off_only(monkeypatch, value):
    monkeypatch.setenv(snapshots.SWITCH, value)
    with pytest.raises(SanlabError, match=snapshots.SWITCH):
        snapshots.enabled()


def test_off_means_no_snapshot(monkeypatch):
    monkeypatch.setenv(snapshots.SWITCH, "off")
    assert snapshots.ready_snapshot(Image("k", Path("/nonexistent")), "qemu", SHAPE, print) is None


@pytest.mark.parametrize("manifest", ["", "[]", "{}", '{"key": "other"}', "{not json"])
def test_a_snapshot_without_its_own_manifest_is_not_used(tmp_path, manifest):
    snap = snapshots.Snapshot("k1", tmp_path / "k1")
    snap.path.mkdir()
    (snap.path / snapshots.RAM_FILE).write_bytes(b"\0")
    (snap.path / snapshots.MANIFEST).write_text(manifest)
    assert not snapshots._usable(snap)
    (tmp_path / "elsewhere.json").write_text(json.dumps({"key": "k1"}))
    (snap.path / snapshots.MANIFEST).unlink()
    (snap.path / snapshots.MANIFEST).symlink_to(tmp_path / "elsewhere.json")
    assert not snapshots._usable(snap), "a manifest that is a link is not the one sanlab wrote"
    (snap.path / snapshots.MANIFEST).unlink()
    (snap.path / snapshots.MANIFEST).write_text(json.dumps({"key": "k1"}))
    assert snapshots._usable(snap)


def test_identity_finds_each_nic_by_its_template_mac_and_quotes_what_it_sets():
    nics = [NicSpec(f"l{i}", f"52:54:00:00:00:0{i}", Path("a"), Path("b")) for i in range(2)]
    script = snapshots.identity_script(VmSpec("target", nics=nics))
    assert "hostname target" in script and "date -s @" in script
    for i, nic in enumerate(nics):
        assert f"grep -l '{snapshots.template_mac(i)}'" in script and f"address {nic.mac}" in script
    odd = snapshots.identity_script(VmSpec("a'b; touch x"))
    assert "hostname 'a'\"'\"'b; touch x'" in odd


# --- restored guests, for real -----------------------------------------------------------


def _pair(driver: str = "rxe"):
    data = yaml.safe_load((SCENARIOS / f"pair-{driver}.yaml").read_text())
    return parse_scenario(data, f"pair-{driver}.yaml")


def _facts(vm) -> dict[str, str]:
    script = (
        "hostname; cat /sys/class/net/fabric/address; date +%s.%N; "
        "head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'; echo; "
        # Linux 6.1 binds vmgenid as an ACPI driver, 6.12 as a platform driver
        "cat /sys/class/infiniband/*/ports/1/gids/0; ls /sys/bus/*/drivers/vmgenid/ | grep -c QEMUVGID"
    )
    host, mac, clock, random, gid, vmgenid = vm.run(script, timeout=30).check().stdout.split()
    return {"host": host, "mac": mac, "clock": clock, "random": random, "gid": gid, "vmgenid": vmgenid}


def _saved_long_enough_ago(image: Image, scenario, seconds: float) -> None:
    """The pair's snapshot, saved if need be, at least ``seconds`` old: a guest that kept the
    snapshot's frozen clock would then be that far behind."""
    qemu = qemu_binary()
    spec = next(iter(Lab(scenario, "test-plan", Path("/nonexistent")).blueprint.specs.values()))
    snapshot = snapshots.ready_snapshot(image, qemu, snapshots.shape_of(spec, choose(qemu, image)), print)
    assert snapshot is not None
    saved = json.loads((snapshot.path / snapshots.MANIFEST).read_text())["saved"]
    time.sleep(max(0.0, saved + seconds - time.time()))


@pytest.mark.vm
def test_two_guests_of_one_snapshot_are_each_themselves(guest_image):
    lines: list[str] = []
    # The image the lab boots, which $SANLAB_GUEST may make another than guest_image (Debian
    # 13's, benchmarks/debian13_vm_tests.py): aging the default image's snapshot instead left
    # the clock check below without its premise.
    image = require_scenario_image(_pair())
    _saved_long_enough_ago(image, _pair(), 10.0)
    with running_lab(_pair(), "test-restored", lines.append, keep_logs=False) as lab:
        assert all(vm.incoming for vm in lab.vms.values()), lines
        assert all(vm.image == image for vm in lab.vms.values()), "restored another image's snapshot"
        facts = {name: _facts(vm) for name, vm in lab.vms.items()}
        now = time.time()
    a, b = facts["initiator"], facts["target"]
    assert (a["host"], b["host"]) == ("initiator", "target")
    assert a["mac"] == lab.blueprint.interfaces["initiator"][0].mac and b["mac"] != a["mac"]
    assert a["random"] != b["random"] and a["gid"] != b["gid"]
    assert a["vmgenid"] == b["vmgenid"] == "1", "no vmgenid device bound: nothing reseeds the RNG"
    for fact in (a, b):
        assert abs(float(fact["clock"]) - now) < 5, fact  # the snapshot's own clock is 10 s older
    assert any(re.search(r"restored, ready in \d", line) for line in lines), lines


@pytest.mark.vm
def test_a_corrupt_or_foreign_snapshot_costs_a_cold_boot_and_one_line(guest_image, monkeypatch, short_dir):
    scenario = _pair()
    lines: list[str] = []
    with running_lab(scenario, "test-snap-warm", lines.append, keep_logs=False) as lab:
        image = lab.vms["initiator"].image  # the guest's own ($SANLAB_GUEST may name another)
        key = snapshots.snapshot_key(image, lab.vms["initiator"].qemu, _shape_of(lab))
    # A restore that only runs out of time (a loaded machine) boots cold but keeps the snapshot:
    # tried on the shared one, whose manifest a timeout must leave alone.
    shared = snapshots.snapshots_dir() / key / snapshots.MANIFEST
    waited = snapshots.AGENT_AFTER_RESTORE_S
    monkeypatch.setattr(snapshots, "AGENT_AFTER_RESTORE_S", 0.0)
    lines.clear()
    with running_lab(scenario, "test-snap-slow", lines.append, keep_logs=False) as lab:
        assert not any(vm.incoming for vm in lab.vms.values())
    said = [line for line in lines if "did not restore" in line]
    assert len(said) == 2 and all("did not answer within 0 s" in line for line in said), lines
    assert shared.is_file(), "a restore that timed out threw a good snapshot away"
    monkeypatch.setattr(snapshots, "AGENT_AFTER_RESTORE_S", waited)
    # The shared snapshot stays whole: labs of the other test worker restore it meanwhile, and
    # a garbled one would cost them (and the next tests) a cold boot and a save.  The test's own
    # folder holds the same snapshot, garbled, and later the foreign QEMU's.
    ram = _private_copy(snapshots.snapshots_dir() / key, short_dir, monkeypatch)
    manifest = ram.parent / snapshots.MANIFEST
    with ram.open("r+b") as handle:  # the migration stream's header, garbled
        handle.write(b"\xff" * 4096)
    lines.clear()
    with running_lab(scenario, "test-snap-corrupt", lines.append, keep_logs=False) as lab:
        assert not any(vm.incoming for vm in lab.vms.values())
        assert lab.vms["target"].run("hostname", timeout=30).check().stdout.strip() == "target"
    said = [line for line in lines if "did not restore" in line]
    assert len(said) == 2 and all("booting cold" in line for line in said), lines
    assert not manifest.exists(), "a garbled snapshot was kept for the next lab to fail on"
    # another QEMU never finds this QEMU's snapshot: it saves its own, then restores it
    monkeypatch.setattr(snapshots, "version_line", lambda qemu: "QEMU emulator version 99.0.0")
    lines.clear()
    with running_lab(scenario, "test-snap-qemu", lines.append, keep_logs=False) as lab:
        assert lab.vms["initiator"].run("hostname", timeout=30).check().stdout.strip() == "initiator"
    assert sum("once to save it" in line for line in lines) == 1, lines
    other = snapshots.snapshot_key(image, "qemu", _shape_of(lab))
    assert other != key and (short_dir / other / snapshots.MANIFEST).is_file(), lines


@pytest.fixture
def short_dir():
    """A folder of the test's own with a short path: a snapshot being saved holds the template's
    sockets, and a unix socket's path has at most 107 bytes (tmp_path's are too long).  Removed
    with what the test put there."""
    folder = Path(tempfile.mkdtemp(prefix="sanlab-snap-"))
    yield folder
    shutil.rmtree(folder)


def _private_copy(shared: Path, private: Path, monkeypatch) -> Path:
    """``shared`` (a snapshot folder) copied into ``private``, which becomes where snapshots are
    looked for and saved; the copy's RAM file.  Its first 64 MiB are copied and the rest left a
    hole of the same length: the header is what a restore reads first, and what the test garbles."""
    copy = private / shared.name
    copy.mkdir()
    (copy / snapshots.MANIFEST).write_bytes((shared / snapshots.MANIFEST).read_bytes())
    ram = copy / snapshots.RAM_FILE
    with (shared / snapshots.RAM_FILE).open("rb") as source, ram.open("wb") as target:
        target.write(source.read(64 << 20))
        target.truncate(os.fstat(source.fileno()).st_size)
    monkeypatch.setattr(snapshots, "snapshots_dir", lambda: private)
    return ram


def _shape_of(lab) -> snapshots.Shape:
    shape = snapshots.shape_of(lab.blueprint.specs["initiator"], lab.accel)
    assert shape is not None
    return shape


# --- images clean: only what sanlab saved ------------------------------------------------


def _saved(folder: Path, key: str, image: str, qemu: str) -> Path:
    path = folder / key
    path.mkdir(parents=True)
    (path / snapshots.RAM_FILE).write_bytes(b"\0" * 64)
    manifest = {"key": key, "image": image, "qemu": qemu}
    (path / snapshots.MANIFEST).write_text(json.dumps(manifest))
    return path


def test_clean_removes_snapshots_of_old_images_or_qemu_and_nothing_else(tmp_path, monkeypatch):
    monkeypatch.setenv("SANLAB_CACHE", str(tmp_path))
    folder = snapshots.snapshots_dir()
    current = _saved(folder, "k-current", "img1", "QEMU 10")
    old_image = _saved(folder, "k-old-image", "img0", "QEMU 10")
    old_qemu = _saved(folder, "k-old-qemu", "img1", "QEMU 9")
    users = folder / "thesis"
    users.mkdir()
    (users / "chapter1.tex").write_text("mine")
    foreign = _saved(folder, "k-foreign", "img0", "QEMU 10")
    (foreign / "notes.txt").write_text("a user's file in a stale snapshot's folder")
    wrong_key = _saved(folder, "k-renamed", "img0", "QEMU 10")
    (wrong_key / snapshots.MANIFEST).write_text(json.dumps({"key": "other", "image": "img0"}))
    outside = tmp_path / "outside.bin"
    outside.write_text("keep")
    linked = folder / "k-link"
    linked.symlink_to(tmp_path)
    half = folder / ".k-half-x1"
    half.mkdir()
    (half / snapshots.SAVING).write_text("999999999\n")  # no such PID: a save that was killed
    (half / snapshots.RAM_FILE).write_bytes(b"\0")
    (half / "template.qmp.sock").write_text("")

    removed = snapshots.clean_snapshots({"img1"}, "QEMU 10")

    assert sorted(removed) == sorted([old_image, old_qemu, half])
    assert current.is_dir() and (users / "chapter1.tex").read_text() == "mine"
    assert (foreign / "notes.txt").is_file() and not (foreign / snapshots.RAM_FILE).exists()
    assert (wrong_key / snapshots.RAM_FILE).exists() and outside.read_text() == "keep" and linked.is_symlink()
    assert snapshots.clean_snapshots({"img1"}, "QEMU 10", everything=True) == [current]


def test_a_monitor_that_hangs_up_is_one_error_not_an_eof(tmp_path):
    """A QEMU that exits while sanlab talks to it (a snapshot it could not load) closes the
    monitor mid-greeting; the caller gets SanlabError, so a cold boot can follow."""
    import socket
    import threading

    from sanlab.emulator.monitor import qmp

    path = tmp_path / "qmp.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)

    def hang_up() -> None:
        connection, _ = server.accept()
        connection.close()

    threading.Thread(target=hang_up, daemon=True).start()
    with pytest.raises(SanlabError, match="QEMU would not load the snapshot"):
        qmp(path, "load the snapshot", ("query-status", {}))
    server.close()


def test_a_monitor_socket_that_is_bound_but_not_listening_is_not_open_yet(tmp_path):
    """QEMU binds its monitor's socket before it listens: in between, the file is there and a
    connection is refused.  A restore that took the file for an open monitor failed on a loaded
    machine and threw a good snapshot away."""
    import socket

    from sanlab.emulator.monitor import listening

    path = tmp_path / "qmp.sock"
    assert not listening(path)
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        assert path.is_socket() and not listening(path)
        server.listen(1)
        assert listening(path)
    finally:
        server.close()
