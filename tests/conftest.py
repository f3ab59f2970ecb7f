"""Session fixtures and the test tiers; see support.py for paths and the missing-tool rule.

Tiers (tox -e fast / unit / vm; the README's test command runs them all):
  fast   no subprocess, VM, tshark or browser: what an edit needs checked, in under 2 minutes
  unit   everything but the VMs
  vm     tests that boot QEMU guests

A test says what it needs by its markers (``subprocess``, ``browser``, ``slow``,
``tshark``, ``vm``; see pyproject.toml).  The fast tier does not trust them: with
SANLAB_TIER=fast a test that starts a process fails, naming the marker it lacks,
so a slow test cannot slip into the fast tier unnoticed.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from sanlab.models.core import published

FAST_TIER = os.environ.get("SANLAB_TIER") == "fast"

# Files that hold one xdist worker for long (measured for issue #50), longest first.  Under
# --dist loadfile a file runs whole on one worker, and xdist sends files with the most tests
# first: the one-test, minute-long test_standalone.py went last and ran alone at the end.
# Sent first, the other worker's many short files run beside them instead of after them.
LONG_FILES = (
    "test_backtest.py",
    "test_coverage.py",
    "test_standalone.py",
    "test_docs.py",
    "test_calibrate_runs.py",
    "test_priors.py",
    "test_golden.py",
    "test_interrupted_writes.py",
    "test_one_writer.py",
    "test_checks.py",
    "test_hostile_bounds.py",
    "test_hostile_reading.py",
    "test_hostile_ssh.py",
)
# The VM tier's files, longest first (wall under -n 2, 2026-11-27): sorted by test count, the
# one-test incast (minutes of four guests) went last and ran alone at the tier's end.
LONG_FILES += (
    "test_ssh_hosts.py",
    "test_labs.py",
    "test_emulator_pairs.py",
    "test_multipath.py",
    "test_flap.py",
    "test_incast.py",
    "test_foreign_objects.py",
    "test_smoke.py",
    "test_lab_cli.py",
)


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False  # the order pytest_collection_modifyitems gives


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Under xdist: the long files first, then the rest as xdist would (most tests first)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    counts = Counter(item.path.name for item in items)

    def rank(item):
        name = item.path.name
        first = LONG_FILES.index(name) if name in LONG_FILES else len(LONG_FILES)
        return (first, -counts[name], str(item.path))

    items.sort(key=rank)  # stable: a file's tests keep their order


@pytest.fixture(autouse=True)
def _fast_tier_starts_no_process(request, monkeypatch):
    """Under SANLAB_TIER=fast, starting a process (subprocess, multiprocessing, fork) fails the test."""
    if not FAST_TIER:
        return
    import _posixsubprocess
    import subprocess

    def refuse(*args, **kwargs):
        pytest.fail(
            f"{request.node.nodeid} starts a process, which the fast tier does not: "
            "mark it @pytest.mark.subprocess (or slow, browser, tshark, vm)",
            pytrace=False,
        )

    # Every way Python starts one: subprocess (and asyncio through it), multiprocessing, os.
    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)
    monkeypatch.setattr(_posixsubprocess, "fork_exec", refuse)
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
        monkeypatch.setattr(os, name, refuse)


@pytest.fixture(scope="session")
def calibration_dir() -> Path:
    """The published tables the package ships (models/data/published)."""
    return published.calibration_dir()


@pytest.fixture(scope="session")
def guest_image():
    """The guest image, built (minutes, once) if the cache lacks it."""
    from sanlab.emulator.images import build_image
    from support import require_tool

    require_tool("qemu-system-x86_64")
    require_tool("mmdebstrap")
    return build_image(print)


@pytest.fixture(scope="session")
def debian_13_image():
    """The Debian 13 guest's image (Linux 6.12: NVMe TLS and in-band authentication)."""
    from sanlab.emulator.images import build_image
    from support import require_tool

    require_tool("qemu-system-x86_64")
    require_tool("mmdebstrap")
    return build_image(print, guest="debian-13")
