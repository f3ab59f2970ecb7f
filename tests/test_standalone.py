"""The repository stands alone: a clone with nothing beside it does the demo in full.

The published tables the demo sets its projections beside used to be read from
a folder next to the checkout, so a clone from anywhere else lost the table's
whole point (the ``published`` and ``err`` columns).  This test makes exactly
that clone, with no ``shared`` folder on any of its parents, and runs the
README's first command in it, its own virtualenv included.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from support import REPO


def _no_shared_above(folder: Path) -> None:
    for parent in [folder, *folder.parents]:
        assert not (parent / "shared").exists(), f"{parent / 'shared'} exists: the clone would not be alone"


@pytest.mark.subprocess
@pytest.mark.slow  # a virtualenv and an install from pip's cache: tens of seconds
def test_the_demo_in_a_lone_clone_prints_the_published_column_and_its_error(tmp_path):
    clone = tmp_path / "elsewhere" / "sanlab"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(clone)], check=True)
    _no_shared_above(clone)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANLAB_")}
    env["SANLAB_VENV"] = str(tmp_path / "venv")
    demo = subprocess.run(
        ["bash", "tests/bootstrap", "demo"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert demo.returncode == 0, demo.stderr[-2000:]
    header = next(line for line in demo.stdout.splitlines() if line.startswith("set-up"))
    assert "published" in header.split() and "err" in header.split(), header
    rows = [line for line in demo.stdout.splitlines() if line.startswith(("iSCSI", "iSER", "SRP"))]
    assert len(rows) >= 20, demo.stdout[-2000:]
    assert all(line.rstrip().endswith("%") for line in rows), "a row lacks its published value and error"
    assert "not found" not in demo.stderr, demo.stderr[-2000:]
    assert "Please be careful" not in demo.stderr, demo.stderr[-2000:]  # setuptools' box, filtered
