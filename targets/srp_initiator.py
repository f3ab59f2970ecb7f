"""The SRP initiator (ib_srp), logging in over RDMA/CM as blktests does.

``add_target`` takes the target's service GUID as id_ext and ioc_guid, the
initiator's GID prefix as initiator_ext, and dest=IP:PORT.  The new disk is
found through the SRP remote port's SCSI host in sysfs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sanlab.targets.host import Host, sh, wait_for_devices
from sanlab.targets.naming import SRP_PORT


def identities(host: Host, rdma_device: str, address: str) -> list[str]:
    """The names this initiator may present to ib_srpt's ACLs: GID-derived ids and its address."""
    gid = sh(host, f"cat /sys/class/infiniband/{rdma_device}/ports/1/gids/0", "reading the port GID").strip()
    guid = gid.removeprefix("fe80:0000:0000:0000:")
    return sorted({guid, "0x" + gid.replace(":", ""), address})


def _remote_ports(host: Host) -> set[str]:
    return set(host.run("ls /sys/class/srp_remote_ports 2>/dev/null", timeout=30).stdout.split())


def login(host: Host, rdma_device: str, ioc_guid: str, source: str, dest: str) -> list[str]:
    gid = sh(host, f"cat /sys/class/infiniband/{rdma_device}/ports/1/gids/0", "reading the port GID").strip()
    prefix = gid.replace(":", "")[:16]
    ioc = ioc_guid.replace(":", "")
    params = f"id_ext={ioc},initiator_ext={prefix},ioc_guid={ioc},src={source},dest={dest}:{SRP_PORT}"
    sh(
        host,
        f"""
modprobe sd_mod
modprobe ib_srp
echo {params} > /sys/class/infiniband_srp/srp-{rdma_device}-1/add_target
""",
        f"SRP login to {dest} on {rdma_device}",
        timeout=120,
    )
    return disks(host)


def disks(host: Host, timeout: float = 30.0, ports: set[str] | None = None) -> list[str]:
    chosen = (
        " ".join(f"/sys/class/srp_remote_ports/{p}" for p in sorted(ports))
        if ports
        else ("/sys/class/srp_remote_ports/port-*")
    )
    script = (
        f"for p in {chosen}; do h=${{p##*/port-}}; h=${{h%%:*}}; "
        "for b in /sys/class/scsi_host/host$h/device/target*/*/block/*; do "
        '[ -e "$b" ] && echo /dev/$(basename $b); done; done'
    )
    return wait_for_devices(host, script, "SRP login succeeded", timeout)


def logout(host: Host, ports: set[str]) -> None:
    """Delete the SRP remote ports this login made (and no other)."""
    if ports:
        listing = " ".join(f"/sys/class/srp_remote_ports/{p}" for p in sorted(ports))
        host.run(f"for p in {listing}; do [ -e $p/delete ] && echo 1 > $p/delete; done; sleep 1", timeout=60)


@contextmanager
def logged_in(host: Host, rdma_device: str, ioc_guid: str, source: str, dest: str) -> Iterator[list[str]]:
    """An SRP login for the ``with`` block; its remote ports (the new ones) are deleted afterwards."""
    before = _remote_ports(host)
    try:
        login(host, rdma_device, ioc_guid, source, dest)
        mine = _remote_ports(host) - before
        yield disks(host, ports=mine)
    finally:
        logout(host, _remote_ports(host) - before)
