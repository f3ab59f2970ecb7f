"""``sanlab blktests run`` before and after the guests (targets/sessions/blktests_session.py):
bad input is one line before any VM boots, the checkout goes in without links or .git, and
what blktests wrote comes back into the run folder as it wrote it (results/<dev>/<group>/<NNN>),
read by the results parser, with each check's wall time and the skip reasons grouped."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from sanlab.main import cli
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.results.blktests import CLONE, skip_reasons
from sanlab.scenarios.results.outdir import MANIFEST, claim_fresh
from sanlab.targets.sessions import blktests_session as session

META = Path(__file__).resolve().parent / "data" / "blktests-meta" / "results"


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "blktests"
    for name in ("check", "common/rc", "tests/nvme/rc", "tests/srp/rc", "tests/nvme/003", "tests/nvme/010"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("#!/bin/bash\n")
    (root / "tests/nvme/003.out").write_text("Running nvme/003\n")
    os.chmod(root / "check", 0o755)
    return root


@pytest.mark.parametrize(
    ("wire", "group", "tests", "timeout", "says"),
    [
        ("roce", "nvme", (), 600, "wire 'roce' is none of rxe, siw, tcp"),
        ("rxe", "block", (), 600, "--group 'block' is none of nvme, srp"),
        ("siw", "srp", (), 600, "--group srp runs over rxe only (SRP's fabrics are ib, roce"),
        ("rxe", "nvme", ("nvme/999",), 600, "--tests 'nvme/999': not a test of the nvme group"),
        ("rxe", "nvme", ("../../x",), 600, "--tests '../../x': not a test of the nvme group"),
        ("rxe", "nvme", ("srp/001",), 600, "not a test of the nvme group"),
        ("rxe", "nvme", (), 5, "--timeout 5: give 10 to 7200 seconds per test"),
    ],
)
def test_bad_input_is_one_line(tmp_path, wire, group, tests, timeout, says):
    with pytest.raises(SanlabError) as caught:
        session.plan(wire, group, _checkout(tmp_path), tests, timeout)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_the_plan_takes_the_checkouts_own_tests_in_order(tmp_path):
    checkout = _checkout(tmp_path)
    assert session.plan("tcp", "nvme", checkout, (), 300).tests == ("nvme/003", "nvme/010")
    assert session.plan("rxe", "nvme", checkout, ("nvme/010", "nvme/003"), 300).tests == (
        "nvme/003",
        "nvme/010",
    )


def test_the_command_refuses_before_any_vm_boots(tmp_path):
    wrong = CliRunner().invoke(cli, ["blktests", "run", "rxe", "--blktests", str(tmp_path / "none")])
    assert wrong.exit_code == 1 and CLONE in wrong.output and len(wrong.output.strip().splitlines()) == 1
    bad = CliRunner().invoke(cli, ["blktests", "run", "ib", "--blktests", str(_checkout(tmp_path))])
    assert bad.exit_code == 1 and "wire 'ib' is none of rxe, siw, tcp" in bad.output
    assert not (tmp_path / "runs").exists()


def test_the_checkout_goes_in_without_links_git_or_results(tmp_path):
    checkout = _checkout(tmp_path)
    (checkout / ".git").mkdir()
    (checkout / ".git" / "HEAD").write_text("ref\n")
    (checkout / "results" / "nodev").mkdir(parents=True)
    (tmp_path / "secret").write_text("not blktests'")
    (checkout / "tests" / "nvme" / "999").symlink_to(tmp_path / "secret")
    (checkout / "linked").symlink_to(tmp_path)
    with tarfile.open(fileobj=io.BytesIO(session.checkout_tar(checkout))) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert sorted(members) == [
        "check",
        "common/rc",
        "tests/nvme/003",
        "tests/nvme/003.out",
        "tests/nvme/010",
        "tests/nvme/rc",
        "tests/srp/rc",
    ]
    assert members["check"].mode == 0o755 and members["tests/nvme/003.out"].mode == 0o644


def _tar(entries: list[tarfile.TarInfo | tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for entry in entries:
            if isinstance(entry, tarfile.TarInfo):
                tar.addfile(entry)
            else:
                info = tarfile.TarInfo(entry[0])
                info.size = len(entry[1])
                tar.addfile(info, io.BytesIO(entry[1]))
    return buffer.getvalue()


def test_only_plain_result_files_come_back(tmp_path):
    link = tarfile.TarInfo("./nodev/nvme/004")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
    data = _tar(
        [
            ("./nodev_tr_rdma/nvme/003", b"status\tpass\n"),
            ("../escape", b"x"),
            ("/abs/003", b"x"),
            ("./nodev/nvme/a b", b"x"),
            link,
        ]
    )
    assert session.results_files(data) == [("nodev_tr_rdma/nvme/003", b"status\tpass\n")]
    with pytest.raises(SanlabError, match="not a tar"):
        session.results_files(b"x" * 1024)


class _Guest:
    """The initiator guest as far as the results' way back needs: its tar of blktests' results
    folder, made here from a folder blktests itself wrote (tests/data/blktests-meta)."""

    name = "initiator"

    def __init__(self, results: Path):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            tar.add(results, arcname=".")
        self.tar, self.commands = buffer.getvalue(), []

    def run(self, command, timeout=60.0, stdin=""):
        self.commands.append(command)
        return type("R", (), {"ok": True, "rc": 0, "stdout": "", "stderr": "", "timed_out": False})()

    def get(self, path):
        assert path == "/run/sanlab-blktests/results.tar"
        return self.tar


CONSOLE = """meta/007 (skip) [not run]
    skipped for testing
nvme/002 (tr=rdma) (create many subsystems and test discovery)  [not run]
    nvme_trtype=rdma is not supported in this test
"""


def test_the_run_folder_keeps_what_blktests_wrote_and_counts_it(tmp_path):
    guest = _Guest(META)
    folder = claim_fresh(tmp_path / "run", "--out", force=False)
    session._keep_results(guest, folder)
    assert guest.commands[0] == [
        "tar",
        "-c",
        "-f",
        "/run/sanlab-blktests/results.tar",
        "-C",
        "/root/blktests-results",
        ".",
    ]
    for name in (
        "results/nodev/meta/001",
        "results/nodev/meta/005.out.bad",
        "results/nodev_x_1_y_1_z_1/meta/019.full",
    ):
        assert (tmp_path / "run" / name).read_bytes() == (META / name.removeprefix("results/")).read_bytes()
    plan = session.BlktestsPlan("rxe", "nvme", tmp_path, ("meta/007", "nvme/002"), 600)
    reasons = sorted({r for rs in skip_reasons(CONSOLE).values() for r in rs})
    runs = [
        session.TestRun("meta/007", 1.5, 0, False, reasons),
        session.TestRun("nvme/002", 700.0, 124, True),
    ]
    summary = session._write_summary(plan, folder, runs, ("6.1.0-50-amd64", "gawk"), 712.3)
    written = json.loads((tmp_path / "run" / "blktests.json").read_text())
    assert written == json.loads(json.dumps(summary))
    assert written["counts"] == {"pass": 16, "fail": 3, "not run": 5}
    assert written["skip_reasons"] == {
        "nvme_trtype=rdma is not supported in this test": 1,
        "skipped for testing": 1,
    }
    assert written["timed_out"] == ["nvme/002"] and written["tests"][1]["wall_s"] == 700.0
    manifest = json.loads((tmp_path / "run" / MANIFEST).read_text())
    assert "results/nodev/meta/003" in json.dumps(manifest) and "blktests.json" in json.dumps(manifest)


def test_the_check_line_quotes_every_value():
    plan = session.BlktestsPlan("siw", "nvme", Path("/x"), ("nvme/003",), 300)
    line = session._check_command(plan, "nvme/003")
    assert "NVME_TARGET_CONTROL=/run/sanlab-blktests/control" in line and "NVMET_TRTYPES=rdma" in line
    assert "USE_RXE" not in line and "timeout -k 20 300 ./check -o /root/blktests-results nvme/003" in line
    rxe = session._check_command(session.BlktestsPlan("rxe", "srp", Path("/x"), (), 300), "srp/001")
    assert "USE_RXE=1" in rxe and "NVME_TARGET_CONTROL" not in rxe


def test_missing_tool_packages_are_one_line_naming_the_folder(tmp_path, monkeypatch):
    from sanlab.emulator import guest_debs

    monkeypatch.setenv("SANLAB_CACHE", str(tmp_path))
    monkeypatch.setattr(guest_debs, "_host_release", lambda: "trixie")  # another release: apt cannot fetch
    with pytest.raises(SanlabError) as caught:
        guest_debs.ready_debs("bookworm", print)
    assert str(caught.value) == (
        f"the bookworm guest needs gawk, libsigsegv2, libmpfr6, bsdextrautils, psmisc: put their .debs in "
        f"{tmp_path}/debs/bookworm (apt-get download gawk libsigsegv2 libmpfr6 bsdextrautils psmisc, "
        "on a Debian bookworm machine)"
    )
    with pytest.raises(SanlabError, match=r"no tool packages are known for Debian '\.\./x'"):
        guest_debs.ready_debs("../x", print)


def test_a_large_file_goes_in_pieces_joined_by_an_argument_vector():
    from sanlab.targets.dryrun import DryRunHost

    guest = DryRunHost("initiator")
    session.put_large(guest, "/run/sanlab-blktests/checkout.tar", b"x" * (session.PUT_CHUNK * 2 + 1))
    parts = [f"/run/sanlab-blktests/checkout.tar.part-000{n}" for n in range(3)]
    assert guest.commands[:3] == [
        f"# write {n} bytes to {part} (mode 644)" for n, part in zip((262144, 262144, 1), parts, strict=True)
    ]
    assert guest.commands[3].endswith("sh /run/sanlab-blktests/checkout.tar " + " ".join(parts))


def test_the_srp_group_asks_for_its_built_helper_first(tmp_path):
    checkout = _checkout(tmp_path)
    with pytest.raises(SanlabError) as caught:
        session.plan("rxe", "srp", checkout, (), 300)
    assert str(caught.value) == (
        f"--blktests {checkout}: src/discontiguous-io is not built, and the srp group needs it "
        f"(the guests have no compiler): run 'make -C {checkout}/src' first"
    )
    (checkout / "src").mkdir()
    (checkout / "src" / "discontiguous-io").write_bytes(b"\x7fELF")
    (checkout / "tests" / "srp" / "001").write_text("#!/bin/bash\n")
    assert session.plan("rxe", "srp", checkout, (), 300).tests == ("srp/001",)


def test_a_kernel_release_is_checked_before_a_package_is_named_after_it(tmp_path, monkeypatch):
    from sanlab.emulator import guest_debs

    monkeypatch.setenv("SANLAB_CACHE", str(tmp_path))
    monkeypatch.setattr(guest_debs, "_host_release", lambda: "trixie")
    for bad in ("6.1.0-50-amd64 x", "../../6.1.0-50-amd64", "6.1.0-50-amd64;reboot"):
        with pytest.raises(SanlabError, match="is not a Debian kernel release"):
            guest_debs.kernel_config("bookworm", bad, print)
    with pytest.raises(SanlabError, match=r"needs linux-image-6\.1\.0-50-amd64: put their \.debs in"):
        guest_debs.kernel_config("bookworm", "6.1.0-50-amd64", print)


def test_a_reply_appears_whole_under_its_name():
    from sanlab.targets.dryrun import DryRunHost

    guest = DryRunHost("initiator")
    session._reply(guest, "/run/sanlab-blktests/replies/" + "1" * 20 + ".json", 0, "")
    temporary = "/run/sanlab-blktests/replies/." + "1" * 20 + ".json.tmp"
    assert guest.commands[0].endswith(f"to {temporary} (mode 644)")
    assert guest.commands[1] == f"mv -f -- {temporary} /run/sanlab-blktests/replies/" + "1" * 20 + ".json"
