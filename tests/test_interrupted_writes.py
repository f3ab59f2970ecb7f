"""Ctrl-C between a file and its manifest stamp must not orphan the file.

Under load, CI once caught a sweep interrupted after it appended rows to
points.jsonl but before it stamped them in the folder's manifest: the resumed
sweep then refused the journal as "a file sanlab did not write".  A run's
results.json has the same window.  Here the signal is sent at exactly that
moment: the write and its stamp finish, and the interrupt comes after them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from sanlab.models.sweeps import sweep_run
from sanlab.models.sweeps.sweep import expand, load_spec
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.results import outdir
from sanlab.scenarios.results.outdir import OutputFolder


@pytest.fixture
def ctrl_c_raises():
    """Ctrl-C as a user's shell delivers it (pytest's workers may have it otherwise)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _interrupt_after(real, only=None):
    """``real``, then Ctrl-C: between the write and its stamp (for ``only`` that path's write)."""

    def wrapped(*args, **kwargs):
        result = real(*args, **kwargs)
        if only is None or os.path.basename(args[1] if isinstance(args[0], int) else args[0]) == only:
            os.kill(os.getpid(), signal.SIGINT)
        return result

    return wrapped


def test_results_written_when_ctrl_c_comes_are_still_sanlabs(tmp_path, monkeypatch, ctrl_c_raises):
    monkeypatch.setattr(outdir, "write_at", _interrupt_after(outdir.write_at, "results.json"))
    folder = OutputFolder.open(tmp_path, "--out")
    with pytest.raises(KeyboardInterrupt):
        folder.write_text("results.json", '{"results": []}\n')
    reopened = OutputFolder.open(tmp_path, "--out")
    assert reopened.ours("results.json") and reopened.foreign() == []


def test_a_sweep_journal_cut_by_ctrl_c_resumes(tmp_path, monkeypatch, ctrl_c_raises):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "axes: {transport: [nvme-tcp], iodepth: [1, 2]}\n"
        "fixed: {fabric: eth, link_gbps: 100, rw: randread, bs: 4k, numjobs: 1}\n"
    )
    grid = expand(load_spec(spec))
    out = tmp_path / "out"
    journal = sweep_run.Journal(out, grid)
    with pytest.raises(KeyboardInterrupt), journal.appending() as add:
        monkeypatch.setattr(sweep_run.os, "fsync", _interrupt_after(os.fsync))  # after the rows' fsync
        add([{"key": "a", "iops": 1.0}])
    monkeypatch.undo()
    assert list(sweep_run.Journal(out, grid).done()) == ["a"]


def test_signals_wait_only_as_long_as_the_block(ctrl_c_raises):
    with pytest.raises(KeyboardInterrupt):
        with outdir.signals_held():
            os.kill(os.getpid(), signal.SIGINT)
            reached = True  # the interrupt did not cut the block short
        reached = False
    assert reached
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# --- a kill at any moment of a write: the folder stays sanlab's (issue #45) ---------------------


def _killed_at(folder_path, name, data, step):
    """Fork; the child writes ``name`` and is killed (os._exit) before the ``step``-th call of the
    one writer, or after the last; the parent gets the folder as the kill left it."""
    pid = os.fork()
    if pid == 0:  # the child: never returns to pytest
        try:
            calls = iter(range(1 << 10))
            real = outdir.write_at

            def dying(*args, **kwargs):
                if next(calls) == step:
                    os._exit(9)
                return real(*args, **kwargs)

            outdir.write_at = dying
            OutputFolder.open(folder_path, "--out").write_text(name, data)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


WRITE_CALLS = 4  # a write: manifest (temporary entered), temporary + manifest (both stamps), manifest


@pytest.mark.subprocess
@pytest.mark.parametrize("existing", [False, True], ids=["new", "replaced"])
@pytest.mark.parametrize("step", range(WRITE_CALLS + 1))
def test_a_write_killed_at_any_step_leaves_a_folder_sanlab_still_owns(tmp_path, existing, step):
    if existing:
        OutputFolder.open(tmp_path, "--out").write_text("results.json", "old\n")
    code = _killed_at(tmp_path, "results.json", "new\n", step)
    assert code == (0 if step == WRITE_CALLS else 9)
    folder = OutputFolder.open(tmp_path, "--out")  # the kill's temporary, if any, is removed here
    assert folder.foreign() == [], "a kill left a file sanlab no longer vouches for"
    path = tmp_path / "results.json"
    assert not path.exists() or folder.ours("results.json")
    assert path.read_text() in (("old\n", "new\n") if existing else ("new\n",)) if path.exists() else True
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []
    folder.write_text("results.json", "again\n")  # and the next write is not refused
    assert path.read_text() == "again\n"


SWEEP_SPEC = (
    "axes: {transport: [nvme-tcp, iscsi], iodepth: [1, 2, 4, 8, 16, 32, 64, 128, 256], bs: [4k, 64k]}\n"
    "fixed: {fabric: eth, link_gbps: 100, rw: randread, numjobs: 1}\n"
    "solver: sim\n"
)


def _sanlab(*args, **kwargs):
    return subprocess.Popen(
        [sys.executable, "-m", "sanlab", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


@pytest.mark.subprocess
@pytest.mark.parametrize("after", [0.3, 0.7, 1.0, 1.5, 2.0, 3.0])
def test_a_sweep_killed_early_resumes_and_is_never_refused(tmp_path, after):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SWEEP_SPEC)
    out = tmp_path / "sweep"
    first = _sanlab("sweep", spec, "--out", out, "--serial")
    time.sleep(after)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=60)
    again = _sanlab("sweep", spec, "--out", out, "--serial")
    stdout, stderr = again.communicate(timeout=600)
    assert again.returncode == 0, stderr
    assert "did not write" not in stderr and "Traceback" not in stderr
    assert json.loads((out / "summary.json").read_text())["points"] == 36


@pytest.mark.subprocess
@pytest.mark.parametrize("after", [1.0, 2.0, 3.0, 3.5, 4.0])
def test_model_report_cut_by_ctrl_c_is_never_refused_after(tmp_path, after):
    report = tmp_path / "report"
    first = _sanlab("model", "--report", report)
    time.sleep(after)
    first.send_signal(signal.SIGINT)
    first.communicate(timeout=120)
    point = ["--transport", "iser", "--fabric", "roce", "--link-gbps", "56", "--rw", "randread"]
    again = _sanlab("model", *point, "--bs", "4k", "--iodepth", "1", "--numjobs", "1", "--report", report)
    _, stderr = again.communicate(timeout=300)
    assert again.returncode == 0, stderr
    assert OutputFolder.open(report, "--report").foreign() == []


EDITS = {
    "a garbage line": lambda text: text + "{not json\n",
    "a row changed": lambda text: text.replace('"iops": ', '"iops": 1', 1),
    "half of it gone": lambda text: "".join(text.splitlines(keepends=True)[: len(text.splitlines()) // 2]),
    "cut mid-line": lambda text: text[: len(text) // 2],
    "emptied": lambda text: "",
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_a_hand_edited_journal_resumes(tmp_path, edit):
    from click.testing import CliRunner

    from sanlab.main import cli

    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "axes: {transport: [nvme-tcp, iscsi], iodepth: [1, 2]}\n"
        "fixed: {fabric: eth, link_gbps: 100, rw: randread, bs: 4k, numjobs: 1}\n"
    )
    out = tmp_path / "sweep"
    args = ["sweep", str(spec), "--out", str(out), "--serial"]
    assert CliRunner().invoke(cli, args).exit_code == 0
    journal = out / sweep_run.JOURNAL
    journal.write_text(EDITS[edit](journal.read_text()))
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert json.loads((out / "summary.json").read_text())["points"] == 4


def test_a_journal_that_is_a_link_is_still_refused(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "axes: {transport: [nvme-tcp], iodepth: [1, 2]}\n"
        "fixed: {fabric: eth, link_gbps: 100, rw: randread, bs: 4k, numjobs: 1}\n"
    )
    grid = expand(load_spec(spec))
    out = tmp_path / "out"
    sweep_run.Journal(out, grid)
    (tmp_path / "elsewhere.jsonl").write_text("")
    (out / sweep_run.JOURNAL).symlink_to(tmp_path / "elsewhere.jsonl")
    with pytest.raises(SanlabError):
        sweep_run.Journal(out, grid).done()
    assert (tmp_path / "elsewhere.jsonl").read_text() == ""
