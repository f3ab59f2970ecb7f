"""The link doctor waits for a step's signal, not a clock (emulator/link_repair.py ``_settled``).

After a down/up or a NIC reset, a link is checked until it answers.  A link that stays
silent is told as soon as both ends show the step in full (up, and the RDMA device ACTIVE
with its address's GID), after one more check: a step that could not help costs two checks,
not the 30 s of SETTLE_S, and one whose RDMA device is still coming back gets its time.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from sanlab.emulator import link_repair as repair
from sanlab.emulator import links
from sanlab.emulator.agent import Completed
from sanlab.emulator.lab import Lab
from sanlab.emulator.link_repair import LinkHealth
from sanlab.emulator.links import Interface
from sanlab.scenarios.loader import load_scenario
from support import SCENARIOS


def _nic(driver: str | None = "rxe", address: str = "169.254.10.2") -> Interface:
    return Interface("fabric", "52:54:00:00:00:01", address, 24, 1500, None, 0.0, 0.0, driver)


class _Guest:
    """A guest whose settle probe answers from a list, one answer a call (the last repeats)."""

    def __init__(self, name: str, answers: list[bool]):
        self.name, self.answers, self.asked = name, answers, 0

    def run(self, command, timeout=60.0, stdin=""):
        ok = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        return Completed(str(command), 0 if ok else 1, "", "")


def _doctor(tmp_path, monkeypatch, settled: list[bool], healthy_from: int | None):
    """A pair lab with no VMs: check_link answers from the ``healthy_from``-th check on."""
    lab = Lab(load_scenario(SCENARIOS / "pair-rxe.yaml"), "settle", tmp_path, None)
    lab.vms = {name: _Guest(name, settled) for name in lab.blueprint.specs}
    checks: list[float] = []

    def check_link(link: str) -> LinkHealth:
        checks.append(0.0)
        ok = healthy_from is not None and len(checks) >= healthy_from
        return LinkHealth(link, ok, "answers" if ok else "no answer")

    slept: list[float] = []
    monkeypatch.setattr(lab, "check_link", check_link)
    monkeypatch.setattr(repair.time, "sleep", slept.append)
    return lab, checks, slept


def test_a_step_that_could_not_help_costs_two_checks_not_the_settle_time(tmp_path, monkeypatch):
    lab, checks, slept = _doctor(tmp_path, monkeypatch, settled=[True], healthy_from=None)
    health = lab._settled("fabric")
    assert not health.ok and len(checks) == 2 and slept == []


def test_a_step_still_settling_is_checked_until_it_answers(tmp_path, monkeypatch):
    lab, checks, slept = _doctor(tmp_path, monkeypatch, settled=[False, False, False], healthy_from=3)
    health = lab._settled("fabric")
    assert health.ok and len(checks) == 3 and slept == [repair.SETTLE_POLL_S] * 2


def test_a_link_that_never_settles_is_given_up_at_the_deadline(tmp_path, monkeypatch):
    lab, checks, slept = _doctor(tmp_path, monkeypatch, settled=[False], healthy_from=None)
    monkeypatch.setattr(repair, "SETTLE_S", 0.0)
    assert not lab._settled("fabric").ok
    assert len(checks) == 1 and slept == []


def test_the_gid_is_the_ipv4_mapped_one_sysfs_prints():
    assert links.ipv4_gid("169.254.10.2") == "0000:0000:0000:0000:0000:ffff:a9fe:0a02"
    assert links.ipv4_gid("10.0.255.1") == "0000:0000:0000:0000:0000:ffff:0a00:ff01"


def _sysfs(root: Path, operstate: str, rdma: str | None, state: str = "4: ACTIVE", gids=()) -> None:
    net = root / "sys/class/net/fabric"
    net.mkdir(parents=True, exist_ok=True)
    (net / "operstate").write_text(operstate + "\n")
    if rdma:
        port = root / f"sys/class/infiniband/{rdma}/ports/1"
        (port / "gids").mkdir(parents=True, exist_ok=True)
        (port / "state").write_text(state + "\n")
        for i, gid in enumerate(gids):
            (port / "gids" / str(i)).write_text(gid + "\n")


@pytest.mark.subprocess  # the probe runs in a real shell, against a sysfs laid out in a folder
@pytest.mark.parametrize(
    ("driver", "layout", "settled"),
    [
        ("rxe", {"operstate": "down", "rdma": None}, False),
        ("rxe", {"operstate": "up", "rdma": None}, True),  # no device: nothing is coming
        ("rxe", {"operstate": "up", "rdma": "rxe_fabric", "gids": ["fe80:0000"]}, False),
        ("rxe", {"operstate": "up", "rdma": "rxe_fabric", "state": "1: DOWN"}, False),
        ("rxe", {"operstate": "up", "rdma": "rxe_fabric", "gids": [links.ipv4_gid("169.254.10.2")]}, True),
        ("siw", {"operstate": "up", "rdma": "siw_fabric"}, True),
        ("siw", {"operstate": "lowerlayerdown", "rdma": "siw_fabric"}, False),
        (None, {"operstate": "up", "rdma": None}, True),
    ],
)
def test_the_settle_probe_reads_operstate_port_state_and_gid(tmp_path, driver, layout, settled):
    _sysfs(tmp_path, **layout)
    script = links.settle_script(_nic(driver)).replace("/sys/", f"{tmp_path}/sys/")
    assert (subprocess.run(["bash", "-c", script], timeout=30).returncode == 0) is settled


@pytest.mark.subprocess  # the probe runs in a real shell, beside real processes
def test_an_rping_server_that_exited_is_told_at_once_one_that_listens_is_found(tmp_path):
    """The listener wait ends when the server has exited (no RDMA device to listen on), not
    after its 10 s; a server that listens (an ``rdma`` that lists it) is found at once."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    zombie = subprocess.Popen(["true"])  # exited, not reaped until wait(): as the agent leaves one
    while subprocess.run(["grep", "-q", "Z", f"/proc/{zombie.pid}/stat"]).returncode != 0:
        time.sleep(0.05)
    try:
        for pid in (gone.pid, zombie.pid):
            began = time.monotonic()
            script = links.listening_script(pid)
            assert subprocess.run(["bash", "-c", script], timeout=30).returncode == 1
            assert time.monotonic() - began < 3
    finally:
        zombie.wait()
    fake = tmp_path / "rdma"
    fake.write_text("#!/bin/sh\necho 'link rxe_fabric cm-idn 1 state LISTEN ps 0 comm [rping]'\n")
    fake.chmod(0o755)
    with subprocess.Popen(["sleep", "30"]) as alive:
        try:
            env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
            listens = links.listening_script(alive.pid)
            assert subprocess.run(["bash", "-c", listens], env=env, timeout=30).returncode == 0
        finally:
            alive.kill()
