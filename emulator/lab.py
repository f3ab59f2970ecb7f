"""A lab: the hosts and links of a scenario, brought up as VMs and torn down.

Topology is data: ``plan()`` turns a scenario into VM specs (one NIC per
link end, addresses, shaping, RDMA device) without starting anything, so a
bad scenario fails before a single VM boots.  ``Lab`` then starts the VMs in
parallel, waits for their agents, configures the links, and records its
state (PIDs, sockets) in the run directory so that ``sanlab lab down`` works
from another shell.  Used as a context manager it always tears down: on
success, on an exception, and on Ctrl-C.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from sanlab.emulator import accel as accelerator
from sanlab.emulator import fabric, guest_ssh, snapshots
from sanlab.emulator import links as cables
from sanlab.emulator.cpuflags import verdict
from sanlab.emulator.fabric import FABRIC_CPUS, FABRIC_MEMORY_MIB, SEGMENT_BASE
from sanlab.emulator.images import Image, guest_of, require_image
from sanlab.emulator.links import Interface, configure
from sanlab.emulator.panics import last_words
from sanlab.emulator.processes import Recorded, recorded, stop_ours
from sanlab.emulator.processes import is_ours as is_process_ours
from sanlab.emulator.qemu import (
    MGMT_ADDRESS,
    MGMT_MAC,
    NicSpec,
    Vm,
    VmSpec,
    own_socket,
    qemu_binary,
    qemu_version,
    set_netdev_link,
    socket_paths,
    tcg_warning,
)
from sanlab.emulator.ssh import SshHost
from sanlab.scenarios.endpoints import Endpoint, emulated
from sanlab.scenarios.errors import HostDown, SanlabError
from sanlab.scenarios.files import regular_file
from sanlab.scenarios.hosts import Say
from sanlab.scenarios.plan import PlannedLink
from sanlab.scenarios.reading import load_json, typed
from sanlab.scenarios.schema import Scenario
from sanlab.scenarios.topology import FABRIC_HOST, Port
from sanlab.scenarios.writing import write_file

BOOT_TIMEOUT = 180.0
# A reset guest can boot far slower than a fresh one under TCG, in unpacking
# its initramfs (why is not established).  Measured on a 2-core host after the
# pair tests' first eleven cases: 112 s and 281 s of uptime to init (a fresh
# boot: 9 s), the initramfs worker stuck for 21 s at a time.  So a reboot
# waits longer than a first boot does.
REBOOT_TIMEOUT = 600.0
# How long a link doctor's step may take to show in the link's health.  After a down/up,
# rxe re-adds its GIDs from netdev events; on a loaded host that once took longer than the
# 2 s the doctor used to sleep, so rping failed and the NICs were reset needlessly.
SETTLE_S = 30.0
SETTLE_POLL_S = 1.0
# How long the link doctor waits for a guest's agent to answer a ping before it takes the
# guest for wedged.  The agent answers each request in its own thread within a second even
# on a loaded TCG host; the steps short of a reboot go through it, and each would wait out
# its own 70 s for an agent that does not answer.
AGENT_PING_S = 20.0
# A lab's name is a name, never a path: it becomes one folder under labs_root().
LAB_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,30}$")
# Everything a lab writes into its run directory; nothing else there is ever removed.
LAB_FILES = (
    "state.json",
    "state.tmp",
    ".state.json.sanlab-*.tmp",  # the state's temporary (scenarios/writing.py), left only by a kill
    "*.sock",
    "*.console.log",
    "*.qemu.log",
    "*.pcap",
    "ssh-*",
    "ssh_key*",
)
UNIX_PATH_MAX = 107
STATE_BYTES = 1 << 20  # a lab's state.json: a few hosts' PIDs, sockets and addresses


def check_lab_name(name: str) -> str:
    """``name`` if it is a lab name; otherwise a one-line error saying what is allowed."""
    if not LAB_NAME.match(name):
        raise SanlabError(
            f"lab name {name!r} is not allowed (lower-case letters, digits and '-', "
            "at most 31, not starting with '-')"
        )
    return name


def lab_name(text: str) -> str:
    """A lab name made from free text such as a file's stem: 'My Pair.v2' -> 'my-pair-v2'."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:31].rstrip("-")
    return name or "lab"


def clear_run_dir(run_dir: Path) -> None:
    """Remove what a lab wrote in ``run_dir`` (and the folder, once empty); nothing else."""
    if run_dir.is_symlink() or not run_dir.is_dir():
        return
    for pattern in LAB_FILES:
        for path in run_dir.glob(pattern):
            if path.is_file() or path.is_socket():
                path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        run_dir.rmdir()


def lab_dir(name: str) -> Path:
    """Lab ``name``'s run directory; a name that is not a lab name (``../x``) is refused first."""
    return labs_root() / check_lab_name(name)


def labs_root() -> Path:
    """Short paths: unix socket names are limited to 107 bytes."""
    base = os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/sanlab-{os.getuid()}"
    return Path(base) / "sanlab-labs" if os.environ.get("XDG_RUNTIME_DIR") else Path(base) / "labs"


def _mac(lab: str, link: str, host: str) -> str:
    digest = hashlib.sha256(f"{lab}/{link}/{host}".encode()).digest()
    return "52:54:00:" + ":".join(f"{b:02x}" for b in digest[:3])


@dataclass(frozen=True)
class Plan:
    """What a lab will be, computed from the scenario alone."""

    specs: dict[str, VmSpec]
    interfaces: dict[str, list[Interface]]
    addresses: dict[tuple[str, str], str]
    endpoints: dict[tuple[str, str], Endpoint]
    fabric: dict[str, Any] | None = None  # what the fabric VM builds, when there are switches


def plan(
    scenario: Scenario,
    lab: str,
    run_dir: Path,
    capture_dir: Path | None,
    snaplen: int | None = None,
    ssh: bool = False,
) -> Plan:
    """VM specs and interfaces for every host; addresses are IPv4 link-local.

    Cable i is 169.254.(10+i).0/24 and its n-th endpoint is .n+1: a
    point-to-point cable needs no routing, and these addresses never leave
    the QEMU processes.  Host ports on switched segment k share
    169.254.(100+k).0/24, numbered in the order their links are declared.
    A cable is captured at its first end, a switch's cable at the switch port.
    """
    specs = {
        h.name: VmSpec(
            h.name, h.cpus, max(256, h.memory >> 20), ssh_port=guest_ssh.free_port() if ssh else None
        )
        for h in scenario.hosts
    }
    interfaces: dict[str, list[Interface]] = {h.name: [] for h in scenario.hosts}
    addresses: dict[tuple[str, str], str] = {}
    switched = {port.link: port for port in scenario.plan.ports}
    on_segment: dict[int, int] = {}
    nic = partial(NicSpec, snaplen=snaplen)
    for link in scenario.plan.links:
        name = link.name
        for end in _ends(link, switched, on_segment, capture_dir):
            spec = specs.setdefault(end.host, VmSpec(end.host, FABRIC_CPUS, FABRIC_MEMORY_MIB))
            mac = _mac(lab, name, end.host)
            sockets = (run_dir / f"{name}.{end.host}.sock", run_dir / f"{name}.{end.peer}.sock")
            spec.nics.append(
                nic(link=name, mac=mac, local_socket=sockets[0], peer_socket=sockets[1], capture=end.capture)
            )
            if end.address is not None:
                addresses[(name, end.host)] = end.address
                interfaces[end.host].append(_interface(link, name, mac, end.address))
    _check_socket_paths(specs, run_dir)
    port_macs = {name: _mac(lab, name, FABRIC_HOST) for name in switched}
    spec_doc = fabric.document(scenario, port_macs, addresses) if scenario.switches else None
    return Plan(specs, interfaces, addresses, emulated(scenario, addresses), spec_doc)


@dataclass(frozen=True)
class _End:
    """One NIC of a link: whose it is, whose is at the other end, its address, its capture."""

    host: str
    peer: str
    address: str | None  # None for a switch port: it has no address
    capture: Path | None


def _ends(
    link: PlannedLink, switched: dict[str, Port], on_segment: dict[int, int], capture_dir: Path | None
) -> list[_End]:
    """The NICs a link needs: two for a cable, host and switch port for a port, none for a trunk."""
    capture = capture_dir / f"{link.name}.pcap" if capture_dir else None
    port = switched.get(link.name)
    if port is not None:
        n = on_segment[port.segment] = on_segment.get(port.segment, 0) + 1
        address = f"169.254.{SEGMENT_BASE + port.segment}.{n}"
        return [_End(port.host, FABRIC_HOST, address, None), _End(FABRIC_HOST, port.host, None, capture)]
    if link.kind == "trunk":
        return []  # between two switches: a Mininet link inside the fabric VM
    a, b = link.endpoints
    net = 10 + link.index
    return [_End(a, b, f"169.254.{net}.1", capture), _End(b, a, f"169.254.{net}.2", None)]


def _interface(planned: PlannedLink, name: str, mac: str, address: str) -> Interface:
    link = planned.link
    return Interface(
        link=name,
        mac=mac,
        address=address,
        prefix=24,
        mtu=link.mtu,
        rate_bps=link.rate,
        delay_s=link.delay,
        loss_pct=link.loss,
        rdma_driver=planned.rdma_driver,
        queue=link.queue,
    )


def _check_socket_paths(specs: dict[str, VmSpec], run_dir: Path) -> None:
    """QEMU's unix sockets fail on paths over 107 bytes: say so before anything boots, for
    every socket a VM listens on (its links' and its own agent, console and monitor)."""
    for spec in specs.values():
        for path in socket_paths(spec, run_dir):
            if len(str(path)) > UNIX_PATH_MAX:
                raise SanlabError(
                    f"socket path {path} is over {UNIX_PATH_MAX} bytes: "
                    "use shorter lab, link or host names (or a shorter XDG_RUNTIME_DIR)"
                )


@dataclass(frozen=True)
class LinkHealth:
    """Whether a link's two ends still reach each other, and the evidence."""

    link: str
    ok: bool
    detail: str


class Lab:
    def __init__(
        self,
        scenario: Scenario,
        name: str,
        run_dir: Path,
        capture_dir: Path | None = None,
        snaplen: int | None = None,
        ssh: bool = False,
    ):
        if not scenario.hosts:
            raise SanlabError(f"scenario {scenario.name!r} declares no hosts: nothing to boot")
        self.scenario, self.name, self.run_dir = scenario, name, run_dir
        self.plan = plan(scenario, name, run_dir, capture_dir, snaplen, ssh)
        self.vms: dict[str, Vm] = {}
        self.ssh_hosts: dict[str, SshHost] = {}  # with ssh: the same guests, reached over SSH
        self.bridges: dict[str, list[str]] = {}  # with switches: each bridge's ports, as built
        self.accel = ""

    @property
    def state_file(self) -> Path:
        return self.run_dir / "state.json"

    def up(self, say: Say = lambda m: None, image: Image | None = None) -> None:
        image = image or require_image(guest_of(self.scenario.guest))
        qemu = qemu_binary()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.accel = accelerator.choose(qemu, image, say)
        say(f"lab {self.name}: starting {len(self.plan.specs)} VMs under {self.accel.upper()}")
        if self.accel == "tcg" and (warning := tcg_warning(qemu_version(qemu))):
            say(warning)
        shapes = {name: snapshots.shape_of(spec, self.accel) for name, spec in self.plan.specs.items()}
        saved = {shape: snapshots.ready_snapshot(image, qemu, shape, say) for shape in set(shapes.values())}
        starts = {name: saved[shape] for name, shape in shapes.items()}
        for spec in self.plan.specs.values():
            vm = Vm(spec, image, self.accel, self.run_dir, qemu)
            snapshots.start(vm, starts[spec.name])
            self.vms[spec.name] = vm
        self._write_state()
        pool = ThreadPoolExecutor(len(self.vms))
        cancelled = threading.Event()
        try:
            waits = pool.map(
                lambda v: snapshots.wait_started(v, starts[v.name], BOOT_TIMEOUT, say, cancelled),
                self.vms.values(),
            )
            for vm, seconds in zip(self.vms.values(), waits, strict=True):
                how = "restored" if vm.incoming else "booted"
                say(f"  {vm.name}: {how}, ready in {seconds:.1f} s")
            list(pool.map(self._configure, self.vms.values()))
        except BaseException:
            # Ctrl-C or a failed boot: stop the VMs now, so the threads still
            # waiting for their guests see them gone and end at once; then once more after
            # they have ended, for a cold boot a failed restore began just before the stop.
            cancelled.set()
            for vm in self.vms.values():
                vm.stop(grace=1.0)
            pool.shutdown(wait=True, cancel_futures=True)
            for vm in self.vms.values():
                vm.stop(grace=1.0)
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        say(f"lab {self.name}: links up ({', '.join(self._link_summary())})")
        if any(spec.ssh_port for spec in self.plan.specs.values()):
            self._open_ssh(say)
        self._write_state()

    def _open_ssh(self, say: Say) -> None:
        """sshd in every guest, reached with a throw-away key through a forwarded port."""
        guest_ssh.make_key(self.run_dir)
        for vm in self.vms.values():
            self.ssh_hosts[vm.name] = self._ssh_into(vm)
            say(f"  {vm.name}: sshd on 127.0.0.1:{self.plan.specs[vm.name].ssh_port}")

    def _ssh_into(self, vm: Vm) -> SshHost:
        """Start sshd in ``vm`` for the lab's key; the ``SshHost`` that reaches it, once it answers."""
        key = self.run_dir / guest_ssh.KEY_FILE
        port = self.plan.specs[vm.name].ssh_port
        assert port is not None
        guest_ssh.start_sshd(vm, key.with_suffix(".pub").read_text(), MGMT_MAC, MGMT_ADDRESS)
        host = guest_ssh.guest_host(vm.name, port, key, self.run_dir)
        guest_ssh.wait_for_sshd(host)
        return host

    def _reopen_ssh(self, vm: Vm) -> None:
        """A rebooted guest's sshd is gone, and with it every connection to it."""
        self.ssh_hosts.pop(vm.name).close()
        self.ssh_hosts[vm.name] = self._ssh_into(vm)

    def _configure(self, vm: Vm) -> None:
        if vm.name == FABRIC_HOST and self.plan.fabric is not None:
            self.bridges = fabric.start(vm, self.plan.fabric)
        for nic in self.plan.interfaces.get(vm.name, []):
            configure(vm, nic)
        if vm.name != FABRIC_HOST and self.plan.fabric is not None:
            fabric.serve_flows(vm, self.plan.fabric)

    def _ends(self, link: str) -> list[tuple[Vm, Interface, str]]:
        """The two hosts that talk over ``link``: a cable's ends; for a host's link to a switch,
        that host and the first host on another port of the same switch, whom its packets
        reach through the switch (the switch port has no address of its own)."""
        ends = self._hosts_on(link)
        if len(ends) == 1:
            switches = {sw.name for sw in self.scenario.switches}
            switch = next((e for e in self.scenario.plan.link(link).link.endpoints if e in switches), "")
            ports = [
                lk.name
                for lk in self.scenario.plan.links
                if lk.name != link and switch in lk.link.endpoints and lk.kind != "cable"
            ]
            ends += next((self._hosts_on(port) for port in ports if self._hosts_on(port)), [])
        if len(ends) != 2:
            raise SanlabError(f"lab {self.name}: no running link {link!r}")
        return ends

    def _hosts_on(self, link: str) -> list[tuple[Vm, Interface, str]]:
        """The hosts with an address on ``link`` (a switch has none)."""
        ends = []
        for (name, host), address in self.plan.addresses.items():
            if name == link and host in self.vms:
                nic = next(n for n in self.plan.interfaces[host] if n.link == link)
                ends.append((self.vms[host], nic, address))
        return ends

    def check_link(self, link: str) -> LinkHealth:
        """Ping across ``link``; the packet counters of both ends show which way is lost.

        A link with soft-RDMA devices at both ends must also carry an RDMA/CM
        connection (``rping``), which an IP ping cannot vouch for.
        """
        (a, nic_a, _), (b, nic_b, addr_b) = self._ends(link)
        before = cables.counters(a, nic_a), cables.counters(b, nic_b)
        ok = cables.answers(a, nic_a, addr_b)
        after = cables.counters(a, nic_a), cables.counters(b, nic_b)
        detail = (
            f"{a.name} -> {addr_b}: {'answers' if ok else 'no answer'}; "
            f"{a.name} {before[0]} -> {after[0]}, {b.name} {before[1]} -> {after[1]}"
        )
        if ok and nic_a.rdma_device and nic_b.rdma_device:
            ok = cables.rdma_answers(b, a, addr_b)
            detail += (
                f"; rping {a.name} -> {addr_b} over {nic_a.rdma_device}: {'answers' if ok else 'no answer'}"
            )
        return LinkHealth(link, ok, detail)

    def set_carrier(self, link: str, up: bool) -> None:
        """Pull ``link``'s cable (``up=False``) or plug it back: carrier goes at every NIC on
        it at once, host or switch port, as it would on real hardware.  The same way as from
        another shell (``LabCables``), through the state this lab wrote."""
        LabCables(self.name).set_carrier(link, up)

    def restart_link(self, link: str, say: Say = lambda m: None) -> LinkHealth:
        """Bring both ends of ``link`` down and up again; if that is not enough, reset both
        NICs; if that is not enough either, reboot both hosts.

        Each step is harsher than the last and is tried only when the one
        before left the link silent (or could not be taken).  The reboot is
        for a guest kernel that soft-RDMA wedged (Linux 6.1's rxe can hang a
        QP's teardown, or oops): nothing short of it frees the NIC.  A guest
        whose agent no longer answers a ping is rebooted at once, as the
        steps before would need that agent.  Returns the health after the
        last step taken, its detail naming that step and what was found before.
        """
        ends = self._ends(link)

        def each_end(act: Callable[[Vm, Interface], None]) -> Callable[[], None]:
            def take() -> None:
                for vm, nic, _ in ends:
                    act(vm, nic)

            return take

        steps: list[tuple[str, Callable[[], None]]] = [
            ("down/up", each_end(cables.restart)),
            ("NIC reset", each_end(cables.reset)),
            ("reboot", partial(self.reboot, self._hosts(ends), say)),
        ]
        failed: list[str] = []
        if silent := self._silent(ends):
            failed.append(f"{' and '.join(silent)}: no answer from the agent within {AGENT_PING_S:.0f} s")
            steps = steps[-1:]
        both = " and ".join(self._hosts(ends))
        for step, take in steps:
            if failed:
                say(f"link {link}: {failed[-1].splitlines()[0]}; next: {step} of {both}")
            try:
                take()
                health = self._settled(link)
            except SanlabError as exc:
                failed.append(f"{step} failed: {exc}")
                continue
            before = f" (before it: {'; '.join(failed)})" if failed else ""
            if health.ok:
                return LinkHealth(link, True, f"{step}: {health.detail}{before}")
            failed.append(f"{step} did not help: {health.detail}")
        return LinkHealth(link, False, "; ".join(failed))

    @staticmethod
    def _silent(ends: list[tuple[Vm, Interface, str]]) -> list[str]:
        """The hosts among ``ends`` whose agents do not answer a ping (asked at once)."""
        with ThreadPoolExecutor(len(ends)) as pool:
            answers = list(pool.map(lambda end: end[0].answers(AGENT_PING_S), ends))
        return [vm.name for (vm, _, _), ok in zip(ends, answers, strict=True) if not ok]

    def _settled(self, link: str) -> LinkHealth:
        """The link's health once a step has taken: checked until it answers; a silent link is
        told after one more check once both ends show the step in full (``cables.settled``:
        up, and the RDMA device ACTIVE with its GID), or past SETTLE_S.  So a step that could
        not help costs two checks, not SETTLE_S, and one still settling gets its time."""
        deadline = time.monotonic() + SETTLE_S
        taken = False
        while True:
            health = self.check_link(link)
            if health.ok or taken or time.monotonic() >= deadline:
                return health
            taken = all(cables.settled(vm, nic) for vm, nic, _ in self._ends(link))
            if not taken:
                time.sleep(SETTLE_POLL_S)

    def reboot_link_hosts(self, link: str, say: Say = lambda m: None) -> None:
        """Reboot the guests at the ends of ``link`` (never the fabric VM) and set them up again:
        for kernel tasks a failed target left stuck on a link that still answers."""
        self.reboot([name for name in self._hosts(self._ends(link)) if name != FABRIC_HOST], say)

    @staticmethod
    def _hosts(ends: list[tuple[Vm, Interface, str]]) -> list[str]:
        return [vm.name for vm, _, _ in ends]

    def reboot(self, names: list[str], say: Say = lambda m: None) -> None:
        """Reset the machines of hosts ``names`` at once and set them up again as ``up`` did:
        links, fabric flows and sshd.  What ran in them is gone; what a target needs it
        makes again when it is exported."""
        if FABRIC_HOST in names:
            raise SanlabError("the fabric VM is not rebooted: it would take every switched link with it")
        vms = [self.vms[name] for name in names]
        gone = [vm.name for vm in vms if not vm.running()]
        if gone:  # a reset needs a QEMU to press it in (a guest kernel panic ends its QEMU)
            raise HostDown(
                f"{', '.join(gone)}: the VM is down (its QEMU exited); a reboot cannot bring it back"
            )
        with ThreadPoolExecutor(len(vms)) as pool:
            for vm, seconds in zip(vms, pool.map(lambda v: v.reboot(REBOOT_TIMEOUT), vms), strict=True):
                say(f"  {vm.name}: rebooted, ready in {seconds:.1f} s")
            list(pool.map(self._configure, vms))
        for vm in vms:
            if vm.name in self.ssh_hosts:
                self._reopen_ssh(vm)

    def _link_summary(self) -> Iterator[str]:
        for (link, host), address in self.plan.addresses.items():
            yield f"{host}/{link} {address}"

    def _write_state(self) -> None:
        state = {
            "name": self.name,
            "scenario": self.scenario.name,
            "accel": self.accel,
            "started": time.time(),
            "hosts": {
                n: {
                    "pid": vm.pid,
                    # With the PID, names this qemu for ever: a reused PID is never taken for it.
                    "started": vm.started_as.started if vm.started_as else None,
                    "agent": str(vm.agent_socket),
                    "console": str(vm.console_socket),
                    "console_log": str(vm.console_log),
                    "qmp": str(vm.qmp_socket),
                    "links": [nic.link for nic in vm.spec.nics],  # in NIC order: netdev n0, n1, ...
                }
                for n, vm in self.vms.items()
            },
            "addresses": {f"{h}/{lk}": a for (lk, h), a in self.plan.addresses.items()},
            "captures": {
                nic.link: str(nic.capture)
                for spec in self.plan.specs.values()
                for nic in spec.nics
                if nic.capture is not None
            },
        }
        write_file(self.state_file, json.dumps(state, indent=2), what="lab state")

    def emulator_faults(self) -> list[str]:
        """A line for each running guest whose CPU flags hold bits no x86-64 CPU sets: the
        emulator corrupted its state, so what ran there may have gone wrong where no check
        looked (emulator/cpuflags.py).  Asked once, as a run ends; a guest it cannot ask is
        passed over."""
        lines = []
        for vm in self.vms.values():
            try:
                flags = vm.impossible_flags()
            except SanlabError:
                continue
            if flags is not None:
                lines.append(f"warning: {vm.name}: its CPU's {verdict(flags)}")
        return lines

    def down(self) -> None:
        """Stop every VM and remove sockets and state; console logs stay."""
        for host in self.ssh_hosts.values():
            host.close()
        for vm in self.vms.values():
            vm.stop()
        self.state_file.unlink(missing_ok=True)

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()


# --- labs seen from another shell (sanlab lab exec / list / down) ---------------


_PATH = r"^[^\x00\n]{1,4096}$"


def _ipv4(text: str) -> str:
    """An address in a lab's state is a dotted IPv4 address, each part 0-255."""
    ipaddress.IPv4Address(text)  # ValueError: pydantic names the field and value
    return text


class _HostState(BaseModel):
    """One host of a lab's state file, typed: a planted or torn entry is a line, never a
    KeyError, and a PID is a PID (Lab._write_state writes these)."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    pid: int = Field(ge=1, le=1 << 22)
    started: int | None = Field(None, ge=0)  # clock ticks since boot (emulator/processes.py)
    agent: str = Field(pattern=_PATH)
    console: str = Field("", pattern=r"^[^\x00\n]{0,4096}$")
    console_log: str = Field("", pattern=r"^[^\x00\n]{0,4096}$")
    qmp: str = Field("", pattern=r"^[^\x00\n]{0,4096}$")
    links: list[str] = Field(default_factory=list, max_length=64)


class _LabState(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    name: str = ""
    scenario: str | None = None
    accel: str = ""
    started: float = Field(0.0, ge=0)
    hosts: dict[str, _HostState] = Field(min_length=1, max_length=64)
    # "host/link": the host's address on that link
    addresses: dict[
        Annotated[str, Field(pattern=r"^[^/\x00]+/[^/\x00]+$")],
        Annotated[str, Field(pattern=r"^\d{1,3}(\.\d{1,3}){3}$"), AfterValidator(_ipv4)],
    ] = Field(default_factory=dict)
    captures: dict[str, Annotated[str, Field(pattern=_PATH)]] = Field(default_factory=dict)


def read_state(name: str) -> dict[str, Any]:
    """A lab's state file, read through the one reader and typed: a corrupt, partial or
    planted one is an error that says which field is wrong and how to clear it."""
    path = lab_dir(name) / "state.json"
    if not path.exists() and not path.is_symlink():
        known = ", ".join(sorted(lab_names())) or "none"
        raise SanlabError(f"no lab named {name!r} is up (labs up: {known})")
    try:
        state = typed(_LabState, load_json(path, "lab state", STATE_BYTES), f"lab state {path}")
    except SanlabError as exc:
        raise SanlabError(f"{exc}; 'sanlab lab down {name}' clears it") from None
    return dict(state.model_dump())


def lab_names() -> list[str]:
    root = labs_root()
    return sorted(p.name for p in root.iterdir() if (p / "state.json").is_file()) if root.is_dir() else []


def vm_alive(name: str, entry: dict[str, Any], host: str | None = None) -> bool:
    """Whether a lab host's qemu still runs (and is ours, not a recycled PID: ``_our_qemu``)."""
    who, sockets = _our_qemu(name, entry, host)
    return is_process_ours(who, paths=sockets)


def live_agent_path(name: str, host: str) -> Path:
    """The agent socket of a running host of lab ``name``; a dead VM is named, with its last words."""
    hosts = read_state(name)["hosts"]
    if host not in hosts:
        raise SanlabError(f"lab {name!r} has no host {host!r} (hosts: {', '.join(hosts)})")
    entry = hosts[host]
    if not vm_alive(name, entry, host):
        path = entry.get("console_log")
        words = last_words(Path(path)) if isinstance(path, str) else ""
        raise SanlabError(
            f"lab {name!r}: host {host!r} is down (its qemu, pid {entry['pid']}, is not running)"
            + (f"; {words}" if words else "")
            + f"; 'sanlab lab down {name}' clears the lab"
        )
    return own_socket(lab_dir(name), host, "agent")  # the one its qemu was proven to name


def capture_file(name: str, link: str) -> Path:
    """Where QEMU writes the pcap of ``link`` of a running lab."""
    state = read_state(name)
    captures = state.get("captures") or {}
    if link not in captures:
        links = sorted({key.split("/", 1)[1] for key in state.get("addresses", {})})
        if not captures:
            raise SanlabError(f"lab {name!r} was not started with --capture: 'sanlab lab up ... --capture'")
        raise SanlabError(f"lab {name!r} has no captured link {link!r} (links: {', '.join(links)})")
    return Path(captures[link])


def follow_capture(name: str, link: str, poll_s: float = 0.2) -> Iterator[bytes]:
    """The pcap of ``link`` from its first byte, then whatever QEMU appends, while the lab runs.

    QEMU's filter-dump writes a classic pcap as frames pass, so following
    the file gives a live stream that Wireshark or tshark read from a pipe.
    """
    path = capture_file(name, link)
    state = read_state(name)
    regular_file(path, f"lab {name!r}: capture of {link!r}")  # a FIFO planted there would block
    with open(path, "rb") as handle:
        while True:
            chunk = handle.read(1 << 16)
            if chunk:
                yield chunk
                continue
            if not any(vm_alive(name, entry, host) for host, entry in state["hosts"].items()):
                return
            time.sleep(poll_s)


@dataclass(frozen=True)
class LabCables:
    """The cables of a lab that is up, pulled from any shell through each VM's QMP socket."""

    name: str

    def set_carrier(self, link: str, up: bool) -> None:
        """Carrier off (``up=False``) or on at every NIC on ``link``, as ``Lab.set_carrier``."""
        hosts = read_state(self.name)["hosts"]
        ends = {host: entry for host, entry in hosts.items() if link in (entry.get("links") or [])}
        if not ends:
            raise SanlabError(f"lab {self.name!r}: no host is on link {link!r} (or the lab predates QMP)")
        for host, entry in ends.items():
            if not vm_alive(self.name, entry, host):
                raise SanlabError(f"lab {self.name!r}: host {host!r} is down")
            qmp = own_socket(lab_dir(self.name), host, "qmp")  # the one its qemu was proven to name
            set_netdev_link(qmp, entry["links"].index(link), up, f"{host}'s link {link!r}")


def left_over(name: str) -> bool:
    """Whether lab ``name``'s state outlived every one of its VMs (a ``lab up`` that was
    killed before it could tear down, say): a readable state none of whose qemus runs.
    A state that cannot be read is not called left over; ``lab down`` clears that one."""
    try:
        hosts = read_state(name)["hosts"]
    except SanlabError:
        return False
    return not any(vm_alive(name, entry, host) for host, entry in hosts.items())


def _our_qemu(name: str, entry: dict[str, Any], host: str | None) -> tuple[Recorded | None, list[Path]]:
    """What proves a state entry's PID is this lab's qemu (emulator/processes.py): the PID and
    start time the state recorded, and the sockets only that qemu names, worked out from the
    lab's own run folder (never taken from the state file, which anyone may have edited).
    A host's agent socket is ``<run folder>/<host>.agent.sock``; an entry whose host is not
    known is matched on every socket it names that lies directly in this lab's folder."""
    who = recorded(entry.get("pid"), entry.get("started"))
    run_dir = lab_dir(name)
    if host is not None and (Path(host).name != host or host.startswith(".")):
        return who, []  # a host name is a name, never a path
    if host is not None:
        return who, [own_socket(run_dir, host, kind) for kind in ("agent", "qmp")]
    named = [entry.get(key) for key in ("agent", "qmp")]
    return who, [Path(p) for p in named if isinstance(p, str) and Path(p).parent == run_dir]


def stop_lab(name: str) -> tuple[list[int], list[str]]:
    """Tear a lab down from its state file: (PIDs stopped, hosts that were already down).

    A corrupt state file is cleared too (with the lab's sockets), so that
    ``lab down`` always leaves a clean slate; only processes proven to be
    this lab's qemu are ever signalled.
    """
    run_dir = lab_dir(name)
    try:
        hosts = read_state(name)["hosts"]
    except SanlabError:
        if not (run_dir / "state.json").exists():
            raise
        hosts = {}
    stopped, dead = [], []
    for host, entry in hosts.items():
        who, sockets = _our_qemu(name, entry, host)
        if stop_ours(who, paths=sockets):
            stopped.append(entry["pid"])
        else:
            dead.append(host)
    for sock in run_dir.glob("*.sock"):
        if sock.is_socket():
            sock.unlink()
    state = run_dir / "state.json"
    if state.is_file() and not state.is_symlink():
        state.unlink()
    return stopped, dead


@contextmanager
def running_lab(
    scenario: Scenario,
    name: str,
    say: Say,
    capture_dir: Path | None = None,
    keep_logs: bool = True,
    snaplen: int | None = None,
    ssh: bool = False,
) -> Iterator[Lab]:
    """A lab that exists only inside the ``with`` block, in a fresh run dir.

    Without ``keep_logs`` the run directory goes too (the caller has copied
    what it wants from it).
    """
    run_dir = new_run_dir(name)
    lab = Lab(scenario, name, run_dir, capture_dir, snaplen, ssh)
    try:
        lab.up(say)
        yield lab
    finally:
        try:
            for line in lab.emulator_faults():
                say(line)
        finally:
            lab.down()
        if not keep_logs:
            clear_run_dir(run_dir)


def new_run_dir(name: str) -> Path:
    """The run directory of a lab about to start: refused if that lab is up, cleared of its
    own leftovers (old console logs, the state of a lab whose VMs all died) otherwise."""
    run_dir = labs_root() / check_lab_name(name)
    if (run_dir / "state.json").exists() and not left_over(name):
        raise SanlabError(f"a lab named {name!r} is already up: 'sanlab lab down {name}' first")
    clear_run_dir(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir
