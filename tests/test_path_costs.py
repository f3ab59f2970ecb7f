"""The model's per-I/O and per-packet costs are the path table's instructions × a CPI per family
(issue #46): its ratios between transports follow the table within the fitted CPIs' spread.

The table's figures are summed here from models/data/paths/path-lengths.csv directly, not
through the model's own reading of it, so a model that read the wrong groups, cells or sides
would fail these tests.
"""

from __future__ import annotations

import copy
import itertools
import math

import pytest
import yaml

from sanlab.models.core.costs import APP_GROUPS, STACK_GROUPS, family, stack_cost
from sanlab.models.core.network import Point, build, default_stack
from sanlab.models.core.params import get_param, set_param
from sanlab.models.core.paths import SIDES, load_paths, nic_groups
from sanlab.models.core.profile_files import STACKS_FILE, load_profile, load_stacks, parse_stacks
from sanlab.models.core.uncertainty import load_posterior, touch
from sanlab.scenarios.errors import SanlabError, ScenarioError
from sanlab.scenarios.registry import TRANSPORTS

PROFILE = "modern-100g"
TABLE = load_paths()
# The transports the committed fit reads from the table (stacks.yaml paths.transports).
MEASURED = sorted(load_stacks().paths.transports)  # type: ignore[union-attr]
FABRIC = {t: ("roce" if TRANSPORTS[t].rdma else "eth") for t in TRANSPORTS}


def table_kinstr(transport: str, rw: str, side: str, groups: tuple[str, ...]) -> float:
    """Thousands of instructions per I/O the table gives, its cells of that shape averaged
    (nvme-rdma and iser ran over rxe and siw)."""
    cells = [c for c in TABLE.cells() if (c.transport, c.rw, c.bs, c.iodepth) == (transport, rw, 4096, 1)]
    assert cells, f"no 4 KiB QD 1 {rw} cell for {transport}"
    return (
        sum(sum(TABLE.group(c, side, g).instructions_per_io for g in groups) for c in cells)
        / len(cells)
        / 1e3
    )


def model_initiator_kcycles(transport: str, rw: str) -> float:
    """The initiator's per-I/O cost as the model charges it: fio and the block layer, and the transport."""
    prof = load_profile(PROFILE)
    cost = stack_cost(prof, default_stack(prof, transport), transport)
    return cost.app_kcycles(rw, prof.initiator.app_kcycles_per_io) + cost.initiator_kcycles(rw)


def spread(*transports: str) -> float:
    """The fitted CPIs' spread over the families of ``transports``: max / min."""
    cpi = load_stacks().paths.cpi  # type: ignore[union-attr]
    values = [cpi[family(t)] for t in transports]
    return max(values) / min(values)


def test_the_table_measures_every_transport_the_model_reads_it_for() -> None:
    in_table = {c.transport for c in TABLE.cells() if (c.bs, c.iodepth) == (4096, 1)}
    assert {"nvme-tcp", "iscsi", "nvme-rdma", "srp"} <= set(MEASURED) <= in_table


def test_a_listed_transport_the_table_lacks_is_one_line_naming_it() -> None:
    in_table = {c.transport for c in TABLE.cells() if (c.bs, c.iodepth) == (4096, 1)}
    lacking = [t for t in TRANSPORTS if t not in in_table]
    if not lacking:
        pytest.skip("the table measures every transport")
    raw = yaml.safe_load(STACKS_FILE.read_text())
    raw["paths"]["transports"].append(lacking[0])
    stacks = parse_stacks(raw, "stacks.yaml")
    with pytest.raises(
        SanlabError, match=rf"^stacks.yaml: paths.transports lists '{lacking[0]}', but .* no 4 KiB"
    ):
        stacks.side_path(lacking[0], None)
    raw["paths"]["transports"] = ["nvme-tcpp"]
    with pytest.raises(ScenarioError, match="nvme-tcpp"):
        parse_stacks(raw, "stacks.yaml")


@pytest.mark.parametrize("rw", ["randread", "randwrite"])
def test_initiator_cost_ratios_between_transports_follow_the_table_within_the_cpi_spread(rw: str) -> None:
    groups = APP_GROUPS + STACK_GROUPS
    for a, b in itertools.combinations(MEASURED, 2):
        table = table_kinstr(a, rw, "initiator", groups) / table_kinstr(b, rw, "initiator", groups)
        model = model_initiator_kcycles(a, rw) / model_initiator_kcycles(b, rw)
        bound = spread(a, b)
        assert 1 / bound - 0.01 <= model / table <= bound + 0.01, (a, b, rw, model, table, bound)
        if family(a) == family(b):  # one CPI: the table's ratio exactly
            assert model == pytest.approx(table, rel=0.01), (a, b, rw)


def test_target_cost_ratios_between_kernel_targets_follow_the_table_within_the_cpi_spread() -> None:
    prof = load_profile(PROFILE)
    stacks = {(c.transport, c.stack) for c in TABLE.cells() if (c.bs, c.iodepth) == (4096, 1)}
    model = {k: stack_cost(prof, k[1], k[0]).target_kcycles("randread") for k in stacks}
    table = {k: table_kinstr(k[0], "randread", "target", APP_GROUPS + STACK_GROUPS) for k in stacks}
    for a, b in itertools.combinations(sorted(stacks), 2):
        if min(table[a], table[b]) > 0:
            bound = spread(a[0], b[0])
            ratio = (model[a] / model[b]) / (table[a] / table[b])
            assert 1 / bound - 0.01 <= ratio <= bound + 0.01, (a, b)


def test_the_model_charges_those_costs_on_the_initiators_cpu() -> None:
    """A 4 KiB write (the initiator receives no data, so no per-byte term): the desk's parts
    are the path costs at the host's clock."""
    prof = load_profile(PROFILE)
    for transport in MEASURED:
        point = Point(transport, FABRIC[transport], 100, "randwrite", 4096, 1, 1, PROFILE)
        parts = dict(p for s in build(point, prof).stations for p in s.parts)
        charged = (
            parts.get("syscall-block", 0.0) + parts.get("initiator-stack", 0.0)
        ) * prof.initiator.stack_ghz
        assert charged == pytest.approx(model_initiator_kcycles(transport, "randwrite"), rel=1e-6), transport


def test_the_kernels_tcpip_per_packet_is_its_path_times_its_cpi_beside_the_nics_driver() -> None:
    cells = [c for c in TABLE.cells() if not TRANSPORTS[c.transport].rdma and (c.bs, c.iodepth) == (4096, 1)]
    per_frame = [
        TABLE.group(c, side, "tcpip").instructions_per_io / TABLE.frames_per_io(c) / 1e3
        for c in cells
        for side in SIDES
    ]
    cpi = load_stacks().paths.cpi["tcpip"]  # type: ignore[union-attr]
    prof = load_profile("starwind-2024")
    assert prof.tcpip_kcycles_per_packet == pytest.approx(cpi * sum(per_frame) / len(per_frame), rel=1e-3)
    # The host's work per packet is the kernel's and the NIC driver's: what the host desks charge.
    point = Point("nvme-tcp", "eth", 100, "randread", 4096, 1, 1, "starwind-2024")
    net = build(point, prof)
    nic = prof.nic_for("eth", 100)
    per_packet = (prof.tcpip_kcycles_per_packet + nic.host_kcycles_per_packet) / prof.initiator.stack_ghz
    parts = dict(p for s in net.stations if s.side == "initiator" for p in s.parts)
    tcp = parts["initiator-tcp-tx"] + parts["initiator-softirq"]
    assert tcp / per_packet == pytest.approx(round(tcp / per_packet), abs=1e-6)  # whole packets
    assert round(tcp / per_packet) >= 1


def test_unmeasured_stacks_keep_their_fitted_costs() -> None:
    prof = load_profile(PROFILE)
    stacks = load_stacks()
    for key in ("scst/iser", "spdk/nvme-tcp", "spdk/nvme-rdma"):
        stack, transport = key.split("/")
        cost = stack_cost(prof, stack, transport)
        assert cost.target_path is None
        assert cost.target_kcycles("randread") == stacks.targets[key].kcycles_per_io


def test_no_nic_stand_in_is_a_host_cost() -> None:
    for transport in TRANSPORTS:
        if transport in MEASURED:
            assert not set(APP_GROUPS + STACK_GROUPS) & set(nic_groups(transport)), transport


def test_a_cpi_moves_every_path_of_its_family_and_no_other_in_a_projections_range() -> None:
    """The range's sensitivities (models/core/uncertainty.py) reach the path costs through their CPI."""
    posterior = load_posterior()
    assert posterior is not None
    data = load_profile(PROFILE).model_dump(mode="json")
    name = "stacks.paths.cpi.kernel-rdma"
    moved = copy.deepcopy(data)
    assert touch(moved, name, posterior.values[name], 2.0)
    for key, cost in moved["costs"].items():
        for side in ("initiator_path", "target_path"):
            if cost[side]:
                factor = 2.0 if cost[side]["family"] == "kernel-rdma" else 1.0
                assert cost[side]["cpi"] == pytest.approx(data["costs"][key][side]["cpi"] * factor), key
    name = "stacks.paths.cpi.tcpip"
    moved = copy.deepcopy(data)
    assert touch(moved, name, posterior.values[name], 2.0)
    assert moved["tcpip_kcycles_per_packet"] == pytest.approx(2 * data["tcpip_kcycles_per_packet"])


def test_a_fits_step_of_a_parameter_valued_one_reaches_the_model() -> None:
    """A fit steps log values by a share of themselves, so a CPI of 1.0 (log 0) is stepped by
    about 1.5e-8; rounded to four decimals, the step vanished and the fit could not move it."""
    data = {"paths": {"cpi": {"kernel-tcp": 1.0}}}
    set_param(data, "paths.cpi.kernel-tcp", math.exp(1.5e-8))
    assert get_param(data, "paths.cpi.kernel-tcp") > 1.0
