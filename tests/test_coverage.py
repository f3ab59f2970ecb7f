"""A held-out cell against its projection's 95 % interval (models/calibration/coverage.py).

The interval is what a projection admits it does not know; these tests
check it means that: a cell's interval widens when the cells that pinned
its parameters are held out, a cell the parameters cannot move keeps only
the solver's floor, inside/outside is read on the log scale the fit
works in, a limit that could bind inside the range pulls its low end
down, and the model's own error is measured, carried and enough to cover
90 % of the cells cross-validation holds out - and 80 % of each regime's.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from sanlab.models.calibration.calibrate import SOLVER_FLOOR, evaluate, load_raw, solve
from sanlab.models.calibration.calibrate_studies import joint_task, load_studies
from sanlab.models.calibration.coverage import (
    Z95,
    Band,
    bands,
    by_regime,
    cross_fit,
    model_error,
    unpinned_error,
)
from sanlab.models.core.network import Point
from sanlab.models.core.project import project_point
from sanlab.models.core.simulate import Settings
from sanlab.models.core.uncertainty import Spread, load_posterior
from support import REPO


@pytest.fixture(scope="module")
def studies(calibration_dir):
    return load_studies(None, calibration_dir)


@pytest.fixture(scope="module")
def joint(studies):
    """The joint fit of every cell, as its task and result: made once for the tests that read it."""
    task = joint_task(studies)
    return task, solve(task)


def _qd1(study):
    return [r for r in study.rows if r.point.transport != "local" and r.point.outstanding == 1]


@pytest.mark.slow  # seconds of fitting, projecting or waiting
def test_a_cell_held_out_has_a_wider_interval_than_the_same_cell_fitted(studies, joint):
    """With StarWind left out its NVMe stacks, drive and NIC sit at their priors: wider intervals."""
    starwind = next(s for s in studies if s.name == "starwind-2024")
    held_rows = {id(r) for r in starwind.rows}
    held_task = joint_task(studies, lambda r: id(r) not in held_rows)
    widths = {}
    for name, (task, fit) in (("fitted", joint), ("held out", (held_task, solve(held_task)))):
        cells = {starwind.name: evaluate(fit.profiles[starwind.name], _qd1(starwind))}
        widths[name] = [b.log_sigma for b in bands(task, fit, cells)]
    assert len(widths["fitted"]) == 6
    for fitted, held in zip(widths["fitted"], widths["held out"], strict=True):
        assert SOLVER_FLOOR <= fitted < held


@pytest.mark.slow  # seconds of fitting, projecting or waiting
def test_a_cell_bound_by_the_wire_keeps_only_the_solvers_floor(studies, joint):
    """Zeta's 64 KiB reads at 10 GbE fill the link: no parameter moves them."""
    zeta = next(s for s in studies if s.name == "zeta-2016")
    task, fit = joint
    row = next(r for r in zeta.rows if r.label == "iscsi/eth/10 randread 64k j1q32")
    (band,) = bands(task, fit, {zeta.name: evaluate(fit.profiles[zeta.name], [row])})
    assert band.log_sigma == pytest.approx(SOLVER_FLOOR, rel=1e-6)
    assert band.inside


@pytest.mark.parametrize(
    "error,sigma,inside",
    [(0.05, 0.03, True), (0.10, 0.03, False), (-0.056, 0.03, True), (-0.06, 0.03, False), (1.0, 0.36, True)],
)
def test_inside_is_read_on_the_log_scale(error, sigma, inside):
    """+100 % and -50 % are the same distance from a projection; ±1.96 σ of log IOPS is the band."""
    assert Band("cell", error, sigma).inside is inside
    assert (abs(math.log1p(error)) <= Z95 * sigma) is inside


def test_the_models_own_error_is_what_the_misses_leave_beyond_the_parameters():
    """σ² = mean(log miss² - parameter spread²): misses the parameters explain add nothing,
    and the estimate never goes negative."""
    explained = [Band("a", math.expm1(0.1), 0.2), Band("b", math.expm1(-0.1), 0.2)]
    assert model_error(explained) == 0.0
    unexplained = [Band("a", math.expm1(0.5), 0.3), Band("b", math.expm1(-0.5), 0.3)]
    assert model_error(unexplained) == pytest.approx(0.4)
    assert model_error([]) == 0.0


def test_the_models_own_error_widens_a_band():
    """A miss outside what the parameters admit lies inside once the model's error is counted."""
    band = Band("cell", 0.30, SOLVER_FLOOR)
    assert not band.inside
    assert replace(band, model_sigma=0.15).inside


def test_the_committed_intervals_cover_at_least_90_percent_of_unseen_cells():
    """The nominal 95 % interval, cross-validated: of every split's unseen cells, at least 90 %
    lie inside (test_backtest holds that these counts are what `sanlab calibrate` prints)."""
    result = load_raw(str(REPO / "models/stacks.fit.yaml"))["result"]
    counts = result["cross_validation_inside_95"].values()
    inside, cells = sum(c["inside"] for c in counts), sum(c["cells"] for c in counts)
    assert cells >= 90 and inside / cells >= 0.90, (inside, cells)
    fitted = result["fitted_inside_95"]
    assert fitted["inside"] / fitted["cells"] >= 0.90, fitted


# Issue #46's bars: 90 % of the cells overall, and 80 % in each regime that holds 5 cells or more.
OVERALL, PER_REGIME, REGIME_CELLS = 0.90, 0.80, 5


def test_each_regime_holds_its_bar_when_a_whole_study_is_left_out():
    """Per regime, with each study left out in turn (every network cell predicted once, by a fit
    that never saw its bench): at least 90 % overall and 80 % in each regime of 5 cells or more.
    The counts are what `sanlab calibrate --write` recorded (test_backtest holds them fresh)."""
    result = load_raw(str(REPO / "models/stacks.fit.yaml"))["result"]
    regimes = result["coverage_by_regime"]
    every = regimes.pop("all")
    assert every["cells"] == sum(r["cells"] for r in regimes.values()) >= 50, every
    assert every["inside"] / every["cells"] >= OVERALL, every
    judged = {k: r for k, r in regimes.items() if r["cells"] >= REGIME_CELLS}
    assert len(judged) >= 3, regimes  # a bar per regime means something only with several
    low = {k: r for k, r in judged.items() if r["inside"] / r["cells"] < PER_REGIME}
    assert not low, low


def test_a_limit_that_could_bind_inside_the_range_pulls_its_low_end_down():
    """A point the wire bounds has no slope to a CPU cost; a CPU whose cap lies 10 % above it, with
    a 30 % spread, could bind inside the range, so the range reaches down to its low end."""
    wire_bound = Spread(SOLVER_FLOOR, limits=((0.0, SOLVER_FLOOR), (0.1, 0.3)), ceiling=0.0)
    low, high = wire_bound.half_widths(0.05)
    assert high == 0.0  # never above the wire
    assert low == pytest.approx(Z95 * math.hypot(0.3, 0.05) - 0.1)
    far = Spread(SOLVER_FLOOR, limits=((2.0, 0.3),), ceiling=0.0)  # a cap far above: no effect
    assert far.half_widths(0.05)[0] == pytest.approx(Z95 * math.hypot(SOLVER_FLOOR, 0.05))
    cell = Band("wire-bound", 0.5, SOLVER_FLOOR, 0.05, spread=wire_bound)  # model 50 % above
    assert cell.inside and not Band("wire-bound", 0.5, SOLVER_FLOOR, 0.05).inside
    assert not Band("above the wire", -0.05, SOLVER_FLOOR, 0.05, spread=wire_bound).inside


def test_an_unpinned_cell_is_widened_only_by_what_other_splits_showed():
    """The error on cells whose regime no training row shared is cross-fitted: a split's own misses
    never widen its own intervals, and pinned cells are left as they are."""
    miss = math.expm1(0.6)

    def split(error: float) -> list[Band]:
        return [
            Band("free", error, 0.1, 0.05, "cpu", "cpu srp read", False),
            Band("pinned", error, 0.1, 0.05),
        ]

    a, b = cross_fit([split(miss), split(0.0)])
    assert a[0].model_sigma == pytest.approx(0.05)  # b's unpinned cell missed by nothing
    assert b[0].model_sigma > 0.05 and b[1].model_sigma == 0.05
    assert b[0].model_sigma == pytest.approx(math.hypot(0.05, unpinned_error(split(miss))))
    assert unpinned_error(split(miss)) == pytest.approx(math.sqrt(0.6**2 - 0.1**2 - 0.05**2))
    again, _ = cross_fit([split(math.expm1(2.0)), split(0.0)])
    assert again[0].model_sigma == a[0].model_sigma


def test_coverage_is_counted_per_regime():
    cells = [
        Band("a", 0.0, 0.1, regime="cpu"),
        Band("b", 3.0, 0.1, regime="cpu"),
        Band("c", 0.0, 0.1, regime="link"),
    ]
    assert by_regime(cells) == {
        "cpu": {"inside": 1, "cells": 2},
        "link": {"inside": 1, "cells": 1},
        "all": {"inside": 2, "cells": 3},
    }


def test_no_projection_has_a_zero_width_interval():
    """The model's own error is measured (stacks.fit.yaml) and carried, in a sweep's point too
    (which leaves the parameters' term out): no range is one figure."""
    posterior = load_posterior()
    assert posterior is not None and posterior.model_sigma > SOLVER_FLOOR
    point = Point("nvme-rdma", "roce", 100, "randread", 65536, 32, 8)
    sweep_like = project_point(point, Settings(seed=1), parameter_range=False)
    assert sweep_like.iops_range95 is not None
    assert sweep_like.iops_range95[0] < sweep_like.iops
