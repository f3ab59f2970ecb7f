"""The desks of the queueing network and the point that decides them: the vocabulary that
``network`` builds with, ``hostcpu`` lays a host's cores out in, and the solvers run.

Kept apart from ``network`` so that the modules that lay out one part of an I/O's path
(a host's cores, ``hostcpu``) share the desks without importing the whole builder.
"""

from __future__ import annotations

from dataclasses import dataclass

from sanlab.models.core import closed
from sanlab.models.core.profile import Profile
from sanlab.scenarios.registry import MODEL_TRANSPORTS
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


def desk(
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


def network_rate(stations: list[Station], customers: int) -> float:
    """I/Os per microsecond the closed network of ``stations`` clears with ``customers`` in it, by
    mean value analysis (``closed``: Seidmann's clerks, the delays summed).  The one place the
    network's rate is worked out: ``mva.solve`` reports it, and ``hostcpu`` chooses layouts and
    settles contention on it, so a fixed point found there is exactly what the solver reports."""
    delay = sum(s.demand_us for s in stations if s.kind == "delay")
    extra, clerks = closed.seidmann((s.demand_us, s.servers) for s in stations if s.kind != "delay")
    return closed.throughput(delay + extra, clerks, customers)
