"""Priors of the fitted parameters: value, range, unit and source, kept as data (priors.yaml).

A published table rarely pins every parameter a model needs: two costs that
only matter as a sum, a latency hidden behind a device's.  Without priors
the least-squares fit puts such a parameter wherever the solver stops (often
at a bound), and the profile then ranks transports by an accident of the
fit.  With them, the fit is a maximum a posteriori estimate: the data move a
parameter as far as they can tell, and no further.
"""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sanlab.models.core.sourced import check_in_range, load_entries

PRIORS_FILE = Path(str(resources.files("sanlab.models"))) / "priors.yaml"
# The range spans this many standard deviations of the prior (log scale): a
# 95 % interval, so the range is what a real machine could plausibly have.
RANGE_SIGMAS = 4.0
# How strongly a prior pulls: one prior standard deviation weighs as much as
# one cell missed by this much (log IOPS): the model's own per-cell error as
# its cross-validation shows it (12-25 %), so a prior decides only what the
# cells leave open.
PRIOR_WEIGHT = 0.2


class Prior(BaseModel):
    """What was known of one parameter before fitting."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float = Field(gt=0)
    range: tuple[float, float]
    unit: str = Field(min_length=1)
    source: str = Field(min_length=10)

    @model_validator(mode="after")
    def _value_in_range(self) -> Prior:
        check_in_range("value", self.value, self.range)
        return self

    @property
    def sigma(self) -> float:
        """Standard deviation of the prior on a log scale."""
        low, high = self.range
        return math.log(high / low) / RANGE_SIGMAS

    def residual(self, log_value: float) -> float:
        """This parameter's term of the fit's residual vector at ``exp(log_value)``."""
        return PRIOR_WEIGHT * (log_value - math.log(self.value)) / self.sigma


def load_priors(path: Path = PRIORS_FILE) -> dict[str, Prior]:
    """Every prior in ``path``, validated: a typo or a value outside its range is an error."""
    return load_entries(path, Prior, "priors")
