"""One QEMU virtual machine: its command line, its process, and its agent.

A VM is a node in the Mininet sense: it runs commands (through the agent)
and owns network interfaces (one virtio-net NIC per link it is on).  Every
file it uses - agent and console sockets, link sockets, console log - lives
in the lab's run directory, so two labs never collide and ``down`` can find
everything from another shell.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from sanlab.emulator.agent import AgentClient, AgentError, Completed
from sanlab.emulator.cpuflags import impossible, live_flags
from sanlab.emulator.images import Image
from sanlab.emulator.monitor import keep_no_reboot, paused_registers, press_reset
from sanlab.emulator.panics import last_words
from sanlab.emulator.processes import Recorded, process_start, recorded, stop_pid
from sanlab.emulator.qemu_opts import opt_value
from sanlab.scenarios.errors import HostDown, SanlabError, ToolMissing
from sanlab.scenarios.writing import open_stream

T = TypeVar("T")

QEMU = "qemu-system-x86_64"
# A guest's uptime just after a reset may run ahead of the host's clock by this much
# (TCG's clock is not the host's); an old boot's uptime is far larger.
REBOOT_CLOCK_SLACK_S = 5.0


# Appended to every guest's kernel command line: module parameters for an experiment, such
# as "siw.abortive_close=0" (upstream siw's graceful close; benchmarks/rdma_path_pulls.py).
KERNEL_ARGS = "SANLAB_GUEST_KERNEL_ARGS"
_KERNEL_ARG = re.compile(r"[A-Za-z0-9_.-]+(=[A-Za-z0-9_.,:-]*)?")


def extra_kernel_args() -> list[str]:
    """The parameters $SANLAB_GUEST_KERNEL_ARGS adds to the guest's kernel command line,
    each ``name`` or ``name=value``; anything else is refused before a VM boots."""
    words = os.environ.get(KERNEL_ARGS, "").split()
    for word in words:
        if not _KERNEL_ARG.fullmatch(word):
            raise SanlabError(
                f"${KERNEL_ARGS}: {word!r} is not a kernel parameter "
                "(name or name=value, of letters, digits and _ . - , :)"
            )
    return words


# The CPU model QEMU emulates under TCG: "max", every feature TCG implements (under KVM: the
# host's), unless $SANLAB_TCG_CPU names another for an experiment (benchmarks/debian13_smokes.py).
TCG_CPU = "SANLAB_TCG_CPU"
_CPU_MODEL = re.compile(r"[A-Za-z0-9_.-]+(,[A-Za-z0-9_.+=-]+)*")


def cpu_under_tcg() -> str:
    """The CPU model the guests run under TCG: "max", unless $SANLAB_TCG_CPU names another
    (a QEMU ``-cpu`` value: a model, then comma-separated features; checked before a VM boots)."""
    chosen = os.environ.get(TCG_CPU, "").strip() or "max"
    if not _CPU_MODEL.fullmatch(chosen):
        raise SanlabError(
            f"${TCG_CPU}: {chosen!r} is not a QEMU CPU model "
            "(a model name, then ,feature or ,feature=value; letters, digits and _ . - + =)"
        )
    return chosen


# Guest time counts instructions: QEMU's ``-icount shift=N`` (one instruction is 2**N ns of the
# guest's clock), for measuring instruction paths with a timer-driven profiler in the guest
# (benchmarks/path_lengths.py).  TCG only, and single-threaded (icount excludes MTTCG).
ICOUNT = "SANLAB_ICOUNT"


def icount_shift() -> int | None:
    """The shift $SANLAB_ICOUNT asks for (0-10), or None when it is unset; checked before a VM boots."""
    value = os.environ.get(ICOUNT, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) > 10:
        raise SanlabError(f"${ICOUNT}: {value!r} is not an icount shift (a whole number 0-10)")
    return int(value)


def tcg_accel() -> list[str]:
    """QEMU's TCG options: multi-threaded, or single-threaded counting instructions (``ICOUNT``)."""
    shift = icount_shift()
    if shift is None:
        return ["-accel", "tcg,thread=multi", "-cpu", cpu_under_tcg()]
    return ["-accel", "tcg,thread=single", "-icount", f"shift={shift}", "-cpu", cpu_under_tcg()]


class VmDown(AgentError, HostDown):
    """A command for a VM whose QEMU has exited: an agent error that no retry can mend."""


def qemu_binary() -> str:
    path = shutil.which(QEMU)
    if path is None:
        raise ToolMissing(QEMU, "install it with: apt-get install qemu-system-x86")
    return path


# The oldest QEMU whose TCG sanlab's guests have run on without corrupted CPU flags; 7.2 (Debian
# 12's) corrupts them now and then (emulator/cpuflags.py).
SOUND_TCG = (10, 0)


@functools.lru_cache(maxsize=8)
def version_line(qemu: str) -> str:
    """The first line QEMU's ``--version`` prints (asked once a binary, a process)."""
    return subprocess.run([qemu, "--version"], capture_output=True, text=True).stdout.split("\n")[0]


def qemu_version(qemu: str) -> tuple[int, int] | None:
    """QEMU's (major, minor), from ``--version``; None if it does not say."""
    m = re.search(r"version (\d+)\.(\d+)", version_line(qemu))
    return (int(m.group(1)), int(m.group(2))) if m else None


def tcg_warning(version: tuple[int, int] | None) -> str | None:
    """A line for a QEMU whose TCG is older than the one sanlab's guests run soundly on."""
    if version is None or version >= SOUND_TCG:
        return None
    return (
        f"warning: QEMU {version[0]}.{version[1]} under TCG: 7.2 now and then corrupts a guest's CPU "
        f"flags (Debian 13's kernel crashed from it); sanlab is checked on QEMU {SOUND_TCG[0]} "
        "(on Debian 12: apt-get install -t bookworm-backports qemu-system-x86)"
    )


@dataclass(frozen=True)
class NicSpec:
    """One end of a link: a virtio-net NIC joined to its peer by unix datagrams."""

    link: str
    mac: str
    local_socket: Path
    peer_socket: Path
    capture: Path | None = None
    snaplen: int | None = None  # bytes kept of each captured frame (QEMU's filter-dump maxlen)


@dataclass
class VmSpec:
    name: str
    cpus: int = 1
    memory_mib: int = 1024
    nics: list[NicSpec] = field(default_factory=list)
    # A management NIC whose guest port 22 QEMU forwards to this port on the
    # host's loopback (user-mode networking, restricted: the guest reaches
    # nothing through it).  Only for reaching a guest over SSH.
    ssh_port: int | None = None


# The management NIC's MAC and the address user-mode networking expects the guest to take.
MGMT_MAC = "52:54:00:5a:4e:01"
MGMT_ADDRESS = "10.0.2.15/24"


def own_socket(run_dir: Path, name: str, kind: str) -> Path:
    """Where VM ``name`` listens for its ``kind`` (agent, console, qmp)."""
    return run_dir / f"{name}.{kind}.sock"


def socket_paths(spec: VmSpec, run_dir: Path) -> list[Path]:
    """Every Unix socket a VM's QEMU listens on: its agent, console and monitor, and its own
    ends of socket-backed links."""
    return [own_socket(run_dir, spec.name, kind) for kind in ("agent", "console", "qmp")] + [
        n.local_socket for n in spec.nics
    ]


class Vm:
    """A running (or about to run) guest."""

    def __init__(self, spec: VmSpec, image: Image, accel: str, run_dir: Path, qemu: str):
        self.spec, self.image, self.accel, self.run_dir, self.qemu = spec, image, accel, run_dir, qemu
        self.name = spec.name
        self.process: subprocess.Popen[bytes] | None = None
        self.agent = AgentClient(self.agent_socket, spec.name, alive=self.running)
        self.boot_seconds: float | None = None
        # Started to load a saved machine (emulator/snapshots.py) rather than to boot.
        self.incoming = False
        # Its PID and start time once started: what proves it ours to another shell (lab.py).
        self.started_as: Recorded | None = None

    @property
    def agent_socket(self) -> Path:
        return own_socket(self.run_dir, self.name, "agent")

    @property
    def console_socket(self) -> Path:
        return own_socket(self.run_dir, self.name, "console")

    @property
    def console_log(self) -> Path:
        return self.run_dir / f"{self.name}.console.log"

    @property
    def qmp_socket(self) -> Path:
        return own_socket(self.run_dir, self.name, "qmp")

    @property
    def sockets(self) -> list[Path]:
        """The Unix sockets this VM's QEMU listens on (``socket_paths``); they are this VM's
        to remove, before it starts (a stale one would refuse the bind) and after it stops."""
        return socket_paths(self.spec, self.run_dir)

    def _remove_sockets(self) -> None:
        for path in self.sockets:
            path.unlink(missing_ok=True)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def command(self) -> list[str]:
        """QEMU's argv for this VM: the machine, then one NIC per link end, then the management
        NIC; each part apart so that a reader sees which options come from where."""
        if self.accel == "kvm" and icount_shift() is not None:
            raise SanlabError(f"${ICOUNT} counts instructions under TCG only: run with SANLAB_ACCEL=tcg")
        argv = self._machine_args() + self._link_args() + self._management_args()
        return argv + (["-incoming", "defer"] if self.incoming else [])

    def _machine_args(self) -> list[str]:
        """The machine itself: accelerator, CPUs and memory, the guest's kernel, and the serial
        console, agent channel and RNG every guest has; nothing that depends on its links."""
        s = self.spec
        accel = ["-accel", "kvm", "-cpu", "host"] if self.accel == "kvm" else tcg_accel()
        return [
            self.qemu,
            "-name",
            f"sanlab-{opt_value(self.name)},debug-threads=on",
            *accel,
            "-machine",
            "q35",
            "-smp",
            str(s.cpus),
            "-m",
            str(s.memory_mib),
            "-nodefaults",
            "-no-reboot",
            "-display",
            "none",
            "-monitor",
            "none",
            "-qmp",
            f"unix:{opt_value(self.qmp_socket)},server=on,wait=off",
            "-kernel",
            str(self.image.kernel),
            "-initrd",
            str(self.image.initrd),
            "-append",
            " ".join(
                ["console=ttyS0 quiet loglevel=4 panic=-1", *extra_kernel_args(), f"sanlab.host={s.name}"]
            ),
            "-chardev",
            f"socket,id=con,path={opt_value(self.console_socket)},server=on,wait=off,"
            f"logfile={opt_value(self.console_log)},logappend=on",
            "-serial",
            "chardev:con",
            "-device",
            "virtio-serial-pci",
            "-chardev",
            f"socket,id=agent,path={opt_value(self.agent_socket)},server=on,wait=off",
            "-device",
            "virtserialport,chardev=agent,name=sanlab.agent",
            "-device",
            "virtio-rng-pci",
            # A generation ID new at each start: a guest restored from a snapshot reseeds its RNG.
            "-device",
            "vmgenid,guid=auto",
        ]

    def _link_args(self) -> list[str]:
        """One NIC per link end, joined to its peer by a pair of datagram sockets, and the
        capture QEMU writes of it when the link is captured."""
        argv: list[str] = []
        for i, nic in enumerate(self.spec.nics):
            argv += [
                "-netdev",
                f"dgram,id=n{i},local.type=unix,local.path={opt_value(nic.local_socket)},"
                f"remote.type=unix,remote.path={opt_value(nic.peer_socket)}",
                "-device",
                f"virtio-net-pci,netdev=n{i},mac={nic.mac}",
            ]
            if nic.capture is not None:
                limit = f",maxlen={nic.snaplen}" if nic.snaplen else ""
                argv += ["-object", f"filter-dump,id=cap{i},netdev=n{i},file={opt_value(nic.capture)}{limit}"]
        return argv

    def _management_args(self) -> list[str]:
        """The SSH port forwarded from 127.0.0.1 to the guest, when the VM is to be reached
        over SSH (its own user-mode NIC, restricted to that forward); else nothing."""
        if self.spec.ssh_port is None:
            return []
        return [
            "-netdev",
            f"user,id=mgmt,restrict=on,hostfwd=tcp:127.0.0.1:{self.spec.ssh_port}-:22",
            "-device",
            f"virtio-net-pci,netdev=mgmt,mac={MGMT_MAC}",
        ]

    def start(self) -> None:
        self._remove_sockets()
        log = open_stream(self.run_dir / f"{self.name}.qemu.log", "append", binary=True)
        with log:
            self.process = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )
        # Read at once: the start time is set at fork, so this is the qemu we started.
        self.started_as = recorded(self.process.pid, process_start(self.process.pid))

    def wait_ready(self, timeout: float) -> float:
        """Wait until the agent answers; a failed boot shows the last console lines."""
        started = time.monotonic()
        try:
            self.agent.wait_ready(timeout)
        except AgentError as exc:
            raise SanlabError(f"{exc}\n{self.diagnosis()}") from None
        self.boot_seconds = time.monotonic() - started
        return self.boot_seconds

    def reboot(self, timeout: float) -> float:
        """Reset the machine and wait for the new boot's agent; returns the seconds it took.

        For a guest whose kernel is wedged (a task stuck in a soft-RDMA
        driver, an oops that took its network): nothing inside it can help,
        and a reset keeps the QEMU process with its link sockets and
        captures.  An answer from the old boot, which the reset may not yet
        have reached, is told apart by its uptime.
        """
        self.agent.close()
        pressed = time.monotonic()
        press_reset(self.qmp_socket, self.name)
        try:
            self._wait_new_boot(pressed, timeout)
        finally:
            if self.running():
                keep_no_reboot(self.qmp_socket, self.name)
        return time.monotonic() - pressed

    def _wait_new_boot(self, pressed: float, timeout: float) -> None:
        while True:
            left = timeout - (time.monotonic() - pressed)
            if left <= 0:
                why = f"{self.name} did not boot again within {timeout:.0f} s"
                raise SanlabError(f"{why}\n{self.diagnosis()}")
            try:
                uptime = self.agent.wait_ready(left)
            except AgentError as exc:
                raise SanlabError(f"{exc}\n{self.diagnosis()}") from None
            if uptime <= time.monotonic() - pressed + REBOOT_CLOCK_SLACK_S:
                return
            self.agent.close()  # the old boot answered: the reset is still on its way
            time.sleep(0.5)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def impossible_flags(self) -> int | None:
        """Its CPU's flags if they hold bits no x86-64 CPU sets (``cpuflags``): the emulator
        corrupted this guest's state.  None for sound flags, or a VM that is not running."""
        if not self.running():
            return None
        flags = live_flags(paused_registers(self.qmp_socket, f"show {self.name}'s registers"))
        return flags if flags is not None and impossible(flags) else None

    def diagnosis(self) -> str:
        parts = []
        if self.process and self.process.poll() is not None:
            parts.append(f"qemu exited with {self.process.returncode}")
            qlog = self.run_dir / f"{self.name}.qemu.log"
            if qlog.exists():
                parts.append("qemu said:\n  " + "\n  ".join(qlog.read_text().splitlines()[-10:]))
        if self.console_log.exists():
            lines = self.console_log.read_text(errors="replace").splitlines()[-20:]
            parts.append(f"last console lines of {self.name}:\n  " + "\n  ".join(lines))
        return "\n".join(parts)

    def answers(self, timeout: float) -> bool:
        """Whether the guest's agent answers a ping within ``timeout`` seconds.  The agent
        runs each request in its own thread, so silence means the guest kernel is wedged."""
        self._must_be_up()
        try:
            self.agent.wait_ready(timeout)
        except AgentError:
            return False
        return True

    # --- the host interface the targets layer uses -------------------------
    def run(self, command: str | list[str], timeout: float = 60.0, stdin: str = "") -> Completed:
        return self._ask(lambda: self.agent.run(command, timeout, stdin))

    def spawn(self, command: str, log: str = "/dev/null") -> int:
        return self._ask(lambda: self.agent.spawn(command, log))

    def put(self, path: str, data: bytes, mode: int = 0o644) -> None:
        self._ask(lambda: self.agent.put(path, data, mode))

    def get(self, path: str) -> bytes:
        return self._ask(lambda: self.agent.get(path))

    def _ask(self, request: Callable[[], T]) -> T:
        """A request to the agent of a VM that is up.  A guest that dies while it is asked
        (its QEMU removes the agent's socket as it exits) is named as down, with its oops,
        rather than as a socket that went missing."""
        self._must_be_up()
        try:
            return request()
        except AgentError as exc:
            if not isinstance(exc, VmDown) and self._exited():
                self._must_be_up()
            raise

    def _exited(self, grace: float = 2.0) -> bool:
        """Whether QEMU has exited, or does within ``grace`` seconds (it may be on its way out)."""
        if self.process is None:
            return False
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            return False
        return True

    def _must_be_up(self) -> None:
        """A VM whose QEMU has exited (a guest kernel panic ends it) answers nothing: say so
        at once, rather than let each command wait out its timeout for the agent's socket."""
        if self.process is not None and self.process.poll() is not None:
            words = last_words(self.console_log)
            raise VmDown(
                f"{self.name}: the VM is down (qemu exited with {self.process.returncode})"
                + (f"; {words}" if words else "")
            )

    # --- teardown -------------------------------------------------------------
    def stop(self, grace: float = 3.0) -> None:
        self.agent.close()
        if self.process and self.process.poll() is None:
            stop_pid(self.process.pid, grace)
            self.process.wait()
        self._remove_sockets()
