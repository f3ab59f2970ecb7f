"""Published figures the fit never sees, projected and scored: the model away from its tables.

``models/data/*.csv`` hold real-NIC measurements with their source, hardware
and software on every row.  They are not fitted: their benches leave things
the fit would have to guess (the T6 paper names no CPU and runs a Windows
initiator), so a fit would bend the stacks' costs to cover the guess.  What
they can judge is the physics that carries to any machine - wire overhead,
line rate, offloads - and a row that misses says so in ``sanlab calibrate``
and in ``tests/test_checks.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sanlab.models.calibrate import CellError, evaluate
from sanlab.models.profile import load_profile
from sanlab.models.published import Measured, measured, read_rows
from sanlab.scenarios.errors import SanlabError

CHECKS_DIR = Path(__file__).parent / "data"
# What every row must say of itself, beside its figures.
PROVENANCE = ("source", "hardware", "software")


@dataclass(frozen=True)
class Judged:
    """One published row that the fit never saw, and the model's projection of it."""

    table: str
    cell: CellError

    @property
    def model_mibps(self) -> float:
        return self.cell.iops * self.cell.row.point.bs / 2**20

    @property
    def throughput_error(self) -> float:
        """Projected MiB/s against published (the same as IOPS at one block size)."""
        return self.model_mibps / self.cell.row.bw_mibps - 1


def check_tables() -> list[Path]:
    return sorted(CHECKS_DIR.glob("*.csv"))


def load_checks(path: Path) -> list[Measured]:
    """One table's rows, each on the profile its ``profile`` column names; a row that does
    not say where it comes from, or on which profile, is refused."""
    rows = read_rows(path)
    for number, row in enumerate(rows, start=2):
        for field in ("profile", *PROVENANCE):
            if not (row.get(field) or "").strip():
                raise SanlabError(f"{path}: line {number}: '{field}' is empty; every row names it")
    return [measured(row, profile="") for row in rows]


def judge(seed: int = 1) -> list[Judged]:
    """Project every row of every check table on its profile as fitted now."""
    judged = []
    for path in check_tables():
        for row in load_checks(path):
            cell = evaluate(load_profile(row.point.profile), [row], seed)[0]
            judged.append(Judged(path.stem, cell))
    return judged
