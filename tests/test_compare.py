"""``sanlab compare``: two run folders as one page of what differs (scenarios/results/compare.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.results.compare import (
    EMULATED_NOTE,
    Ladder,
    RunRead,
    page,
    paired,
    pooled,
    read_run,
    verdict,
)
from sanlab.scenarios.results.records import ResultRecord

BASE = {"mode": "emulated", "transport": "nvme-tcp", "fabric": "eth", "target_stack": "nvmet", "mtu": 1500}


def _record(**fields: object) -> ResultRecord:
    shape = {"rw": "randwrite", "bs": 4096, "iodepth": 4, "numjobs": 1, "initiator": "initiator"}
    return ResultRecord.model_validate(BASE | shape | fields)


def test_points_pair_by_stack_wire_and_shape_whatever_their_order():
    a = [_record(bs=4096, verify="pass"), _record(bs=65536, verify="pass"), _record(transport="iscsi")]
    b = [_record(bs=65536, verify="fail"), _record(bs=4096, verify="pass"), _record(transport="srp")]
    pairs = paired(a, b)
    assert [(x and x.bs, y and y.bs) for x, y in pairs] == [
        (4096, 4096),
        (65536, 65536),
        (4096, None),
        (None, 4096),
    ]
    assert [verdict(y) for _, y in pairs] == ["pass", "FAIL", "-", "ran"]
    assert verdict(_record(error="fio: no device")) == "ERROR"


def test_the_same_point_twice_pairs_in_turn():
    a = [_record(recovery_s=1.0), _record(recovery_s=2.0)]
    b = [_record(recovery_s=3.0), _record(recovery_s=4.0), _record(recovery_s=5.0)]
    assert [(x and x.recovery_s, y and y.recovery_s) for x, y in paired(a, b)] == [
        (1.0, 3.0),
        (2.0, 4.0),
        (None, 5.0),
    ]


def test_captures_of_one_link_pool_weighted_by_their_ios():
    rows = [
        Ladder("roce", "nvme-tcp", "write", 4096, 100, 4.0, 4500.0, 1.0),
        Ladder("roce", "nvme-tcp", "write", 4096, 300, 2.0, 4300.0, 1.0),
        Ladder("roce", "nvme-tcp", "read", 4096, 10, 3.0, 4400.0, 1.0),
    ]
    read, write = pooled(rows)
    assert (read.op, read.count) == ("read", 10)
    assert (write.count, write.frames, write.wire_bytes, write.round_trips) == (400, 2.5, 4350.0, 1.0)


def _run(folder: str, records: list[ResultRecord], kernel: str) -> RunRead:
    return RunRead(Path(folder), "kernel-pair", "complete", records, kernel)


def test_the_page_says_what_differs_and_never_compares_emulated_speeds():
    a = _run("run-a", [_record(verify="pass", recovery_s=2.4, iops=900.0)], "6.1.0-41-amd64")
    b = _run("run-b", [_record(verify="fail", recovery_s=9.5, iops=12345.0)], "6.12.57+deb13-amd64")
    ladders = (
        [Ladder("roce", "nvme-tcp", "write", 4096, 256, 4.0, 4418.0, 1.0)],
        [Ladder("roce", "nvme-tcp", "write", 4096, 256, 3.0, 4418.0, 1.0)],
    )
    projected = _record(
        mode="projected", profile="starwind-2024", iops=250000.0, lat_mean_us=15.5, bottleneck="cpu"
    )
    text = page(a, b, ladders, ([projected], [projected]))
    assert "| kernel | 6.1.0-41-amd64 | 6.12.57+deb13-amd64 |" in text
    assert "1 points; 1 with another outcome in B than in A." in text
    assert "| pass | FAIL | 2.40 | 9.50 | **differs** |" in text
    assert "| roce | nvme-tcp | write 4k | 256 | 256 | **4 -> 3** | 4418 | 1 |" in text
    assert EMULATED_NOTE in text
    assert "12345" not in text and "12,345" not in text and "900" not in text  # emulated IOPS: never shown
    assert "| 250,000 | 250,000 | 15.5 | 15.5 | cpu / cpu |" in text


def test_a_folder_that_is_no_run_is_one_line(tmp_path):
    with pytest.raises(SanlabError, match=r"^RUN_A .*/none: is not a folder"):
        read_run(tmp_path / "none", "RUN_A")
    with pytest.raises(SanlabError, match=r"^RUN_B .*: holds no results.json of a sanlab run$"):
        read_run(tmp_path, "RUN_B")
    (tmp_path / "results.json").write_text(json.dumps({"run": {}, "results": [{"mode": "guessed"}]}))
    with pytest.raises(SanlabError, match=r"results\[0\] is not a result record$"):
        read_run(tmp_path, "RUN_B")


def test_the_kernel_is_read_from_the_runs_kernel_logs(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps({"run": {"status": "complete"}, "results": []}))
    (tmp_path / "share-2" / "logs").mkdir(parents=True)
    (tmp_path / "share-2" / "logs" / "target.dmesg").write_text(
        "[    0.000000] Linux version 6.12.57+deb13-amd64 (debian-kernel@lists.debian.org) ...\n"
    )
    assert read_run(tmp_path, "RUN_A").kernel == "6.12.57+deb13-amd64"


KEPT = Path(__file__).resolve().parent / "data" / "kernel-compare"  # README.md: how they were made


def test_two_kernels_real_runs_on_one_page():
    """Two real runs (Debian 12's 6.1 and Debian 13's 6.12) of one scenario: the kernels from
    their logs, each point's verdict and recovery, the model's figures, no emulated speed."""
    from click.testing import CliRunner

    from sanlab.main import cli

    run = CliRunner().invoke(cli, ["compare", str(KEPT / "debian-12"), str(KEPT / "debian-13")])
    assert run.exit_code == 0, run.output
    text = run.output
    assert "| kernel | 6.1.0-50-amd64 | 6.12.117+deb13-amd64 |" in text
    assert "2 points; 0 with another outcome in B than in A." in text
    assert "| nvme-tcp nvmet eth randwrite 4k qd4 j1 | pass | pass | 1.14 | 0.37 |  |" in text
    assert "| nvme-rdma nvmet roce/rxe randwrite 4k qd4 j1 | pass | pass | 0.13 | 0.61 |  |" in text
    assert "No wire ladders: debian-12 and debian-13 kept no capture" in text
    model = text.split("## The model's projection", 1)[1]
    assert model.count("(modern-100g) |") == 2 and EMULATED_NOTE in model
    before = text.split("## The model", 1)[0]
    assert "IOPS" not in before and "lat" not in before.lower()  # no emulated speed is set out
    for folder in ("debian-12", "debian-13"):
        for record in json.loads((KEPT / folder / "results.json").read_text())["results"]:
            assert f"| {record['iops']:,.0f} |" not in text and f"| {record['lat_mean_us']:.1f} |" not in text


def test_a_runs_own_strings_are_escaped_on_the_page(tmp_path):
    """results.json is anyone's file: a '|' or a line break in its scenario's name or status
    must not split a table's cell or start a heading of its own."""
    planted = "evil | scenario\n# heading\n| x |"
    (tmp_path / "results.json").write_text(
        json.dumps({"run": {"scenario": planted, "status": "complete|\nfailed"}, "results": []})
    )
    a = read_run(tmp_path, "RUN_A")
    text = page(a, a, "none", "none")
    head, status = (
        text.splitlines()[0],
        next(line for line in text.splitlines() if line.startswith("| status")),
    )
    assert head == r"# evil \| scenario \# heading \| x \| vs evil \| scenario \# heading \| x \|"
    assert status == r"| status | complete\| failed | complete\| failed |"
    assert status.replace("\\|", "").count("|") == 4  # three cells, however the status was written
    assert "\n# heading" not in text and "\n| x |" not in text
