"""Session fixtures; see support.py for paths and the missing-tool rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import SHARED, require_path


@pytest.fixture(scope="session")
def calibration_dir() -> Path:
    return require_path(SHARED / "calibration", "shared/calibration (the published tables)")


@pytest.fixture(scope="session")
def guest_image():
    """The guest image, built (minutes, once) if the cache lacks it."""
    from sanlab.emulator.images import build_image
    from support import require_tool

    require_tool("qemu-system-x86_64")
    require_tool("mmdebstrap")
    return build_image(print)
