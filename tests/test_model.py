"""The projection model: bounds, determinism, queueing sanity, profile hygiene."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from sanlab.models.core import mva
from sanlab.models.core.network import Point, build
from sanlab.models.core.profile import Profile
from sanlab.models.core.profile_files import STACKS_FILE, load_profile, parse_stacks, profile_path
from sanlab.models.core.project import project_point
from sanlab.models.core.simulate import Settings, simulate
from sanlab.scenarios.errors import ScenarioError

LINK_BOUND = Point("iser", "roce", 40, "randread", 65536, 32, 1, profile="zeta-2016")
CPU_BOUND = Point("nvme-tcp", "eth", 100, "randread", 4096, 16, 4)


def test_never_above_the_wire_bound_and_reaches_it_when_link_bound():
    record = project_point(LINK_BOUND)
    assert record.iops <= record.bound
    assert record.iops >= 0.97 * record.bound
    assert record.bottleneck == "link-in"


@pytest.mark.parametrize("transport,fabric", [("iscsi", "eth"), ("srp", "ib"), ("nvme-rdma", "iwarp")])
def test_bound_holds_for_large_sequential_io(transport, fabric):
    record = project_point(Point(transport, fabric, 10, "read", 1 << 20, 8, 2))
    assert 0 < record.iops <= record.bound


def test_deterministic_for_a_seed():
    a = project_point(CPU_BOUND, Settings(seed=7))
    b = project_point(CPU_BOUND, Settings(seed=7))
    c = project_point(CPU_BOUND, Settings(seed=8))
    assert a == b
    assert a.iops != c.iops


def test_confidence_interval_contains_estimate_and_is_tight():
    record = project_point(CPU_BOUND)
    low, high = record.iops_ci95
    assert low <= record.iops <= high
    assert (high - low) / record.iops < 0.05


def test_littles_law():
    sim = simulate(build(CPU_BOUND))
    assert sim.lat_mean_us == pytest.approx(CPU_BOUND.outstanding / sim.iops * 1e6, rel=0.03)


def test_simulation_agrees_with_mva_at_depth():
    net = build(CPU_BOUND)
    assert simulate(net).iops == pytest.approx(mva.solve(net).iops, rel=0.05)


def test_qd1_latency_is_the_sum_of_the_path():
    net = build(Point("nvme-rdma", "roce", 100, "randread", 4096, 1, 1))
    total = sum(s.demand_us for s in net.stations)
    assert simulate(net, Settings(cv_scale=0)).lat_mean_us == pytest.approx(total, rel=1e-6)


def test_more_link_means_no_less_throughput():
    slow = project_point(Point("iser", "roce", 10, "randread", 65536, 32, 4))
    fast = project_point(Point("iser", "roce", 100, "randread", 65536, 32, 4))
    assert fast.iops > slow.iops


def test_large_io_is_split_like_the_block_layer():
    net = build(Point("nvme-rdma", "roce", 100, "read", 1 << 20, 2, 1, profile="starwind-2024"))
    assert net.split == 8


def test_cpu_is_reported_per_side():
    record = project_point(CPU_BOUND)
    assert 0 < record.cpu_initiator_pct <= 100 and 0 < record.cpu_target_pct <= 100


def test_profile_refuses_typos(tmp_path):
    data = yaml.safe_load(profile_path("zeta-2016").read_text())
    data["target"]["coers"] = 8
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ScenarioError, match=r"typo.yaml: target.coers: unknown field \(allowed: cpu, cores"):
        load_profile(str(path))


def test_every_profile_loads_and_has_a_nic_for_its_fabrics():
    from sanlab.models.core.profile_files import profile_names

    for name in profile_names():
        profile = load_profile(name)
        assert isinstance(profile, Profile)
        for nic in profile.nics:
            for fabric in nic.fabrics:
                for gbps in nic.link_gbps:
                    chosen = profile.nic_for(fabric, gbps)
                    assert fabric in chosen.fabrics and max(chosen.link_gbps) >= gbps, (name, fabric, gbps)


def test_the_nic_comes_from_the_profile_not_from_the_link_speed():
    """25 GbE Ethernet on the default machine is its ConnectX-5, not the Chelsio TOE that
    lists 25 G: Linux's NVMe/TCP and open-iscsi do not use TCP offload."""
    profile = load_profile("modern-100g")
    assert profile.nic_for("eth", 25).name == "connectx-5"
    assert profile.nic_for("eth", 100).name == "connectx-5"
    assert profile.nic_for("iwarp", 25).name == "chelsio-t6"
    assert load_profile("zeta-2016").nic_for("eth", 10).name == "intel-x710"  # the exact speed wins
    assert load_profile("chelsio-t6-100g").nic_for("eth", 25).toe  # the profile's only Ethernet NIC


def test_a_link_faster_than_every_nic_is_an_error_naming_them():
    with pytest.raises(ScenarioError) as caught:
        build(Point("nvme-tcp", "eth", 200, "randread", 4096, 1, 1))
    message = str(caught.value)
    assert "no NIC of this profile carries eth at 200 Gb/s" in message
    assert "connectx-5 (up to 100 Gb/s)" in message and "chelsio-t6 (up to 100 Gb/s)" in message


def test_default_profile_projects_every_transport_and_fabric():
    for transport, fabric in [
        ("iscsi", "eth"),
        ("iser", "roce"),
        ("iser", "iwarp"),
        ("iser", "ib"),
        ("srp", "ib"),
        ("srp", "roce"),
        ("nvme-tcp", "eth"),
        ("nvme-rdma", "roce"),
        ("nvme-rdma", "iwarp"),
        ("nvme-rdma", "ib"),
    ]:
        record = project_point(Point(transport, fabric, 100, "randwrite", 16384, 8, 2))
        assert record.iops > 0 and record.lat_mean_us > 0, (transport, fabric)


def test_incast_meets_at_the_target_port_and_stays_under_its_wire_bound():
    """4 initiators into one 100 G target port: the port is the bottleneck, the sum fits its wire."""
    writes = Point("nvme-rdma", "roce", 100, "randwrite", 64 << 10, 16, 4, initiators=4)
    record = project_point(writes)
    assert record.bottleneck == "target-port-rx" and record.initiators == 4
    assert record.iops <= record.bound
    reads = project_point(replace(writes, transport="nvme-tcp", fabric="eth", rw="randread"))
    assert reads.bottleneck == "target-port-tx" and reads.iops <= reads.bound
    alone = project_point(replace(writes, initiators=1))
    assert alone.bottleneck == "link-out"
    assert record.lat_mean_us > 3 * alone.lat_mean_us  # four times the I/Os queue at the same port


def test_incast_of_small_blocks_is_not_held_by_one_initiator():
    """Where one initiator's CPU is the limit, four initiators together do more."""
    one = project_point(Point("nvme-tcp", "eth", 100, "randread", 4096, 32, 1, initiators=1))
    four = project_point(Point("nvme-tcp", "eth", 100, "randread", 4096, 32, 1, initiators=4))
    assert four.iops > 1.5 * one.iops


@pytest.mark.parametrize(
    ("stack", "library"), [("nvmet", False), ("spdk", True)], ids=["kernel-target", "library-target"]
)
def test_digests_cost_crc32c_cpu_per_byte_on_both_sides(stack, library):
    """A data digest runs every data byte through CRC32C on the sender and the receiver, at
    the rate of the code that runs it: Linux's kernel path, or a library's on whole buffers."""
    plain = Point("nvme-tcp", "eth", 100, "randread", 1 << 20, 4, 1, target_stack=stack)
    digested = replace(plain, header_digest=True, data_digest=True)
    profile = load_profile(plain.profile)
    kernel = profile.digests.kernel_cycles_per_byte
    # the digests' own hops (the desk's other parts move with the batching the slower rate brings)
    before = {hop: us for s in build(plain).stations for hop, us in s.parts}
    after = {hop: us for s in build(digested).stations for hop, us in s.parts}
    split = build(plain).split  # a 1 MiB read travels as 128 KiB requests
    per_request = (1 << 20) // split
    target_rate = profile.target.crc32c_cycles_per_byte if library else kernel
    for side, host, rate in (
        ("initiator-digests", profile.initiator, kernel),
        ("target-digests", profile.target, target_rate),
    ):
        added = after[side] - before.get(side, 0.0)
        data_only = per_request * rate / 1000 / host.ghz
        assert data_only < added < data_only * 1.01, side  # headers add a few bytes more
    assert profile.target.crc32c_cycles_per_byte < kernel  # the instruction alone is faster
    assert project_point(digested).iops < project_point(plain).iops  # one queue's thread does the CRC


def test_a_pcie_slot_gives_the_nic_its_dma_rate():
    from sanlab.models.core.pcie import pcie_gbps

    # The specification's accounting (models/core/pcie.py): Gen3 x16 at a 256-byte MPS is
    # 126.0 Gb/s coded, 113.7 left for TLPs after Ack/UpdateFC DLLPs every 168 bytes and
    # SKP sets, and 256 of every 280 bytes of a write are data.
    assert pcie_gbps(3, 16) == pytest.approx(104.0, abs=0.1)
    assert pcie_gbps(4, 16) == pytest.approx(2 * pcie_gbps(3, 16))
    assert pcie_gbps(3, 8, mps=128) < pcie_gbps(3, 8) < pcie_gbps(3, 8, mps=512)  # less header per byte
    nic = load_profile("modern-400g").nic_for("roce", 400)
    assert nic.name == "connectx-7" and nic.pcie_gbps == pytest.approx(415.8, abs=0.1)
    assert nic.one_way_us == load_profile("starwind-2024").nic_for("roce", 100).one_way_us  # borrowed


def test_the_gen3_x8_physics_brackets_the_rate_the_zeta_table_fits():
    """The ConnectX-3's slot rate is fitted to Zeta's 56 Gb/s cells (64 KiB iSER and SRP near
    48 Gb/s of data); the accounting for its Gen3 x8 slot at the two usual payload sizes
    brackets it, so the fit lands where the physics allows."""
    from sanlab.models.core.pcie import pcie_gbps

    fitted = load_profile("zeta-2016").nic_for("ib", 56).pcie_gbps
    assert pcie_gbps(3, 8, mps=128) < fitted < pcie_gbps(3, 8, mps=256)


def test_a_slot_the_accounting_does_not_know_is_refused_by_name():
    from sanlab.models.core.profile import Nic

    with pytest.raises(ValueError, match="mps"):
        Nic(name="x", fabrics=["eth"], link_gbps=[100], pcie={"gen": 3, "lanes": 8, "mps": 1024})


def test_line_rate_reads_scale_with_the_link_up_to_400g():
    from sanlab.models.core.profile_files import clear_cache

    clear_cache()
    bounds = [
        build(Point("nvme-rdma", "roce", gbps, "read", 131072, 32, 32, profile="modern-400g")).bound_iops
        for gbps in (100, 200, 400)
    ]
    assert bounds[1] == pytest.approx(2 * bounds[0], rel=0.01)
    assert bounds[2] == pytest.approx(4 * bounds[0], rel=0.01)


def test_the_refusal_names_a_shipped_profile_that_can_carry_the_link():
    with pytest.raises(ScenarioError) as caught:
        build(Point("nvme-rdma", "roce", 400, "read", 4096, 1, 1))
    assert "(shipped: modern-400g)" in str(caught.value)


def test_the_documented_machine_you_do_not_have_yet_loads_and_projects():
    """docs/examples/epyc-cx6dx.yaml, shown in models/README.md: its slot gives the NIC's rate,
    its core design scales the stacks, and a link faster than its NIC is refused by name."""
    from sanlab.models.core.pcie import pcie_gbps

    path = str(Path(__file__).resolve().parents[1] / "docs" / "examples" / "epyc-cx6dx.yaml")
    profile = load_profile(path)
    nic = profile.nic_for("roce", 100)
    assert nic.name == "connectx-6dx" and nic.pcie_gbps == pytest.approx(pcie_gbps(4, 16, mps=512), abs=0.1)
    assert profile.initiator.core == "zen3"
    point = Point("nvme-rdma", "roce", 100, "randread", 4096, 1, 1, profile=path, backend="null")
    assert project_point(point).iops > project_point(replace(point, transport="nvme-tcp", fabric="eth")).iops
    with pytest.raises(ScenarioError, match="modern-400g"):
        build(replace(point, link_gbps=200))


def test_a_digest_library_that_is_no_known_stack_is_refused_naming_the_known_ones():
    """stacks.yaml's digests.library names target stacks; a typo must not quietly send SPDK
    through the kernel's digest path."""
    data = yaml.safe_load(STACKS_FILE.read_text())
    assert parse_stacks(data, "stacks.yaml").digests.library == ["spdk"]
    data["digests"]["library"] = ["spdkk"]
    with pytest.raises(ScenarioError, match=r"stacks.yaml.*digests.library.*spdkk.*'spdk'"):
        parse_stacks(data, "stacks.yaml")


def test_the_printed_table_has_cpu_columns_a_legend_and_no_empty_columns():
    """CPU beside IOPS; an interval with two ends even where the wire bounds the point (the
    model's own error); no column without data (Zeta publishes no latency, so no 'lat err')."""
    from click.testing import CliRunner

    from sanlab.main import cli

    result = CliRunner().invoke(cli, ["model", "--wide"])
    assert result.exit_code == 0, result.output
    head = next(line for line in result.output.splitlines() if line.startswith("set-up"))
    assert "cpu ini" in head and "cpu tgt" in head and "lat err" not in head
    rows = [line for line in result.output.splitlines() if line.startswith("iSCSI 10GbE")]
    assert rows and all(line.count("%") >= 3 for line in rows)  # two CPU columns and err
    assert any(" 16k-19k " in line for line in rows)  # 64 KiB at 10 GbE: the link's 19k at the top
    legend = " ".join(line.strip() for line in result.output.splitlines())  # wrapped to 120 columns
    assert "err: (model - published) / published" in legend
