"""Ctrl-C between a file and its manifest stamp must not orphan the file.

Under load, CI once caught a sweep interrupted after it appended rows to
points.jsonl but before it stamped them in the folder's manifest: the resumed
sweep then refused the journal as "a file sanlab did not write".  A run's
results.json has the same window.  Here the signal is sent at exactly that
moment: the write and its stamp finish, and the interrupt comes after them.
"""

from __future__ import annotations

import os
import signal

import pytest

from sanlab.models import sweep_run
from sanlab.models.sweep import expand, load_spec
from sanlab.scenarios import outdir
from sanlab.scenarios.outdir import OutputFolder


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
