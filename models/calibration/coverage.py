"""Whether a held-out cell's miss is one the model admitted: its 95 % interval.

A cross-validation split's MAPE says how far the unseen cells fell from the
projections; it does not say whether the model *said* it did not know.
Every projection carries an interval from what its training cells left
open (models/core/uncertainty.py does this for the committed fit): the
posterior covariance Σ of the split's log parameters - a parameter no
training cell moves keeps its prior's width - and the cell's sensitivity g
to each, var = gᵀ Σ g to first order.  The fit's own floor
(uncertainty.SOLVER_FLOOR: how closely the analytic solution it runs agrees
with the simulator that projects) is added in quadrature, so a cell the
parameters cannot move (one bound by the wire) still has the model's
structural error around it.  The model's own error - fitted cells' log
misses beyond what their parameters admit (``model_error``) - is added in
quadrature too: the physics the model lacks, which no parameter moves.  A
split measures it on its own training cells only, so no unseen cell widens
its own interval, and its coverage is an honest check of the estimate.

A cell inside its interval was missed by no more than what the data left
open, and more cells of the same kind would narrow it.  A cell outside is
one no parameter value the data allow explains: physics the model lacks,
or a figure to doubt.  That split is what a reader of a MAPE needs.

Coverage is counted per regime (models/core/regimes.py), since a model can hold
its link-bound cells and miss every CPU-bound one while the total looks
fine.  A cell whose regime no training row of its split shares is
*unpinned*: its range also carries the physics candidates the data leave
open (uncertainty.candidate_shifts) and the error the model showed on such
cells, cross-fitted - measured on the other whole-study splits only, so no
cell widens its own interval (``cross_fit``).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from sanlab.models.calibration.calibrate import CellError, Fit, Task
from sanlab.models.core.profile import Profile
from sanlab.models.core.published import Measured
from sanlab.models.core.regimes import key_of, kind_of
from sanlab.models.core.uncertainty import (
    STEP,
    Z95,
    Solved,
    Spread,
    candidate_shifts,
    solved,
    spread_from,
    total_sigma,
)


@dataclass(frozen=True)
class Band:
    """One unseen cell against its projection's 95 % interval."""

    label: str
    iops_error: float  # model / published - 1
    log_sigma: float  # standard deviation of the projection's log IOPS: parameters and floor
    model_sigma: float = 0.0  # the model's own error, in quadrature
    regime: str = ""  # the kind of limit that binds the cell (regimes.kind_of)
    key: str = ""  # its regime with what decides it (regimes.key_of)
    pinned: bool = True  # whether a training row of its split shares ``key``
    spread: Spread | None = None  # limits, wire ceiling, candidates (None: symmetric)

    @property
    def total_sigma(self) -> float:
        return math.sqrt(self.log_sigma**2 + self.model_sigma**2)

    @property
    def log_miss(self) -> float:
        return math.log1p(self.iops_error)

    @property
    def half_widths(self) -> tuple[float, float]:
        """The interval's log half-widths below and above the projection."""
        if self.spread is None:
            return Z95 * self.total_sigma, Z95 * self.total_sigma
        return self.spread.half_widths(self.model_sigma)

    @property
    def inside(self) -> bool:
        """The published figure lies in [model / e^low, model * e^high]: a model above it (a
        positive miss) needs the range below, a model under it the range above."""
        low, high = self.half_widths
        return -high <= self.log_miss <= low


def model_error(judged: Sequence[Band]) -> float:
    """The model's own error, measured: the root of the cells' mean squared log miss beyond
    the spread their parameters and the floor admit (a moment estimate; a miss the
    parameters explain adds nothing, and the mean's bias counts as error)."""
    if not judged:
        return 0.0
    excess = [b.log_miss**2 - b.log_sigma**2 for b in judged]
    return math.sqrt(max(0.0, sum(excess) / len(excess)))


def unpinned_error(judged: Sequence[Band]) -> float:
    """The error the model shows where no training row shared a cell's regime, beyond its
    parameters and its own error as the training rows measured it: the maximum-likelihood
    extra spread τ of the unpinned cells' log misses, each a normal of variance
    σᵢ² + mᵢ² + τ² (0.0 without any, or when their misses need none).

    Not a plain moment estimate: unpinned cells carry very unequal spreads (a cost at its
    prior's width, or a drive the fit pinned), and an average of miss² - σ² lets the wide
    ones, which say little of τ, cancel the narrow ones that missed.
    """
    free = [(b.log_miss**2, b.log_sigma**2 + b.model_sigma**2) for b in judged if not b.pinned]

    def score(tau2: float) -> float:  # d log-likelihood / d τ², decreasing in τ²
        return sum((miss - v - tau2) / (v + tau2) ** 2 for miss, v in free)

    if not free or score(0.0) <= 0:
        return 0.0
    low, high = 0.0, max(miss for miss, _ in free)
    for _ in range(60):  # bisection: the score's root
        mid = (low + high) / 2
        low, high = (mid, high) if score(mid) > 0 else (low, mid)
    return math.sqrt((low + high) / 2)


def cross_fit(splits: Sequence[Sequence[Band]]) -> list[list[Band]]:
    """Each split's unpinned cells widened by the unpinned error of the *other* splits' cells
    (whole studies left out in turn: disjoint, so no cell widens its own interval)."""
    out = []
    for i, bands_ in enumerate(splits):
        others = [b for j, other in enumerate(splits) if j != i for b in other]
        extra = unpinned_error(others)
        out.append(
            [b if b.pinned else replace(b, model_sigma=math.hypot(b.model_sigma, extra)) for b in bands_]
        )
    return out


def inside_count(judged: Sequence[Band]) -> tuple[int, int]:
    """How many cells lie inside their interval, of how many."""
    return sum(b.inside for b in judged), len(judged)


def by_regime(judged: Sequence[Band]) -> dict[str, dict[str, int]]:
    """Inside and cells per regime kind, and 'all' (what stacks.fit.yaml records)."""
    kinds = sorted({b.regime for b in judged})
    out = {
        k: dict(zip(("inside", "cells"), inside_count([b for b in judged if b.regime == k]), strict=True))
        for k in kinds
    }
    out["all"] = dict(zip(("inside", "cells"), inside_count(judged), strict=True))
    return out


def bands(
    task: Task,
    fit: Fit,
    cells: Mapping[str, Sequence[CellError]],
    pinned: Collection[str] | None = None,
) -> list[Band]:
    """Each of ``cells`` (a profile's name to its scored cells) against its interval under
    ``fit``; ``pinned``: the regimes the fit's training rows hold (None: all pinned)."""
    rows = {name: [c.row for c in scored] for name, scored in cells.items()}
    centres = {name: [math.log(c.iops) for c in scored] for name, scored in cells.items()}
    spreads = _spreads(task, fit, rows, centres)
    out = []
    for name, scored in cells.items():
        profile = fit.profiles[name]
        for c, spread in zip(scored, spreads[name], strict=True):
            key = key_of(c.bottleneck, c.row.point.transport, c.row.point.rw)
            free = pinned is not None and key not in pinned
            low, high = candidate_shifts(c.row.point, profile, pinned=not free)
            spread = replace(spread, shift_low=low, shift_high=high)
            out.append(
                Band(
                    c.row.label, c.iops_error, spread.sigma, 0.0, kind_of(c.bottleneck), key, not free, spread
                )
            )
    return out


def regimes_of(cells: Mapping[str, Sequence[CellError]]) -> set[str]:
    """The regimes that scored cells hold (a split's training rows: what it pins)."""
    return {
        key_of(c.bottleneck, c.row.point.transport, c.row.point.rw)
        for scored in cells.values()
        for c in scored
    }


def with_floor(log_sigma: float) -> float:
    """A projection's spread from its parameters, with the solver's floor in quadrature."""
    return total_sigma(log_sigma, 0.0)


def _spreads(
    task: Task,
    fit: Fit,
    rows: Mapping[str, Sequence[Measured]],
    centres: Mapping[str, Sequence[float]],
) -> dict[str, list[Spread]]:
    """Each cell's spread (uncertainty.spread_from): its solution at the fit and with each log
    parameter stepped, the limits' headroom over its simulated IOPS.  No ceiling at the wire
    here: a published figure may pass the model's bound by what its unstated MTU or headers
    carry, and counting that as outside would score the model's assumptions, not its range."""
    x = np.log([fit.params[name] for name in task.params.names])
    seen: dict[tuple[str, str], list[Solved]] = {}
    base = _solved(task.profiles(x), rows, seen)
    moved: dict[str, list[list[Solved | None]]] = {name: [[] for _ in cells] for name, cells in rows.items()}
    for i in range(len(x)):
        nudged = x.copy()
        nudged[i] += STEP
        stepped = _solved(task.profiles(nudged), rows, seen)
        for name, cells in stepped.items():
            for j, cell in enumerate(cells):
                moved[name][j].append(cell)
    cov = fit.covariance if fit.covariance is not None else np.zeros((len(x), len(x)))
    # As a projection's interval (models/core/uncertainty.py): a blind direction adds
    # nothing; every parameter of the published fit has a prior, so none is blind.
    return {
        name: [
            spread_from(b, m, cov, centre)
            for b, m, centre in zip(base[name], moved[name], centres[name], strict=True)
        ]
        for name in rows
    }


def _solved(
    profiles: Mapping[str, Profile],
    rows: Mapping[str, Sequence[Measured]],
    seen: dict[tuple[str, str], list[Solved]],
) -> dict[str, list[Solved]]:
    """Each profile's cells solved, once per profile as built (``seen``, by every value it
    holds): a step of one bench's parameter leaves the other benches' profiles as they were."""
    out = {}
    for name, cells in rows.items():
        key = (name, profiles[name].model_dump_json())
        if key not in seen:
            seen[key] = [solved(row.point, profiles[name]) for row in cells]
        out[name] = seen[key]
    return out
