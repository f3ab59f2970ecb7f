"""Interfaces configure themselves: address, MTU, shaping and a soft-RDMA device.

Run inside a guest through its agent.  Delay and loss are netem at the
interface's egress, rate a tbf under it; both ends of a link are shaped the
same way, so ``delay`` is one-way and the round trip is twice it.  The RDMA
device (rxe or siw) is bound to the interface with ``rdma link add``.

An interface can also be asked whether its peer still answers, what its
packet counters say, and to restart itself: an emulated cable can stall
(a virtio queue that waits for a kick that never comes), and bringing the
interface down and up again re-arms its queues.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Protocol

from sanlab.emulator.agent import Completed
from sanlab.scenarios.endpoints import soft_rdma_device
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.registry import SOFT_RDMA_MODULES


class Runs(Protocol):
    name: str

    def run(self, command: str | list[str], timeout: float = 60.0, stdin: str = "") -> Completed: ...


@dataclass(frozen=True)
class Interface:
    """How one end of a link is set up inside its guest."""

    link: str
    mac: str
    address: str
    prefix: int
    mtu: int
    rate_bps: float | None
    delay_s: float
    loss_pct: float
    rdma_driver: str | None
    queue: int | None = None  # packets netem may hold; None: as good as unbounded

    @property
    def rdma_device(self) -> str | None:
        return soft_rdma_device(self.rdma_driver, self.link) if self.rdma_driver else None


def configure(host: Runs, nic: Interface) -> None:
    """Rename the NIC after its link, address it, shape it, and add the RDMA device."""
    find = f"grep -l '{nic.mac}' /sys/class/net/*/address | head -n1 | cut -d/ -f5"
    script = [
        "set -e",
        f"dev=$({find})",
        f'[ -n "$dev" ] || {{ echo "no interface with MAC {nic.mac}" >&2; exit 1; }}',
        f'[ "$dev" = {nic.link} ] || ip link set dev "$dev" name {nic.link}',
        f"ip link set dev {nic.link} mtu {nic.mtu}",
        f"ip addr add {nic.address}/{nic.prefix} dev {nic.link}",
        f"ip link set dev {nic.link} up",
    ]
    script += shaping_commands(nic)
    if nic.rdma_driver:
        script += [
            f"modprobe {SOFT_RDMA_MODULES[nic.rdma_driver]}",
            "modprobe rdma_ucm",
            f"rdma link add {nic.rdma_device} type {nic.rdma_driver} netdev {nic.link}",
        ]
    result = host.run("\n".join(script), timeout=120)
    if not result.ok:
        kernel = host.run("dmesg | tail -n 8", timeout=30).stdout.strip()
        raise SanlabError(
            f"{host.name}: configuring link {nic.link!r} failed: {result.stderr.strip()}\n"
            f"kernel log:\n  " + "\n  ".join(kernel.splitlines())
        )


def shaping_commands(nic: Interface) -> list[str]:
    """tc commands for delay/loss (netem) and rate (tbf); none when unshaped."""
    commands = []
    parent = "root"
    if nic.delay_s > 0 or nic.loss_pct > 0 or nic.queue:
        netem = f"netem limit {nic.queue or 100000}"
        if nic.delay_s > 0:
            netem += f" delay {nic.delay_s * 1e6:.0f}us"
        if nic.loss_pct > 0:
            netem += f" loss {nic.loss_pct:g}%"
        commands.append(f"tc qdisc add dev {nic.link} root handle 1: {netem}")
        parent = "parent 1:"
    if nic.rate_bps:
        burst = max(nic.mtu * 10, int(nic.rate_bps / 8 / 250))  # >= 4 ms of traffic
        commands.append(
            f"tc qdisc add dev {nic.link} {parent} handle 2: tbf rate {nic.rate_bps:.0f}bit "
            f"burst {burst} latency 100ms"
        )
    return commands


def answers(host: Runs, nic: Interface, peer: str, count: int = 3) -> bool:
    """Does ``peer`` answer pings sent out of this interface?"""
    return host.run(f"ping -q -n -c {count} -W 2 -I {nic.link} {peer}", timeout=30 + 3 * count).ok


def ipv4_gid(address: str) -> str:
    """The RoCE v2 GID that rxe makes from an IPv4 address, as sysfs prints it."""
    a, b, c, d = (int(x) for x in address.split("."))
    return f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}"


def settle_script(nic: Interface) -> str:
    """Exits 0 once nothing more is on its way to this end after a step that re-armed it: the
    interface is up, and its RDMA device, when there is one, is ACTIVE and (rxe) holds its
    address's GID again, which rxe re-adds from netdev events some time after the link is up.
    A missing RDMA device is nothing to wait for: no step short of a NIC reset makes one."""
    lines = [f'[ "$(cat /sys/class/net/{nic.link}/operstate 2>/dev/null)" = up ] || exit 1']
    if nic.rdma_device:
        port = f"/sys/class/infiniband/{nic.rdma_device}/ports/1"
        lines += [f"[ -e {port} ] || exit 0", f"grep -q ACTIVE {port}/state || exit 1"]
        if nic.rdma_driver == "rxe":
            lines.append(f"cat {port}/gids/* 2>/dev/null | grep -qx {ipv4_gid(nic.address)}")
    return "\n".join(lines)


def settled(host: Runs, nic: Interface) -> bool:
    """Whether this end has taken a restart step in full (``settle_script``)."""
    return host.run(settle_script(nic), timeout=30).ok


RPING_S = 20  # an RDMA/CM connection and one ping take 1-3 s under TCG


def rdma_answers(server: Runs, client: Runs, address: str) -> bool:
    """Does an RDMA/CM connection from ``client`` to ``server``'s ``address`` come up and
    carry one ping (``rping``)?

    An IP ping never touches the soft-RDMA device.  Its connection manager's
    messages ride the device's QP 1, and under TCG rxe (Linux 6.1) was seen
    to stop taking them in after a flap while IP still answered: a send
    failed while the port was down, rxe put QP 1 in error, the MAD layer
    moved it back to RTS, and its receive side stayed in error, dropping
    every incoming request.  Only a new RDMA device clears that.
    """
    where = shlex.quote(address)
    started = server.run(f"timeout {RPING_S + 10} rping -s -a {where} -C 1 >/dev/null 2>&1 & echo $!")
    pid = started.stdout.strip()
    try:
        listening = pid.isdigit() and server.run(listening_script(int(pid)), timeout=30).ok
        return (
            listening and client.run(f"timeout {RPING_S} rping -c -a {where} -C 1", timeout=RPING_S + 30).ok
        )
    finally:
        if pid.isdigit():
            server.run(f"kill {pid} 2>/dev/null; true", timeout=30)


def listening_script(pid: int) -> str:
    """Exits 0 once the rping server ``pid`` listens; 1 as soon as it has exited (no RDMA
    device to listen on, say; a zombie counts as exited), rather than after the 10 s a
    listener may take to come up."""
    return (
        "for i in $(seq 20); do rdma resource show cm_id | grep -q 'LISTEN.*rping' && exit 0; "
        f"grep -qs '^State:[[:space:]]*[^Z[:space:]]' /proc/{pid}/status || exit 1; sleep 0.5; done; exit 1"
    )


def counters(host: Runs, nic: Interface) -> str:
    """``rx N tx M`` packets, read from sysfs: which direction of a cable moves."""
    base = f"/sys/class/net/{nic.link}/statistics"
    out = host.run(f"cat {base}/rx_packets {base}/tx_packets", timeout=30).stdout.split()
    return f"rx {out[0]} tx {out[1]}" if len(out) == 2 else "counters unreadable"


def restart(host: Runs, nic: Interface) -> None:
    """Down and up: the guest driver refills and kicks its queues; address and RDMA device stay."""
    host.run(f"ip link set dev {nic.link} down; sleep 1; ip link set dev {nic.link} up", timeout=60)


def reset(host: Runs, nic: Interface) -> None:
    """Unbind and rebind the virtio NIC (a device reset), then configure it from scratch.

    The last resort for a stall that down/up does not clear: QEMU drops the
    device's queues, the guest gets a new netdev without address, shaping
    or RDMA device, and ``configure`` puts them back.  The soft-RDMA device
    goes with the old netdev; its removal is asynchronous, so wait for it.
    """
    lines = [
        "set -e",
        f"dev=$(basename $(readlink /sys/class/net/{nic.link}/device))",
        'echo "$dev" > /sys/bus/virtio/drivers/virtio_net/unbind',
        'echo "$dev" > /sys/bus/virtio/drivers/virtio_net/bind',
    ]
    if nic.rdma_device:
        gone = f"! rdma link show {nic.rdma_device} >/dev/null 2>&1"
        lines += [
            f"for i in $(seq 50); do {gone} && break; sleep 0.2; done",
            f'{gone} || {{ echo "{nic.rdma_device} is still registered" >&2; exit 1; }}',
        ]
    result = host.run("\n".join(lines), timeout=60)
    if not result.ok:
        why = result.stderr.strip() or ("no answer in 60 s" if result.timed_out else f"exit {result.rc}")
        raise SanlabError(f"{host.name}: resetting the NIC of link {nic.link!r} failed: {why}")
    configure(host, nic)
