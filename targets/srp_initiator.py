"""The SRP initiator (ib_srp), logging in over RDMA/CM as blktests does.

``add_target`` takes the target's service GUID as id_ext and ioc_guid, the
initiator's GID prefix as initiator_ext, and dest=IP:PORT.  The new disk is
found through the SRP remote port's SCSI host in sysfs.
"""

from __future__ import annotations

from sanlab.targets.host import Host, sh, wait_for_devices
from sanlab.targets.naming import SRP_PORT


def identities(host: Host, rdma_device: str, address: str) -> list[str]:
    """The names this initiator may present to ib_srpt's ACLs: GID-derived ids and its address."""
    gid = sh(host, f"cat /sys/class/infiniband/{rdma_device}/ports/1/gids/0", "reading the port GID").strip()
    guid = gid.removeprefix("fe80:0000:0000:0000:")
    return sorted({guid, "0x" + gid.replace(":", ""), address})


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


def disks(host: Host, timeout: float = 30.0) -> list[str]:
    script = (
        "for p in /sys/class/srp_remote_ports/port-*; do h=${p##*/port-}; h=${h%%:*}; "
        "for b in /sys/class/scsi_host/host$h/device/target*/*/block/*; do "
        '[ -e "$b" ] && echo /dev/$(basename $b); done; done'
    )
    return wait_for_devices(host, script, "SRP login succeeded", timeout)


def logout(host: Host) -> None:
    host.run("for p in /sys/class/srp_remote_ports/*; do echo 1 > $p/delete; done; sleep 1", timeout=60)
