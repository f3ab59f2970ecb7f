"""open-iscsi on the initiator, through an iface record of sanlab's own per target.

The initiator's name travels in that iface record (``iface.initiatorname``),
not in ``/etc/iscsi/initiatorname.iscsi``: on a real machine that file is
the owner's identity, which the target's ACLs may name, so sanlab writes it
only where there is none (a fresh guest) and never replaces it.  The iface
is made at login and deleted at logout with the target's node records.

The new disk is found from the session: the session whose target name is
ours, then the SCSI disks under that session in sysfs.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sanlab.targets.host import Host, sh, wait_for_devices
from sanlab.targets.naming import Chap

INITIATOR_NAME_FILE = "/etc/iscsi/initiatorname.iscsi"


def name_file_script(initiator_iqn: str, path: str = INITIATOR_NAME_FILE) -> str:
    """Write the initiator's name file only where there is none: a host's own is left alone."""
    quoted = shlex.quote(path)
    return f"[ -s {quoted} ] || printf 'InitiatorName=%s\\n' {shlex.quote(initiator_iqn)} > {quoted}"


def prepare(host: Host, initiator_iqn: str) -> None:
    """Start iscsid (unless one runs), giving it a name file only where the host has none."""
    sh(
        host,
        f"""
mkdir -p /etc/iscsi /run/lock/iscsi /var/lib/iscsi
{name_file_script(initiator_iqn)}
modprobe sd_mod  # no udev in the guest: nothing autoloads the disk driver
modprobe iscsi_tcp; modprobe ib_iser || true
pidof iscsid >/dev/null || iscsid
""",
        "starting iscsid",
    )


def iface_name(iqn: str) -> str:
    """The iface record sanlab makes for sessions to ``iqn``: a name of its own (a file name
    under /etc/iscsi/ifaces, so a digest, never the IQN's characters), one per target."""
    return "sanlab-" + hashlib.sha256(iqn.encode()).hexdigest()[:12]


def iface_script(iqn: str, iser: bool, initiator_iqn: str) -> str:
    """Make (or refresh) the target's iface record: its transport and the initiator's name."""
    iface = f"iscsiadm -m iface -I {iface_name(iqn)}"
    return "\n".join(
        [
            f"{iface} >/dev/null 2>&1 || {iface} -o new >/dev/null",
            f"{iface} -o update -n iface.transport_name -v {'iser' if iser else 'tcp'} >/dev/null",
            f"{iface} -o update -n iface.initiatorname -v {shlex.quote(initiator_iqn)} >/dev/null",
        ]
    )


@dataclass(frozen=True)
class Session:
    """What a login to one target needs: the target, the initiator's name, the transport and
    the negotiated options."""

    iqn: str
    initiator_iqn: str
    iser: bool = False
    header_digest: bool = False
    data_digest: bool = False
    chap: Chap | None = None


def find_script(session: Session, portal: str) -> str:
    """The node record a login uses: SendTargets discovery over TCP, made by hand over iSER.

    Never a discovery over iSER, for any stack.  tgt's iSER portal lists nothing; and
    iscsiadm (open-iscsi 2.1.8, unchanged upstream) loses LIO's Text Response when it
    arrives before the kernel's reply to iscsiadm's own send: ``__kipc_call`` takes the
    RECV_PDU event off the netlink socket while it waits, and the discovery loop then polls
    that socket for a message already read, times out after 30 s, and crashes in ``kread`` on
    the retry (open-iscsi issue #255).  Under ``-icount`` (benchmarks/path_lengths.py) LIO
    over rxe answered that early every time; a record made by hand logs in at once.
    """
    node = f"iscsiadm -m node -T {session.iqn} -p {portal} -I {iface_name(session.iqn)}"
    if session.iser:
        return f"{node} -o new >/dev/null"
    return f"iscsiadm -m discovery -t sendtargets -p {portal} -I {iface_name(session.iqn)} >/dev/null"


def login(host: Host, session: Session, portal: str, settings: tuple[tuple[str, str], ...] = ()) -> list[str]:
    """Log in through ``portal`` (``settings``: further node-record settings, name and value)."""
    iqn, iface = session.iqn, iface_name(session.iqn)
    node = f"iscsiadm -m node -T {iqn} -p {portal} -I {iface}"
    digest = lambda on: "CRC32C" if on else "None"  # noqa: E731
    lines = [
        iface_script(iqn, session.iser, session.initiator_iqn),
        find_script(session, portal),
        f"{node} -o update -n node.conn[0].iscsi.HeaderDigest -v {digest(session.header_digest)}",
        f"{node} -o update -n node.conn[0].iscsi.DataDigest -v {digest(session.data_digest)}",
    ]
    lines += [f"{node} -o update -n {name} -v {shlex.quote(value)}" for name, value in settings]
    if session.chap:
        lines += [
            f"{node} -o update -n node.session.auth.authmethod -v CHAP",
            f"{node} -o update -n node.session.auth.username -v {shlex.quote(session.chap.username)}",
            f"{node} -o update -n node.session.auth.password -v {shlex.quote(session.chap.password)}",
        ]
    lines.append(f"{node} --login")
    transport = "iser" if session.iser else "tcp"
    sh(host, "\n".join(lines), f"iSCSI login to {iqn} at {portal} ({transport})", timeout=180)
    return disks(host, iqn)


def disks(host: Host, iqn: str, timeout: float = 30.0, count: int = 1) -> list[str]:
    script = (
        "for s in /sys/class/iscsi_session/session*; do "
        f'[ "$(cat $s/targetname)" = {iqn} ] || continue; '
        'for b in $s/device/target*/*/block/*; do [ -e "$b" ] && echo /dev/$(basename $b); done; done'
    )
    return wait_for_devices(host, script, f"logged in to {iqn}", timeout, count)


def logout(host: Host, iqn: str) -> None:
    """Log out of ``iqn`` and forget its node records and sanlab's iface record for it."""
    host.run(
        f"iscsiadm -m node -T {iqn} --logout; iscsiadm -m node -T {iqn} -o delete; "
        f"iscsiadm -m iface -I {iface_name(iqn)} -o delete",
        timeout=120,
    )


@contextmanager
def logged_in(host: Host, session: Session, portal: str) -> Iterator[list[str]]:
    """A session to ``iqn`` for the ``with`` block (its disks), logged out and forgotten afterwards.

    The node record is sanlab's own (its target name is a sanlab IQN), so
    logging out and deleting it touches no session of anyone else.
    """
    try:
        yield login(host, session, portal)
    finally:
        logout(host, session.iqn)


# A path of a multipath device: a failed session hands its I/O back to
# dm-multipath after 5 s (device-mapper-multipath's documented advice)
# instead of holding it for open-iscsi's default 120 s, so the I/O moves to
# the paths that are left.
MULTIPATH_SETTINGS = (("node.session.timeo.replacement_timeout", "5"),)


@contextmanager
def logged_in_everywhere(host: Host, session: Session, portals: list[str], luns: int) -> Iterator[list[str]]:
    """A session to ``iqn`` through each of ``portals`` (the paths of a multipath device);
    every session's disks for the block, all logged out afterwards."""
    try:
        for portal in portals:
            login(host, session, portal, MULTIPATH_SETTINGS)
        yield disks(host, session.iqn, count=len(portals) * luns)
    finally:
        logout(host, session.iqn)


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
