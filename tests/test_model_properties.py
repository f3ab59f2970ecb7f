"""Properties the projection keeps for every transport and fabric on the default profile.

Checked on the analytic solution (MVA) of the same network the simulator
runs, so that a property is about the model and not about sampling noise;
hypothesis picks the points.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sanlab.models.core import mva
from sanlab.models.core.budget import qd1_budget
from sanlab.models.core.network import Point, build, connections, packet_batch
from sanlab.models.core.profile import Switch
from sanlab.models.core.profile_files import load_profile
from sanlab.models.core.simulate import Settings, simulate
from sanlab.scenarios.registry import TRANSPORTS

PAIRS = [(t.name, f) for t in TRANSPORTS.values() for f in t.fabrics]
TCP_TRANSPORTS = [t.name for t in TRANSPORTS.values() if not t.rdma]
LINKS = [10, 25, 40, 100]
SIZES = [4096, 16384, 65536, 131072, 1 << 20]
RW = ["randread", "randwrite", "read", "write"]


@st.composite
def points(draw: st.DrawFn) -> Point:
    transport, fabric = draw(st.sampled_from(PAIRS))
    return Point(
        transport,
        fabric,
        draw(st.sampled_from(LINKS)),
        draw(st.sampled_from(RW)),
        draw(st.sampled_from(SIZES)),
        draw(st.integers(1, 64)),
        draw(st.integers(1, 16)),
        sessions=draw(st.none() | st.integers(1, 8)),
        queues=draw(st.none() | st.integers(1, 8)) if transport.startswith("nvme") else None,
    )


def iops(point: Point) -> float:
    net = build(point)
    return mva.solve(net).iops / net.split


def grown(point: Point, axis: str) -> Point:
    """The same point with more of ``axis``: the next link rate, twice the depth or jobs, or
    twice the connections it already has (NVMe and SRP open one per fio job by default)."""
    if axis == "link_gbps":
        return replace(point, link_gbps=LINKS[min(LINKS.index(int(point.link_gbps)) + 1, len(LINKS) - 1)])
    if axis == "sessions":
        return replace(point, sessions=2 * connections(point, load_profile(point.profile)))
    if axis == "queues":
        return replace(point, queues=2 * point.queues) if point.queues else point
    return replace(point, **{axis: 2 * getattr(point, axis)})


@settings(max_examples=300, deadline=None)
@given(points(), st.sampled_from(["link_gbps", "iodepth", "numjobs", "sessions", "queues"]))
def test_more_link_depth_jobs_sessions_or_queues_never_costs_more_than_2_percent(point, axis):
    assert iops(grown(point, axis)) >= 0.98 * iops(point)


@settings(max_examples=300, deadline=None)
@given(points())
def test_never_above_the_wire_bound(point):
    net = build(point)
    assert mva.solve(net).iops <= net.bound_iops * (1 + 1e-9)  # whole requests, as the bound


@pytest.mark.parametrize("transport", TCP_TRANSPORTS)
@pytest.mark.parametrize("bs", [4096, 1 << 20])
def test_digests_raise_cpu_per_byte_on_both_sides(transport, bs):
    plain = Point(transport, "eth", 100, "randread", bs, 8, 2)
    digested = replace(plain, header_digest=True, data_digest=True)

    def cpu(point: Point, side: str) -> float:
        return sum(s.demand_us for s in build(point).stations if s.side == side)

    for side in ("initiator", "target"):
        assert cpu(digested, side) > cpu(plain, side), side


@pytest.mark.parametrize("transport,fabric", PAIRS)
def test_qd1_latency_is_the_sum_of_its_named_hops(transport, fabric):
    """One I/O alone in the system waits nowhere: its latency is every hop's demand, added up,
    and every hop says what it stands for (sanlab model --budget)."""
    point = Point(transport, fabric, 100, "randread", 4096, 1, 1)
    hops = qd1_budget(point)
    assert all(hop.meaning for hop in hops), [hop.name for hop in hops if not hop.meaning]
    named = {
        "syscall-block",
        "initiator-stack",
        "target-stack",
        "nic-pipeline",
        "pcie-doorbell",
        "propagation",
    }
    assert named | {"initiator-interrupt"} <= {hop.name for hop in hops}
    simulated = simulate(build(point), Settings(cv_scale=0)).lat_mean_us
    assert simulated == pytest.approx(sum(hop.us for hop in hops), rel=1e-6)


@pytest.mark.parametrize("rw", ["randread", "randwrite"])
@pytest.mark.parametrize("transport,fabric", PAIRS)
def test_the_nic_streams_its_dma_alongside_the_wire(transport, fabric, rw):
    """A block of many packets at QD 1: the target NIC's DMA overlaps the wire, so the two cost
    the slower of them plus one packet's fill, not their sum; and the desk that carries both
    is busy for the slower, so the rate at depth is still the slower's."""
    point = Point(transport, fabric, 100, rw, 131072, 1, 1)
    net = build(point)
    bs = point.bs // net.split
    nic = load_profile(point.profile).nic_for(fabric, 100)
    dma = bs * 8 / (nic.pcie_gbps * 1000)
    way = "link-in" if rw == "randread" else "link-out"
    hops = {hop.name: hop.us for hop in qd1_budget(point)}
    assert hops[way] + hops.get("pcie", 0.0) == pytest.approx(max(hops[way], dma))
    assert 0 < hops["pipeline-fill"] < 0.25 * max(hops[way], dma)
    desk = next(s for s in net.stations if s.name in (way, "pcie"))
    assert desk.demand_us == pytest.approx(max(hops[way], dma))


@pytest.mark.parametrize("transport,fabric", PAIRS)
def test_the_side_that_receives_the_data_pays_per_byte(transport, fabric):
    """TCP receivers copy and senders do not: a read costs the initiator per byte, a write the
    target; RDMA places the data by DMA, so reads and writes cost the CPUs alike."""
    read = Point(transport, fabric, 100, "randread", 65536, 8, 2)
    write = replace(read, rw="randwrite")

    def cpu(point: Point, side: str) -> float:
        return sum(s.demand_us for s in build(point).stations if s.side == side and s.name.endswith("cpu"))

    if transport in TCP_TRANSPORTS:
        assert cpu(read, "initiator") > cpu(write, "initiator")
        assert cpu(write, "target") > cpu(read, "target")
    else:  # alike to 0.1 %: what interrupt moderation batches follows each way's wire time, and a
        # read's and a write's frames differ by a few header bytes (0.06 % of the 64 KiB transfer)
        assert cpu(read, "initiator") == pytest.approx(cpu(write, "initiator"), rel=1e-3)
        assert cpu(read, "target") == pytest.approx(cpu(write, "target"), rel=1e-3)


@pytest.mark.parametrize("transport", TCP_TRANSPORTS)
def test_with_segmentation_offload_the_host_pays_per_super_packet_not_per_frame(transport):
    """TSO and GRO: a 1 MiB read costs the hosts the same packets at MTU 1500 as at 9000;
    without them, every wire frame costs a trip through the stack."""
    big = Point(transport, "eth", 100, "read", 1 << 20, 32, 1, mtu=1500)
    jumbo = replace(big, mtu=9000)
    assert iops(big) == pytest.approx(iops(jumbo), rel=0.02)
    net = build(big)
    assert 0 < net.wire.super_packets < net.wire.frames / 4
    profile = load_profile(big.profile)
    nic = profile.nic_for("eth", 100)
    plain = profile.model_copy(update={"nics": [nic.model_copy(update={"gso_gro": False})]})
    per_frame = build(big, plain)
    assert mva.solve(per_frame).iops < 0.9 * mva.solve(build(big, profile)).iops


@pytest.mark.parametrize("transport", TCP_TRANSPORTS)
def test_jobs_sharing_a_connection_are_answered_no_faster_than_jobs_on_their_own(transport):
    """Batching shares a pass's work, not its wait: an I/O batched with another job's still
    waits out the whole pass, so giving each job its own connection never costs IOPS (the
    grid where sharing used to win by up to 20 %: few I/Os in flight on several jobs)."""
    for jobs in (2, 4, 16):
        for depth in (1, 2):
            shared = Point(transport, "eth", 100, "randread", 4096, depth, jobs, sessions=1)
            own = replace(shared, sessions=jobs)
            assert iops(own) >= 0.98 * iops(shared), (jobs, depth)
            wait = [s for s in build(shared).stations if s.name.endswith("-batch")]
            assert wait and all(s.kind == "delay" and not s.side for s in wait)


def net_us_per_io(point: Point, profile=None) -> float:
    """The initiator's TCP stack's microseconds per I/O (its packets, shared or not)."""
    return next(s.demand_us for s in build(point, profile).stations if s.name == "initiator-net")


@pytest.mark.parametrize("transport", TCP_TRANSPORTS)
def test_under_load_a_connections_packets_are_batched_never_at_qd1(transport):
    """Interrupt moderation, GRO and batched sends share a packet's cost among the I/Os of a
    connection that arrive within the NIC's window: never fewer the deeper the queue, none
    alone in flight, and none at all with no window."""
    alone = Point(transport, "eth", 100, "randread", 4096, 1, 1)
    profile = load_profile(alone.profile)
    nic = profile.nic_for("eth", 100)
    unbatched = profile.model_copy(update={"nics": [nic.model_copy(update={"batch_window_us": 0.0})]})
    per_io = [net_us_per_io(replace(alone, iodepth=d)) for d in (1, 4, 32)]
    assert per_io[0] == pytest.approx(net_us_per_io(alone, unbatched))
    assert per_io[0] > per_io[1] >= per_io[2]  # the batch follows the rate, which a bound may cap
    deep = replace(alone, iodepth=32)
    assert net_us_per_io(deep, unbatched) == pytest.approx(per_io[0])
    assert mva.solve(build(deep)).iops > mva.solve(build(deep, unbatched)).iops


def test_a_batch_is_one_alone_grows_with_the_rate_and_never_exceeds_what_is_in_flight():
    assert packet_batch(1, 10.0, 12.0) == 1.0
    assert packet_batch(32, 0.0, 12.0) == 1.0
    assert packet_batch(32, 0.1, 10.0) == pytest.approx(2.0)
    assert packet_batch(32, 0.2, 10.0) == pytest.approx(3.0)
    assert packet_batch(2, 10.0, 12.0) == 2.0


@pytest.mark.parametrize("transport,fabric", [("nvme-tcp", "eth"), ("nvme-rdma", "roce")])
def test_a_polling_initiator_saves_its_wake_up_and_spins_a_core_per_job(transport, fabric):
    """fio --hipri on poll queues: no interrupt hop at QD 1, and each job's core busy all the time."""
    sleeping = Point(transport, fabric, 100, "randread", 4096, 1, 4)
    polling = replace(sleeping, poll=True)
    hops = {hop.name: hop.us for hop in qd1_budget(sleeping)}
    assert hops["initiator-interrupt"] > 0
    assert "initiator-interrupt" not in {hop.name for hop in qd1_budget(polling)}
    assert mva.solve(build(polling)).latency_us < mva.solve(build(sleeping)).latency_us
    cores = load_profile(sleeping.profile).initiator.cores
    spun = simulate(build(polling)).cpu_pct["initiator"]
    assert spun >= 100 * 4 / cores > simulate(build(sleeping)).cpu_pct["initiator"]


def test_fewer_nvme_queues_than_jobs_share_the_target_threads():
    """nvme connect --nr-io-queues 2: eight jobs' I/O meets on two queues and two target threads."""
    per_cpu = Point("nvme-tcp", "eth", 100, "randread", 4096, 32, 8)
    two = replace(per_cpu, queues=2)
    profile = load_profile(per_cpu.profile)
    assert connections(per_cpu, profile) == 8 and connections(two, profile) == 2
    assert iops(two) < 0.6 * iops(per_cpu)


def test_a_named_switch_is_a_hop_of_its_own_each_way():
    point = Point("nvme-rdma", "roce", 100, "randread", 4096, 1, 1)
    profile = load_profile(point.profile)
    assert "switch" not in {hop.name for hop in qd1_budget(point, profile)}
    switched = profile.model_copy(update={"switch": Switch(name="leaf", latency_us=0.5)})
    hops = {hop.name: hop.us for hop in qd1_budget(point, switched)}
    assert hops["switch"] == pytest.approx(2 * 0.5)


def test_a_newer_core_runs_the_same_stack_cycles_faster_by_its_factor():
    """Costs are Skylake-equivalent cycles: a Sapphire Rapids core at the same clock does more per cycle."""
    from sanlab.models.core.cores import core_factor

    point = Point("iscsi", "eth", 100, "randread", 4096, 1, 1)
    profile = load_profile(point.profile)
    assert profile.initiator.core == "skylake"
    newer = profile.model_copy(
        update={"initiator": profile.initiator.model_copy(update={"core": "golden-cove"})}
    )

    def stack_us(p) -> float:
        return dict(next(s for s in build(point, p).stations if s.name == "initiator-cpu").parts)[
            "initiator-stack"
        ]

    assert stack_us(profile) / stack_us(newer) == pytest.approx(core_factor("golden-cove"))
