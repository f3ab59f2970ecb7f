"""Linux's kernel NVMe-oF target (nvmet) over TCP or RDMA, through configfs.

The layout follows the kernel's own tests (blktests tests/nvme/rc): a
subsystem with one namespace per LUN, a port with its transport and
address, and a symlink that exports the subsystem on the port.  Like
blktests' ``_create_nvmet_subsystem``/``_remove_nvmet_subsystem``, each
create has its remove: ``exported`` makes a subsystem and a port of its own
(refusing a subsystem name that exists, taking the first unused port id)
and removes exactly those, leaving every other subsystem and port alone.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sanlab.scenarios.registry import TRANSPORTS
from sanlab.targets.backstores import Backing
from sanlab.targets.host import Host, sh
from sanlab.targets.naming import NVME_PORT

CFS = "/sys/kernel/config/nvmet"


@dataclass(frozen=True)
class Export:
    nqn: str
    port_ids: tuple[int, ...]  # one port per address (several: multipath)
    host: str | None = None  # the one host NQN allowed in (DH-HMAC-CHAP), its hosts/ object ours


@dataclass(frozen=True)
class HostKey:
    """The one host allowed in: its NQN (a TLS PSK names it too) and, with NVMe in-band
    authentication, the secret it must prove it holds."""

    nqn: str
    secret: str | None = None
    # Bi-directional authentication: the secret the controller proves it holds back to the host.
    ctrl_secret: str | None = None


def _free_port_ids(host: Host, count: int) -> tuple[int, ...]:
    used = host.run(f"ls {CFS}/ports 2>/dev/null", timeout=30).stdout.split()
    taken = {int(p) for p in used if p.isdigit()}
    return tuple(n for n in range(1, 65536) if n not in taken)[:count]


def claim(host: Host, nqn: str, transport: str, ports: int = 1, key: HostKey | None = None) -> Export:
    """Load the transport and check that ``nqn`` (and the host object ``key`` needs) is
    free; from here on, what is made is ours."""
    trtype = TRANSPORTS[transport].carrier  # nvmet's trtype: tcp or rdma
    lines = [f"modprobe nvmet-{trtype}"]
    for kind, name, path in (("subsystem", nqn, "subsystems"), ("host", key.nqn if key else None, "hosts")):
        if name:
            lines.append(
                f"if [ -e {CFS}/{path}/{name} ]; then echo 'NVMe {kind} {name} already exists: sanlab does "
                "not touch what it did not create' >&2; exit 17; fi"
            )
    sh(host, "\n".join(lines), f"nvmet: claiming {nqn}")
    return Export(nqn, _free_port_ids(host, ports), key.nqn if key else None)


def _allowed_host(subsystem: str, key: HostKey | None) -> list[str]:
    """Any host, or only ``key``'s, which must authenticate with its secret."""
    if key is None:
        return [f"echo 1 > {subsystem}/attr_allow_any_host"]
    entry = f"{CFS}/hosts/{key.nqn}"
    secret = [f"printf %s {shlex.quote(key.secret)} > {entry}/dhchap_key"] if key.secret else []
    if key.ctrl_secret:
        secret.append(f"printf %s {shlex.quote(key.ctrl_secret)} > {entry}/dhchap_ctrl_key")
    return [
        f"echo 0 > {subsystem}/attr_allow_any_host",
        f"mkdir {entry}",
        *secret,
        f"ln -s {entry} {subsystem}/allowed_hosts/{key.nqn}",
    ]


@dataclass(frozen=True)
class NvmetSettings:
    """What one nvmet export serves and to whom: ``exported`` and ``create`` take it whole, so
    the two never drift apart."""

    nqn: str
    transport: str
    addresses: tuple[str, ...]  # a port each (several: the paths of a multipath device)
    backings: tuple[Backing, ...]  # a namespace each
    key: HostKey | None = None  # the one host allowed in (None: any host)
    tls: bool = False  # the ports ask for TLS 1.3
    uuids: tuple[str, ...] = ()  # each namespace's UUID, in order (blktests finds its namespace by it)


def create(host: Host, export: Export, settings: NvmetSettings) -> None:
    """The subsystem, who may connect, its namespaces, and a port on each address that exports
    it (asking for TLS 1.3 with ``tls``)."""
    s = settings
    trtype = TRANSPORTS[s.transport].carrier  # nvmet's trtype: tcp or rdma
    subsystem = f"{CFS}/subsystems/{export.nqn}"
    lines = [f"mkdir {subsystem}", *_allowed_host(subsystem, s.key)]
    for nsid, backing in enumerate(s.backings, start=1):
        ns = f"{subsystem}/namespaces/{nsid}"
        lines += [f"mkdir {ns}", f"printf %s {shlex.quote(backing.path)} > {ns}/device_path"]
        if nsid <= len(s.uuids):
            lines.append(f"printf %s {shlex.quote(s.uuids[nsid - 1])} > {ns}/device_uuid")
        if backing.kind == "file":  # tmpfs and friends refuse O_DIRECT
            lines.append(f"echo 1 > {ns}/buffered_io")
        lines.append(f"echo 1 > {ns}/enable")
    for port_id, address in zip(export.port_ids, s.addresses, strict=True):
        port = f"{CFS}/ports/{port_id}"
        lines += [
            f"mkdir {port}",
            f"echo ipv4 > {port}/addr_adrfam",
            f"echo {trtype} > {port}/addr_trtype",
            f"echo {address} > {port}/addr_traddr",
            f"echo {NVME_PORT} > {port}/addr_trsvcid",
            *([f"echo tls1.3 > {port}/addr_tsas"] if s.tls else []),
            f"ln -s {subsystem} {port}/subsystems/{export.nqn}",
        ]
    where = " and ".join(s.addresses)
    sh(host, "\n".join(lines), f"nvmet: exporting {export.nqn} over {trtype} on {where}")


def remove(host: Host, export: Export) -> None:
    """Remove the ports and subsystem of ``export`` (as far as they were made), nothing else."""
    subsystem = f"{CFS}/subsystems/{export.nqn}"
    ports = "".join(
        f"rm -f {CFS}/ports/{n}/subsystems/{export.nqn}; rmdir {CFS}/ports/{n} 2>/dev/null;"
        for n in export.port_ids
    )
    allowed = (
        f"rm -f {subsystem}/allowed_hosts/{export.host}; rmdir {CFS}/hosts/{export.host} 2>/dev/null;"
        if export.host
        else ""
    )
    host.run(
        ports + f"for ns in {subsystem}/namespaces/*; do [ -d $ns ] || continue; "
        "echo 0 > $ns/enable; rmdir $ns; done;"
        f"{allowed}rmdir {subsystem} 2>/dev/null; true",
        timeout=60,
    )


@contextmanager
def exported(host: Host, settings: NvmetSettings) -> Iterator[Export]:
    """A subsystem and ports of sanlab's own (and, with ``key``, the one host allowed in) for
    the ``with`` block; removed however it ends."""
    s = settings
    export = claim(host, s.nqn, s.transport, len(s.addresses), s.key)
    try:
        create(host, export, s)
        yield export
    finally:
        remove(host, export)


def _restart_file(nqn: str) -> str:
    return shlex.quote(f"/tmp/sanlab-restart-{nqn}")


def stop_script(nqn: str) -> str:
    """The service goes: the subsystem leaves every port it is exported on (the links are
    noted, so ``start_script`` puts back exactly those).  Hosts see their connections drop."""
    links = shlex.quote(f"{CFS}/ports/") + "*" + shlex.quote(f"/subsystems/{nqn}")
    noted = _restart_file(nqn)
    return f': > {noted}; for l in {links}; do [ -L "$l" ] || continue; echo "$l" >> {noted}; rm "$l"; done'


def start_script(nqn: str) -> str:
    """The service is back: the subsystem is exported on the same ports again."""
    subsystem = shlex.quote(f"{CFS}/subsystems/{nqn}")
    return (
        f'while read -r l; do ln -s {subsystem} "$l"; done < {_restart_file(nqn)}; rm -f {_restart_file(nqn)}'
    )
