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
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Iterator
from contextlib import contextmanager

from sanlab.targets.backstores import Backing
from sanlab.targets.host import Host, StackError, sh
from sanlab.targets.naming import TGT_TCP_PORT

POOL_MB = 128
TID = 1


def start_daemon(host: Host, address: str) -> int:
    """Start sanlab's own tgtd and return its PID; a tgtd that is already running is not ours.

    tgtd takes its portal and iSER pool from its command line, so sanlab
    cannot share one it did not start: it refuses rather than stop or
    reconfigure it.
    """
    running = host.run("pidof tgtd", timeout=30)
    if running.ok:
        raise StackError(
            f"{host.name}: tgtd is already running (pid {running.stdout.strip()}) and was not started by "
            "sanlab for this target; sanlab will not stop or reconfigure it"
        )
    pid = host.spawn(
        f"ulimit -l unlimited; exec tgtd -f --iscsi portal={address}:{TGT_TCP_PORT} "
        f"--iser pool_sz_mb={POOL_MB}",
        log="/var/log/tgtd.log",
    )
    for _ in range(40):
        if host.run("tgtadm --op show --mode system >/dev/null 2>&1", timeout=30).ok:
            return pid
        time.sleep(0.25)
    log = host.run("tail -n 5 /var/log/tgtd.log", timeout=30).stdout
    stop_daemon(host, pid)
    raise StackError(f"{host.name}: tgtd did not start: {log.strip()}")


def create(
    host: Host,
    iqn: str,
    iser: bool,
    backings: list[Backing],
    initiator_address: str,
    initiator_iqn: str,
) -> None:
    lld = "iser" if iser else "iscsi"
    tgtadm = f"tgtadm --lld {lld}"
    lines = [f"{tgtadm} --op new --mode target --tid {TID} -T {iqn}"]
    for lun, backing in enumerate(backings, start=1):
        lines.append(
            f"{tgtadm} --op new --mode logicalunit --tid {TID} --lun {lun} -b {shlex.quote(backing.path)}"
        )
    lines += [
        f"{tgtadm} --op bind --mode target --tid {TID} -I {initiator_address}",
        f"{tgtadm} --op bind --mode target --tid {TID} --initiator-name {initiator_iqn}",
    ]
    sh(host, "\n".join(lines), f"tgt: exporting {iqn} over {lld}")


def stop_daemon(host: Host, pid: int) -> None:
    """Stop the tgtd sanlab started (by its PID, and only if it is still a tgtd)."""
    host.run(
        f'[ "$(cat /proc/{pid}/comm 2>/dev/null)" = tgtd ] || exit 0; '
        f"tgtadm --op delete --mode system >/dev/null 2>&1; kill {pid}; sleep 1; "
        f"[ -e /proc/{pid} ] && kill -9 {pid}; true",
        timeout=60,
    )


@contextmanager
def exported(
    host: Host,
    iqn: str,
    iser: bool,
    address: str,
    backings: list[Backing],
    initiator_address: str,
    initiator_iqn: str,
) -> Iterator[int]:
    """sanlab's own tgtd serving ``iqn`` for the ``with`` block; stopped (only it) however it ends."""
    pid = start_daemon(host, address)
    try:
        create(host, iqn, iser, backings, initiator_address, initiator_iqn)
        yield pid
    finally:
        stop_daemon(host, pid)
