"""tgt, the user-space iSCSI target, with its iSER driver.

Debian's tgt 1.0.85 is built with iSER.  Making it serve iSER over iWARP
(siw) took four things, each found on this lab's guests:

1. ``--iser port=N`` is rejected with "invalid port supplied" (its parser
   tests a stale errno), so iSER keeps port 3260 and tgtd's *TCP* portal
   moves instead (``--iscsi portal=IP:3261``).  This is also why tgt, not
   LIO, serves iSER over siw: siw's RDMA listener is a kernel TCP socket,
   and LIO binds its TCP and iSER listeners to the same address and port,
   so LIO's ``rdma_listen`` fails with EADDRINUSE.
2. tgtd's iSER buffer pool defaults to 1 GiB and cannot be allocated in a
   small guest: ``--iser pool_sz_mb=128`` (its minimum) and
   ``ulimit -l unlimited`` for the registered memory.
3. The target is created under the ``iser`` driver (``--lld iser``).
4. An iSER login is answered "target not found" unless the target has an
   initiator-name ACL *as well as* an address ACL; ``-I ALL`` alone admits
   TCP logins but not iSER ones.  Discovery over iSER lists nothing, so the
   initiator uses a static node record.

CHAP is an account in tgtd, bound to the target for incoming logins
(``--op new --mode account``, then ``--op bind --mode account``): once a
target has one, tgtd answers a login that offers ``AuthMethod=None`` with
an authentication failure (usr/iscsi/iscsid.c) and checks the CHAP
response against the bound account's secret (usr/iscsi/chap.c).
tgtadm hands tgtd ``user=NAME,password=SECRET`` and tgtd cuts the name
at the first comma (usr/mgmt.c ``account_mgmt``), so a name with a comma
cannot be set; ``validate`` refuses it (scenarios/semantics/targets.py).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sanlab.targets.backstores import Backing
from sanlab.targets.host import Host, StackError, sh
from sanlab.targets.naming import TGT_TCP_PORT, Chap

POOL_MB = 128
TID = 1


# sanlab's tgtd: its PID, and the script that starts it and recreates its target (run
# once at export and again when a restart fault starts the service again).  Fixed
# names: sanlab runs at most one tgtd per host (it refuses to share one it did not start).
PIDFILE = "/run/sanlab-tgtd.pid"
STARTER = "/run/sanlab-tgtd.start"
LOG = "/var/log/sanlab-tgtd.log"
SCRIPT_END = "SANLAB_TGTD_SCRIPT_END"


def start_lines(addresses: list[str]) -> list[str]:
    """Start tgtd in a session of its own, note its PID, and wait until it answers."""
    portals = ",".join(f"portal={address}:{TGT_TCP_PORT}" for address in addresses)
    daemon = f"ulimit -l unlimited; exec tgtd -f --iscsi {portals} --iser pool_sz_mb={POOL_MB}"
    return [
        f"setsid sh -c {shlex.quote(daemon)} >>{LOG} 2>&1 </dev/null &",
        f"echo $! > {PIDFILE}",
        "for i in $(seq 40); do tgtadm --op show --mode system >/dev/null 2>&1 && break; sleep 0.25; done",
        f"tgtadm --op show --mode system >/dev/null 2>&1 || {{ tail -n 5 {LOG} >&2; exit 1; }}",
    ]


@dataclass(frozen=True)
class TgtSettings:
    """What sanlab's tgtd serves and to whom: ``exported`` and ``create_lines`` take it whole,
    so the two never drift apart."""

    iqn: str
    iser: bool
    addresses: tuple[str, ...]  # a portal each (several: the paths of a multipath device)
    backings: tuple[Backing, ...]  # a LUN each
    initiator_addresses: tuple[str, ...]  # an address ACL each
    initiator_iqns: tuple[str, ...]  # an initiator-name ACL each (iSER needs both)
    chap: Chap | None = None


def create_lines(settings: TgtSettings) -> list[str]:
    """The target, its LUNs, who may log in (by address and by IQN: every initiator's), and
    with ``chap`` the account each login must prove it knows (``chap_lines``)."""
    s = settings
    tgtadm = f"tgtadm --lld {'iser' if s.iser else 'iscsi'}"
    lines = [f"{tgtadm} --op new --mode target --tid {TID} -T {s.iqn}"]
    for lun, backing in enumerate(s.backings, start=1):
        lines.append(
            f"{tgtadm} --op new --mode logicalunit --tid {TID} --lun {lun} -b {shlex.quote(backing.path)}"
        )
    lines += [f"{tgtadm} --op bind --mode target --tid {TID} -I {a}" for a in s.initiator_addresses]
    lines += [
        f"{tgtadm} --op bind --mode target --tid {TID} --initiator-name {name}" for name in s.initiator_iqns
    ]
    return lines + (chap_lines(tgtadm, s.chap) if s.chap else [])


def chap_lines(tgtadm: str, chap: Chap) -> list[str]:
    """An account holding the CHAP secret, bound to the target for incoming logins: from then
    on tgtd takes no login without it.  Each value is one quoted word; tgtadm's options take
    the next word whatever it starts with (getopt's required arguments)."""
    if "," in chap.username:
        raise StackError(f"tgt cannot hold a CHAP name with a comma ({chap.username!r})")
    user, password = shlex.quote(chap.username), shlex.quote(chap.password)
    return [
        f"{tgtadm} --op new --mode account --user {user} --password {password}",
        f"{tgtadm} --op bind --mode account --tid {TID} --user {user}",
    ]


def refuse_a_running_tgtd(host: Host) -> None:
    """tgtd takes its portals and iSER pool from its command line, so sanlab cannot share one
    it did not start: it refuses rather than stop or reconfigure it."""
    running = host.run("pidof tgtd", timeout=30)
    if running.ok:
        raise StackError(
            f"{host.name}: tgtd is already running (pid {running.stdout.strip()}) and was not started by "
            "sanlab for this target; sanlab will not stop or reconfigure it"
        )


def stop_script(crash: bool = False) -> str:
    """Stop sanlab's tgtd (the PID it noted, and only if that is still a tgtd) and wait until
    it has gone.  ``crash``: at once, with SIGKILL, as a restart fault does (tgtd does not
    leave on SIGTERM while sessions are open); else SIGTERM first (at the end of a run,
    once the initiator has logged out)."""
    first = "kill -9 $pid" if crash else "kill $pid"
    return (
        f'pid=$(cat {PIDFILE} 2>/dev/null); [ -n "$pid" ] || exit 0; '
        '[ "$(cat /proc/$pid/comm 2>/dev/null)" = tgtd ] || exit 0; '
        f"{first}; for i in $(seq 20); do [ -e /proc/$pid ] || exit 0; sleep 0.25; done; kill -9 $pid; true"
    )


def start_script() -> str:
    """Start sanlab's tgtd again, with the same target (the script noted at export)."""
    return f"sh -e {STARTER}"


@contextmanager
def exported(host: Host, settings: TgtSettings) -> Iterator[None]:
    """sanlab's own tgtd serving ``iqn`` on ``addresses`` (one portal each, several for a
    multipath device) for the ``with`` block; stopped (only it) however it ends."""
    refuse_a_running_tgtd(host)
    iqn, iser = settings.iqn, settings.iser
    made = create_lines(settings)
    script = start_lines(list(settings.addresses)) + made
    # A here-document with a quoted delimiter: its lines are written as they are (no expansion),
    # one a line, so --dry-run shows each tgtadm command as it will run; every line begins
    # with a command word, so none can be the delimiter.
    note = f"umask 077; cat > {STARTER} <<'{SCRIPT_END}'\n" + "\n".join(script) + f"\n{SCRIPT_END}"
    try:
        sh(host, f"{note}\n{start_script()}", f"tgt: exporting {iqn} over {'iser' if iser else 'iscsi'}")
        yield
    finally:
        host.run(stop_script(), timeout=60)
        host.run(f"rm -f {STARTER} {PIDFILE}", timeout=30)
