"""A QD 1 latency budget: one I/O alone in the system, hop by hop.

With nothing else in flight an I/O waits at no desk, so its latency is the
sum of the demands of the desks it visits (tests/test_model_properties.py
checks the simulator agrees).  Each hop names what it stands for and the
parameter behind it, whose value and source are in the profile, the stacks'
costs and models/priors.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sanlab.models.network import Point, build
from sanlab.models.profile import Profile

HOPS = {
    "initiator-cpu": "fio, the block layer and the initiator's stack (stacks: application, initiators)",
    "initiator-net": "the initiator's TCP stack, per packet it handles (nics: host_kcycles_per_packet)",
    "link-out": "serialisation towards the target (link rate, wire bytes)",
    "initiator-ports-tx": "serialisation out of the initiators' switch ports",
    "target-port-rx": "serialisation into the target's switch port",
    "target-cpu": "the target stack's thread (stacks: targets; backend copy per byte)",
    "target-net": "the target's TCP stack, per packet it handles (nics: host_kcycles_per_packet)",
    "device": "the backend's service: per I/O and per byte (backends)",
    "pcie": "DMA of the data across the NIC's slot (nics: pcie_gbps or pcie)",
    "link-in": "serialisation back to the initiator (link rate, wire bytes)",
    "target-port-tx": "serialisation out of the target's switch port",
    "initiator-ports-rx": "serialisation into the initiators' switch ports",
    "flight": "NIC pipelines, wire and switch, each way per round trip (nics: one_way_us)",
    "wake-ups": "an interrupt waking the waiting thread, each side that does not poll (hosts: wakeup_us)",
    "device-latency": "the backend's access time (backends: read/write_latency_us)",
}


@dataclass(frozen=True)
class Hop:
    name: str
    us: float
    side: str
    meaning: str


def qd1_budget(point: Point, profile: Profile | None = None) -> list[Hop]:
    """The hops of one request of ``point`` alone in flight (one job, QD 1, one initiator)."""
    alone = replace(point, iodepth=1, numjobs=1, initiators=1)
    net = build(alone, profile)
    return [Hop(s.name, s.demand_us, s.side or "hardware", HOPS.get(s.name, "")) for s in net.stations]
