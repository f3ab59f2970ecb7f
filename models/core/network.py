"""From one workload point to the stations of a closed queueing network.

Think of an I/O as a customer that visits service desks in turn: the fio
job's thread on the initiator, the initiator's network softirq, the outbound
link, the target's serving thread, the backend device, the PCIe bus that
carries the data, the inbound link, and fixed delays (propagation, NIC and
interrupt latency).  Each desk has a number of clerks (servers) and a service
demand per I/O.  ``numjobs * iodepth`` customers circulate for ever: that is
fio's closed loop.  This module only computes the desks; ``simulate`` runs
them and ``mva`` solves them analytically.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from sanlab.models.core.costs import StackCost, stack_cost
from sanlab.models.core.hostcpu import host_desks
from sanlab.models.core.nicmsg import message_us, messages_per_io
from sanlab.models.core.profile import Nic, Profile, Switch
from sanlab.models.core.profile_files import load_profile
from sanlab.models.core.stations import (  # noqa: F401  (re-exported: the builder's vocabulary)
    Point,
    Station,
    connections,
    desk,
    packet_batch,
    throughput_bound,
)
from sanlab.models.core.transports import (
    ProtocolParams,
    Recipe,
    WireCost,
    recipe,
    stack_params,
    wire_bound_iops,
    wire_cost,
)
from sanlab.models.core.wire import data_rate_gbps, packet_payload
from sanlab.scenarios.registry import FABRICS, MODEL_TRANSPORTS, TRANSPORTS


@dataclass(frozen=True)
class Network:
    point: Point
    stations: tuple[Station, ...]
    wire: WireCost
    bound_iops: float
    target_stack: str
    mtu: int
    initiator_cores: int
    target_cores: int
    split: int = 1
    # What one I/O (one piece of a split one) puts on the wire, message by message, and
    # the round trips it waits for: the ladder the golden captures check (tests/test_golden).
    recipe: Recipe | None = None
    # Cores of each host ('initiator', 'target') its I/O work keeps busy before contention
    # (models/core/contention.py): what `sanlab calibrate --write` records of the fitted rows.
    busy_cores: dict[str, float] = field(default_factory=dict)
    # The most any fitted row's hosts kept busy, per side: past them contention is a prior's.
    fitted_busy_cores: dict[str, float] = field(default_factory=dict)

    @property
    def spinning_pct(self) -> float:
        """Initiator CPU % that polling jobs burn whatever the load: each polls on its core."""
        if not self.point.poll:
            return 0.0
        spinning = min(self.point.numjobs, self.initiator_cores // self.point.initiators)
        return 100 * spinning * self.point.initiators / self.initiator_cores

    def cpu_pct(self, busy_cores: Iterable[tuple[Station, float]]) -> dict[str, float]:
        """Each side's CPU %: its desks' busy cores over its cores, and polling jobs' cores at least.

        The one way CPU % is counted, whichever solver measured the busy cores.
        """
        cpu = {"initiator": 0.0, "target": 0.0}
        jobs = 0.0  # the jobs' own cores, which spin when they poll
        for station, busy in busy_cores:
            if station.side:
                cores = self.initiator_cores if station.side == "initiator" else self.target_cores
                if station.name == "initiator-cpu":
                    jobs += 100 * busy / cores
                else:
                    cpu[station.side] += 100 * busy / cores
        cpu["initiator"] += max(jobs, self.spinning_pct)
        return cpu


def default_stack(profile: Profile, transport: str) -> str:
    if transport in profile.target_stacks:
        return profile.target_stacks[transport]
    return TRANSPORTS[transport].default_stack


def max_transfer(point: Point, prof: Profile) -> int:
    """Linux splits a request larger than the device's max_hw_sectors: the profile's, else the
    initiator's default (the registry's)."""
    if point.transport in prof.max_transfer:
        return prof.max_transfer[point.transport]
    return MODEL_TRANSPORTS[point.transport].max_transfer


def with_cores(profile: Profile, cores: int | None, core: str | None = None) -> Profile:
    """The profile's machine with ``cores`` cores of design ``core`` on each host (a what-if)."""
    update = {k: v for k, v in (("cores", cores), ("core", core)) if v}
    if not update:
        return profile
    return profile.model_copy(
        update={
            "initiator": profile.initiator.model_copy(update=update),
            "target": profile.target.model_copy(update=update),
        }
    )


def build(point: Point, profile: Profile | None = None) -> Network:
    """The stations one I/O of ``point`` visits, with their demands in microseconds.

    An fio I/O larger than the largest request the block layer sends is cut
    into ``split`` requests that travel concurrently; the network then models
    one such request and the results are divided back by ``split``.
    """
    prof = with_cores(profile or load_profile(point.profile), point.cores, point.core)
    limit = max_transfer(point, prof)
    if point.bs > limit:
        split = -(-point.bs // limit)
        net = build(replace(point, bs=point.bs // split, iodepth=point.iodepth * split), prof)
        return replace(net, point=point, split=split, bound_iops=net.bound_iops / split)
    nic = prof.nic_for(point.fabric, point.link_gbps)
    mtu = point.mtu or nic.mtu
    kind = MODEL_TRANSPORTS[point.transport]
    if not kind.networked:
        stack = kind.default_stack
        return _local(point, prof, stack, stack_cost(prof, stack, point.transport))
    stack = point.target_stack or default_stack(prof, point.transport)
    cost = stack_cost(prof, stack, point.transport)
    r = recipe(point.transport, point.rw, point.bs, _protocol(prof, stack, point))
    wire = wire_cost(r, point.fabric, mtu)
    stations, busy = _stations(point, prof, nic, stack, cost, wire, r, mtu)
    return Network(
        point=point,
        stations=tuple(s for s in stations if s.demand_us > 0),
        wire=wire,
        bound_iops=wire_bound_iops(wire, data_rate_gbps(point.fabric, point.link_gbps)),
        target_stack=stack,
        mtu=mtu,
        recipe=r,
        initiator_cores=prof.initiator.cores * point.initiators,  # CPU % is the average initiator's
        target_cores=prof.target.cores,
        busy_cores=busy,
        fitted_busy_cores={side: prof.contention.start(side) for side in busy},
    )


def _protocol(prof: Profile, stack: str, point: Point) -> ProtocolParams:
    """The transport's negotiated parameters: the stack's defaults, the profile's, the point's digests."""
    return (
        stack_params(stack, ProtocolParams())
        .with_(**prof.protocol)
        .with_(header_digest=point.header_digest, data_digest=point.data_digest, tls=point.tls)
    )


def _cpu_parts(
    point: Point, prof: Profile, stack: str, cost: StackCost, pdus: int
) -> tuple[tuple[tuple[str, float], ...], tuple[tuple[str, float], ...]]:
    """The CPU one I/O costs each side on its job's (queue's) core, as named parts in microseconds.

    Initiator: the application's submission and completion through the
    syscall and the block layer, the transport's initiator, digests.
    Target: its stack, the backend's copy, digests.  Cycles are the stacks'
    (Skylake-equivalent), run at the host's ``stack_ghz``; CRC32C at its
    plain clock, at the rate of the code that runs it (Linux's initiators
    are kernel code; a target stack may call a library, ``Digests``).
    The TCP stack's and the interrupts' shares join these in ``_host_desks``.
    """
    init, tgt = prof.initiator, prof.target
    backend = prof.backends[point.backend or prof.default_backend]
    digested = digested_bytes(point, pdus)
    to_initiator, to_target = received_bytes(point)
    init_parts = (
        ("syscall-block", init.app_kcycles_per_io / init.stack_ghz),
        (
            "initiator-stack",
            (cost.initiator_kcycles_per_io + to_initiator * cost.initiator_cycles_per_byte / 1000)
            / init.stack_ghz,
        ),
        ("initiator-digests", digested * prof.digests.kernel_cycles_per_byte / 1000 / init.ghz),
        ("initiator-tls", encrypted_bytes(point, pdus) * prof.tls.cycles_per_byte / 1000 / init.ghz),
    )
    tgt_parts = (
        (
            "target-stack",
            (cost.target_kcycles_per_io + to_target * cost.target_cycles_per_byte / 1000) / tgt.stack_ghz,
        ),
        ("backend-copy", point.bs * backend.target_cycles_per_byte / 1000 / tgt.stack_ghz),
        ("target-digests", digested * prof.digests.cycles_per_byte(stack, tgt) / 1000 / tgt.ghz),
        ("target-tls", encrypted_bytes(point, pdus) * prof.tls.cycles_per_byte / 1000 / tgt.ghz),
    )
    return init_parts, tgt_parts


def received_bytes(point: Point) -> tuple[int, int]:
    """Data bytes of one I/O that the initiator and the target each receive.

    A stack's per-byte cost is a receive cost: Linux's TCP senders hand
    the data pages to the socket without copying them (open-iscsi and the
    nvme-tcp host through sendpage, LIO's iscsit_fe_sendpage_sg, nvmet-tcp's
    kernel_sendpage), while every receiver copies each byte out of the
    socket buffers into the I/O's pages (skb_copy_datagram_iter,
    skb_copy_bits).  So a read costs the initiator per byte and a write the
    target, which is why reads and writes differ where the stacks do.
    """
    return (point.bs, 0) if "read" in point.rw else (0, point.bs)


# Bytes a header digest covers per PDU: iSCSI's basic header segment; NVMe/TCP's
# headers are 8 to 72 bytes.  Either way small beside a data digest.
DIGESTED_HEADER = 48


def encrypted_bytes(point: Point, pdus: int) -> int:
    """Bytes of one I/O each side runs through TLS's AEAD: all it sends or receives, its
    data and its PDUs' headers (a sender encrypts, a receiver decrypts)."""
    return point.bs + pdus * DIGESTED_HEADER if point.tls else 0


def digested_bytes(point: Point, pdus: int) -> int:
    """Bytes of one I/O each side runs through CRC32C: its data (data digest) and PDU headers."""
    data = point.bs if point.data_digest else 0
    return data + (pdus * DIGESTED_HEADER if point.header_digest else 0)


# Signal speed in a copper or fibre cable, about two thirds of light's:
# 5 ns a metre (fibre's refractive index is about 1.47).
NS_PER_METRE = 5.0


def _fixed(point: Point, prof: Profile, nic: Nic, stack: str, round_trips: float, fill_us: float) -> Station:
    """What every I/O waits however idle the machines are, as one delay made of named hops.

    Once each way per round trip: the NICs' pipelines and the PCIe doorbell
    and DMA at the two ends (together ``Nic.one_way_us``, as perftest
    measures back to back), the cable's propagation and the profile's switch
    (several initiators always meet in one).  Once per I/O: the data path's pipeline fill
    (``_pipeline_fill``), each side's interrupt waking the waiting thread, unless that side
    polls, and the backend's access time.
    One delay desk (one simulator event); ``parts`` keeps the hops apart.
    """
    ways = round_trips * 2
    doorbell = min(nic.pcie_us, nic.one_way_us)
    switch = prof.switch or (Switch() if point.initiators > 1 else None)
    parts = (
        ("nic-pipeline", ways * (nic.one_way_us - doorbell)),
        ("pcie-doorbell", ways * doorbell),
        ("pipeline-fill", fill_us),
        ("propagation", ways * prof.cable_m * NS_PER_METRE / 1000),
        ("switch", ways * switch.latency_us if switch else 0.0),
        ("initiator-interrupt", 0.0 if point.poll else prof.initiator.wakeup_us + nic.irq_coalesce_us),
        (
            "target-interrupt",
            0.0 if stack in prof.target_polled else prof.target.wakeup_us + nic.irq_coalesce_us,
        ),
        ("device-latency", _device_demand(point, prof)[1]),
    )
    return desk("fixed", 1, parts, kind="delay", cv=0.1)


def _stations(
    point: Point,
    prof: Profile,
    nic: Nic,
    stack: str,
    cost: StackCost,
    wire: WireCost,
    r: Recipe,
    mtu: int,
) -> tuple[list[Station], dict[str, float]]:
    """The desks one I/O visits, in order, with their clerks and demands, and the cores each
    host's I/O work keeps busy (``hostcpu.host_desks``)."""
    n = point.initiators
    rate_bits_per_us = data_rate_gbps(point.fabric, point.link_gbps) * 1000
    backend = prof.backends[point.backend or prof.default_backend]
    out = _ports("out", n, wire.wire_out * 8 / rate_bits_per_us)
    back = _ports("in", n, wire.wire_in * 8 / rate_bits_per_us)
    dma = point.bs * 8 / (nic.pcie_gbps * 1000)
    packets = host_packets(point, nic, wire)
    count = messages_per_io(len(r.messages), packets, FABRICS[point.fabric].rdma)
    msgs = message_us(count, nic.msg_ns, nic.pcie_gbps)
    if "read" in point.rw:
        back = _streamed(back, dma, msgs)
    else:
        out = _streamed(out, dma, msgs)
    fill = _pipeline_fill(point, nic, mtu, rate_bits_per_us)
    others = [
        *out,
        Station("device", backend.parallel, _device_demand(point, prof)[0]),
        *back,
        _fixed(point, prof, nic, stack, r.round_trips, fill),
    ]
    parts = _cpu_parts(point, prof, stack, cost, len(r.messages))
    mine, theirs, busy = host_desks(point, prof, nic, stack, packets, parts, others)
    at = len(out)
    return [*mine, *others[:at], *theirs, *others[at:]], busy


def host_packets(point: Point, nic: Nic, wire: WireCost) -> int:
    """Packets each host's TCP stack handles per I/O: none without software TCP (RDMA, a TOE),
    one per super-packet with segmentation and receive offload, else one per wire frame."""
    if FABRICS[point.fabric].rdma or nic.toe:
        return 0
    return wire.super_packets if nic.gso_gro else wire.frames


def _streamed(ports: list[Station], dma_us: float, msg_us: float = 0.0) -> list[Station]:
    """The data's way: the target NIC's DMA across its slot streams alongside its port's
    serialisation, packet by packet, so the two overlap.

    One desk does both: busy for the longer of the two (the slower stage
    sets the rate), named after it, its parts the wire's time and the DMA
    the wire does not cover.  The pipeline's fill, the one packet that the
    faster stage handles before or after the slower, is a fixed delay
    (``_pipeline_fill``): it costs latency, not capacity.
    """
    at = next(i for i, st in enumerate(ports) if st.name.startswith(("link-", "target-port-")))
    wire = ports[at]
    nic = dma_us + msg_us
    name = wire.name if wire.demand_us >= nic else "pcie" if dma_us > wire.demand_us else "nic-messages"
    parts = (
        (wire.name, wire.demand_us),
        ("pcie", max(0.0, dma_us - wire.demand_us)),
        ("nic-messages", max(0.0, nic - max(wire.demand_us, dma_us))),
    )
    return [*ports[:at], desk(name, 1, parts, cv=0.0), *ports[at + 1 :]]


def _pipeline_fill(point: Point, nic: Nic, mtu: int, wire_bits_per_us: float) -> float:
    """One packet through the faster of the DMA and the wire: what a two-stage pipeline adds to
    its slower stage.  A block that fits one packet is not pipelined at all."""
    packet_bits = min(point.bs, packet_payload(point.fabric, mtu)) * 8
    return packet_bits / max(nic.pcie_gbps * 1000, wire_bits_per_us)


def _ports(direction: str, initiators: int, serial_us: float) -> list[Station]:
    """The wire one way: a cable (``link-out`` / ``link-in``), or, with several initiators
    behind a switch, each initiator's own port and the target's one shared port.

    ``out`` carries commands and write data towards the target, ``in`` read
    data and responses back.  The initiators' ports are pooled into one
    station of ``initiators`` servers: the initiators are alike and the
    switch spreads their traffic, so the target's port is where they meet.
    """
    if initiators == 1:
        return [Station(f"link-{direction}", 1, serial_us, cv=0.0)]
    towards_target = direction == "out"
    mine = Station(f"initiator-ports-{'tx' if towards_target else 'rx'}", initiators, serial_us, cv=0.0)
    shared = Station(f"target-port-{'rx' if towards_target else 'tx'}", 1, serial_us, cv=0.0)
    return [mine, shared] if towards_target else [shared, mine]


def _device_demand(point: Point, prof: Profile) -> tuple[float, float]:
    """(serial service, fixed latency) of the backend for one I/O of ``point``."""
    backend = prof.backends[point.backend or prof.default_backend]
    reading = "read" in point.rw
    gbs = backend.read_gbytes_per_s if reading else backend.write_gbytes_per_s
    per_io = backend.read_us_per_io if reading else backend.write_us_per_io
    latency = backend.read_latency_us if reading else backend.write_latency_us
    return per_io + point.bs / (gbs * 1000), latency


def _local(point: Point, prof: Profile, stack: str, cost: StackCost) -> Network:
    """No network at all: fio on the target's own device (the device's limit)."""
    init = prof.initiator
    service, latency = _device_demand(point, prof)
    cpu = (
        ("syscall-block", init.app_kcycles_per_io / init.stack_ghz),
        ("initiator-stack", cost.initiator_kcycles_per_io / init.stack_ghz),
    )
    fixed = (
        ("initiator-interrupt", 0.0 if point.poll else init.wakeup_us),
        ("device-latency", latency),
    )
    stations = (
        desk("initiator-cpu", min(point.numjobs, init.cores), cpu, side="initiator"),
        Station("device", prof.backends[point.backend or prof.default_backend].parallel, service),
        desk("fixed", 1, fixed, kind="delay", cv=0.1),
    )
    empty = WireCost(0, 0, 0, 0, 0, 0)
    kept = tuple(s for s in stations if s.demand_us > 0)
    return Network(point, kept, empty, float("inf"), stack, 0, init.cores, init.cores)
