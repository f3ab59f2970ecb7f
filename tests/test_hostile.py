"""Every case of the hostile corpus (hostile.py) fails cleanly, in one line, and harms nothing.

Held to: exit 1 or 2, no traceback, the expected piece in what the user is
told, every line short, an answer before the hang guard (60 s: a hang, not a
slow machine, fails), and no file a case plants outside its folder changed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from hostile import FIFO, FOLDER, HUGE, Hostile, corpus
from test_bad_inputs import deadline, error_lines

from sanlab.main import cli
from support import REPO

CASES = corpus()
PWNED = Path("/tmp/sanlab-pwned")


def test_the_corpus_with_the_scenario_corpus_is_over_300():
    from bad_inputs import MODEL_CASES, scenario_cases
    from test_bad_inputs import CAPTURES

    assert len(CASES) + len(scenario_cases()) + len(MODEL_CASES) + len(CAPTURES) >= 300


def _plant(folder: Path, files: dict[str, str]) -> None:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content == FIFO:
            os.mkfifo(path)
        elif content == FOLDER:
            path.mkdir()
        elif content == HUGE:
            with open(path, "wb") as handle:
                handle.truncate(100 << 20)
        elif content.startswith("<symlink:"):
            path.symlink_to(content.removeprefix("<symlink:").removesuffix(">"))
        else:
            path.write_text(content.replace("{d}", str(folder)))


# Cases that get as far as tshark (analyze of a real capture): not in the fast tier.
REACH_TSHARK = {"analyze-io-past"}
PARAMS = [
    pytest.param(c, id=c.name, marks=[pytest.mark.tshark] if c.name in REACH_TSHARK else []) for c in CASES
]


@pytest.mark.parametrize("case", PARAMS)
def test_hostile(tmp_path, monkeypatch, case: Hostile):
    monkeypatch.chdir(REPO)
    _plant(tmp_path, case.files)
    env = {"XDG_RUNTIME_DIR": str(tmp_path / "run")} if case.runtime else {}
    argv = [arg.replace("{d}", str(tmp_path)) for arg in case.argv]
    with deadline(60):
        result = CliRunner().invoke(cli, argv, env=env)
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), (
        f"raised {result.exception!r}"
    )
    assert result.exit_code in (1, 2), result.output
    assert "Traceback" not in result.output
    lines = error_lines(result.output)
    assert lines and any(case.expect in line for line in lines), result.output
    assert all(len(line) < 600 for line in lines), result.output
    assert not PWNED.exists(), "a case ran a command on this machine"
