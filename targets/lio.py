"""LIO, the kernel's SCSI target, through configfs (targetcli needs D-Bus).

One backstore object per LUN under ``core/``; then a fabric: an iSCSI target
(IQN, TPG 1, a network portal with iSER switched on or off, an ACL per
initiator) or an SRP target port named after the RDMA port's GID, with its
RDMA/CM port in ``srpt/discovery_auth/rdma_cm_port`` (the module parameter
is gone in 6.1).  The layout follows blktests' tests/srp/rc.

Every export is a pair, like blktests' create/remove helpers: ``claim``
checks that the fabric target and the storage objects it will make do not
exist (sanlab never reuses or removes LIO objects it did not create),
``create`` makes them, and ``remove`` takes down exactly those - never the
rest of configfs, where the host's owner may have exports of their own.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

from sanlab.targets.backstores import Backing
from sanlab.targets.host import Host, StackError, sh
from sanlab.targets.naming import ISCSI_PORT, SRP_PORT, Chap

CFS = "/sys/kernel/config/target"


def _storage_path(name: str, lun: int, backing: Backing | None) -> str:
    if backing is None:  # LIO's own RAM disk
        return f"{CFS}/core/rd_mcp_{lun}/{name}"
    if backing.kind == "block":
        return f"{CFS}/core/iblock_{lun}/{name}"
    return f"{CFS}/core/fileio_{lun}/{name}"


def _backstore(name: str, lun: int, backing: Backing | None, size: int) -> tuple[str, list[str]]:
    """(configfs path, commands) of one LUN's storage object."""
    if backing is None:  # LIO's own RAM disk
        path = f"{CFS}/core/rd_mcp_{lun}/{name}"
        control = f"rd_pages={max(1, size // 4096)}"
    elif backing.kind == "block":
        path = f"{CFS}/core/iblock_{lun}/{name}"
        control = f"udev_path={backing.path}"
    else:
        path = f"{CFS}/core/fileio_{lun}/{name}"
        control = f"fd_dev_name={backing.path},fd_dev_size={backing.size}"
    # LIO makes the LUN's NAA identifier from the serial's hex digits alone, and
    # dm-multipath joins every disk with one identifier: so the digits are a
    # digest of the export's name, never shared by two exports.
    serial = "sanlab" + hashlib.sha256(f"{name}/{lun}".encode()).hexdigest()[:14]
    return path, [
        f"mkdir -p {path}",
        f"echo {shlex.quote(control)} > {path}/control",
        f"echo {serial} > {path}/wwn/vpd_unit_serial",
        f"echo 1 > {path}/enable",
    ]


def _luns(tpg: str, name: str, backings: Sequence[Backing | None], size: int) -> list[str]:
    lines = []
    for lun, backing in enumerate(backings):
        path, commands = _backstore(name, lun, backing, size)
        lines += commands
        lines += [f"mkdir -p {tpg}/lun/lun_{lun}", f"ln -s {path} {tpg}/lun/lun_{lun}/{name}"]
    return lines


def _acl(tpg: str, initiator: str, luns: int) -> list[str]:
    acl = f"{tpg}/acls/{initiator}"
    lines = [f"mkdir -p {acl}"]
    for lun in range(luns):
        lines += [f"mkdir -p {acl}/lun_{lun}", f"ln -s {tpg}/lun/lun_{lun} {acl}/lun_{lun}/map"]
    return lines


@dataclass(frozen=True)
class Export:
    """What one LIO export made, so that exactly that is removed."""

    root: str  # the fabric target: iscsi/<iqn> or srpt/<port>
    tpg: str
    storage: tuple[str, ...]  # core/<hba>/<name>, one per LUN
    hbas: tuple[str, ...]  # HBA folders this export created (not those that were there)
    restore: tuple[tuple[str, str], ...] = ()  # (attribute, value it had before)


def claim(host: Host, root: str, tpg: str, name: str, backings: Sequence[Backing | None]) -> Export:
    """Check that the objects this export will make are free; note which HBAs exist already."""
    storage = tuple(_storage_path(name, lun, b) for lun, b in enumerate(backings))
    hbas = tuple(dict.fromkeys(path.rsplit("/", 1)[0] for path in storage))
    listing = " ".join([root, *storage, *hbas])
    found = set(
        host.run(
            f"modprobe target_core_mod; for p in {listing}; do [ -e $p ] && echo $p; done; true", timeout=60
        ).stdout.split()
    )
    taken = [p for p in (root, *storage) if p in found]
    if taken:
        raise StackError(
            f"{host.name}: LIO already has {', '.join(taken)}: "
            "sanlab does not touch objects it did not create"
        )
    return Export(root, tpg, storage, tuple(h for h in hbas if h not in found))


def remove(host: Host, made: Export) -> None:
    """Take down the objects of one export, leaves first (as blktests' stop_lio_srpt does)."""
    t = made.tpg
    lines = [
        f"[ -e {t}/enable ] && echo 0 > {t}/enable",
        f"rm -f {t}/acls/*/*/* {t}/lun/*/* 2>/dev/null",
        f"rmdir {t}/acls/*/* {t}/acls/* {t}/lun/* {t}/np/* 2>/dev/null",
        f"rmdir {t} {made.root} 2>/dev/null",
    ]
    lines += [f"rmdir {path} 2>/dev/null" for path in (*made.storage, *made.hbas)]
    lines += [f"printf %s {shlex.quote(value)} > {attribute}" for attribute, value in made.restore]
    host.run("\n".join(lines + ["true"]), timeout=60)


@dataclass(frozen=True)
class IscsiSettings:
    """What one iSCSI (or iSER) export serves and to whom: ``start_iscsi`` and
    ``iscsi_exported`` take it whole, so the two never drift apart.  A backing of None is
    LIO's own RAM disk of ``size`` bytes."""

    iqn: str
    initiator_iqns: tuple[str, ...]  # an ACL each (several: initiators sharing the target)
    addresses: tuple[str, ...]  # a portal each (several: the paths of a multipath device)
    iser: bool
    backings: tuple[Backing | None, ...]  # one per LUN
    size: int
    header_digest: bool = False
    data_digest: bool = False
    chap: Chap | None = None


def start_iscsi(host: Host, settings: IscsiSettings) -> None:
    """One portal per address (several: the paths of a multipath device), and an ACL per
    initiator IQN (several: initiators sharing the target, each its own session)."""
    s = settings
    iqn, iser, chap, addresses = s.iqn, s.iser, s.chap, s.addresses
    tpg = f"{CFS}/iscsi/{iqn}/tpgt_1"
    lines = ["modprobe target_core_mod", "modprobe iscsi_target_mod"]
    if iser:
        lines.append("modprobe ib_isert")
    lines += [f"mkdir -p {tpg}"] + _luns(tpg, iqn.rsplit(":", 1)[1], s.backings, s.size)
    for initiator in s.initiator_iqns:
        lines += _acl(tpg, initiator, len(s.backings))
    for address in addresses:
        portal = f"{tpg}/np/{address}:{ISCSI_PORT}"
        lines += [f"mkdir {portal}"] + ([f"echo 1 > {portal}/iser"] if iser else [])
    digest = lambda on: "CRC32C" if on else "None"  # noqa: E731
    lines += [
        f"echo {digest(s.header_digest)} > {tpg}/param/HeaderDigest",
        f"echo {digest(s.data_digest)} > {tpg}/param/DataDigest",
    ]
    if chap:
        # printf, not echo: LIO keeps a trailing newline as part of the secret.
        for initiator in s.initiator_iqns:
            auth = f"{tpg}/acls/{initiator}/auth"
            lines += [
                f"printf %s {shlex.quote(chap.username)} > {auth}/userid",
                f"printf %s {shlex.quote(chap.password)} > {auth}/password",
            ]
        lines.append(f"echo 1 > {tpg}/attrib/authentication")
    else:
        lines.append(f"echo 0 > {tpg}/attrib/authentication")
    lines.append(f"echo 1 > {tpg}/enable")
    sh(
        host,
        "\n".join(lines),
        f"LIO: exporting {iqn} over {'iSER' if iser else 'iSCSI'} on {', '.join(addresses)}",
    )


def srp_port_name(gid: str) -> str:
    """How ib_srpt names a port: the GUID half of a link-local GID, else 0x + the whole GID."""
    if gid.startswith("fe80:0000:0000:0000:"):
        return gid.removeprefix("fe80:0000:0000:0000:")
    return "0x" + gid.replace(":", "")


@dataclass(frozen=True)
class SrpSettings:
    """What one SRP export serves and to whom: ``start_srp`` and ``srp_exported`` take it
    whole.  A backing of None is LIO's own RAM disk of ``size`` bytes."""

    name: str  # the storage objects' name
    rdma_device: str  # the target's RDMA device, whose port the target port is named after
    address: str  # the target's own address (an ACL name too: see start_srp)
    initiator_ids: tuple[str, ...]  # the initiator's GID and address, an ACL each
    backings: tuple[Backing | None, ...]  # one per LUN
    size: int


def start_srp(host: Host, settings: SrpSettings) -> str:
    """Export the LUNs on ``rdma_device``; returns the target's service GUID (the ioc_guid).

    For a login over RDMA/CM, Linux 6.1's ib_srpt looks the ACL up under the
    *target's own* address (it takes the connection's source address on the
    passive side; its log says "Rejected login for initiator <target IP>").
    So the target's address is an ACL name too, beside the initiator's GID
    and address, which other kernels use.
    """
    s = settings
    rdma_device = s.rdma_device
    gid = sh(host, f"cat /sys/class/infiniband/{rdma_device}/ports/1/gids/0", "reading the port GID")
    port = srp_port_name(gid.strip())
    tpg = f"{CFS}/srpt/{port}/{port}"
    lines = [
        "modprobe target_core_mod",
        "modprobe ib_srpt",
        f"mkdir -p {CFS}/srpt",
        f"echo {SRP_PORT} > {CFS}/srpt/discovery_auth/rdma_cm_port",
        f"mkdir -p {tpg}",
    ] + _luns(tpg, s.name, s.backings, s.size)
    for ident in sorted(set(s.initiator_ids) | {s.address}):
        lines += _acl(tpg, ident, len(s.backings))
    lines.append(f"echo 1 > {tpg}/enable")
    sh(host, "\n".join(lines), f"LIO: exporting SRP on {rdma_device} ({port})")
    return sh(
        host, "cat /sys/module/ib_srpt/parameters/srpt_service_guid", "reading srpt_service_guid"
    ).strip()


def srp_port(host: Host, rdma_device: str) -> str:
    gid = sh(host, f"cat /sys/class/infiniband/{rdma_device}/ports/1/gids/0", "reading the port GID")
    return srp_port_name(gid.strip())


@contextmanager
def iscsi_exported(host: Host, settings: IscsiSettings) -> Iterator[Export]:
    """An iSCSI (or iSER) target of sanlab's own for the ``with`` block, removed however it ends."""
    root = f"{CFS}/iscsi/{settings.iqn}"
    made = claim(host, root, f"{root}/tpgt_1", settings.iqn.rsplit(":", 1)[1], settings.backings)
    try:
        start_iscsi(host, settings)
        yield made
    finally:
        remove(host, made)


@contextmanager
def srp_exported(host: Host, settings: SrpSettings) -> Iterator[str]:
    """An SRP target port of sanlab's own; yields the service GUID.  The RDMA/CM port it sets
    in ``srpt/discovery_auth`` is put back as it was."""
    port = srp_port(host, settings.rdma_device)
    root = f"{CFS}/srpt/{port}"
    made = claim(host, root, f"{root}/{port}", settings.name, settings.backings)
    setting = f"{CFS}/srpt/discovery_auth/rdma_cm_port"
    before = host.run(f"modprobe ib_srpt; mkdir -p {CFS}/srpt; cat {setting}", timeout=60).stdout.strip()
    if before.isdigit():
        made = replace(made, restore=((setting, before),))
    try:
        yield start_srp(host, settings)
    finally:
        remove(host, made)


def stop_script(iqn: str) -> str:
    """The iSCSI service goes: the target's portal group is disabled, which ends its sessions."""
    return f"echo 0 > {shlex.quote(f'{CFS}/iscsi/{iqn}/tpgt_1/enable')}"


def start_script(iqn: str) -> str:
    """The portal group is enabled again; initiators log back in."""
    return f"echo 1 > {shlex.quote(f'{CFS}/iscsi/{iqn}/tpgt_1/enable')}"
