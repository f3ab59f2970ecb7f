"""CPU core designs and how much of a storage stack's work each does per clock (cores.yaml).

The stacks' costs are fitted in cycles, but a cycle of a 2013 Haswell does
less of the kernel's work than one of a 2023 Sapphire Rapids.  Costs are
therefore kept in Skylake-equivalent cycles, and a host with core design
``c`` at ``ghz`` does ``ghz * factor(c)`` thousand of them per microsecond.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sanlab.models.core.sourced import check_in_range, load_entries
from sanlab.scenarios.errors import SanlabError

CORES_FILE = Path(str(resources.files("sanlab.models"))) / "cores.yaml"
# The design every cost in stacks.yaml is counted in.
REFERENCE_CORE = "skylake"


class Core(BaseModel):
    """One core design: its work per clock relative to Skylake, the plausible range, the source."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    factor: float = Field(gt=0)
    range: tuple[float, float]
    cpus: str = Field(min_length=3)
    source: str = Field(min_length=10)

    @model_validator(mode="after")
    def _factor_in_range(self) -> Core:
        check_in_range("factor", self.factor, self.range, width=False)  # the reference's range is [1, 1]
        return self


@cache
def load_cores(path: Path = CORES_FILE) -> dict[str, Core]:
    """Every core design in ``path``, validated: a typo or a factor outside its range is an error."""
    cores = load_entries(path, Core, "cores")
    if REFERENCE_CORE not in cores or cores[REFERENCE_CORE].factor != 1.0:
        raise SanlabError(f"{path}: the reference core {REFERENCE_CORE!r} must be there with factor 1.0")
    return cores


def core_factor(name: str) -> float:
    """Work per clock of core design ``name`` relative to Skylake."""
    return load_cores()[name].factor
