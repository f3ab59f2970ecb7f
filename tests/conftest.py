"""Session fixtures; see support.py for paths and the missing-tool rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import SHARED, require_path


@pytest.fixture(scope="session")
def calibration_dir() -> Path:
    return require_path(SHARED / "calibration", "shared/calibration (the published tables)")
