"""QEMU's monitor (QMP): every conversation sanlab has with a running QEMU, in one place.

A VM's process, its snapshots and a lab's links all ask its QEMU for something (pause and read
the registers, drop a link's carrier, press reset, save or load a snapshot).  Each asks through
``qmp`` here, so a monitor that refuses or does not answer is one kind of error, said one way.
"""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

from qemu.qmp import QMPError
from qemu.qmp.legacy import QEMUMonitorProtocol

from sanlab.scenarios.errors import SanlabError


def qmp(qmp_socket: Path, what: str, *commands: tuple[str, dict[str, object]]) -> list[object]:
    """Send ``commands`` (name, arguments) to the QEMU monitor behind ``qmp_socket``, in order,
    and return their replies; a monitor that refuses or does not answer is an error that says
    ``what`` was being done."""
    monitor = QEMUMonitorProtocol(str(qmp_socket))
    try:
        monitor.settimeout(15)
        monitor.connect()
        # an error reply raises ExecuteError, a QMPError
        return [monitor.cmd(name, **args) for name, args in commands]
    except (OSError, EOFError, QMPError) as exc:
        raise SanlabError(f"QEMU would not {what}: {exc or type(exc).__name__}") from None
    finally:
        # A QEMU that exited mid-conversation (a snapshot it could not load) ends the stream:
        # closing then raises EOFError, which must not hide the error above.
        with contextlib.suppress(OSError, EOFError, QMPError):
            monitor.close()


def listening(qmp_socket: Path) -> bool:
    """Whether the monitor behind ``qmp_socket`` takes connections yet.  QEMU binds its socket
    (the file appears) a moment before it listens on it, and a connection in between is refused:
    the file alone does not say the monitor is open."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(str(qmp_socket))
    except OSError:  # refused, not there yet, or stuck: the caller's deadline decides
        return False
    finally:
        probe.close()
    return True


def paused_registers(qmp_socket: Path, what: str) -> str:
    """QEMU's ``info registers`` of its guest, read while it is paused for an instant: under TCG
    a running vCPU keeps its flags in lazy parts that another thread may read half-written.
    The guest is resumed even when the read fails: a guest left paused would stall its run."""
    try:
        show: tuple[str, dict[str, object]] = ("human-monitor-command", {"command-line": "info registers"})
        replies = qmp(qmp_socket, what, ("stop", {}), show)
    finally:
        qmp(qmp_socket, f"resume after trying to {what}", ("cont", {}))
    return str(replies[1])


def set_netdev_link(qmp_socket: Path, index: int, up: bool, what: str) -> None:
    """Drop or restore carrier on the ``index``-th link NIC of the VM behind ``qmp_socket``,
    as pulling or replugging its cable would (QEMU's ``set_link``).

    The guest sees NO-CARRIER and nothing else: its address, routes,
    shaping and RDMA device stay, and what it sends meanwhile is lost on
    the wire.  (``ip link set down`` inside the guest is harsher: it
    deletes the routes, so rxe's sends fail at once and, on Linux 6.1, can
    leave its QP 1 deaf to every later connection request.)
    """
    qmp(qmp_socket, f"set {what} {'up' if up else 'down'}", ("set_link", {"name": f"n{index}", "up": up}))


def press_reset(qmp_socket: Path, what: str) -> None:
    """Press the machine's reset button: the guest boots again in the same QEMU process, so its
    sockets, links and captures stay.

    VMs run with ``-no-reboot`` (a guest that panics or reboots itself ends
    its QEMU, which the lab sees), and under it QEMU turns a reset into a
    shutdown.  So the reboot action is reset from here until ``keep_no_reboot``
    puts it back, once the new boot has come up: the firmware resets the
    machine twice more on its way (QEMU 7.2, SeaBIOS), and under the old action that ended QEMU.
    """
    qmp(qmp_socket, f"reset {what}", ("set-action", {"reboot": "reset"}), ("system_reset", {}))


def keep_no_reboot(qmp_socket: Path, what: str) -> None:
    """A reboot ends QEMU again, as ``-no-reboot`` said at start (see ``press_reset``)."""
    qmp(qmp_socket, f"restore -no-reboot for {what}", ("set-action", {"reboot": "shutdown"}))
