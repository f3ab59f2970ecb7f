"""The NVMe host finds its own namespace's block device, never another target's (targets/nvme_host.py).

In the path benchmark's lab (2026-11-27, models/data/paths/README.md) NVMe/RDMA over rxe was
handed nvme-tcp's /dev/nvme0n1: its I/O ran through nvme_tcp and nvmet_tcp (their symbols in
path-lengths.runs.jsonl) and crossed no rxe frame.  The lookup ran before the new namespace
was scanned: ``$c/nvme*n*`` matched nothing, sh kept the pattern, and the unquoted
``[ -b /dev/$b ]`` globbed it again under /dev, where the one other namespace matched.  Here
the lookup runs, as the host runs it, on a made-up sysfs and /dev in a temporary folder.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from sanlab.targets.nvme_host import namespaces_script

pytestmark = pytest.mark.subprocess

TCP, RXE = "nqn.2026-11.org.sanlab:nvme-tcp-none", "nqn.2026-11.org.sanlab:nvme-rdma-rxe"


def _subsystem(root: Path, n: int, nqn: str, namespace: bool) -> None:
    """nvme-subsysN and controller nvmeN of ``nqn``, as native multipath lays them out; with
    ``namespace``, the scan has run: nvmeNn1 under the subsystem, the hidden nvmeNcNn1
    under the controller, the block device node."""
    subsys, ctrl = root / f"sys/class/nvme-subsystem/nvme-subsys{n}", root / f"sys/class/nvme/nvme{n}"
    for folder in (subsys, ctrl):
        folder.mkdir(parents=True)
        (folder / "subsysnqn").write_text(nqn + "\n")
    if namespace:
        (subsys / f"nvme{n}n1").mkdir()
        (ctrl / f"nvme{n}c{n}n1").mkdir()
        (root / "dev").mkdir(exist_ok=True)
        (root / "dev" / f"nvme{n}n1").touch()
        (root / "dev" / f"nvme{n}c{n}n1").touch()


def _lookup(root: Path, nqn: str) -> list[str]:
    shell = shutil.which("dash") or shutil.which("sh") or "sh"  # the guests' /bin/sh is dash
    script = namespaces_script(nqn, str(root / "sys"), str(root / "dev"))
    done = subprocess.run([shell, "-c", script], capture_output=True, text=True, timeout=30, check=False)
    return sorted(done.stdout.split())


def test_a_namespace_not_yet_scanned_is_not_the_other_targets_one(tmp_path):
    _subsystem(tmp_path, 0, TCP, namespace=True)
    _subsystem(tmp_path, 1, RXE, namespace=False)  # connected, not scanned yet
    assert _lookup(tmp_path, RXE) == []
    assert _lookup(tmp_path, TCP) == [f"{tmp_path}/dev/nvme0n1"]


def test_once_scanned_each_target_gets_its_own_device_and_no_hidden_path(tmp_path):
    _subsystem(tmp_path, 0, TCP, namespace=True)
    _subsystem(tmp_path, 1, RXE, namespace=True)
    assert _lookup(tmp_path, RXE) == [f"{tmp_path}/dev/nvme1n1"]
    assert _lookup(tmp_path, TCP) == [f"{tmp_path}/dev/nvme0n1"]


def test_without_multipath_the_controller_holds_the_namespace(tmp_path):
    ctrl = tmp_path / "sys/class/nvme/nvme3"
    (ctrl / "nvme3n1").mkdir(parents=True)
    (ctrl / "subsysnqn").write_text(RXE + "\n")
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/nvme3n1").touch()
    assert _lookup(tmp_path, RXE) == [f"{tmp_path}/dev/nvme3n1"]


def test_a_device_node_not_yet_made_is_not_listed(tmp_path):
    _subsystem(tmp_path, 1, RXE, namespace=True)
    (tmp_path / "dev/nvme1n1").unlink()
    assert _lookup(tmp_path, RXE) == []


def test_roots_with_shell_characters_stay_one_word(tmp_path):
    root = tmp_path / "a b;$(touch pwned)"
    _subsystem(root, 0, TCP, namespace=True)
    assert _lookup(root, TCP) == sorted(f"{root}/dev/nvme0n1".split())
    assert not list(tmp_path.rglob("pwned"))
