"""Reproducers of known kernel bugs: a point that fails as the bug says, on a kernel it lists, is
``known-bad`` (scenarios/results/known_bad.py); anything else is judged as in any run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sanlab.scenarios.errors import ScenarioError
from sanlab.scenarios.loader import load_scenario, parse_scenario
from sanlab.scenarios.results import known_bad
from sanlab.scenarios.results.compare import RunRead, page, verdict
from sanlab.scenarios.results.records import ResultRecord
from sanlab.scenarios.schema import KnownBug

ROOT = Path(__file__).resolve().parents[1]
REPRODUCERS = sorted((ROOT / "scenarios" / "reproducers").glob("*.yaml"))
BUG = KnownBug(
    name="rxe-qp1-deaf",
    title="rxe: QP 1 deaf after a flap",
    kernels=["6.1.0-*"],
    symptom="no I/O for 150 s after the flap",
    shows=["stalled and did not come back", known_bad.LATE],
    fix="rxe must take QP 1 out of error whole",
    recover_within=30.0,
)
STALL = "initiator: no I/O completed on /dev/nvme0n1 for 150 s: the transport stalled and did not come back"


def _record(**fields: object) -> ResultRecord:
    base = {
        "mode": "emulated", "transport": "nvme-rdma", "fabric": "roce", "rdma_driver": "rxe",
        "target_stack": "nvmet", "mtu": 1500, "rw": "randwrite", "bs": 4096, "iodepth": 4, "numjobs": 1,
    }  # fmt: skip
    return ResultRecord.model_validate(base | fields)


def test_a_stall_on_a_listed_kernel_is_known_bad_and_keeps_its_error():
    [judged] = known_bad.judged([_record(verify="fail", error=STALL)], BUG, "6.1.0-50-amd64")
    assert judged.known_bad == "rxe-qp1-deaf on 6.1.0-50-amd64: rxe: QP 1 deaf after a flap"
    assert judged.error == STALL  # the evidence stays
    assert known_bad.outcome(judged) == verdict(judged) == known_bad.KNOWN_BAD
    assert known_bad.exit_status([judged, _record(verify="pass")]) == known_bad.EXIT_KNOWN_BAD


def test_the_same_stall_on_a_kernel_the_bug_does_not_list_is_a_failure():
    [judged] = known_bad.judged([_record(verify="fail", error=STALL)], BUG, "6.12.117+deb13-amd64")
    assert judged.known_bad is None and verdict(judged) == "ERROR"
    assert known_bad.exit_status([judged]) == 1
    assert known_bad.summary([judged], BUG, "6.12.117+deb13-amd64") == [
        "rxe-qp1-deaf: not known on 6.12.117+deb13-amd64 (known on 6.1.0-*); judged as any run"
    ]


def test_a_failure_the_bug_does_not_explain_stays_a_failure_on_its_kernel():
    other = _record(verify="fail", error="nvme connect failed: Connection refused")
    [judged] = known_bad.judged([other], BUG, "6.1.0-50-amd64")
    assert judged.known_bad is None and known_bad.exit_status([judged]) == 1


def test_a_kernel_that_was_not_logged_makes_nothing_known_bad():
    [judged] = known_bad.judged([_record(verify="fail", error=STALL)], BUG, "")
    assert judged.known_bad is None and not known_bad.affected(BUG, "")


@pytest.mark.parametrize(
    ("recovery", "dip", "said"),
    [
        (45.5, 100.0, "I/O came back 45.50 s after the fault, later than recover_within 30 s"),
        (None, 100.0, "no I/O came back after the fault (recover_within 30 s)"),
    ],
)
def test_io_back_too_late_fails_and_is_known_bad_where_the_bug_is(recovery, dip, said):
    late = _record(verify="pass", recovery_s=recovery, throughput_dip_pct=dip)
    [on_buggy] = known_bad.judged([late], BUG, "6.1.0-50-amd64")
    [on_fixed] = known_bad.judged([late], BUG, "6.13.0-sanlab")
    assert on_buggy.error == on_fixed.error == said
    assert verdict(on_buggy) == known_bad.KNOWN_BAD and verdict(on_fixed) == "ERROR"


def test_io_back_in_time_passes_and_the_summary_says_the_bug_did_not_show():
    quick = _record(verify="pass", recovery_s=0.4, throughput_dip_pct=90.0)
    [judged] = known_bad.judged([quick], BUG, "6.1.0-50-amd64")
    assert judged == quick and known_bad.exit_status([judged]) == 0
    assert known_bad.summary([judged], BUG, "6.1.0-50-amd64") == [
        "rxe-qp1-deaf: did not show on 6.1.0-50-amd64, a kernel it is known on (1 points)"
    ]


def test_judging_twice_is_judging_once():
    records = [
        _record(verify="fail", error=STALL),
        _record(verify="pass", recovery_s=99.0, throughput_dip_pct=1.0),
    ]
    once = known_bad.judged(records, BUG, "6.1.0-50-amd64")
    assert known_bad.judged(once, BUG, "6.1.0-50-amd64") == once


def test_a_rerun_whose_note_carries_the_mark_is_known_bad():
    rerun = _record(verify="fail", error="fio exited 1", note=f"first attempt failed: {STALL}")
    [judged] = known_bad.judged([rerun], BUG, "6.1.0-50-amd64")
    assert judged.known_bad is not None


def test_the_summary_of_a_known_bad_run_says_what_a_fix_must_change():
    judged = known_bad.judged([_record(verify="fail", error=STALL)], BUG, "6.1.0-50-amd64")
    lines = known_bad.summary(judged, BUG, "6.1.0-50-amd64")
    assert lines[0].startswith("known-bad: 1 of 1 points: rxe-qp1-deaf on 6.1.0-50-amd64")
    assert lines[1:] == [
        "  symptom: no I/O for 150 s after the flap",
        "  a fix must: rxe must take QP 1 out of error whole",
    ]


def test_compare_sets_known_bad_beside_pass():
    bad = known_bad.judged([_record(verify="fail", error=STALL)], BUG, "6.1.0-50-amd64")
    a = RunRead(Path("a-debian-12"), "rxe-qp1-flap", "complete", bad, "6.1.0-50-amd64")
    b = RunRead(Path("b-linux"), "rxe-qp1-flap", "complete", [_record(verify="pass")], "6.13.0")
    text = page(a, b, "none", "none")
    assert "| known-bad | pass | - | - | **differs** |" in text
    assert (
        "A, nvme-rdma nvmet roce/rxe randwrite 4k qd4 j1: known-bad, rxe-qp1-deaf on 6.1.0-50-amd64" in text
    )


# --- the shipped reproducers -----------------------------------------------------------------


@pytest.mark.parametrize("path", REPRODUCERS, ids=lambda p: p.stem)
def test_each_shipped_reproducer_names_its_bug_kernels_symptom_and_fix(path):
    scenario = load_scenario(path)
    bug = scenario.known_bug
    assert bug is not None and bug.fix and bug.symptom and bug.kernels and bug.recover_within
    assert any(known_bad.affected(bug, k) for k in ("6.1.0-50-amd64", "6.12.117+deb13-amd64"))
    assert scenario.guest in ("debian-12", "debian-13") and all(
        f.pull == "interfaces" for f in scenario.faults
    )
    assert f"sanlab run scenarios/reproducers/{path.name}" in path.read_text()  # says how to run it


def test_three_bugs_are_shipped():
    names = {load_scenario(p).known_bug.name for p in REPRODUCERS}  # type: ignore[union-attr]
    assert names == {"rxe-qp1-deaf", "nvme-rdma-reconnect-stall", "iser-no-relogin"}


def _sanlab_messages() -> str:
    return "\n".join(p.read_text() for p in (ROOT / "targets").rglob("*.py"))


@pytest.mark.parametrize("path", REPRODUCERS, ids=lambda p: p.stem)
def test_every_mark_is_something_a_run_can_write(path):
    """A mark nothing writes would make a reproducer that can never be known-bad: each is the
    late-recovery word, a phrase of sanlab's own errors, or a kernel function a stuck task's
    stack names (targets/kernel_stacks.py)."""
    source = _sanlab_messages()
    for mark in load_scenario(path).known_bug.shows:  # type: ignore[union-attr]
        kernel_symbol = re.fullmatch(r"[a-z_][a-z0-9_]+", mark) and "_" in mark
        assert mark == known_bad.LATE or mark in source or kernel_symbol, mark


def _with(bug: dict[str, object], fault: dict[str, object] | None = None) -> dict[str, object]:
    return {
        "hosts": [{"name": "i", "role": "initiator"}, {"name": "t", "role": "target"}],
        "links": [{"name": "roce", "endpoints": ["i", "t"], "fabric": "roce"}],
        "targets": [{"name": "n", "host": "t", "stack": "nvmet", "transport": "nvme-rdma"}],
        "workloads": [{"name": "w", "rw": "randwrite", "bs": "4k", "verify": "crc32c"}],
        "faults": [fault or {"at": "2s", "link": "roce", "action": "down", "pull": "interfaces"}],
        "known_bug": {
            "name": "b", "title": "t", "kernels": ["6.1.0-*"], "symptom": "s", "shows": ["x"], "fix": "f",
        } | bug,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("bug", "fault", "said"),
    [
        ({"kernels": ["$(reboot)"]}, None, "known_bug.kernels[0]"),
        ({"kernels": []}, None, "known_bug.kernels"),
        ({"fix": "two\nlines"}, None, "known_bug.fix"),
        ({"colour": "red"}, None, "known_bug.colour"),
        ({}, {"at": "2s", "target": "n", "action": "restart", "pull": "interfaces"}, "faults[0].pull"),
        ({}, {"at": "2s", "link": "roce", "action": "down", "pull": "cable"}, "faults[0].pull"),
    ],
)
def test_a_bad_known_bug_or_pull_is_one_line_naming_the_field(bug, fault, said):
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(_with(bug, fault), "x.yaml")
    assert [p.path for p in caught.value.problems] == [said], caught.value.problems


def test_sanlab_runs_table_says_known_bad_and_its_exit_status_is_three(tmp_path, capsys):
    from sanlab import commands_run

    judged = known_bad.judged([_record(verify="fail", error=STALL)], BUG, "6.1.0-50-amd64")
    said = known_bad.summary(judged, BUG, "6.1.0-50-amd64")
    assert commands_run._report(judged, tmp_path, as_json=False, captured=False, said=said) == 3
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[-2:] == ["verify", "checked"]
    assert " known-bad " in out[1] and "KNOWN-BAD: rxe-qp1-deaf on 6.1.0-50-amd64" in out[1]
    assert out[1].index("known-bad") == out[0].index("verify")  # in its column, the column wide enough
    assert out[-3:] == said
    assert commands_run._report([_record(verify="pass")], tmp_path, as_json=False, captured=False) == 0
