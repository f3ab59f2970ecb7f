"""A lab: the hosts and links of a scenario, brought up as VMs and torn down.

What the VMs will be is the lab's blueprint (blueprint.py), worked out before
anything starts, so a bad scenario fails before a single VM boots.  ``Lab`` starts the VMs in
parallel, waits for their agents, configures the links, and records its
state (PIDs, sockets) in the run directory so that ``sanlab lab down`` works
from another shell.  Used as a context manager it always tears down: on
success, on an exception, and on Ctrl-C.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from sanlab.emulator import accel as accelerator
from sanlab.emulator import fabric, guest_ssh, snapshots
from sanlab.emulator.blueprint import blueprint
from sanlab.emulator.cpuflags import verdict
from sanlab.emulator.images import Image
from sanlab.emulator.kernel_image import require_scenario_image
from sanlab.emulator.lab_state import clear_run_dir, new_run_dir
from sanlab.emulator.link_repair import LinkRepair
from sanlab.emulator.links import configure
from sanlab.emulator.qemu import MGMT_ADDRESS, MGMT_MAC, Vm, qemu_binary, qemu_version, tcg_warning
from sanlab.emulator.ssh import SshHost
from sanlab.scenarios.errors import HostDown, SanlabError
from sanlab.scenarios.hosts import Say
from sanlab.scenarios.schema import Scenario
from sanlab.scenarios.topology import FABRIC_HOST
from sanlab.scenarios.writing import write_file

BOOT_TIMEOUT = 180.0


# A reset guest can boot far slower than a fresh one under TCG, in unpacking
# its initramfs (why is not established).  Measured on a 2-core host after the
# pair tests' first eleven cases: 112 s and 281 s of uptime to init (a fresh
# boot: 9 s), the initramfs worker stuck for 21 s at a time.  So a reboot
# waits longer than a first boot does.
REBOOT_TIMEOUT = 600.0


class Lab(LinkRepair):
    """A scenario's hosts as VMs: started in parallel, their links configured, torn down
    however the ``with`` block ends."""

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
        self.blueprint = blueprint(scenario, name, run_dir, capture_dir, snaplen, ssh)
        self.vms: dict[str, Vm] = {}
        self.ssh_hosts: dict[str, SshHost] = {}  # with ssh: the same guests, reached over SSH
        self.bridges: dict[str, list[str]] = {}  # with switches: each bridge's ports, as built
        self.accel = ""

    @property
    def state_file(self) -> Path:
        return self.run_dir / "state.json"

    def up(self, say: Say = lambda m: None, image: Image | None = None) -> None:
        image = image or require_scenario_image(self.scenario, say)
        qemu = qemu_binary()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.accel = accelerator.choose(qemu, image, say)
        say(f"lab {self.name}: starting {len(self.blueprint.specs)} VMs under {self.accel.upper()}")
        if self.accel == "tcg" and (warning := tcg_warning(qemu_version(qemu))):
            say(warning)
        shapes = {name: snapshots.shape_of(spec, self.accel) for name, spec in self.blueprint.specs.items()}
        saved = {shape: snapshots.ready_snapshot(image, qemu, shape, say) for shape in set(shapes.values())}
        starts = {name: saved[shape] for name, shape in shapes.items()}
        for spec in self.blueprint.specs.values():
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
        if any(spec.ssh_port for spec in self.blueprint.specs.values()):
            self._open_ssh(say)
        self._write_state()

    def _open_ssh(self, say: Say) -> None:
        """sshd in every guest, reached with a throw-away key through a forwarded port."""
        guest_ssh.make_key(self.run_dir)
        for vm in self.vms.values():
            self.ssh_hosts[vm.name] = self._ssh_into(vm)
            say(f"  {vm.name}: sshd on 127.0.0.1:{self.blueprint.specs[vm.name].ssh_port}")

    def _ssh_into(self, vm: Vm) -> SshHost:
        """Start sshd in ``vm`` for the lab's key; the ``SshHost`` that reaches it, once it answers."""
        key = self.run_dir / guest_ssh.KEY_FILE
        port = self.blueprint.specs[vm.name].ssh_port
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
        if vm.name == FABRIC_HOST and self.blueprint.fabric is not None:
            self.bridges = fabric.start(vm, self.blueprint.fabric)
        for nic in self.blueprint.interfaces.get(vm.name, []):
            configure(vm, nic)
        if vm.name != FABRIC_HOST and self.blueprint.fabric is not None:
            fabric.serve_flows(vm, self.blueprint.fabric)

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
        for (link, host), address in self.blueprint.addresses.items():
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
            "addresses": {f"{h}/{lk}": a for (lk, h), a in self.blueprint.addresses.items()},
            "captures": {
                nic.link: str(nic.capture)
                for spec in self.blueprint.specs.values()
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
