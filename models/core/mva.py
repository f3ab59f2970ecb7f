"""Mean value analysis: the closed network solved without simulation.

MVA is the accountant's view of the same desks the simulator runs: with N
customers, each desk's residence time is its demand times one plus the
queue an arriving customer finds, which is the queue with N-1 customers.
Multi-server desks use Seidmann's approximation (a faster single clerk plus
a fixed delay).  It is exact for exponential service and close otherwise,
and fast enough to sit inside a least-squares fit.
"""

from __future__ import annotations

from dataclasses import dataclass

from sanlab.models.core.closed import SETTLED
from sanlab.models.core.network import Network
from sanlab.models.core.stations import network_rate

__all__ = ["SETTLED", "Solution", "bottleneck_of", "solve"]


@dataclass(frozen=True)
class Solution:
    iops: float
    latency_us: float
    utilisation: dict[str, float]
    bottleneck: str


def solve(net: Network) -> Solution:
    n_customers = net.point.outstanding * net.split
    rate = network_rate(list(net.stations), n_customers)  # latency by Little: N / X
    utilisation = {s.name: rate * s.demand_us / s.servers for s in net.stations if s.kind == "queue"}
    return Solution(rate * 1e6 / net.split, n_customers / rate, utilisation, bottleneck_of(utilisation))


BUSY_ENOUGH = 0.5  # a resource busier than this is what the load waits on


def bottleneck_of(utilisation: dict[str, float]) -> str:
    """The busiest resource, named only when it is more than half busy; else "latency".

    At low queue depth nothing fills: the I/O waits on the round trip, and the
    busiest of idle resources (a CPU 0.7 % busy at QD 1) is no bottleneck.
    Both solvers name it here, so the table, ``--json`` and lab 6's key agree.
    """
    if not utilisation:
        return "latency"
    busiest = max(utilisation, key=lambda k: utilisation[k])
    return busiest if utilisation[busiest] > BUSY_ENOUGH else "latency"
