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
from dataclasses import dataclass, replace

from sanlab.models.profile import Nic, Profile, StackCost, Switch, load_profile, stack_cost
from sanlab.models.transports import (
    ProtocolParams,
    Recipe,
    WireCost,
    recipe,
    stack_params,
    wire_bound_iops,
    wire_cost,
)
from sanlab.models.wire import data_rate_gbps, packet_payload
from sanlab.scenarios.registry import FABRICS, MODEL_TRANSPORTS, TRANSPORTS
from sanlab.scenarios.schema import DEFAULT_PROFILE


@dataclass(frozen=True)
class Point:
    """One projected workload point: a transport set-up and a fio job shape."""

    transport: str
    fabric: str
    link_gbps: float
    rw: str
    bs: int
    iodepth: int
    numjobs: int
    profile: str = DEFAULT_PROFILE
    mtu: int | None = None
    target_stack: str | None = None
    backend: str | None = None
    header_digest: bool = False
    data_digest: bool = False
    tls: bool = False  # NVMe/TCP inside TLS 1.3 (every byte encrypted and decrypted)
    sessions: int | None = None
    cores: int | None = None  # per host, in place of the profile's (a what-if: more or fewer cores)
    core: str | None = None  # core design per host (models/cores.yaml), in place of the profile's
    # Initiators, each its own machine like the profile's, sharing the target's
    # one port through a switch (incast).  1: a point-to-point cable.
    initiators: int = 1
    # The initiator polls for completions (fio --hipri on NVMe poll queues)
    # instead of sleeping until an interrupt: no wake-up, a spinning core per job.
    poll: bool = False
    # NVMe I/O queues per controller (nvme connect --nr-io-queues); unset, one per CPU.
    queues: int | None = None

    @property
    def networked(self) -> bool:
        """A transport carries it (the registry's LOCAL rows measured the drive on its own)."""
        return MODEL_TRANSPORTS[self.transport].networked

    @property
    def outstanding(self) -> int:
        return self.iodepth * self.numjobs * self.initiators


@dataclass(frozen=True)
class Station:
    """A service desk: ``servers`` clerks, ``demand_us`` of work per I/O.

    ``kind`` is 'queue' (I/Os wait for a free clerk) or 'delay' (every I/O
    is served at once: propagation and fixed latencies).  ``side`` says whose
    CPU the work burns ('initiator', 'target' or '' for hardware).  ``cv`` is
    the spread of service times: software and devices vary, serialisation of
    bits onto a wire or a bus does not.
    """

    name: str
    servers: int
    demand_us: float
    kind: str = "queue"
    side: str = ""
    cv: float = 0.3
    # What the demand is made of, hop by hop, for a latency budget: the
    # simulator runs the desk whole (one event), the budget reads its parts.
    parts: tuple[tuple[str, float], ...] = ()


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
        for station, busy in busy_cores:
            if station.side:
                cores = self.initiator_cores if station.side == "initiator" else self.target_cores
                cpu[station.side] += 100 * busy / cores
        cpu["initiator"] = max(cpu["initiator"], self.spinning_pct)
        return cpu


def default_stack(profile: Profile, transport: str) -> str:
    if transport in profile.target_stacks:
        return profile.target_stacks[transport]
    return TRANSPORTS[transport].default_stack


def connections(point: Point, profile: Profile) -> int:
    """Connections (iSCSI sessions, SRP channels, NVMe queues) that carry the I/O.

    Linux's NVMe and SRP hosts open one queue per CPU and fio jobs spread
    over CPUs; iSCSI and iSER use the sessions the user logged in.  An NVMe
    host connected with fewer I/O queues than CPUs (``queues``) maps
    several CPUs, and so several jobs, onto one queue and its target thread.
    """
    if point.sessions:
        return point.sessions
    if MODEL_TRANSPORTS[point.transport].sessions:
        return profile.sessions.get(point.transport, 1)
    per_cpu = max(1, min(point.numjobs, profile.initiator.cores))
    return min(per_cpu, point.queues) if point.queues else per_cpu


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
    stations = _stations(point, prof, nic, stack, cost, wire, r, mtu)
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
    )


def _protocol(prof: Profile, stack: str, point: Point) -> ProtocolParams:
    """The transport's negotiated parameters: the stack's defaults, the profile's, the point's digests."""
    return (
        stack_params(stack, ProtocolParams())
        .with_(**prof.protocol)
        .with_(header_digest=point.header_digest, data_digest=point.data_digest, tls=point.tls)
    )


def _cpu_desks(
    point: Point, prof: Profile, stack: str, cost: StackCost, pdus: int
) -> tuple[Station, Station]:
    """The CPU one I/O costs each side, as its serving desks with their named parts.

    Initiator: the application's submission and completion through the
    syscall and the block layer, the transport's initiator, digests.
    Target: its stack, the backend's copy, digests.  Cycles are the stacks'
    (Skylake-equivalent), run at the host's ``stack_ghz``; CRC32C at its
    plain clock, at the rate of the code that runs it (Linux's initiators
    are kernel code; a target stack may call a library, ``Digests``).
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
    n, conns = point.initiators, connections(point, prof)
    return (
        _desk("initiator-cpu", min(point.numjobs, init.cores) * n, init_parts, side="initiator"),
        _desk("target-cpu", min(tgt.cores, conns * n), tgt_parts, side="target"),
    )


def _desk(
    name: str,
    servers: int,
    parts: tuple[tuple[str, float], ...],
    kind: str = "queue",
    side: str = "",
    cv: float = 0.3,
) -> Station:
    """A desk whose demand is the sum of its named parts (those that cost anything)."""
    kept = tuple((hop, us) for hop, us in parts if us > 0)
    return Station(name, servers, sum(us for _, us in kept), kind=kind, side=side, cv=cv, parts=kept)


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
    return _desk("fixed", 1, parts, kind="delay", cv=0.1)


def _stations(
    point: Point,
    prof: Profile,
    nic: Nic,
    stack: str,
    cost: StackCost,
    wire: WireCost,
    r: Recipe,
    mtu: int,
) -> list[Station]:
    """The desks one I/O visits, in order, with their clerks and demands."""
    n = point.initiators
    init_cpu, tgt_cpu = _cpu_desks(point, prof, stack, cost, len(r.messages))
    rate_bits_per_us = data_rate_gbps(point.fabric, point.link_gbps) * 1000
    backend = prof.backends[point.backend or prof.default_backend]
    out = _ports("out", n, wire.wire_out * 8 / rate_bits_per_us)
    back = _ports("in", n, wire.wire_in * 8 / rate_bits_per_us)
    dma = point.bs * 8 / (nic.pcie_gbps * 1000)
    if "read" in point.rw:
        back = _streamed(back, dma)
    else:
        out = _streamed(out, dma)
    fill = _pipeline_fill(point, nic, mtu, rate_bits_per_us)
    stations = [
        init_cpu,
        *out,
        tgt_cpu,
        Station("device", backend.parallel, _device_demand(point, prof)[0]),
        *back,
        _fixed(point, prof, nic, stack, r.round_trips, fill),
    ]
    packets = host_packets(point, nic, wire)
    if packets:
        mine, theirs = _net_desks(point, prof, nic, packets, stations)
        stations[1:1] = mine
        after_target = next(i for i, st in enumerate(stations) if st.name == "target-cpu") + 1
        stations[after_target:after_target] = theirs
    return stations


# Rounds of the fixed point between a connection's I/O rate and its packet batching.
BATCH_ROUNDS = 3


def _net_desks(
    point: Point, prof: Profile, nic: Nic, packets: int, others: list[Station]
) -> tuple[list[Station], list[Station]]:
    """Each host's TCP stack, once per packet it handles, shared by the I/Os batched into it.

    Alone in flight, an I/O's packets each take a pass through the stack.
    Under load they do not: a NIC moderates its interrupts, so one poll
    takes every packet that arrived in the window, GRO merges a flow's
    back-to-back segments, and a transport's send work pushes what is
    queued in one call (nvme-tcp's io_work, with MSG_MORE).  The batch grows
    with the connection's I/O rate, which falls as the batch shrinks, so the
    two are solved together: a few rounds, the rate taken from the
    network's throughput bound (``throughput_bound``).

    Batching shares the work, not the wait: the thread that takes an I/O's
    data runs when the pass that brought it ends, so each I/O still waits
    out the whole pass (``_batch_wait``).  Were the shared cost also the
    wait, a connection carrying two jobs would answer each faster than two
    connections carrying one each, and more sessions would cost IOPS.
    """
    n = point.initiators
    per_initiator = connections(point, prof)
    conns = per_initiator * n
    kcycles = packets * nic.host_kcycles_per_packet

    def desks(batch: float) -> tuple[Station, Station]:
        return (
            Station(
                "initiator-net",
                min(per_initiator, prof.initiator.cores) * n,
                kcycles / batch / prof.initiator.stack_ghz,
                side="initiator",
            ),
            Station(
                "target-net",
                min(conns, prof.target.cores),
                kcycles / batch / prof.target.stack_ghz,
                side="target",
            ),
        )

    batch = 1.0
    for _ in range(BATCH_ROUNDS):
        rate = throughput_bound([*others, *desks(batch)], point.outstanding) / conns
        batch = packet_batch(point.outstanding / conns, rate, nic.batch_window_us)
    mine, theirs = desks(batch)
    return [mine, *_batch_wait(mine, batch)], [theirs, *_batch_wait(theirs, batch)]


def _batch_wait(desk: Station, batch: float) -> list[Station]:
    """The rest of the pass an I/O's packets were batched into: waited through, burning none of
    its CPU (the others' share is theirs); nothing when the I/O had the pass to itself."""
    if batch <= 1.0:
        return []
    return [Station(f"{desk.name}-batch", 1, desk.demand_us * (batch - 1), kind="delay", cv=desk.cv)]


def packet_batch(outstanding_per_conn: float, ios_per_us_per_conn: float, window_us: float) -> float:
    """I/Os whose packets one connection's TCP stack handles in one go: one, plus those arriving
    within the batching window, never more than the connection has in flight."""
    return max(1.0, min(outstanding_per_conn, 1.0 + ios_per_us_per_conn * window_us))


def throughput_bound(stations: list[Station], customers: int) -> float:
    """I/Os per microsecond: the lesser of the population's bound (no queueing) and the busiest desk's."""
    total = sum(s.demand_us for s in stations)
    capacity = min(
        (s.servers / s.demand_us for s in stations if s.kind == "queue" and s.demand_us > 0),
        default=float("inf"),
    )
    return min(customers / total, capacity) if total > 0 else 0.0


def host_packets(point: Point, nic: Nic, wire: WireCost) -> int:
    """Packets each host's TCP stack handles per I/O: none without software TCP (RDMA, a TOE),
    one per super-packet with segmentation and receive offload, else one per wire frame."""
    if FABRICS[point.fabric].rdma or nic.toe:
        return 0
    return wire.super_packets if nic.gso_gro else wire.frames


def _streamed(ports: list[Station], dma_us: float) -> list[Station]:
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
    name = "pcie" if dma_us > wire.demand_us else wire.name
    parts = ((wire.name, wire.demand_us), ("pcie", max(0.0, dma_us - wire.demand_us)))
    return [*ports[:at], _desk(name, 1, parts, cv=0.0), *ports[at + 1 :]]


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
        _desk("initiator-cpu", min(point.numjobs, init.cores), cpu, side="initiator"),
        Station("device", prof.backends[point.backend or prof.default_backend].parallel, service),
        _desk("fixed", 1, fixed, kind="delay", cv=0.1),
    )
    empty = WireCost(0, 0, 0, 0, 0, 0)
    kept = tuple(s for s in stations if s.demand_us > 0)
    return Network(point, kept, empty, float("inf"), stack, 0, init.cores, init.cores)
