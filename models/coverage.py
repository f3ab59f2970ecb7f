"""Whether a held-out cell's miss is one the model admitted: its 95 % interval.

A cross-validation split's MAPE says how far the unseen cells fell from the
projections; it does not say whether the model *said* it did not know.
Every projection carries an interval from what its training cells left
open (models/uncertainty.py does this for the committed fit): the
posterior covariance Σ of the split's log parameters - a parameter no
training cell moves keeps its prior's width - and the cell's sensitivity g
to each, var = gᵀ Σ g to first order.  The fit's own floor
(calibrate.SOLVER_FLOOR: how closely the analytic solution it runs agrees
with the simulator that projects) is added in quadrature, so a cell the
parameters cannot move (one bound by the wire) still has the model's
structural error around it.

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

from sanlab.models.calibrate import SOLVER_FLOOR, CellError, Fit, Task
from sanlab.models.profile import Profile
from sanlab.models.published import Measured
from sanlab.models.uncertainty import STEP, Z95, mva_iops, spread


@dataclass(frozen=True)
class Band:
    """One unseen cell against its projection's 95 % interval."""

    label: str
    iops_error: float  # model / published - 1
    log_sigma: float  # standard deviation of the projection's log IOPS

    @property
    def inside(self) -> bool:
        return abs(math.log1p(self.iops_error)) <= Z95 * self.log_sigma


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
    return math.sqrt(log_sigma**2 + SOLVER_FLOOR**2)


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
