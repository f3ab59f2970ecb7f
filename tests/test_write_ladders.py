"""A write's projection follows its own message ladder, not a fitted factor (#30).

The ladders themselves are checked against real packets: tests/test_golden.py
holds that the model's wire bytes and round trips per I/O are the analyser's
reading of the golden captures, for reads and writes on every transport.  Here
the projection is tied to the ladder: each round trip is a pass each way through
both NICs' pipelines, their doorbells and the cable in the QD 1 budget, so a
write that waits for an R2T or an RDMA READ costs exactly that many more passes
than its read, and is slower by at least them; where the write's data rides in
its command (in-capsule, ImmediateData, SRP and iSER immediate data) it waits
for no more trips than the read (and the two may still differ: the data
crosses the other way, costing the other side's CPU and packets).
"""

from __future__ import annotations

import pytest

from sanlab.models.core.budget import qd1_budget
from sanlab.models.core.network import Point, build
from sanlab.scenarios.registry import TRANSPORTS

FIXED = ("nic-pipeline", "pcie-doorbell", "propagation")  # each way, per round trip
# What the golden captures show at 4 KiB and (RDMA: past the 8 KiB immediate or inline
# limit; NVMe/TCP: past the 16 KiB in-capsule size) at 64 KiB on the default stacks.
WRITE_TRIPS = {
    ("iscsi", 4096): 1, ("iscsi", 65536): 1,  # LIO: ImmediateData, FirstBurstLength 64 KiB
    ("iser", 4096): 1, ("iser", 65536): 2,
    ("srp", 4096): 1, ("srp", 65536): 2,
    ("nvme-tcp", 4096): 1, ("nvme-tcp", 65536): 2,  # R2T, then H2CData
    ("nvme-rdma", 4096): 1, ("nvme-rdma", 65536): 2,
}  # fmt: skip


def _point(transport: str, rw: str, bs: int) -> Point:
    fabric = TRANSPORTS[transport].fabrics[0]
    return Point(transport, fabric, 100, rw, bs, 1, 1, backend="null")


def _budget(point: Point) -> tuple[float, float]:
    """The QD 1 latency and the part of it paid per round trip."""
    hops = qd1_budget(point)
    return sum(h.us for h in hops), sum(h.us for h in hops if h.name in FIXED)


@pytest.mark.parametrize(("transport", "bs"), sorted(WRITE_TRIPS))
def test_a_writes_round_trips_are_its_ladders_and_cost_what_a_trip_costs(transport, bs):
    read, write = _point(transport, "randread", bs), _point(transport, "randwrite", bs)
    trips = {rw: build(p).recipe.round_trips for rw, p in (("read", read), ("write", write))}
    assert trips == {"read": 1, "write": WRITE_TRIPS[(transport, bs)]}
    (read_us, read_fixed), (write_us, write_fixed) = _budget(read), _budget(write)
    assert write_fixed == pytest.approx(read_fixed * trips["write"] / trips["read"], rel=1e-9)
    extra = trips["write"] - trips["read"]
    if extra:  # equal trips need not mean equal time: data crosses the other way
        assert write_us - read_us >= extra * read_fixed, (write_us, read_us)
