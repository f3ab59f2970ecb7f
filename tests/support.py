"""Paths and the rule for missing tools, shared by the tests.

Outside CI a test whose external tool (qemu, tshark) is missing is skipped
with the reason; with CI=true it fails instead, so CI can never go green by
skipping what it was meant to run.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

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


@dataclass
class Reply:
    """What a scripted host answers to one command (the targets layer's Result)."""

    rc: int = 0
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.rc == 0
