"""Where a target runs: its hosts, addresses and link, and what its records say of them.

A target placed behind a switch is reached by several initiators, each a placement of its
own; on real machines (``Machines``) the records say 'measured' and carry both hosts' facts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from sanlab.scenarios.endpoints import Endpoints
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.plan import PlannedTarget
from sanlab.scenarios.registry import PLAIN_FABRIC
from sanlab.scenarios.results.records import BackendFacts, HostFacts, MachineFacts, NicFacts
from sanlab.scenarios.schema import Scenario, Target
from sanlab.targets import host_facts
from sanlab.targets.host import Host
from sanlab.targets.stacks import RDMA_TRANSPORTS, Wiring


@dataclass(frozen=True)
class Placement:
    """Where one target runs: its hosts and addresses, and what its records say of the link."""

    wiring: Wiring
    fabric: str  # as the transport sees it: 'eth' for TCP transports, whatever the link carries
    rdma_driver: str | None
    link_gbps: float | None
    mtu: int
    mode: str = "emulated"  # 'measured' on real machines
    hardware: Mapping[str, object] | None = None  # facts of the target and initiator hosts
    machine: MachineFacts | None = None  # what a model needs of both hosts (targets/host_facts.py)
    devices: Mapping[tuple[str, str], BackendFacts] = field(default_factory=dict)  # (host, device)

    def record_base(self, target: Target) -> dict[str, object]:
        """The fields every record of this target shares."""
        return {
            "mode": self.mode,
            "initiator": self.wiring.initiator_host.name,
            "hardware": self.hardware,
            "machine": self.machine,
            "backend": host_facts.backend_of(target, self.devices),
            "transport": target.transport,
            "fabric": self.fabric,
            "rdma_driver": self.rdma_driver,
            "target_stack": target.stack,
            "link_gbps": self.link_gbps,
            "mtu": self.mtu,
        }


def placements(placed: PlannedTarget, hosts: Mapping[str, Host], ends: Endpoints) -> list[Placement]:
    """Where a planned target runs, once per initiator that reaches it (several behind a switch)."""
    target = placed.target
    if placed.link is None:
        raise SanlabError(f"target on {target.host!r} has no link")
    link, lname = placed.link.link, placed.link.name
    rate = link.rate / 1e9 if link.rate else None
    found_ends = [
        Wiring(
            hosts[target.host],
            hosts[initiator],
            ends[(lname, target.host)],
            ends[(via, initiator)],
            tuple((ends[(path, target.host)], ends[(path, initiator)]) for path in (target.paths or [])[1:]),
        )
        for initiator, via in placed.initiators
    ]
    if not found_ends:
        raise SanlabError(f"no initiator reaches target host {target.host!r}")
    if target.transport not in RDMA_TRANSPORTS:  # plain TCP/IP, whatever else the link carries
        return [Placement(wire, PLAIN_FABRIC.name, None, rate, link.mtu) for wire in found_ends]
    return [Placement(wire, link.fabric, placed.link.rdma_driver, rate, link.mtu) for wire in found_ends]


def place(scenario: Scenario, target: Target, hosts: Mapping[str, Host], ends: Endpoints) -> Placement:
    """Where a target runs, for its first (on a cable, its only) initiator."""
    return placements(scenario.plan.placed(target), hosts, ends)[0]


def admitting_all(wires: list[Wiring]) -> Wiring:
    """The first initiator's wiring, told of the others: what a shared target is exported with,
    so that its ACLs admit every initiator (each by its own IQN and address)."""
    sharers = tuple((w.initiator_host.name, w.initiator_address) for w in wires[1:])
    return replace(wires[0], sharers=sharers)


@dataclass(frozen=True)
class Machines:
    """Real machines under a run: their records say 'measured' and carry each host's facts."""

    facts: Mapping[str, Mapping[str, object]]  # host name -> hardware facts
    link_gbps: Mapping[str, float | None]  # link name -> the NICs' negotiated speed
    mtu: Mapping[str, int]  # link name -> the interfaces' MTU
    # host name -> its CPU and kernel, and the NIC of each of its link interfaces
    hosts: Mapping[str, tuple[HostFacts, Mapping[str, NicFacts]]] = field(default_factory=dict)
    devices: Mapping[tuple[str, str], BackendFacts] = field(default_factory=dict)  # (host, device)

    def _host(self, name: str, interface: str) -> HostFacts | None:
        if name not in self.hosts:
            return None
        cpu, nics = self.hosts[name]
        return cpu.model_copy(update={"nic": nics.get(interface)})

    def apply(self, placement: Placement) -> Placement:
        wire = placement.wiring
        hardware = {
            "target": self.facts.get(wire.target_host.name),
            "initiator": self.facts.get(wire.initiator_host.name),
        }
        machine = MachineFacts(
            initiator=self._host(wire.initiator_host.name, wire.initiator_end.interface),
            target=self._host(wire.target_host.name, wire.target_end.interface),
        )
        return replace(
            placement,
            mode="measured",
            hardware=hardware,
            machine=machine,
            devices=self.devices,
            link_gbps=self.link_gbps.get(wire.link),
            mtu=self.mtu.get(wire.link, placement.mtu),
        )
