"""sshd in a lab's guests: the SSH path of real machines, tested for real on VMs.

A lab asked for SSH gives each guest a management NIC whose port 22 QEMU
forwards to a free port on the host's loopback.  The lab makes a
throw-away ed25519 key in its run directory, installs the public half as
root's only authorized key, lets each guest make its own host key, and
starts sshd with key authentication only.  ``SshHost`` then reaches the
guest exactly as it reaches a server in a rack.
"""

from __future__ import annotations

import shlex
import socket
import subprocess
import time
from pathlib import Path
from typing import Protocol

from sanlab.emulator.agent import Completed
from sanlab.emulator.ssh import SshError, SshHost
from sanlab.scenarios.errors import SanlabError

KEY_FILE = "ssh_key"
# Throw-away guests make a new host key every boot: nothing to remember or verify.
THROWAWAY_HOST_KEYS = ("StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null")
SSHD_READY_TIMEOUT = 60.0


class Guest(Protocol):
    @property
    def name(self) -> str: ...

    def run(self, command: str | list[str], timeout: float = 60.0, stdin: str = "") -> Completed: ...

    def put(self, path: str, data: bytes, mode: int = 0o644) -> None: ...


def free_port() -> int:
    """A TCP port free on the loopback now (QEMU binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def make_key(run_dir: Path) -> Path:
    """A new passphrase-less ed25519 key pair in ``run_dir``; returns the private half."""
    key = run_dir / KEY_FILE
    for path in (key, key.with_suffix(".pub")):
        path.unlink(missing_ok=True)
    argv = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sanlab-lab", "-f", str(key)]
    try:
        subprocess.run(argv, check=True, capture_output=True, timeout=60)
    except FileNotFoundError:
        raise SanlabError("ssh-keygen is not installed (apt-get install openssh-client)") from None
    return key


def start_sshd(guest: Guest, public_key: str, mac: str, address: str) -> None:
    """Address the management NIC, authorize ``public_key`` for root and start sshd."""
    guest.put("/root/.ssh/authorized_keys", public_key.encode(), 0o600)
    script = "\n".join(
        [
            "set -e",
            f"dev=$(grep -l {shlex.quote(mac)} /sys/class/net/*/address | head -n1 | cut -d/ -f5)",
            '[ -n "$dev" ] || { echo "no management NIC" >&2; exit 1; }',
            'ip link set dev "$dev" name mgmt',
            f"ip addr add {address} dev mgmt",
            "ip link set dev mgmt up",
            "chmod 700 /root/.ssh",
            "mkdir -p /run/sshd",
            "key=/etc/ssh/ssh_host_ed25519_key",
            "[ -e $key ] || ssh-keygen -q -t ed25519 -N '' -f $key",
            "/usr/sbin/sshd -o HostKey=$key -o PasswordAuthentication=no "
            "-o PermitRootLogin=prohibit-password -o UseDNS=no",
        ]
    )
    result = guest.run(script, timeout=120)
    if not result.ok:
        raise SanlabError(f"{guest.name}: starting sshd failed: {result.stderr.strip()}")


def guest_host(name: str, port: int, key: Path, run_dir: Path) -> SshHost:
    """The ``SshHost`` that reaches guest ``name`` through its forwarded port."""
    return SshHost(name, "root@127.0.0.1", port, str(key), run_dir, THROWAWAY_HOST_KEYS)


def wait_for_sshd(host: SshHost, timeout: float = SSHD_READY_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            if host.run("true", timeout=30).ok:
                return
        except SshError as exc:
            last = str(exc)
        time.sleep(1)
    raise SanlabError(f"{host.name}: sshd did not answer in {timeout:.0f} s ({last})")
