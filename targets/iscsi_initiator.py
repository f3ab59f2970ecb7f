"""open-iscsi on the initiator: the default (TCP) iface or the ``iser`` iface.

The new disk is found from the session: the session whose target name is
ours, then the SCSI disks under that session in sysfs.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from contextlib import contextmanager

from sanlab.targets.host import Host, sh, wait_for_devices
from sanlab.targets.naming import Chap


def prepare(host: Host, initiator_iqn: str) -> None:
    sh(
        host,
        f"""
mkdir -p /etc/iscsi /run/lock/iscsi /var/lib/iscsi
echo InitiatorName={initiator_iqn} > /etc/iscsi/initiatorname.iscsi
modprobe sd_mod  # no udev in the guest: nothing autoloads the disk driver
modprobe iscsi_tcp; modprobe ib_iser || true
pidof iscsid >/dev/null || iscsid
""",
        "starting iscsid",
    )


def login(
    host: Host,
    iqn: str,
    portal: str,
    iser: bool,
    header_digest: bool,
    data_digest: bool,
    chap: Chap | None,
    discover: bool = True,
    settings: tuple[tuple[str, str], ...] = (),
) -> list[str]:
    """Log in; with ``discover=False`` the node record is made by hand (tgt's iSER lists nothing).

    ``settings`` are further node-record settings (name, value).
    """
    iface = "iser" if iser else "default"
    node = f"iscsiadm -m node -T {iqn} -p {portal} -I {iface}"
    digest = lambda on: "CRC32C" if on else "None"  # noqa: E731
    find = (
        f"iscsiadm -m discovery -t sendtargets -p {portal} -I {iface} >/dev/null"
        if discover
        else f"{node} -o new >/dev/null"
    )
    lines = [
        find,
        f"{node} -o update -n node.conn[0].iscsi.HeaderDigest -v {digest(header_digest)}",
        f"{node} -o update -n node.conn[0].iscsi.DataDigest -v {digest(data_digest)}",
    ]
    lines += [f"{node} -o update -n {name} -v {shlex.quote(value)}" for name, value in settings]
    if chap:
        lines += [
            f"{node} -o update -n node.session.auth.authmethod -v CHAP",
            f"{node} -o update -n node.session.auth.username -v {shlex.quote(chap.username)}",
            f"{node} -o update -n node.session.auth.password -v {shlex.quote(chap.password)}",
        ]
    lines.append(f"{node} --login")
    sh(host, "\n".join(lines), f"iSCSI login to {iqn} at {portal} ({iface})", timeout=180)
    return disks(host, iqn)


def disks(host: Host, iqn: str, timeout: float = 30.0, count: int = 1) -> list[str]:
    script = (
        "for s in /sys/class/iscsi_session/session*; do "
        f'[ "$(cat $s/targetname)" = {iqn} ] || continue; '
        'for b in $s/device/target*/*/block/*; do [ -e "$b" ] && echo /dev/$(basename $b); done; done'
    )
    return wait_for_devices(host, script, f"logged in to {iqn}", timeout, count)


def logout(host: Host, iqn: str) -> None:
    host.run(f"iscsiadm -m node -T {iqn} --logout; iscsiadm -m node -T {iqn} -o delete", timeout=120)


@contextmanager
def logged_in(
    host: Host,
    iqn: str,
    portal: str,
    iser: bool,
    header_digest: bool,
    data_digest: bool,
    chap: Chap | None,
    discover: bool = True,
) -> Iterator[list[str]]:
    """A session to ``iqn`` for the ``with`` block (its disks), logged out and forgotten afterwards.

    The node record is sanlab's own (its target name is a sanlab IQN), so
    logging out and deleting it touches no session of anyone else.
    """
    try:
        yield login(host, iqn, portal, iser, header_digest, data_digest, chap, discover)
    finally:
        logout(host, iqn)


# A path of a multipath device: a failed session hands its I/O back to
# dm-multipath after 5 s (device-mapper-multipath's documented advice)
# instead of holding it for open-iscsi's default 120 s, so the I/O moves to
# the paths that are left.
MULTIPATH_SETTINGS = (("node.session.timeo.replacement_timeout", "5"),)


@contextmanager
def logged_in_everywhere(
    host: Host,
    iqn: str,
    portals: list[str],
    iser: bool,
    header_digest: bool,
    data_digest: bool,
    chap: Chap | None,
    luns: int,
    discover: bool = True,
) -> Iterator[list[str]]:
    """A session to ``iqn`` through each of ``portals`` (the paths of a multipath device);
    every session's disks for the block, all logged out afterwards."""
    try:
        for portal in portals:
            login(host, iqn, portal, iser, header_digest, data_digest, chap, discover, MULTIPATH_SETTINGS)
        yield disks(host, iqn, count=len(portals) * luns)
    finally:
        logout(host, iqn)


def reset_script(portals: list[str]) -> str:
    """Cut the TCP connection of each session to ``portals`` (``ss -K``, as a dying network
    would), failing if there was none: open-iscsi notices at once, its session recovery
    logs in again, and the SCSI commands in flight are retried."""
    kills = "; ".join(
        f"ss -tnK dst {shlex.quote(host)} dport = :{shlex.quote(port)}"
        for host, port in (portal.rsplit(":", 1) for portal in portals)
    )
    none = "{ echo 'no iSCSI connection to cut' >&2; exit 1; }"
    return f'n=$( ({kills}) | grep -c ESTAB ); [ "$n" -gt 0 ] || {none}'
