"""One writer (issue #45): no writer follows a link out of its folder, or leaves half a file.

(a) Every write call in product code goes through scenarios/writing.py: a
    scan of the syntax tree finds the rest, and fails on a new one.
(b) A symlink planted at every path a writer touches -- its final file, the
    temporaries older sanlab used, its lock, its probe, its manifest --
    pointing outside the folder: the real commands run, and no file outside
    changes (hashed before and after).
(c) Standard output on /dev/full or a closed pipe, and a full or read-only
    disk: one line, no traceback, no partial or 0-byte file.
Kills and interrupts are in tests/test_interrupted_writes.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from one_writer_scan import ALLOWED_CALLS, ALLOWED_FILES, bypasses, product_writes, scan_source

from sanlab.emulator import images
from sanlab.main import cli
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.results.outdir import MANIFEST, OutputFolder
from sanlab.scenarios.writing import (
    is_temporary,
    open_lock,
    open_stream,
    probe_writable,
    write_file,
)

SANLAB = [sys.executable, "-m", "sanlab"]
POINT = ["--transport", "nvme-tcp", "--fabric", "eth", "--link-gbps", "25", "--rw", "randread"]
POINT += ["--bs", "4k", "--iodepth", "1", "--numjobs", "1"]
SPEC = (
    "axes: {transport: [nvme-tcp, iscsi], iodepth: [1, 2]}\n"
    "fixed: {fabric: eth, link_gbps: 100, rw: randread, bs: 4k, numjobs: 1}\n"
)
PCAP = Path(__file__).parent / "golden" / "nvme-tcp-qd4.pcap"


# --- (a) the scan -----------------------------------------------------------------------------


def test_no_product_code_writes_a_file_but_through_the_one_writer():
    writes = product_writes()
    assert len(writes) >= 10, "the scan found too few writes to be looking at the code"
    assert bypasses(writes) == [], "\n".join(map(str, bypasses(writes)))


def test_the_allowlist_is_tiny_and_every_entry_still_needed():
    assert len(ALLOWED_FILES) + len(ALLOWED_CALLS) <= 6
    seen = {w.path for w in product_writes()} | {(w.path, w.function, w.call) for w in product_writes()}
    for entry in [*ALLOWED_FILES, *ALLOWED_CALLS]:
        assert entry in seen, f"{entry} is allowed but writes nothing any more: drop it"


BYPASSES = [
    "open(p, 'w')",
    "open(p, mode='ab')",
    "open(p, 'r+')",
    "open(p, m)",
    "Path(p).open('w')",
    "p.write_text('x')",
    "p.write_bytes(b'x')",
    "p.replace(q)",
    "p.rename(q)",
    "os.replace(a, b)",
    "os.rename(a, b)",
    "shutil.copyfile(a, b)",
    "shutil.copy2(a, b)",
    "shutil.move(a, b)",
    "fig.savefig(path)",
    "tempfile.mkstemp(dir=d)",
    "tempfile.NamedTemporaryFile(dir=d)",
    "os.open(p, os.O_WRONLY | os.O_CREAT)",
    "os.open(p, flags)",
    "json.dump(doc, handle)",
    "pq.write_table(table, path)",
    "os.symlink(a, b)",
    "p.symlink_to(q)",
    "os.truncate(p, 0)",
    "tar.extractall(d)",
    "frame.to_csv(p)",
]


@pytest.mark.parametrize("code", BYPASSES)
def test_the_scan_finds_a_writer_that_bypasses_the_module(code):
    found = scan_source(f"def writer():\n    {code}\n", "models/new_writer.py")
    assert bypasses(found), f"{code} was not seen as a write"


@pytest.mark.parametrize(
    "code",
    [
        "open(p)",
        "open(p, 'rb')",
        "text.replace('a', 'b')",
        "folder.write_text('a', 'b')",
        "os.open(p, os.O_RDONLY | os.O_NONBLOCK)",
        "os.open(os.devnull, os.O_WRONLY)",
        "pq.write_table(table, sink)",
        "tarfile.open(p)",
    ],
)
def test_the_scan_lets_reads_and_the_manifests_writer_pass(code):
    assert scan_source(f"def reader():\n    {code}\n", "models/reader.py") == []


# --- (b) symlinks at every path ----------------------------------------------------------------


def _hashes(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.fixture
def outside(tmp_path):
    """A folder of the user's, outside every folder sanlab writes: its files must never change."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "thesis.tex").write_text("\\chapter{years of work}\n")
    (folder / "manifest.json").write_text(json.dumps({"kind": "sanlab output manifest", "files": {}}))
    before = _hashes(folder)
    yield folder
    assert _hashes(folder) == before, "a file outside the folder sanlab writes changed"


def _run(args, env=None):
    result = CliRunner().invoke(cli, args, env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result


def _plant(folder: Path, name: str, target: Path) -> Path:
    link = folder / name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    return link


REPORT_NAMES = ["table.txt", "cells.csv", "chart.png", "results.json", MANIFEST, "table.tmp", "chart.tmp"]


@pytest.mark.parametrize("name", REPORT_NAMES)
def test_model_report_never_writes_through_a_planted_link(tmp_path, outside, name):
    report = tmp_path / "report"
    link = _plant(report, name, outside / "thesis.tex")
    result = _run(["model", *POINT, "--report", str(report)])
    assert link.is_symlink()
    if not name.endswith(".tmp"):
        assert result.exit_code == 1 and len(result.output.strip().splitlines()) <= 2


SWEEP_NAMES = [
    "sweep.json",
    "points.jsonl",
    "results.parquet",
    "results.csv",
    "goals.csv",
    "pareto.csv",
    "pareto.png",
    "summary.json",
    MANIFEST,
    "points.tmp",
    "summary.tmp",
]


@pytest.mark.parametrize("name", SWEEP_NAMES)
def test_sweep_never_writes_through_a_planted_link(tmp_path, outside, name):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "sweep"
    link = _plant(out, name, outside / "thesis.tex")
    result = _run(["sweep", str(spec), "--out", str(out), "--serial"])
    assert link.is_symlink()
    if not name.endswith(".tmp"):
        assert result.exit_code == 1


PLUGIN_NAMES = [
    "sanlab-srp.lua",
    "sanlab-scsi.lua",
    "sanlab-iwarp.lua",
    MANIFEST,
    "old-probe",
]
# The probe's old, predictable name: this process's PID, named when the test runs (a PID in a
# test's id would differ between xdist's workers, and they must collect the same tests).
OLD_PROBE = "old-probe"


def _named(name: str) -> str:
    return f".sanlab-probe-{os.getpid()}" if name == OLD_PROBE else name


@pytest.mark.parametrize("name", PLUGIN_NAMES)
def test_dissectors_install_never_writes_through_a_planted_link(tmp_path, outside, name):
    folder = tmp_path / "plugins"
    name = _named(name)
    link = _plant(folder, name, outside / "thesis.tex")
    result = _run(["dissectors", "install", "--to", str(folder)])
    assert link.is_symlink()
    if name.endswith(".lua") or name == MANIFEST:
        assert result.exit_code == 1
    else:  # the probe's name is unpredictable now: a planted one is simply not used
        assert result.exit_code == 0, result.output


def test_dissectors_install_never_replaces_a_users_own_plugin(tmp_path):
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "sanlab-srp.lua").write_text("-- my own dissector\n")
    result = _run(["dissectors", "install", "--to", str(folder)])
    assert result.exit_code == 1 and "did not write" in result.output
    assert (folder / "sanlab-srp.lua").read_text() == "-- my own dissector\n"
    assert not (folder / "sanlab-scsi.lua").exists(), "nothing is written when one name is refused"


def test_dissectors_install_twice_replaces_its_own_files(tmp_path):
    folder = tmp_path / "plugins"
    assert _run(["dissectors", "install", "--to", str(folder)]).exit_code == 0
    assert _run(["dissectors", "install", "--to", str(folder)]).exit_code == 0
    assert sorted(p.name for p in folder.iterdir()) == [
        MANIFEST,
        "sanlab-dhchap.lua",
        "sanlab-iwarp.lua",
        "sanlab-scsi.lua",
        "sanlab-srp.lua",
    ]


LADDER_PLANTS = [("l.png", "link"), ("l.svg", "link"), ("l.png", "own"), ("lat.png", "link")]


@pytest.mark.tshark
@pytest.mark.parametrize("name,kind", LADDER_PLANTS)
def test_analyze_pictures_never_write_through_a_link_or_over_a_users_file(tmp_path, outside, name, kind):
    folder = tmp_path / "pictures"
    folder.mkdir()
    if kind == "link":
        _plant(folder, name, outside / "thesis.tex")
    else:
        (folder / name).write_bytes(b"my holiday picture")
    option = (
        ["--latency", str(folder / "lat.png")] if name == "lat.png" else ["--ladder", str(folder / "l.svg")]
    )
    result = _run(["analyze", str(PCAP), *option])
    assert result.exit_code == 1
    if kind == "own":
        assert (folder / name).read_bytes() == b"my holiday picture"


@pytest.mark.tshark
def test_analyze_pictures_replace_only_their_own_files(tmp_path):
    ladder = tmp_path / "pictures" / "l.svg"
    for _ in range(2):  # the second run replaces what the first drew, by the manifest
        assert _run(["analyze", str(PCAP), "--ladder", str(ladder)]).exit_code == 0
    assert ladder.read_bytes().startswith(b"<?xml") and ladder.with_suffix(".png").stat().st_size > 0
    assert OutputFolder.open(ladder.parent, "--ladder").foreign() == []


def test_the_image_build_lock_is_never_followed(tmp_path, outside, monkeypatch):
    monkeypatch.setenv("SANLAB_CACHE", str(tmp_path / "cache"))
    _plant(images.images_dir(), images.BUILD_LOCK, outside / "thesis.tex")
    with pytest.raises(SanlabError, match="symlink"), images._one_builder(lambda line: None):
        pass


def test_the_image_build_lock_is_never_truncated(tmp_path, monkeypatch):
    monkeypatch.setenv("SANLAB_CACHE", str(tmp_path / "cache"))
    lock = images.images_dir() / images.BUILD_LOCK
    lock.parent.mkdir(parents=True)
    lock.write_text("held by pid 42\n")
    with images._one_builder(lambda line: None):
        pass
    assert lock.read_text() == "held by pid 42\n"


def _image(folder: Path, key: str, extra: str | None = None) -> Path:
    path = folder / key
    path.mkdir(parents=True)
    (path / "manifest.json").write_text(json.dumps({"key": key, "guest": "debian-12"}))
    (path / "rootfs.cpio").write_bytes(b"cpio")
    (path / "vmlinuz").write_bytes(b"kernel")
    if extra:
        (path / extra).write_text("the user's own file\n")
    return path


@pytest.mark.subprocess  # it asks QEMU for its version (what snapshots are keyed on)
@pytest.mark.parametrize("everything", [False, True])
def test_images_clean_removes_only_what_an_image_manifest_names(tmp_path, outside, monkeypatch, everything):
    monkeypatch.setenv("SANLAB_CACHE", str(tmp_path / "cache"))
    base = images.images_dir()
    for user in ("holiday-photos", "thesis"):
        (base / user).mkdir(parents=True)
        (base / user / "IMG_0001.jpg").write_bytes(b"jpeg")
    stale = _image(base, "0123456789abcdef")
    kept_with_notes = _image(base, "fedcba9876543210", extra="notes.txt")
    forged = base / "forged"
    forged.mkdir()
    (forged / "manifest.json").write_text(json.dumps({"key": "not-this-folder"}))
    (forged / "vmlinuz").write_bytes(b"mine")
    (base / "linked").symlink_to(outside)
    linked_manifest = base / "linked-manifest"
    linked_manifest.mkdir()
    (linked_manifest / "manifest.json").symlink_to(outside / "manifest.json")
    dead_build = base / ".build-0123-999999999"
    dead_build.mkdir()
    (dead_build / images.BUILD_MARK).write_text("999999999\n")
    (dead_build / "rootfs.tar").write_bytes(b"tar")
    unmarked_build = base / ".build-0123-999999998"
    unmarked_build.mkdir()
    (unmarked_build / "rootfs.tar").write_bytes(b"tar")
    live_build = base / f".build-0123-{os.getpid()}"
    live_build.mkdir()
    (live_build / images.BUILD_MARK).write_text(f"{os.getpid()}\n")
    result = _run(
        ["images", "clean", *(["--all"] if everything else [])], env={"SANLAB_CACHE": str(tmp_path / "cache")}
    )
    assert result.exit_code == 0, result.output
    assert not stale.exists() and not dead_build.exists()
    for user in ("holiday-photos", "thesis"):
        assert (base / user / "IMG_0001.jpg").read_bytes() == b"jpeg"
    assert (kept_with_notes / "notes.txt").exists() and not (kept_with_notes / "vmlinuz").exists()
    assert (forged / "vmlinuz").read_bytes() == b"mine"
    assert (base / "linked").is_symlink() and (linked_manifest / "manifest.json").is_symlink()
    assert (unmarked_build / "rootfs.tar").exists() and (live_build / images.BUILD_MARK).exists()
    assert "kept" in result.output and "holiday-photos" in result.output


HOSTILE_MANIFESTS = {
    "a list": [],
    "files a list": {"kind": "sanlab output manifest", "files": []},
    "deeply nested": {"kind": "sanlab output manifest", "files": {"a": [[[[[[[[[[[[1]]]]]]]]]]]]}},
    "three stamps": {"kind": "sanlab output manifest", "files": {"a": [[1, 2], [3, 4], [5, 6]]}},
    "a float stamp": {"kind": "sanlab output manifest", "files": {"a": [1.5, 2]}},
    "grows a string": {"kind": "sanlab output manifest", "files": {"a": None}, "grows": "a"},
    "grows unlisted": {"kind": "sanlab output manifest", "files": {}, "grows": ["points.jsonl"]},
    "outside": {"kind": "sanlab output manifest", "files": {"../thesis.tex": None}},
}


@pytest.mark.parametrize("case", list(HOSTILE_MANIFESTS))
def test_a_hostile_manifest_is_one_line_and_nothing_is_touched(tmp_path, outside, case):
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / MANIFEST).write_text(json.dumps(HOSTILE_MANIFESTS[case]))
    (folder / "a").write_text("the user's\n")
    with pytest.raises(SanlabError) as caught:
        OutputFolder.open(folder, "--out")
    assert "\n" not in str(caught.value) and (folder / "a").read_text() == "the user's\n"


@pytest.mark.parametrize("kind", ["link", "folder"])
def test_a_listed_temporary_that_is_not_a_regular_file_is_left_alone(tmp_path, outside, kind):
    folder = tmp_path / "out"
    folder.mkdir()
    name = ".results.json.sanlab-0123456789ab.tmp"
    if kind == "link":
        (folder / name).symlink_to(outside / "thesis.tex")
    else:
        (folder / name).mkdir()
    manifest = {"kind": "sanlab output manifest", "files": {name: None}}
    (folder / MANIFEST).write_text(json.dumps(manifest))
    OutputFolder.open(folder, "--out")
    assert (folder / name).is_symlink() if kind == "link" else (folder / name).is_dir()


# --- the module itself, at each path it touches ---------------------------------------------------


@pytest.mark.parametrize("exists", ["replace", "regular", "refuse"])
@pytest.mark.parametrize("planted", ["NAME.tmp", ".NAME-x.tmp", "NAME"])
def test_write_file_never_writes_through_a_planted_link(tmp_path, outside, exists, planted):
    folder = tmp_path / "out"
    target = folder / "profile.yaml"
    name = (
        planted.replace("NAME", "profile").replace("x.tmp", "abc.yaml") if planted != "NAME" else target.name
    )
    link = _plant(folder, name, outside / "thesis.tex")
    try:
        write_file(target, "parameters: {}\n", exists=exists)  # type: ignore[arg-type]
    except SanlabError as exc:
        assert planted == "NAME" and exists != "replace" and "\n" not in str(exc)
    else:
        assert planted != "NAME" or exists == "replace"
    assert link.is_symlink() or (planted == "NAME" and exists == "replace")
    assert [p.name for p in folder.iterdir() if is_temporary(p.name)] == []


def test_write_file_through_a_linked_subfolder_is_refused_in_an_output_folder(tmp_path, outside):
    folder = OutputFolder.open(tmp_path / "run", "--out")
    (tmp_path / "run" / "logs").symlink_to(outside)
    with pytest.raises(SanlabError, match="will not write through it"):
        folder.write_text("logs/host.dmesg", "dmesg")


def test_an_output_folder_never_writes_through_a_link_made_after_its_check(tmp_path, outside):
    folder = OutputFolder.open(tmp_path / "run", "--out")
    folder.write_text("logs/host.dmesg", "first")
    (tmp_path / "run" / "logs" / "host.dmesg").unlink()
    (tmp_path / "run" / "logs").rmdir()
    (tmp_path / "run" / "logs").symlink_to(outside)
    with pytest.raises(SanlabError):
        folder.write_text("logs/host.dmesg", "second")


@pytest.mark.parametrize("how", ["new", "append"])
def test_streams_and_logs_never_follow_a_link(tmp_path, outside, how):
    link = _plant(tmp_path / "run", "vm.qemu.log", outside / "thesis.tex")
    with pytest.raises(SanlabError, match="symlink|File exists"):
        open_stream(link, how)  # type: ignore[arg-type]


def test_a_lock_file_never_follows_a_link(tmp_path, outside):
    link = _plant(tmp_path / "snapshots", ".key.lock", outside / "thesis.tex")
    with pytest.raises(SanlabError, match="symlink"):
        open_lock(link)


@pytest.mark.parametrize("planted", [OLD_PROBE, ".probe", "probe"])
def test_the_write_probe_never_follows_a_planted_name(tmp_path, outside, planted):
    planted = _named(planted)
    _plant(tmp_path / "dest", planted, outside / "thesis.tex")
    probe_writable(tmp_path / "dest", "--to")
    assert sorted(p.name for p in (tmp_path / "dest").iterdir()) == [planted]


def test_the_lab_keeper_status_replaces_a_link_never_the_file_it_names(tmp_path, outside):
    from sanlab.targets.sessions.lab_targets import _write_status

    link = _plant(tmp_path / "lab", "keeper.json", outside / "thesis.tex")
    _plant(tmp_path / "lab", "keeper.tmp", outside / "manifest.json")
    _write_status(link, pid=1)
    assert json.loads(link.read_text()) == {"pid": 1} and not link.is_symlink()


# --- (c) full and read-only disks, a closed pipe -------------------------------------------------


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("Error")]
    assert len(lines) == 1, proc.stderr  # besides progress lines, one error line
    return lines[0]


STDOUT_COMMANDS = [
    ["validate", "scenarios/smoke.yaml"],
    ["model", *POINT],
    ["model", *POINT, "--json"],
    ["lab", "list"],
    ["run", "scenarios/smoke.yaml", "--dry-run"],
    ["dissectors", "args"],
]


@pytest.mark.subprocess
@pytest.mark.parametrize("args", STDOUT_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_stdout_on_a_full_disk_is_one_line(args, tmp_path):
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [*SANLAB, *args],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            cwd=Path(__file__).parent.parent,
        )
    assert "No space left" in _one_line(proc)


@pytest.mark.subprocess
@pytest.mark.parametrize("args", STDOUT_COMMANDS[:3], ids=lambda a: " ".join(a[:2]))
def test_stdout_to_a_reader_that_went_away_is_one_line(args):
    proc = subprocess.Popen(
        [*SANLAB, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parent.parent,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    proc.wait(timeout=120)
    assert proc.returncode == 1 and "Traceback" not in err and "Broken pipe" in err, err


@contextlib.contextmanager
def _small_disk(where: Path, read_only: bool = False):
    """A 64 KiB tmpfs at ``where`` (root only), nearly full or read-only; unmounted after."""
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        (where / "out").mkdir()
        if read_only:
            subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)
        else:
            with contextlib.suppress(OSError), open(where / "filler", "wb") as filler:
                filler.write(b"\0" * (56 << 10))
        yield where / "out"
    finally:
        subprocess.run(["umount", str(where)], check=True)


def _no_partial_files(folder: Path) -> None:
    for path in folder.rglob("*"):
        assert not is_temporary(path.name), f"a temporary was left: {path}"
        if path.is_file() and path.name != MANIFEST:
            assert path.stat().st_size > 0, f"a 0-byte file was left: {path}"


DISK_COMMANDS = {
    "model --report": lambda out, spec: ["model", *POINT, "--report", str(out)],
    "sweep --out": lambda out, spec: ["sweep", str(spec), "--out", str(out), "--serial"],
    "dissectors install": lambda out, spec: ["dissectors", "install", "--to", str(out)],
}


@pytest.mark.subprocess
@pytest.mark.parametrize("read_only", [False, True], ids=["full", "read-only"])
@pytest.mark.parametrize("command", list(DISK_COMMANDS))
def test_a_full_or_read_only_disk_is_one_line_and_leaves_nothing_half_written(tmp_path, command, read_only):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    with _small_disk(tmp_path / "disk", read_only) as out:
        proc = subprocess.run(
            [*SANLAB, *DISK_COMMANDS[command](out, spec)], capture_output=True, text=True, timeout=300
        )
        line = _one_line(proc)
        assert ("Read-only" in line) if read_only else ("No space left" in line), line
        _no_partial_files(out)


@pytest.mark.subprocess
@pytest.mark.tshark
@pytest.mark.parametrize("extra", [[], ["--json"]], ids=["table", "json"])
def test_analyze_to_a_full_disk_is_one_line(extra):
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [*SANLAB, "analyze", str(PCAP), *extra],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert "No space left" in _one_line(proc)


def test_a_folder_built_whole_goes_into_place_and_nothing_in_the_way_is_replaced(tmp_path):
    """writing.rename_into_place: the one way a build's folder (an image, a snapshot, a compiled
    siw.ko) takes its final name; a link, a file or a folder already there is refused."""
    from sanlab.scenarios.errors import SanlabError
    from sanlab.scenarios.writing import rename_into_place

    work = tmp_path / ".build"
    (work / "inside").mkdir(parents=True)
    assert rename_into_place(work, tmp_path / "done", "a test build") == tmp_path / "done"
    assert (tmp_path / "done" / "inside").is_dir() and not work.exists()

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for in_the_way in ("link", "file", "empty"):
        work.mkdir()
        final = tmp_path / in_the_way
        if in_the_way == "link":
            final.symlink_to(elsewhere)
        elif in_the_way == "file":
            final.write_text("theirs")
        else:
            final.mkdir()  # os.rename alone would replace an empty folder silently
        with pytest.raises(SanlabError, match="in the way of a test build"):
            rename_into_place(work, final, "a test build")
        assert work.is_dir()
        work.rmdir()

    (tmp_path / "linked").symlink_to(elsewhere)
    with pytest.raises(SanlabError, match="not the folder sanlab built"):
        rename_into_place(tmp_path / "linked", tmp_path / "moved", "a test build")
    assert elsewhere.is_dir() and not (tmp_path / "moved").exists()
