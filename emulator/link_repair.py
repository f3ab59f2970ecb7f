"""A lab's links checked and repaired: ping and rping across a link, then harsher steps.

The run's link doctor (targets/sessions/link_doctor.py) asks a lab whether a failed
target's link still carries packets, and to restart it: down/up, NIC reset, then a reboot
of the hosts at its ends.  ``Lab`` has these from ``LinkRepair``; what they need of the lab
(its VMs, blueprint and reboot) is declared below.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

from sanlab.emulator import links as cables
from sanlab.emulator.blueprint import Blueprint
from sanlab.emulator.lab_state import LabCables
from sanlab.emulator.links import Interface
from sanlab.emulator.qemu import Vm
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.hosts import Say
from sanlab.scenarios.schema import Scenario
from sanlab.scenarios.topology import FABRIC_HOST

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


@dataclass(frozen=True)
class LinkHealth:
    """Whether a link's two ends still reach each other, and the evidence."""

    link: str
    ok: bool
    detail: str


class LinkRepair:
    """A lab's link checks and repairs (mixed into ``Lab``)."""

    name: str
    scenario: Scenario
    blueprint: Blueprint
    vms: dict[str, Vm]

    def reboot(self, names: list[str], say: Say = lambda m: None) -> None:
        raise NotImplementedError

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
        for (name, host), address in self.blueprint.addresses.items():
            if name == link and host in self.vms:
                nic = next(n for n in self.blueprint.interfaces[host] if n.link == link)
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
