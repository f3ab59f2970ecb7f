"""Contention between a host's cores (models/core/contention.py, issue #46's "contention as cores grow").

An I/O pays for the other cores busy on its host only past the busiest host a fitted row had
(the fitted costs carry what their rows spent so); a saturated host still gains from every core
it is given; and the range spans the contention prior wherever a host is busier than the fitted
rows'.
"""

from __future__ import annotations

import pytest

from sanlab.models.calibration.calibrate import CellError
from sanlab.models.calibration.calibrate_studies import busiest_hosts, load_studies
from sanlab.models.core import mva
from sanlab.models.core.budget import HOPS
from sanlab.models.core.contention import extra_kcycles, past_fitted
from sanlab.models.core.costs import BUSY_CORES_MAX, Contention
from sanlab.models.core.network import Point, build, with_cores
from sanlab.models.core.priors import load_priors
from sanlab.models.core.profile import Profile
from sanlab.models.core.profile_files import STACKS_FILE, fit_path, load_profile, read_fit
from sanlab.models.core.uncertainty import CONTENTION, candidate_shifts

# Within the fitted rows' busiest hosts: 16 NVMe/TCP jobs on 8 cores keep 8 busy.
WITHIN = Point("nvme-tcp", "eth", 100, "randread", 4096, 32, 16, cores=8)
# Past them: 24 NVMe/TCP jobs on 24 cores at 400 Gb/s keep about 23 of the initiator's busy.
PAST = Point(
    "nvme-tcp", "eth", 400, "randread", 4096, 32, 24, cores=24, backend="null", profile="modern-400g"
)


def contention_parts(point: Point, profile: Profile | None = None) -> dict[str, float]:
    return {
        hop: us for s in build(point, profile).stations for hop, us in s.parts if hop.endswith("-contention")
    }


def test_within_the_fitted_rows_busiest_hosts_contention_costs_nothing():
    net = build(WITHIN)
    contention = load_profile(WITHIN.profile).contention
    assert 0 < net.busy_cores["initiator"] <= contention.start("initiator")
    assert net.busy_cores["target"] <= contention.start("target")
    assert contention_parts(WITHIN) == {}


def test_past_them_each_busy_core_adds_its_cycles_to_the_ios_own_cores():
    profile = with_cores(load_profile(PAST.profile), PAST.cores)
    net = build(PAST)
    busy = net.busy_cores["initiator"]
    assert busy > profile.contention.start("initiator")
    want = profile.contention.cycles_per_busy_core * (busy - profile.contention.start("initiator")) / 1000
    assert extra_kcycles(profile.contention, "initiator", busy) == pytest.approx(want)
    (desk,) = [s for s in net.stations if any(hop == "initiator-contention" for hop, _ in s.parts)]
    assert desk.name == "initiator-cpu"
    assert "contention" in HOPS["initiator-contention"]  # a budget names the hop
    assert dict(desk.parts)["initiator-contention"] == pytest.approx(want / profile.initiator.stack_ghz)


def at_priors_top(profile: Profile) -> Profile:
    """``profile`` with contention from the first busy core, at its prior's worst."""
    top = load_priors()[CONTENTION].range[1]
    worst = profile.contention.model_copy(
        update={"cycles_per_busy_core": top, "initiator_from": 1.0, "target_from": 1.0}
    )
    return profile.model_copy(update={"contention": worst})


def test_a_saturated_host_gains_from_every_core_even_at_the_priors_worst():
    """Contention's term is linear (Amdahl's): more cores for as many jobs never lose IOPS, they
    gain less.  iSCSI at 512 B, as many jobs as cores, binds the initiator's CPU."""
    profile = at_priors_top(load_profile("modern-100g"))
    got, free = [], []
    for cores in (4, 8, 16, 32):
        point = Point("iscsi", "eth", 100, "randread", 512, 32, cores, cores=cores, sessions=cores)
        got.append(mva.solve(build(point, profile)).iops)
        free.append(mva.solve(build(point)).iops)
        assert contention_parts(point, profile), "contention must bite at the prior's top"
    assert got == sorted(got) and len(set(got)) == len(got)
    assert got[-1] / got[0] < free[-1] / free[0]


def test_the_range_spans_contention_only_past_the_fitted_rows_busiest_hosts():
    within = with_cores(load_profile(WITHIN.profile), WITHIN.cores)
    assert candidate_shifts(WITHIN, within, pinned=True) == (0.0, 0.0)
    past = with_cores(load_profile(PAST.profile), PAST.cores)
    low, high = candidate_shifts(PAST, past, pinned=True)
    assert low > 0.05 and high >= 0.0


def test_busiest_hosts_is_the_most_any_cell_kept_busy_and_never_below_one_core():
    row = object()
    cells = [
        CellError(row, 1.0, 1.0, "link-in", busy_cores={"initiator": 3.5, "target": 0.4}),  # type: ignore[arg-type]
        CellError(row, 1.0, 1.0, "link-in", busy_cores={"initiator": 1.2, "target": 0.7}),  # type: ignore[arg-type]
    ]
    assert busiest_hosts(cells) == {"initiator": 3.5, "target": 1.0}


def test_the_committed_busy_cores_are_the_fitted_rows_busiest(calibration_dir):
    """stacks.fit.yaml's ``busy_cores`` is what `sanlab calibrate --write` measured of the joint
    fit's network rows; rebuilt from the committed profiles, they reach the same."""
    committed = read_fit(fit_path(STACKS_FILE))["busy_cores"]
    reached = {"initiator": 1.0, "target": 1.0}
    for study in load_studies(None, calibration_dir):
        profile = load_profile(study.name)
        for row in study.rows:
            if row.point.networked:
                busy = build(row.point, profile).busy_cores
                reached = {side: max(reached[side], busy[side]) for side in reached}
    assert committed == pytest.approx(reached, abs=0.01)
    # rounded up: the busiest fitted row itself pays no contention, nor carries the note
    assert all(reached[side] <= committed[side] for side in reached)
    # and the committed model reads them
    assert load_profile("modern-100g").contention.start("initiator") == committed["initiator"]


def test_a_fit_being_made_leaves_its_own_rows_without_contention():
    """stacks.yaml alone (no fit's busy cores) starts contention nowhere: the fit's costs carry
    what its rows' hosts spent on it."""
    fresh = Contention(cycles_per_busy_core=20)
    assert fresh.start("initiator") == fresh.start("target") == BUSY_CORES_MAX


def test_a_projection_busier_than_the_fitted_rows_says_so_in_its_note():
    """A number off every table says so: past the fitted rows' busiest hosts, contention is a
    prior's, and the record's note names the side and both counts."""
    from sanlab.models.core.project import project_point

    within, past = build(WITHIN), build(PAST)
    assert past_fitted(within.busy_cores, within.fitted_busy_cores) is None
    said = past_fitted(past.busy_cores, past.fitted_busy_cores)
    assert said is not None and said.startswith("extrapolated: the initiator keeps 23.")
    assert "(fitted rows: at most 16.96)" in said
    assert "target" not in said  # its target is within the fitted rows' busiest
    note = project_point(PAST).note or ""
    assert note.count("extrapolated:") == 1 and "contention between its cores" in note
