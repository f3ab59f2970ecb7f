"""`sanlab lab`: bad scenarios fail before any VM; a lab can be driven from other shells."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
import yaml

from sanlab.emulator.lab import labs_root
from sanlab.emulator.qemu import pid_alive
from support import SCENARIOS


def sanlab(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sanlab", *args], capture_output=True, text=True, timeout=timeout
    )


def _qemu_pids() -> set[int]:
    out = subprocess.run(["pgrep", "-f", "qemu-system"], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


def test_link_to_unknown_host_fails_before_any_vm(tmp_path):
    data = yaml.safe_load((SCENARIOS / "pair-rxe.yaml").read_text())
    data["links"][0]["endpoints"] = ["initiator", "storage"]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    before = _qemu_pids()
    result = sanlab("lab", "up", str(path), "--name", "test-bad")
    assert result.returncode == 1
    assert f"{path}: links[0].endpoints[1]: 'storage' is not a host" in result.stderr
    assert _qemu_pids() == before
    assert not (labs_root() / "test-bad" / "state.json").exists()


def test_exec_on_a_lab_that_is_not_up():
    result = sanlab("lab", "exec", "no-such-lab", "initiator", "--", "true")
    assert result.returncode == 1 and "no lab named 'no-such-lab' is up" in result.stderr


@pytest.mark.vm
def test_lab_up_exec_list_down_from_separate_processes(guest_image):
    up = sanlab("lab", "up", str(SCENARIOS / "pair-rxe.yaml"), "--name", "test-cli")
    try:
        assert up.returncode == 0, up.stderr
        listed = sanlab("lab", "list").stdout
        assert "test-cli" in listed and "initiator" in listed
        pids = [int(p) for p in __import__("re").findall(r"pid (\d+)", listed.split("test-cli")[1])][:2]
        assert len(pids) == 2 and all(pid_alive(p) for p in pids)
        ran = sanlab("lab", "exec", "test-cli", "initiator", "--", "hostname")
        assert ran.returncode == 0 and ran.stdout.strip() == "initiator"
        failed = sanlab("lab", "exec", "test-cli", "target", "--", "sh", "-c", "exit 3")
        assert failed.returncode == 3
    finally:
        down = sanlab("lab", "down", "test-cli")
    assert down.returncode == 0, down.stderr
    assert not any(pid_alive(p) for p in pids)
    assert not list((labs_root() / "test-cli").glob("*.sock"))
    assert (labs_root() / "test-cli" / "initiator.console.log").exists()
    shutil.rmtree(labs_root() / "test-cli")
