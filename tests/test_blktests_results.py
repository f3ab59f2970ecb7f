"""blktests' results as its ``check`` writes them (scenarios/results/blktests.py), on a folder
blktests itself wrote (tests/data/blktests-meta/README.md says how), and a checkout refused in
one line naming what to clone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from sanlab.main import cli
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.results.blktests import CLONE, check_checkout, counts, read_results

HEAD = "description\tx\ndate\td\n"  # the two lines every result has, before its status
META = Path(__file__).resolve().parent / "data" / "blktests-meta" / "results"


def test_the_meta_groups_results_read_as_blktests_wrote_them():
    found = read_results(META)
    assert counts(found) == {"pass": 16, "fail": 3, "not run": 5}
    by = {(r.test, r.device): r for r in found}
    exit_fail = by["meta/003", "nodev"]
    assert (exit_fail.status, exit_fail.reason, exit_fail.exit_status) == ("fail", "exit", 1)
    assert exit_fail.description == "exit with non-zero status"
    output = by["meta/005", "nodev"]
    assert (output.reason, output.exit_status, output.evidence) == ("output", 0, ("005.out.bad",))
    skipped = by["meta/007", "nodev"]
    assert (skipped.status, skipped.runtime_s, skipped.exit_status, skipped.reason) == (
        "not run",
        None,
        None,
        None,
    )
    junk = by["meta/012", "nodev"]  # a test's own keys, an empty value among them
    assert junk.runtime_s == pytest.approx(1.03) and junk.figures["random"] == ""
    assert set(junk.figures) == {"pid", junk.figures["pid"], "random"}
    conditions = sorted(r.device for r in found if r.test == "meta/019")
    assert len(conditions) == 8 and conditions[0] == "nodev_x_0_y_0_z_0"
    assert by["meta/019", "nodev_x_1_y_1_z_1"].evidence == ("019.full",)


def _one(tmp_path: Path, text: str, name: str = "001") -> Path:
    folder = tmp_path / "results" / "nodev_tr_rdma" / "nvme"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return tmp_path / "results"


def test_a_dmesg_failure_and_a_tests_figures(tmp_path):
    root = _one(
        tmp_path,
        "runtime\t12.5s\n" + HEAD + "exit_status\t0\nreason\tdmesg\nstatus\tfail\nread iops\t1234\n",
    )
    (root / "nodev_tr_rdma" / "nvme" / "001.dmesg").write_text("WARNING: x\n")
    (result,) = read_results(root)
    assert (result.test, result.device, result.reason, result.runtime_s) == (
        "nvme/001",
        "nodev_tr_rdma",
        "dmesg",
        12.5,
    )
    assert result.figures == {"read iops": "1234"} and result.evidence == ("001.dmesg",)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("description\tx\ndate\td\n", "has no status line"),
        (HEAD + "status\tpassed\n", "status 'passed' is none of pass, fail, not run"),
        (HEAD + "status\tfail\n", "status fail with no reason"),
        (HEAD + "status\tpass\nreason\texit\n", "status pass with a reason"),
        (
            HEAD + "status\tfail\nreason\toops\n",
            "reason 'oops' is none of output, exit, dmesg",
        ),
        (HEAD + "status\tpass\nruntime\t3 s\n", "runtime '3 s' is not bash's '%Rs'"),
        (
            HEAD + "status\tpass\nexit_status\t-1\n",
            "exit_status '-1' is not an exit status",
        ),
        ("description x\n", "line 1 'description x' is not 'key<TAB>value'"),
        ("description\tx\n" * 5000, "is over 65,536 bytes"),
    ],
)
def test_a_file_blktests_did_not_write_is_one_line_naming_it(tmp_path, text, says):
    root = _one(tmp_path, text)
    with pytest.raises(SanlabError) as caught:
        read_results(root)
    message = str(caught.value)
    assert says in message and "nvme/001" in message and "\n" not in message


def test_links_are_never_followed_and_an_empty_folder_is_said(tmp_path):
    root = _one(tmp_path, HEAD + "status\tpass\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "002").write_text(HEAD + "status\tfail\nreason\texit\n")
    (root / "nodev_tr_rdma" / "nvme" / "002").symlink_to(outside / "002")
    (root / "linked").symlink_to(outside)
    assert [r.test for r in read_results(root)] == ["nvme/001"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(SanlabError, match=r"holds no blktests result"):
        read_results(tmp_path / "empty")


def test_a_missing_or_wrong_checkout_is_refused_naming_what_to_clone(tmp_path):
    with pytest.raises(SanlabError, match=rf"^--blktests {tmp_path}/none: does not exist; .*{CLONE}"):
        check_checkout(tmp_path / "none")
    (tmp_path / "file").write_text("")
    with pytest.raises(SanlabError, match=r"is not a folder; give a blktests checkout"):
        check_checkout(tmp_path / "file")
    half = tmp_path / "half"
    (half / "tests" / "nvme").mkdir(parents=True)
    (half / "check").write_text("#!/bin/bash\n")
    (half / "tests" / "nvme" / "rc").write_text("")
    with pytest.raises(SanlabError) as caught:
        check_checkout(half)
    assert str(caught.value) == (
        f"--blktests {half}: is not a blktests checkout (no common/rc, tests/srp/rc); "
        f"give one made with '{CLONE}'"
    )


def test_the_command_reads_a_checkouts_results_and_exits_1_on_a_failure(tmp_path):
    checkout = tmp_path / "blktests"
    for name in ("check", "common/rc", "tests/nvme/rc", "tests/srp/rc"):
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        (checkout / name).write_text("")
    shutil.copytree(META, checkout / "results")
    run = CliRunner().invoke(cli, ["blktests", "results", "--blktests", str(checkout), "--json"])
    assert run.exit_code == 1, run.output
    assert json.loads(run.output)["counts"] == {"pass": 16, "fail": 3, "not run": 5}
    table = CliRunner().invoke(cli, ["blktests", "results", str(META)])
    assert "meta/005     nodev                        fail     output" in table.output
    assert table.output.rstrip().endswith("16 pass, 3 fail, 5 not run (24 results)")
    wrong = CliRunner().invoke(cli, ["blktests", "results", "--blktests", str(tmp_path)])
    assert (
        wrong.exit_code == 1
        and "give one made with 'git clone https://github.com/osandov/blktests'" in wrong.output
    )


WIRE = Path(__file__).resolve().parent / "data" / "blktests-nvme-tcp" / "results"


def test_the_nvme_groups_results_across_a_wire_read_as_the_guest_wrote_them():
    """tests/data/blktests-nvme-tcp: the nvme group over NVMe/TCP, its targets in another guest."""
    found = read_results(WIRE)
    assert counts(found) == {"pass": 21, "fail": 3, "not run": 18}
    by = {r.test: r for r in found}
    assert {r.device for r in found} == {"nodev_tr_tcp", "nodev_tr_tcp_bd_file"}
    assert [t for t, r in sorted(by.items()) if r.status == "fail"] == ["nvme/051", "nvme/057", "nvme/058"]
    assert all(
        by[t].reason == "output" and by[t].evidence[0].endswith(".out.bad") for t in ("nvme/051", "nvme/058")
    )
    assert by["nvme/003"].status == "pass" and 20 < by["nvme/003"].runtime_s < 60  # keep-alives: 10 s waits
    assert "nvme/010" not in by  # stopped at its timeout: blktests wrote no result for it
