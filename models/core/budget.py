"""A QD 1 latency budget: one I/O alone in the system, hop by hop.

With nothing else in flight an I/O waits at no desk, so its latency is the
sum of the demands of the desks it visits (tests/test_model_properties.py
checks the simulator agrees).  A desk made of several hops (the fio job's
CPU: syscall and block layer, then the transport's initiator; the fixed
delays: NIC, PCIe, cable, switch, interrupts, device) is listed hop by
hop.  Each hop names what it stands for and the parameter behind it, whose
value and source are in the profile (models/core/profile.py's comments), the
stacks' costs and models/priors.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sanlab.models.core.network import Point, Station, build
from sanlab.models.core.profile import Profile

HOPS = {
    "syscall-block": "fio's submission and completion: syscalls, the block layer (stacks: application)",
    "initiator-stack": "the transport's initiator: commands, completions, data in (stacks: paths x CPI)",
    "initiator-digests": "CRC32C of the PDUs the initiator sends and checks (stacks: digests)",
    "initiator-tls": "TLS's AEAD (AES-GCM) over every byte the initiator sends and receives (stacks: tls)",
    "initiator-net": "the initiator's TCP stack, per packet it handles (nics: host_kcycles_per_packet)",
    "initiator-tcp-tx": "TCP's transmit path, on the job's core (nics: host_kcycles_per_packet)",
    "initiator-softirq": "the NIC's receive softirq: driver, GRO, IP, TCP (nics: host_kcycles_per_packet)",
    "initiator-irq": "the completion interrupt and the job's wake-up, on its core (stacks: interrupts)",
    "initiator-contention": "waits on lines its busy cores share, past the fitted rows (stacks: contention)",
    # (under load, packets are batched and share that cost: nics' batch_window_us; never at QD 1)
    "link-out": "serialisation towards the target (link rate, wire bytes)",
    "initiator-ports-tx": "serialisation out of the initiators' switch ports",
    "target-port-rx": "serialisation into the target's switch port",
    "target-stack": "the target stack's thread (stacks: paths x CPI where measured, else targets)",
    "backend-copy": "the target's copy in and out of the backend (backends: target_cycles_per_byte)",
    "target-digests": "CRC32C of the PDUs the target sends and checks (stacks: digests; a library: hosts)",
    "target-tls": "TLS's AEAD (AES-GCM) over every byte the target sends and receives (stacks: tls)",
    "target-net": "the target's TCP stack, per packet it handles (nics: host_kcycles_per_packet)",
    "target-tcp-tx": "the target's TCP transmit path, on the queue's core (nics: host_kcycles_per_packet)",
    "target-softirq": "the target NIC's receive softirq (nics: host_kcycles_per_packet)",
    "target-irq": "the interrupt waking the target's thread, unless its stack polls (stacks: interrupts)",
    "target-contention": "waits on lines its busy cores share, past the fitted rows (stacks: contention)",
    "nic-messages": "the NIC's work per message beyond the data's DMA (nics: msg_ns)",
    "device": "the backend's service: per I/O and per byte (backends)",
    "pcie": "DMA of the data across the target NIC's slot, beyond what the wire overlaps (nics: pcie_gbps)",
    "link-in": "serialisation back to the initiator (link rate, wire bytes)",
    "target-port-tx": "serialisation out of the target's switch port",
    "initiator-ports-rx": "serialisation into the initiators' switch ports",
    "nic-pipeline": "the two NICs' pipelines, each way per round trip (nics: one_way_us less pcie_us)",
    "pcie-doorbell": "doorbell, work-request and completion DMA at both ends, each way (nics: pcie_us)",
    "pipeline-fill": "one packet through the faster of DMA and wire: the data path's fill (MTU, pcie_gbps)",
    "propagation": "signal flight along the cable, 5 ns a metre, each way (profile: cable_m)",
    "switch": "the switch's port-to-port latency, each way, with several initiators (profile: switch)",
    "initiator-interrupt": "fio's thread woken by an interrupt unless it polls (wakeup_us, irq_coalesce_us)",
    "target-interrupt": "an interrupt waking the target's thread, unless its stack polls (hosts: wakeup_us)",
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
    return [hop for station in net.stations for hop in _hops(station)]


def _hops(station: Station) -> list[Hop]:
    parts = station.parts or ((station.name, station.demand_us),)
    return [Hop(name, us, _side(station, name), HOPS.get(name, "")) for name, us in parts]


def _side(station: Station, hop: str) -> str:
    """Whose time a hop is: a CPU desk's side, an interrupt's host, else the hardware's."""
    if station.side:
        return station.side
    return hop.split("-")[0] if hop.endswith("-interrupt") else "hardware"
