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

import time

from sanlab.targets.backstores import Backing
from sanlab.targets.host import Host, StackError, sh
from sanlab.targets.naming import TGT_TCP_PORT

POOL_MB = 128


def ensure_daemon(host: Host, address: str) -> None:
    if host.run("pidof tgtd", timeout=30).ok:
        return
    host.spawn(
        f"ulimit -l unlimited; exec tgtd -f --iscsi portal={address}:{TGT_TCP_PORT} "
        f"--iser pool_sz_mb={POOL_MB}",
        log="/var/log/tgtd.log",
    )
    for _ in range(40):
        if host.run("tgtadm --op show --mode system >/dev/null 2>&1", timeout=30).ok:
            return
        time.sleep(0.25)
    log = host.run("tail -n 5 /var/log/tgtd.log", timeout=30).stdout
    raise StackError(f"{host.name}: tgtd did not start: {log.strip()}")


def start(
    host: Host,
    tid: int,
    iqn: str,
    iser: bool,
    address: str,
    backings: list[Backing],
    initiator_address: str,
    initiator_iqn: str,
) -> None:
    ensure_daemon(host, address)
    lld = "iser" if iser else "iscsi"
    tgtadm = f"tgtadm --lld {lld}"
    lines = [f"{tgtadm} --op new --mode target --tid {tid} -T {iqn}"]
    for lun, backing in enumerate(backings, start=1):
        lines.append(f"{tgtadm} --op new --mode logicalunit --tid {tid} --lun {lun} -b {backing.path}")
    lines += [
        f"{tgtadm} --op bind --mode target --tid {tid} -I {initiator_address}",
        f"{tgtadm} --op bind --mode target --tid {tid} --initiator-name {initiator_iqn}",
    ]
    sh(host, "\n".join(lines), f"tgt: exporting {iqn} over {lld}")


def stop(host: Host, tid: int, iser: bool) -> None:
    lld = "iser" if iser else "iscsi"
    host.run(f"tgtadm --lld {lld} --op delete --mode target --tid {tid} --force", timeout=60)


def stop_daemon(host: Host) -> None:
    host.run(
        "tgtadm --op delete --mode system >/dev/null 2>&1; pkill tgtd; sleep 1; pkill -9 tgtd; true",
        timeout=60,
    )
