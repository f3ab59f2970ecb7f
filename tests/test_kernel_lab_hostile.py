"""Issue #51's inputs, held to the principles: a kernel tree, a Dask worker's answer and a run
folder are data sanlab did not make, so each bad one is a one-line error in bounded time and
memory, and nothing of it is written out of the run folder.

- a brought kernel's module that is a decompression bomb, corrupt, or larger than any module
  (emulator/kernel_image.py read it whole and decompressed it unbounded);
- a worker whose share names files out of the run folder or sends records that are not
  records (targets/sessions/cluster.py merged them unchecked: a pydantic traceback), or that
  answers the probe with something else;
- a run folder whose ``share-K`` is a link out of it (scenarios/results/compare.py globbed
  the captures and kernel logs through it);
- a blktests results folder whose device folder's name carries a terminal escape or a newline
  (``sanlab blktests results`` printed it as it was);
- a run folder's scenario copy that names the kernel it booted (``sanlab compare`` checked
  that kernel again, from the current directory, before the model's projection).
"""

from __future__ import annotations

import json
import lzma
import os
import shutil
from pathlib import Path

import pytest

from sanlab.emulator import kernel_image, kernels
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.results.blktests import read_results
from sanlab.scenarios.results.compare import captures, read_run
from sanlab.scenarios.results.records import RESULTS
from sanlab.targets.sessions import cluster, run_session
from sanlab.validation import load_checked
from support import SCENARIOS

SMOKE = SCENARIOS / "smoke.yaml"


def _modules(tmp_path: Path, name: str, data: bytes) -> Path:
    root = tmp_path / "lib" / "modules" / "6.99.0"
    (root / "kernel").mkdir(parents=True)
    (root / "kernel" / name).write_bytes(data)
    return root


def test_a_module_that_decompresses_past_the_bound_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(kernel_image, "MODULE_BYTES", 1 << 20)
    root = _modules(tmp_path, "nvme-tcp.ko.xz", lzma.compress(bytes(8 << 20), preset=0))
    assert (root / "kernel" / "nvme-tcp.ko.xz").stat().st_size < 1 << 20  # small on disk
    with pytest.raises(SanlabError, match=r"^kernel module .*nvme-tcp\.ko\.xz: decompresses to over 1 MiB$"):
        kernel_image.keep_modules(root, ["nvme-tcp"])


@pytest.mark.parametrize("name", ["nvme-tcp.ko.xz", "nvme-tcp.ko.gz"])
def test_a_corrupt_compressed_module_is_one_line(tmp_path, name):
    root = _modules(tmp_path, name, b"not compressed at all")
    with pytest.raises(SanlabError, match=r"^kernel module .*: cannot decompress it \(") as caught:
        kernel_image.keep_modules(root, ["nvme-tcp"])
    assert "\n" not in str(caught.value)


def test_a_module_larger_than_any_is_refused_before_it_is_read(tmp_path):
    root = _modules(tmp_path, "nvme-tcp.ko", b"")
    with open(root / "kernel" / "nvme-tcp.ko", "wb") as handle:
        handle.truncate(kernel_image.MODULE_BYTES + 1)  # sparse: no disk, no memory
    with pytest.raises(SanlabError, match=r"^kernel module .*nvme-tcp\.ko: is [0-9,]+ bytes; at most"):
        kernel_image.keep_modules(root, ["nvme-tcp"])


@pytest.fixture
def journal(tmp_path):
    return run_session.fresh(SMOKE, load_checked(SMOKE), tmp_path / "run", force=False)


def _record() -> dict:
    share = cluster.rehearse_share(load_checked(SMOKE), frozenset({0}))
    return share.records[0]


@pytest.mark.parametrize(
    "name", ["../escape", "fio/../../escape", "/tmp/escape", "a//b", "fio/./x", "x\0y", ""]
)
def test_a_worker_naming_a_file_out_of_the_run_folder_merges_nothing(tmp_path, journal, name):
    outcome = cluster.ShareOutcome("evil", [_record()], {"fine.log": b"ok", name: b"pwned"})
    with pytest.raises(
        SanlabError, match=r"^the share from 'evil': file .* is not a name inside a run folder"
    ):
        cluster.merge(journal, outcome, "share-1/")
    assert not (tmp_path / "escape").exists() and not Path("/tmp/escape").exists()
    assert not (tmp_path / "run" / "share-1").exists()  # nothing of a bad share is merged
    assert json.loads((tmp_path / "run" / RESULTS).read_text())["results"] == []


@pytest.mark.parametrize(
    ("records", "files"),
    [
        ([{"mode": "guessed"}], {}),
        (["not a record"], {}),
        ("not a list", {}),
        ([], {"x.log": "text, not bytes"}),
        ([], ["x.log"]),
    ],
    ids=["bad-record", "string-record", "records-string", "file-text", "files-list"],
)
def test_a_worker_sending_what_is_not_a_share_is_one_line(tmp_path, journal, records, files):
    outcome = cluster.ShareOutcome("evil", records, files)
    with pytest.raises(SanlabError, match=r"^the share from 'evil': ") as caught:
        cluster.merge(journal, outcome, "share-1/")
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "run" / "share-1").exists()


def test_a_good_share_still_merges(tmp_path, journal):
    outcome = cluster.ShareOutcome(
        "good", [_record()], {"dry-run/h.commands": b"true\n", "fio/p1.json": b"{}"}
    )
    cluster.merge(journal, outcome, "share-1/")
    assert (tmp_path / "run" / "share-1" / "dry-run" / "h.commands").read_bytes() == b"true\n"
    assert (tmp_path / "run" / "fio" / "p1.json").read_bytes() == b"{}"
    assert len(json.loads((tmp_path / "run" / RESULTS).read_text())["results"]) == 1


def test_a_share_folder_that_is_a_link_out_is_never_written_through(tmp_path, journal):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "run" / "share-1").symlink_to(outside)
    outcome = cluster.ShareOutcome("good", [], {"x.log": b"pwned"})
    with pytest.raises(SanlabError):
        cluster.merge(journal, outcome, "share-1/")
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize(
    "answer",
    [None, "host", ("host",), ("host", "problems as text"), (5, ()), ("host", (1,)), {"host": ()}],
)
def test_a_worker_answering_the_probe_with_something_else_is_unfit(answer):
    fitness = cluster._fitness("tcp://10.0.0.9:1", answer)
    assert fitness.problems and "another sanlab" in fitness.problems[0]


def test_a_probe_answer_is_cut_to_one_line():
    fitness = cluster._fitness("tcp://w", ("host", ("lacks QEMU\nTraceback: ...", "")))
    assert fitness == cluster.Fitness("tcp://w", "host", ("lacks QEMU",))


def test_compare_never_follows_a_share_folder_out_of_the_run(tmp_path):
    run, outside = tmp_path / "run", tmp_path / "outside"
    (outside / "logs").mkdir(parents=True)
    (outside / "logs" / "h.dmesg").write_text("Linux version 9.9.9-elsewhere\n")
    (outside / "link.pcap").write_bytes(b"\xd4\xc3\xb2\xa1")
    run.mkdir()
    (run / RESULTS).write_text(json.dumps({"run": {"status": "complete"}, "results": []}))
    os.symlink(outside, run / "share-1")
    assert captures(run) == []
    assert read_run(run, "RUN_A").kernel == ""
    (run / "share-2").mkdir()
    (run / "share-2" / "link.pcap").write_bytes(b"\xd4\xc3\xb2\xa1")
    assert captures(run) == [run / "share-2" / "link.pcap"]  # a real share's capture is still read


@pytest.mark.parametrize("device", ["nvme0n1\x1b]0;pwned\x07", "two\nlines"])
def test_a_blktests_device_folder_that_would_print_escapes_is_one_line(tmp_path, device):
    folder = tmp_path / "results" / device / "nvme"
    folder.mkdir(parents=True)
    (folder / "001").write_text("description\tx\ndate\td\nstatus\tpass\n")
    with pytest.raises(SanlabError, match=r"^results .*: a folder .* is no device name blktests writes$"):
        read_results(tmp_path / "results")


def test_a_modules_dependencies_that_are_not_utf8_are_names_not_a_traceback(tmp_path):
    root = _modules(tmp_path, "nvme-tcp.ko", b"\0depends=nvme-core,\xff\xfe\0softdep=pre: \xff\0")
    kept, absent = kernel_image.keep_modules(root, ["nvme-tcp"])
    assert [p.name for p in kept] == ["nvme-tcp.ko"] and absent == []


def test_compare_reads_no_kernel_a_run_folders_scenario_names(tmp_path):
    """A run's scenario copy names the kernel it booted, relative to wherever that run was
    started: compare projects the scenario without reading (or needing) that file."""
    from click.testing import CliRunner

    from sanlab.main import cli

    kept = Path(__file__).resolve().parent / "data" / "kernel-compare"
    for name in ("debian-12", "debian-13"):
        shutil.copytree(kept / name, tmp_path / name)
    copy = tmp_path / "debian-13" / "scenario.yaml"
    copy.write_text(
        copy.read_text().replace("guest: debian-13", "guest: {kernel: ./gone/linux, base: debian-13}")
    )
    run = CliRunner().invoke(cli, ["compare", "--no-captures", str(tmp_path / "debian-12"), str(copy.parent)])
    assert run.exit_code == 0, run.output
    assert run.output.split("## The model's projection", 1)[1].count("(modern-100g) |") == 2


@pytest.mark.parametrize("release", ["6.99\nCONFIG_X is fine", "-v", "6.99 $(id)"])
def test_a_trees_release_that_is_no_uname_r_is_one_line(tmp_path, release):
    (tmp_path / "lib" / "modules" / release).mkdir(parents=True)
    (tmp_path / "bzImage").write_bytes(b"MZ")
    (tmp_path / ".config").write_text("CONFIG_NVME_TCP=m\n")
    with pytest.raises(SanlabError, match=r"^kernel .*: release .* is not one \(") as caught:
        kernels.read_config(kernels.kernel_source(str(tmp_path)))
    assert "\n" not in str(caught.value)
