"""targets/host_facts.py: a host's CPU, NIC and backend, read as argument vectors, as records state them.

The VM test (tests/test_ssh_hosts.py) reads them from the guests over SSH;
here they are read from this machine by a host that runs each argument
vector itself, and checked against what the machine says directly.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sanlab.scenarios.schema import Target
from sanlab.targets.host_facts import MADE, backend_of, cpu_facts, lscpu_fields, nic_facts, read_host

LSCPU = {
    "lscpu": [
        {"field": "Model name:", "data": "Intel(R) Xeon(R) Platinum 8352Y CPU @ 2.20GHz"},
        {"field": "CPU(s):", "data": "128"},
        {"field": "Socket(s):", "data": "2"},
        {"field": "Core(s) per socket:", "data": "32"},
        {"field": "CPU max MHz:", "data": "3400.0000"},
    ]
}


@dataclass(frozen=True)
class Reply:
    rc: int = 0
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.rc == 0


@dataclass
class LocalHost:
    """This machine, as a Host that runs only argument vectors (no shell), each as it is given."""

    name: str = "here"
    argvs: list[list[str]] = field(default_factory=list)

    def run(self, command: str | list[str], timeout: float = 60.0, stdin: str = "") -> Reply:
        assert isinstance(command, list), f"a shell string reached the host: {command!r}"
        self.argvs.append(command)
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except FileNotFoundError:
            return Reply(rc=127)
        return Reply(done.returncode, done.stdout, done.stderr)

    def spawn(self, command: str, log: str = "/dev/null") -> int:
        raise AssertionError("reading facts starts nothing")

    def put(self, path: str, data: bytes, mode: int = 0o644) -> None:
        raise AssertionError("reading facts writes nothing")

    def get(self, path: str) -> bytes:
        return Path(path).read_bytes()


def test_lscpu_gives_physical_cores_over_all_sockets_and_the_sustained_clock():
    facts = cpu_facts(lscpu_fields(json.dumps(LSCPU)), "6.1.0-28-amd64")
    assert (facts.sockets, facts.cores, facts.threads, facts.ghz) == (2, 64, 128, 3.4)
    assert facts.cpu_model.startswith("Intel(R) Xeon(R) Platinum 8352Y") and facts.kernel == "6.1.0-28-amd64"
    plain = "Model name:            AMD EPYC 7443P 24-Core Processor\nSocket(s): 1\nCore(s) per socket: 24\n"
    assert cpu_facts(lscpu_fields(plain), "").cores == 24


@pytest.mark.parametrize("interface", ["eth0;reboot", "-eth0", "$(id)", "a b", "x" * 16, "../lo"])
def test_an_interface_name_that_is_not_one_is_never_run(interface):
    host = LocalHost()
    assert nic_facts(host, interface).model_dump() == nic_facts(host, "").model_dump()
    assert host.argvs == []


def test_backend_says_what_sanlab_made_or_the_drive_read_from_the_host():
    base = {"host": "t", "stack": "nvmet", "transport": "nvme-tcp"}
    assert backend_of(Target.model_validate(base | {"backstore": "null"}), {}) == MADE["null"]
    drive = Target.model_validate(base | {"backstore": "device", "device": "/dev/nvme0n1"})
    read = {("t", "/dev/nvme0n1"): MADE["file"].model_copy(update={"kind": "nvme", "model": "P5800X"})}
    assert backend_of(drive, read).model == "P5800X"


@pytest.mark.subprocess  # runs lscpu, uname and cat on this machine
def test_this_machines_facts_are_what_it_says_of_itself():
    interface = sorted(os.listdir("/sys/class/net"))[0]
    host = LocalHost()
    cpu, nics = read_host(host, [interface])
    assert all(isinstance(argv, list) for argv in host.argvs)
    fields = lscpu_fields(subprocess.run(["lscpu", "-J"], capture_output=True, text=True).stdout)
    assert cpu.cpu_model == fields["Model name"] and cpu.threads == os.cpu_count()
    assert cpu.kernel == os.uname().release
    assert cpu.cores and cpu.sockets and cpu.cores <= cpu.threads
    mtu = int(Path(f"/sys/class/net/{interface}/mtu").read_text())
    assert nics[interface].mtu == mtu
