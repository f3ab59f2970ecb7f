"""Each host's cores: one pool for all of its work, laid out where the kernel runs it.

A host's cores run the application, the block layer, the transport, the
TCP/IP stack, interrupts and softirq alike; no desk may hand out a core
another desk already holds, so a host is never more than 100 % busy.  Where
each piece runs is the kernel's choice, per transport:

- **The job's (queue's) core.**  fio's syscalls, the block layer and the
  transport's submission run on the job's core.  Linux's NVMe hosts open
  one queue per CPU and blk-mq maps each CPU to its own queue, so the
  queue's work is the job's core's too: nvme-tcp's ``io_work`` runs on
  ``queue->io_cpu`` (drivers/nvme/host/tcp.c, ``nvme_tcp_set_queue_io_cpu``,
  ``queue_work_on(queue->io_cpu, ...)`` from ``nvme_tcp_queue_request`` and
  ``nvme_tcp_data_ready``), and there it sends PDUs (TCP's transmit path)
  and copies received data out of the socket.  The completion's interrupt
  and the wake-up of the job's sleeping thread land there too (an NVMe
  queue's interrupt vector is affined to the CPUs mapped to it; an RDMA
  queue's completion vector likewise, ``ib_alloc_cq`` with the queue's
  ``comp_vector``).
- **The receive softirq.**  The NIC's receive interrupt for a flow's RX
  queue (RSS) runs the driver, GRO, IP and TCP's input path on the core the
  queue's IRQ is affined to, which is in general not the job's.  With spare
  cores it runs beside the jobs; with every core running a job it runs on
  theirs, taking their time.  Either way it shares the pool.
- **Kernel targets that follow the softirq.**  nvmet-tcp queues its
  ``io_work`` on ``sk->sk_incoming_cpu`` (drivers/nvme/target/tcp.c,
  ``queue_cpu``): the core that ran the socket's receive softirq, so the
  target's receive path and its I/O work share one core per queue.

``softirq_cores`` decides, for one host, whether the receive work gets cores
of its own (only out of those no job holds) or runs on the jobs' cores, and
takes whichever the pool serves faster: the kernel's scheduler and RSS put
the softirq wherever its IRQ is affined, and a model that chose the slower
layout would lose IOPS when a core is added.
"""

from __future__ import annotations

from dataclasses import dataclass

from sanlab.models.core import closed, contention
from sanlab.models.core.profile import Nic, Profile
from sanlab.models.core.stations import (
    Point,
    Station,
    connections,
    desk,
    network_rate,
    packet_batch,
    throughput_bound,
)

# Of a host's per-packet TCP/IP work, the share its receive softirq runs (the rest is the
# transmit path, run by the thread that sends: the job's or queue's core).  Each side of an
# NVMe/TCP or iSCSI I/O sends about as many packets as it receives (a read: one command out,
# one data-and-response back; a write with in-capsule data the same), so half.
RECEIVE_SHARE = 0.5


def softirq_cores(
    job_us: float,
    softirq_us: float,
    job_cores: int,
    cores: int,
    flows: int,
    customers: int,
    think_us: float = 0.0,
) -> int:
    """Cores one host's receive softirq runs on apart from its jobs' cores; 0: on theirs.

    ``job_us`` and ``softirq_us`` are one I/O's work on the job's core and in
    the receive softirq; ``job_cores`` the cores the jobs (or target queues)
    hold, out of ``cores``; ``flows`` the connections, each one RX queue's
    interrupt at most; ``customers`` the I/Os in flight on the host.  Apart,
    the two run in parallel, the softirq on at most the spare cores;
    together, each I/O takes both from the jobs' cores.  The faster of the
    two layouts is the one taken.

    Saturated, the faster is the one whose busiest desk allows more.  With
    fewer spare cores than jobs' cores the softirq's own desk is the slower
    per I/O, so at a light load (few I/Os in flight for the cores) apart can
    lose to together although its bound is higher: there the two are solved
    at the host's population (``closed``, as ``mva`` solves the network).  Taking the bound alone, a
    host with 11 jobs at QD 1 lost 0.03 % of its IOPS going from 10 cores to
    20 (iSCSI, 2026-11-27).  The I/Os spend ``think_us`` of each round trip
    elsewhere (the wire, the drive, the other host), so fewer of them are at
    this host at once: solved without it, 7 iSCSI jobs at QD 1 took the
    softirq apart on 14 cores and lost 0.06 % against 7 (2026-11-27).
    """
    spare = min(flows, cores - job_cores)
    if softirq_us <= 0 or spare < 1:
        return 0
    together = job_cores / (job_us + softirq_us)
    apart = min(job_cores / job_us if job_us > 0 else float("inf"), spare / softirq_us)
    if apart < together:
        return 0
    if spare >= job_cores:
        return spare
    delay, clerks = closed.seidmann([(job_us + softirq_us, job_cores)])
    alone = closed.throughput(delay + think_us, clerks, customers)
    delay, clerks = closed.seidmann([(job_us, job_cores), (softirq_us, spare)])
    beside = closed.throughput(delay + think_us, clerks, customers)
    return spare if beside >= alone else 0


def interrupts_per_io(polled: bool, batch: float) -> float:
    """Completion interrupts (each with the wake-up of the thread that sleeps on it) per I/O.

    One per completion alone in flight; under load the NIC's moderation and
    the softirq's budget take every completion that arrived in the window in
    one go (``batch``), and a side that polls takes none.
    """
    return 0.0 if polled else 1.0 / max(batch, 1.0)


# Rounds of the fixed point between a connection's I/O rate and its batching.
BATCH_ROUNDS = 3
# Kernel targets whose I/O work runs on the core that ran the socket's receive softirq:
# nvmet-tcp queues its io_work on sk->sk_incoming_cpu (drivers/nvme/target/tcp.c, queue_cpu).
FOLLOW_SOFTIRQ = {("nvmet", "nvme-tcp")}


def host_desks(
    point: Point,
    prof: Profile,
    nic: Nic,
    stack: str,
    packets: int,
    parts: tuple[tuple[tuple[str, float], ...], tuple[tuple[str, float], ...]],
    others: list[Station],
) -> tuple[list[Station], list[Station], dict[str, float]]:
    """Each host's cores, one pool for all its work, shared by the I/Os batched together.

    Alone in flight, an I/O's packets each take a pass through the TCP stack
    and its completion an interrupt.  Under load they do not: a NIC
    moderates its interrupts, so one poll takes every packet and completion
    that arrived in the window, GRO merges a flow's back-to-back segments,
    and a transport's send work pushes what is queued in one call
    (nvme-tcp's io_work, with MSG_MORE).  The batch grows with the
    connection's I/O rate, which falls as the batch shrinks, so the two are
    solved together: a few rounds, the rate taken from the network's
    throughput bound (``throughput_bound``).

    Where the work runs is the kernel's choice (``hostcpu``): the job's or
    queue's core takes its own work, the transmit path and the interrupt;
    the receive softirq takes cores of its own only out of those no job
    holds.  So no host is ever busier than its cores.

    Batching shares the work, not the wait: the thread that takes an I/O's
    data runs when the pass that brought it ends, so each I/O still waits
    out the whole pass (``_batch_wait``).
    """
    work = _PassWork.of(point, prof, nic, stack, packets)

    elsewhere = sum(s.demand_us for s in others)

    def desks(flow: float, job: float) -> tuple[list[Station], list[Station]]:
        (mine, _), (theirs, _) = _both_sides(point, prof, stack, parts, work, (flow, job, elsewhere))
        return mine, theirs

    # Batches: a flow's receive softirq (GRO, NAPI) takes what one connection brought in the
    # window; a job's sends and its interrupt's wake-up what that job has in flight, whatever
    # connections carry it; a target queue's thread what its connection has.
    flow = job = 1.0
    for _ in range(BATCH_ROUNDS):
        rate = throughput_bound([*others, *sum(desks(flow, job), [])], point.outstanding)
        flow = packet_batch(point.outstanding / work.conns, rate / work.conns, nic.batch_window_us)
        job = packet_batch(point.iodepth, rate / (point.numjobs * point.initiators), nic.batch_window_us)
    mine, theirs = _fastest(
        others, _both_sides(point, prof, stack, parts, work, (flow, job, elsewhere)), point
    )
    # the rest of each pass an I/O waits out (its share of the pass is CPU, the rest is not)
    init_wait = (work.tx + work.irq * (not point.poll)) * (1 - 1 / job) + work.rx * (1 - 1 / flow)
    tgt_wait = (work.kcycles + work.irq * (not work.tgt_polled)) * (1 - 1 / flow)
    mine = mine + _batch_wait("initiator", init_wait / prof.initiator.stack_ghz)
    theirs = theirs + _batch_wait("target", tgt_wait / prof.target.stack_ghz)
    return _contended(point, prof, others, mine, theirs)


# One host's desks in the layout its softirq was given, and the other layout where there is one.
Layouts = tuple[list[Station], list[Station] | None]


def _fastest(
    others: list[Station], sides: tuple[Layouts, Layouts], point: Point
) -> tuple[list[Station], list[Station]]:
    """The two hosts' layouts the whole network clears fastest (``softirq_cores`` chose each on
    its own host, with the rest of the round trip as a delay; near a limit elsewhere that can
    miss by a few parts in a million, and a host given more cores must never lose IOPS)."""
    (mine, mine_alt), (theirs, theirs_alt) = sides
    best, fastest = (mine, theirs), network_rate([*others, *mine, *theirs], point.outstanding)
    # Only a layout clearly faster replaces the guess: where the two tie (a point the wire
    # bounds), a 5 % step of a parameter must not flip it, or a desk's capacity would jump and
    # the range read that jump as the parameter's spread (Zeta's iSCSI 64 KiB read at 10 GbE:
    # 3k-19k against 16k-19k).  Half the property test's tolerance for the solver's settling.
    margin = 1 + closed.SETTLED * point.outstanding
    for pair in ((mine_alt, theirs), (mine, theirs_alt), (mine_alt, theirs_alt)):
        if pair[0] is None or pair[1] is None:
            continue
        rate = network_rate([*others, *pair[0], *pair[1]], point.outstanding)
        if rate > fastest * margin:
            best, fastest = (pair[0], pair[1]), rate
    return best


def _contended(
    point: Point, prof: Profile, others: list[Station], mine: list[Station], theirs: list[Station]
) -> tuple[list[Station], list[Station], dict[str, float]]:
    """Each host's desks with what its busy cores' contention adds to an I/O (``contention``),
    and the busy cores: the I/O path's own work at the rate the network then clears.  That rate
    and the contention decide each other, so the two are solved together (``settled``)."""
    demand = contention.side_demands([*mine, *theirs])
    hosts = {"initiator": point.initiators, "target": 1}
    cores = {"initiator": prof.initiator.cores, "target": prof.target.cores}

    def loaded(rate: float) -> tuple[list[Station], list[Station], dict[str, float]]:
        busy = contention.busy_at(rate, demand, hosts, cores)
        init_us = contention.extra_kcycles(prof.contention, "initiator", busy["initiator"])
        tgt_us = contention.extra_kcycles(prof.contention, "target", busy["target"])
        return (
            contention.contended(mine, "initiator", init_us / prof.initiator.stack_ghz),
            contention.contended(theirs, "target", tgt_us / prof.target.stack_ghz),
            busy,
        )

    def rate_under(rate: float) -> float:
        ours, peer, _ = loaded(rate)
        return network_rate([*others, *ours, *peer], point.outstanding)

    free = network_rate([*others, *mine, *theirs], point.outstanding)
    busy = contention.busy_at(free, demand, hosts, cores)
    if not contention.busier(busy, {side: prof.contention.start(side) for side in busy}):
        return mine, theirs, busy  # within the fitted rows' busiest hosts: nothing to pay
    return loaded(contention.settled(rate_under, free))


@dataclass(frozen=True)
class _PassWork:
    """One I/O's pass through the hosts' network stacks, before batching shares it: kcycles in
    all, sent and received, an interrupt's, and the connections that carry it."""

    per_initiator: int
    conns: int
    kcycles: float
    tx: float
    rx: float
    irq: float
    tgt_polled: bool

    @classmethod
    def of(cls, point: Point, prof: Profile, nic: Nic, stack: str, packets: int) -> _PassWork:
        per_initiator = connections(point, prof)
        kcycles = packets * nic.host_kcycles_per_packet
        return cls(
            per_initiator,
            per_initiator * point.initiators,
            kcycles,
            kcycles * (1 - RECEIVE_SHARE),
            kcycles * RECEIVE_SHARE,
            prof.interrupts.kcycles,
            stack in prof.target_polled,
        )


def _both_sides(
    point: Point,
    prof: Profile,
    stack: str,
    parts: tuple[tuple[tuple[str, float], ...], tuple[tuple[str, float], ...]],
    work: _PassWork,
    sharing: tuple[float, float, float],
) -> tuple[Layouts, Layouts]:
    """The initiator's and the target's desks with a pass shared by ``flow`` packets a
    connection and ``job`` I/Os a job (``sharing``: those two, and the microseconds of an I/O
    spent at no host's CPU, which each side's layout is solved with)."""
    flow, job, elsewhere = sharing
    init, tgt, n = prof.initiator, prof.target, point.initiators
    init_us = sum(us for _, us in parts[0]) + (work.kcycles + work.irq) / init.stack_ghz
    tgt_us = sum(us for _, us in parts[1]) + (work.kcycles + work.irq) / tgt.stack_ghz
    mine = _side_desks(
        "initiator",
        (*parts[0], ("tcp-tx", work.tx / job), ("irq", work.irq * interrupts_per_io(point.poll, job))),
        work.rx / flow,
        init.stack_ghz,
        (min(point.numjobs, init.cores), init.cores, work.per_initiator, n, point.outstanding // n),
        elsewhere + tgt_us,
    )
    softirq_conns = 0 if (stack, point.transport) in FOLLOW_SOFTIRQ else work.conns
    theirs = _side_desks(
        "target",
        (*parts[1], ("tcp-tx", work.tx / flow), ("irq", work.irq * interrupts_per_io(work.tgt_polled, flow))),
        work.rx / flow,
        tgt.stack_ghz,
        (min(tgt.cores, work.conns), tgt.cores, softirq_conns, 1, point.outstanding),
        elsewhere + init_us,
    )
    return mine, theirs


def _side_desks(
    side: str,
    kcycles: tuple[tuple[str, float], ...],
    rx_kcycles: float,
    ghz: float,
    shape: tuple[int, int, int, int, int],
    think_us: float = 0.0,
) -> tuple[list[Station], list[Station] | None]:
    """One host's CPU desks: its jobs' (queues') cores and, where cores are spare, its softirq's;
    and the other layout where there is a choice (``host_desks`` settles it on the network).

    ``kcycles`` are the parts in microseconds (the stack's, already timed) and the transmit
    path's and interrupt's kcycles (named ``tcp-tx`` and ``irq``); ``shape`` is (cores the
    jobs or queues hold, cores, flows whose softirq may run apart (0: never), hosts alike,
    I/Os in flight on one host); ``think_us`` is what an I/O spends away from this host.
    """
    held, cores, flows, hosts, customers = shape
    job = tuple(
        (f"{side}-{hop}", value / ghz) if hop in ("tcp-tx", "irq") else (hop, value) for hop, value in kcycles
    )
    rx_us = rx_kcycles / ghz
    job_us = sum(us for _, us in job)
    apart = softirq_cores(job_us, rx_us, held, cores, flows, customers, think_us) if flows else 0
    together = [desk(f"{side}-cpu", held * hosts, (*job, (f"{side}-softirq", rx_us)), side=side)]
    spare = min(flows, cores - held)
    if rx_us <= 0 or spare < 1:
        return together, None
    beside = [
        desk(f"{side}-cpu", held * hosts, job, side=side),
        desk(f"{side}-net", spare * hosts, ((f"{side}-softirq", rx_us),), side=side),
    ]
    return (beside, together) if apart else (together, beside)


def _batch_wait(side: str, wait_us: float) -> list[Station]:
    """The rest of the pass an I/O's packets were batched into: waited through, burning none of
    its CPU (the others' share is theirs); nothing when the I/O had the pass to itself."""
    if wait_us <= 0:
        return []
    return [Station(f"{side}-net-batch", 1, wait_us, kind="delay")]
