"""The NVMe-oF host side: nvme-cli connect, find the namespaces, disconnect.

The block devices are found through sysfs - the controller whose
``subsysnqn`` is ours and the namespaces under it - never by guessing that
the new device is nvme0n1.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sanlab.scenarios.registry import TRANSPORTS
from sanlab.scenarios.sizes import FAULT_LENGTH
from sanlab.targets.host import Host, StackError, sh, wait_for_devices
from sanlab.targets.naming import NVME_PORT

# How long a fabrics Connect may wait before the kernel gives up (nvme_core's
# admin_timeout, 60 s by default, read when a controller is created).  Under
# TCG every Connect answers within a second or two.
CONNECT_TIMEOUT_S = 20
CONNECT_ATTEMPTS = 2
# How long a disconnect waits for a Connect that its command gave up on to
# leave the kernel (see ``disconnect``).
CONNECT_SETTLE_S = 60
# How long a controller that lost its connection keeps reconnecting before it
# fails the I/O it holds (nvme-cli's --ctrl-loss-tmo, 600 s by default): a
# minute longer than the longest fault a scenario may inject, so every fault
# is outlasted, while a transport whose reconnects keep failing fails its
# I/O, counted as I/O errors.  The kernel turns it into a number of attempts
# (ctrl_loss_tmo / reconnect_delay), so attempts that each hang are bounded
# by the faulted run's own progress watch (faults.NO_PROGRESS_S) instead.
CTRL_LOSS_TMO_S = int(FAULT_LENGTH.high) + 60


@dataclass(frozen=True)
class Identity:
    """How the host presents itself to one subsystem: its host NQN, the DH-HMAC-CHAP secret it
    proves (in-band authentication), and whether its queues run inside TLS."""

    nqn: str
    dhchap_secret: str | None = None
    tls: bool = False

    def options(self) -> str:
        secret = f" --dhchap-secret={shlex.quote(self.dhchap_secret)}" if self.dhchap_secret else ""
        return f" --hostnqn={shlex.quote(self.nqn)}{secret}" + (" --tls" if self.tls else "")


@dataclass(frozen=True)
class Connection:
    """What a host connects to and how: the subsystem ``nqn`` over ``transport`` at each of
    ``addresses`` (several: the paths of one multipath device), with digests, and as whom
    (``identity``: its host NQN, the secret it proves, TLS).  ``connect`` and ``connected``
    take it whole, so the two never drift apart."""

    nqn: str
    transport: str
    addresses: tuple[str, ...]
    header_digest: bool = False
    data_digest: bool = False
    identity: Identity | None = None


def connect(host: Host, to: Connection, say: Callable[[str], None] = lambda m: None) -> list[str]:
    """Connect to ``to.nqn`` at each address and return its namespaces' block devices.

    Several addresses are several paths to one subsystem: the kernel's
    native multipath (on in Debian's kernel) joins their controllers under
    one block device per namespace.

    A Connect that times out (the kernel logs "QID n timeout") is tried once
    more; any other failure is a configuration error and is raised at once.  The reason is a race in
    siw (Linux 6.1, siw_cm.c): after a passive side sends its MPA reply it
    installs the QP's receive upcall, and if the host's first FPDU (the I/O
    queue's Connect capsule) lands in between, it waits unread in the socket
    until the connection closes.  A slow TCG guest hits that window now and
    then; the retry makes a new connection.
    """
    nqn, trtype = to.nqn, TRANSPORTS[to.transport].carrier  # nvme-cli's --transport: tcp or rdma
    options = (" --hdr-digest" if to.header_digest else "") + (" --data-digest" if to.data_digest else "")
    if to.identity:
        options += to.identity.options()
    prepare = (
        f"modprobe nvme-{trtype}\n"
        f"echo {CONNECT_TIMEOUT_S} > /sys/module/nvme_core/parameters/admin_timeout\n"
        "[ -s /etc/nvme/hostnqn ] || { mkdir -p /etc/nvme; nvme gen-hostnqn > /etc/nvme/hostnqn; }\n"
    )
    for address in to.addresses:
        command = (
            f"nvme connect -t {trtype} -a {shlex.quote(address)} -s {NVME_PORT} -n {shlex.quote(nqn)}"
            f" --ctrl-loss-tmo={CTRL_LOSS_TMO_S}{options}"
        )
        _connect_path(host, nqn, trtype, prepare + command, say)
    return namespaces(host, nqn)


def _connect_path(host: Host, nqn: str, trtype: str, script: str, say: Callable[[str], None]) -> None:
    """One path's Connect, tried again after a timeout; the error that ends it says how many
    attempts were made, so a race that struck twice is told from one that struck once."""
    for attempt in range(1, CONNECT_ATTEMPTS + 1):
        try:
            sh(host, script, f"nvme connect to {nqn} over {trtype}", timeout=120)
            return
        except StackError as exc:
            if attempt == CONNECT_ATTEMPTS or " timeout" not in str(exc):
                if attempt == 1:
                    raise
                tried = f"attempt {attempt} of {CONNECT_ATTEMPTS}; the first timed out"
                raise StackError(f"{exc}\n  ({tried})") from None
            disconnect(host, nqn)
            say(f"nvme connect to {nqn} failed, trying again: {str(exc).splitlines()[0]}")


def namespaces_script(nqn: str, sysfs: str = "/sys", dev: str = "/dev") -> str:
    """Print the block devices of ``nqn``'s namespaces, as far as the kernel has made them.

    With native multipath the block device belongs to the subsystem
    (nvme-subsys0/nvme0n1) and the controller shows a hidden path (nvme0c0n1);
    without it, the controller holds nvme0n1 itself.  Before the namespace scan
    has run, ``$c/nvme*n*`` matches nothing and sh keeps the pattern as it is:
    so each entry must exist and every expansion is quoted.  Unquoted, the
    pattern was globbed again under /dev, and the only other NVMe namespace
    there (another target's) was handed over as this one's.  ``sysfs`` and
    ``dev`` are roots for tests."""
    sys_, dev_ = shlex.quote(sysfs), shlex.quote(dev)
    return (
        f"for c in {sys_}/class/nvme-subsystem/* {sys_}/class/nvme/*; do "
        f'[ "$(cat "$c/subsysnqn" 2>/dev/null)" = {shlex.quote(nqn)} ] || continue; '
        'for n in "$c"/nvme*n*; do [ -e "$n" ] || continue; b=${n##*/}; '
        f'case $b in *c*) continue;; esac; [ -e {dev_}/"$b" ] && echo {dev_}/"$b"; done; '
        "done"
    )


def namespaces(host: Host, nqn: str, timeout: float = 30.0) -> list[str]:
    return wait_for_devices(host, namespaces_script(nqn), f"connected to {nqn}", timeout)


def disconnect(host: Host, nqn: str) -> None:
    """Disconnect every controller of ``nqn`` - once no Connect to it is still under way.

    A Connect stopped at its timeout is only the command's end: the kernel
    call it made goes on (behind a wedged RDMA/CM, for minutes) and makes
    its controller afterwards, which a disconnect sent earlier cannot see.
    So wait, bounded, for such a call to return first.
    """
    still_connecting = shlex.quote(f"[n]vme connect .* -n {nqn}( |$)")  # [n]: not this script itself
    script = (
        f"for i in $(seq {CONNECT_SETTLE_S}); do pgrep -f -- {still_connecting} >/dev/null || break; "
        f"sleep 1; done; nvme disconnect -n {shlex.quote(nqn)}"
    )
    host.run(script, timeout=CONNECT_SETTLE_S + 60)


@contextmanager
def connected(host: Host, to: Connection, say: Callable[[str], None] = lambda m: None) -> Iterator[list[str]]:
    """Controllers to ``to.nqn`` (a sanlab NQN) for the ``with`` block; disconnected afterwards."""
    try:
        yield connect(host, to, say)
    finally:
        disconnect(host, to.nqn)


def reset_script(nqn: str) -> str:
    """Reset every controller of ``nqn`` on this host, as ``nvme reset`` does: the queues are
    torn down and connected again, and the I/O in flight is retried."""
    return (
        "for c in /sys/class/nvme/nvme*; do "
        f'[ "$(cat $c/subsysnqn 2>/dev/null)" = {shlex.quote(nqn)} ] && echo 1 > $c/reset_controller; '
        "done; true"
    )


def live_paths_script(nqn: str) -> str:
    """Print how many of this host's controllers of ``nqn`` are live (a multipath device's
    paths in use)."""
    return (
        "n=0; for c in /sys/class/nvme/nvme*; do "
        f'[ "$(cat $c/subsysnqn 2>/dev/null)" = {shlex.quote(nqn)} ] && '
        '[ "$(cat $c/state 2>/dev/null)" = live ] && n=$((n+1)); '
        "done; echo $n"
    )
