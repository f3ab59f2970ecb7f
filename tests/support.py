"""Paths and the rule for missing tools, shared by the tests.

Outside CI a test whose external tool (qemu, tshark) is missing is skipped
with the reason; with CI=true it fails instead, so CI can never go green by
skipping what it was meant to run.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from sanlab.targets.dryrun import Reply  # noqa: F401 - what a scripted host answers (a targets Result)

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
SCENARIOS = REPO / "scenarios"


def require_tool(name: str) -> str:
    """The path of ``name``, or skip (outside CI) / fail (in CI) naming what is missing."""
    path = shutil.which(name)
    if path:
        return path
    message = f"{name} is not installed (install it, or run the README's test command)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and {message}")
    pytest.skip(message)


def require_path(path: Path, what: str) -> Path:
    if path.exists():
        return path
    message = f"{what} not found at {path}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and {message}")
    pytest.skip(message)


def reruns(records) -> int:
    """How many records come from a second attempt, made after the link doctor revived a
    stalled link (``sanlab run`` does the same; such a record's note says so)."""
    return sum(1 for r in records if r.note and "stalled link" in r.note)
