"""Whether a held-out cell's miss is one the model admitted: its 95 % interval.

A cross-validation split's MAPE says how far the unseen cells fell from the
projections; it does not say whether the model *said* it did not know.
Every projection carries an interval from what its training cells left
open (models/uncertainty.py does this for the committed fit): the
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
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sanlab.models.calibrate import CellError, Fit, Task
from sanlab.models.profile import Profile
from sanlab.models.published import Measured
from sanlab.models.uncertainty import STEP, Z95, mva_iops, spread, total_sigma


@dataclass(frozen=True)
class Band:
    """One unseen cell against its projection's 95 % interval."""

    label: str
    iops_error: float  # model / published - 1
    log_sigma: float  # standard deviation of the projection's log IOPS: parameters and floor
    model_sigma: float = 0.0  # the model's own error, in quadrature

    @property
    def total_sigma(self) -> float:
        return math.sqrt(self.log_sigma**2 + self.model_sigma**2)

    @property
    def log_miss(self) -> float:
        return math.log1p(self.iops_error)

    @property
    def inside(self) -> bool:
        return abs(self.log_miss) <= Z95 * self.total_sigma


def model_error(judged: Sequence[Band]) -> float:
    """The model's own error, measured: the root of the cells' mean squared log miss beyond
    the spread their parameters and the floor admit (a moment estimate; a miss the
    parameters explain adds nothing, and the mean's bias counts as error)."""
    if not judged:
        return 0.0
    excess = [b.log_miss**2 - b.log_sigma**2 for b in judged]
    return math.sqrt(max(0.0, sum(excess) / len(excess)))


def inside_count(judged: Sequence[Band]) -> tuple[int, int]:
    """How many cells lie inside their interval, of how many."""
    return sum(b.inside for b in judged), len(judged)


def bands(task: Task, fit: Fit, cells: Mapping[str, Sequence[CellError]]) -> list[Band]:
    """Each of ``cells`` (a profile's name to its scored cells) against its interval under ``fit``."""
    rows = {name: [c.row for c in scored] for name, scored in cells.items()}
    sigmas = _log_sigmas(task, fit, rows)
    return [
        Band(c.row.label, c.iops_error, sigma)
        for name, scored in cells.items()
        for c, sigma in zip(scored, sigmas[name], strict=True)
    ]


def with_floor(log_sigma: float) -> float:
    """A projection's spread from its parameters, with the solver's floor in quadrature."""
    return total_sigma(log_sigma, 0.0)


def _log_sigmas(task: Task, fit: Fit, rows: Mapping[str, Sequence[Measured]]) -> dict[str, list[float]]:
    """The projections' log-IOPS spread: parameters (gᵀ Σ g) and the solver's floor together."""
    x = np.log([fit.params[name] for name in task.params.names])
    base = _log_iops(task.profiles(x), rows)
    slopes = {name: np.zeros((len(cells), len(x))) for name, cells in rows.items()}
    for i in range(len(x)):
        nudged = x.copy()
        nudged[i] += STEP
        moved = _log_iops(task.profiles(nudged), rows)
        for name in rows:
            slopes[name][:, i] = (moved[name] - base[name]) / STEP
    cov = fit.covariance if fit.covariance is not None else np.zeros((len(x), len(x)))
    # As a projection's interval (models/uncertainty.py): a blind direction adds
    # nothing; every parameter of the published fit has a prior, so none is blind.
    return {name: [with_floor(spread(g, cov)) for g in slopes[name]] for name in rows}


def _log_iops(
    profiles: Mapping[str, Profile], rows: Mapping[str, Sequence[Measured]]
) -> dict[str, np.ndarray]:
    return {
        name: np.array([math.log(mva_iops(row.point, profiles[name])) for row in cells])
        for name, cells in rows.items()
    }
