"""The model's per-I/O costs of the code sanlab runs are the path table's instructions × a CPI
per family (issue #46): its cost ratios between transports follow the table within the spread
of the fitted CPIs, and a side the table lacks keeps its fitted cost and says so.

The table's figures are summed here from models/data/paths/path-lengths.csv with the csv module,
not through the model's reading of it, so a model that read the wrong groups, cells or sides
would fail.  Another helper may add cells to the table: every figure here follows what it holds.
"""

from __future__ import annotations

import copy
import csv
import itertools
from collections import defaultdict

import pytest

from sanlab.models.core import costs
from sanlab.models.core.costs import family, stack_cost
from sanlab.models.core.network import Point, build, default_stack
from sanlab.models.core.paths import PATHS_CSV, STACK_GROUPS, load_paths, nic_groups, stack_path
from sanlab.models.core.profile_files import load_profile, load_stacks
from sanlab.models.core.uncertainty import touch
from sanlab.scenarios.registry import TRANSPORTS

PROFILE = "modern-100g"
FABRIC = {t: ("roce" if TRANSPORTS[t].rdma else "eth") for t in TRANSPORTS}


def _table() -> dict[tuple[str, str, str], list[float]]:
    """(transport, stack, side) -> per 4 KiB cell, thousands of instructions of the side's
    transport code (and RDMA core, and a target's block layer): the rows summed by hand."""
    sums: dict[tuple[str, ...], float] = defaultdict(float)
    for row in csv.DictReader(PATHS_CSV.open()):
        if int(row["bs"]) == 4096 and row["group"] in STACK_GROUPS[row["side"]]:
            cell = tuple(row[c] for c in ("transport", "stack", "provider", "rw", "iodepth", "side"))
            sums[cell] += float(row["instructions_per_io"]) / 1e3
    out: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for (transport, stack, *_, side), kinstr in sums.items():
        out[(transport, stack, side)].append(kinstr)
    return out


TABLE = _table()


def table_kinstr(transport: str, side: str, stack: str | None = None) -> float:
    """A side's mean over its 4 KiB cells (an initiator's over every target stack's cells)."""
    found = [
        v
        for (t, s, sd), vs in TABLE.items()
        if (t, sd) == (transport, side) and stack in (None, s)
        for v in vs
    ]
    assert found, (transport, side, stack)
    return sum(found) / len(found)


def cpi(transport: str) -> float:
    return load_stacks().paths.cpi[family(transport)]  # type: ignore[union-attr]


def spread() -> float:
    """The fitted CPIs' spread: the largest over the smallest."""
    values = load_stacks().paths.cpi.values()  # type: ignore[union-attr]
    return max(values) / min(values)


def initiator_kcycles(transport: str) -> float:
    prof = load_profile(PROFILE)
    return stack_cost(prof, default_stack(prof, transport), transport).initiator_kcycles_per_io


def test_the_table_measures_every_transport_and_the_model_reads_it() -> None:
    prof = load_profile(PROFILE)
    for transport in TRANSPORTS:
        assert (transport, "initiator") in {(t, sd) for t, _, sd in TABLE}, transport
        cost = stack_cost(prof, default_stack(prof, transport), transport)
        assert cost.initiator_family == family(transport), transport
        assert "path" in cost.calibrated_on.split("target:")[0], cost.calibrated_on


def test_initiator_cost_ratios_between_transports_follow_the_table_within_the_cpi_spread() -> None:
    bound = spread()
    assert bound < 16, load_stacks().paths  # two families' CPIs, not any number at all
    for a, b in itertools.combinations(sorted(TRANSPORTS), 2):
        table = table_kinstr(a, "initiator") / table_kinstr(b, "initiator")
        model = initiator_kcycles(a) / initiator_kcycles(b)
        assert (1 - 1e-9) / bound <= model / table <= bound * (1 + 1e-9), (a, b)
        # exactly the table's ratio times the two families' CPIs (one family: the table's own)
        assert model == pytest.approx(table * cpi(a) / cpi(b), rel=1e-6), (a, b, model, table)


def test_kernel_target_cost_ratios_follow_the_table_within_the_cpi_spread() -> None:
    prof = load_profile(PROFILE)
    measured = sorted({(t, s) for t, s, sd in TABLE if sd == "target"})
    assert len(measured) >= 4, measured
    model = {k: stack_cost(prof, k[1], k[0]).target_kcycles_per_io for k in measured}
    table = {k: table_kinstr(k[0], "target", k[1]) for k in measured}
    for a, b in itertools.combinations(measured, 2):
        ratio = (model[a] / model[b]) / (table[a] / table[b])
        assert (1 - 1e-9) / spread() <= ratio <= spread() * (1 + 1e-9), (a, b)
        assert ratio == pytest.approx(cpi(a[0]) / cpi(b[0]), rel=1e-6), (a, b)


def test_the_model_charges_those_costs_on_each_sides_cpu() -> None:
    """A 4 KiB write on the initiator and a read on the target (neither side receives data, so no
    per-byte term): the desks' stack parts are the path costs at the host's clock."""
    prof = load_profile(PROFILE)
    for transport in TRANSPORTS:
        stack = default_stack(prof, transport)
        cost = stack_cost(prof, stack, transport)
        for rw, side, want in (
            ("randwrite", "initiator", cost.initiator_kcycles_per_io),
            ("randread", "target", cost.target_kcycles_per_io),
        ):
            point = Point(transport, FABRIC[transport], 100, rw, 4096, 1, 1, PROFILE)
            parts = dict(p for s in build(point, prof).stations for p in s.parts)
            ghz = getattr(prof, side).stack_ghz
            assert parts[f"{side}-stack"] * ghz == pytest.approx(want, rel=1e-9), (transport, side)


def test_a_side_the_table_lacks_keeps_its_fitted_cost_and_says_so(tmp_path, monkeypatch) -> None:
    """A copy of the table without NVMe/TCP's rows stands in for a table that never measured it."""
    lines = PATHS_CSV.read_text().splitlines(keepends=True)
    kept = [line for line in lines if not line.startswith("nvme-tcp,")]
    assert len(kept) < len(lines)
    lacking = tmp_path / "path-lengths.csv"
    lacking.write_text("".join(kept))
    table = load_paths(lacking)
    monkeypatch.setattr(costs, "default_stack_path", lambda t, side, s=None: stack_path(table, t, side, s))
    stacks = load_stacks()
    cost = stacks.cost("nvmet/nvme-tcp")
    assert cost.initiator_kcycles_per_io == stacks.initiators["nvme-tcp"].kcycles_per_io
    assert cost.target_kcycles_per_io == stacks.targets["nvmet/nvme-tcp"].kcycles_per_io
    assert (cost.initiator_family, cost.target_family) == (None, None)
    assert "no 4 KiB cell of nvme-tcp's initiator" in cost.calibrated_on
    assert "no 4 KiB cell of nvmet/nvme-tcp" in cost.calibrated_on
    assert stacks.cost("nvmet/nvme-rdma").initiator_family == "kernel-rdma"  # the others still read it


def test_stacks_sanlab_does_not_run_keep_their_fitted_costs() -> None:
    prof, stacks = load_profile(PROFILE), load_stacks()
    for key in ("scst/iscsi", "scst/iser", "spdk/nvme-tcp", "spdk/nvme-rdma"):
        cost = prof.costs[key]
        assert cost.target_family is None and "target: fitted" in cost.calibrated_on, key
        assert cost.target_kcycles_per_io == stacks.targets[key].kcycles_per_io, key


def test_no_nic_stand_in_is_read_as_the_hosts_cost() -> None:
    for transport in TRANSPORTS:
        for side in STACK_GROUPS:
            assert not set(STACK_GROUPS[side]) & set(nic_groups(transport)), (transport, side)


def test_a_cpi_moves_every_side_of_its_family_and_no_other_in_a_projections_range() -> None:
    """The range's sensitivities (models/core/uncertainty.py) reach the path costs through their CPI."""
    data = load_profile(PROFILE).model_dump(mode="json")
    moved = copy.deepcopy(data)
    assert touch(moved, "stacks.paths.cpi.kernel-rdma", cpi("srp"), 2.0)
    for key, cost in moved["costs"].items():
        for side in ("initiator", "target"):
            factor = 2.0 if cost[f"{side}_family"] == "kernel-rdma" else 1.0
            was = data["costs"][key][f"{side}_kcycles_per_io"]
            assert cost[f"{side}_kcycles_per_io"] == pytest.approx(was * factor), (key, side)
