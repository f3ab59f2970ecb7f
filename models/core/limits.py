"""What each kind of limit allows a point: the wire, the slot, the NIC's messages, the cores, the drive.

A closed network's throughput can never pass what its busiest desk of each
kind clears: a desk of ``servers`` clerks and ``demand_us`` of work per I/O
clears ``servers / demand_us`` I/Os a microsecond.  Grouping the desks by
the kind of limit they are (``regimes.kind_of``, the one home of that
mapping) gives each kind's cap in IOPS, analytically: what the property
test holds every projection under, and what a range may not be clipped by
while another kind could bind inside it (issue #46).
"""

from __future__ import annotations

from sanlab.models.core.network import Network
from sanlab.models.core.regimes import CPU, DEVICE, LINK, NIC, PCIE, kind_of

CAPPED = (LINK, PCIE, NIC, CPU, DEVICE)


def caps(net: Network) -> dict[str, float]:
    """IOPS each kind of limit allows ``net`` (``inf`` where no desk of that kind is in it)."""
    out = dict.fromkeys(CAPPED, float("inf"))
    for station in net.stations:
        if station.kind != "queue" or station.demand_us <= 0:
            continue
        kind = kind_of(station.name)
        if kind in out:
            out[kind] = min(out[kind], station.servers / station.demand_us * 1e6 / net.split)
    out[LINK] = min(out[LINK], net.bound_iops)
    return out


def binding(net: Network) -> str:
    """The kind of limit with the lowest cap: what binds ``net`` once enough I/Os are in flight."""
    allowed = caps(net)
    return min(allowed, key=lambda kind: allowed[kind])
