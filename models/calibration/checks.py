"""Published figures the fit never sees, projected and scored: the model away from its tables.

``models/data/*.csv`` hold real-NIC measurements with their source, hardware
and software on every row.  They are not fitted: their benches leave things
the fit would have to guess (the T6 paper names no CPU and runs a Windows
initiator), so a fit would bend the stacks' costs to cover the guess.  What
they can judge is the physics that carries to any machine - wire overhead,
line rate, offloads, digests - and a row that misses says so in
``sanlab calibrate`` and in ``tests/test_checks.py``.

Each row says how far its projection may be off (``tolerance``, and
``cpu_tolerance`` where it publishes a CPU figure): 5 % where the physics
should carry, the size of a known miss where it does not, so a miss may
shrink but never silently grow.  Each projection also carries its 95 %
interval from what the committed fit leaves open (models/calibration/coverage.py): a
row outside it is a miss no parameter value the tables allow explains.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sanlab.models.calibration.calibrate import CellError, evaluate
from sanlab.models.calibration.coverage import Band, with_floor
from sanlab.models.core.profile_files import load_profile
from sanlab.models.core.published import Measured, measured, read_rows
from sanlab.models.core.reach import past
from sanlab.models.core.uncertainty import SOLVER_FLOOR, log_iops_sigma
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.yamlfile import load_yaml

CHECKS_DIR = Path(__file__).resolve().parent.parent / "data"
# A row allowed no more than this is one whose physics should carry (line rate, wire overhead);
# a row allowed more is a known miss, and its note says so.
CARRIES = 0.05
# What every row must say of itself, beside its figures.
PROVENANCE = ("source", "hardware", "software")


@dataclass(frozen=True)
class Check:
    """One published row and how far the model may be from it (a fraction of the published figure)."""

    row: Measured
    tolerance: float
    cpu_tolerance: float | None = None


@dataclass(frozen=True)
class Judged:
    """One published row that the fit never saw, and the model's projection of it."""

    table: str
    check: Check
    cell: CellError
    # The projection's log-IOPS spread: the committed fit's parameters, the solver's floor
    # and the model's own error (uncertainty.log_iops_sigma).
    log_sigma: float = SOLVER_FLOOR

    @property
    def band(self) -> Band:
        """The published figure against the projection's 95 % interval."""
        return Band(self.cell.row.label, self.throughput_error, self.log_sigma)

    @property
    def extrapolated(self) -> bool:
        """Whether the projection lies past what the published tables reach (models/core/reach.py)."""
        return past(self.cell.row.point, self.model_mibps) is not None

    @property
    def model_mibps(self) -> float:
        return self.cell.iops * self.cell.row.point.bs / 2**20

    @property
    def throughput_error(self) -> float:
        """Projected MiB/s against published (the same as IOPS at one block size)."""
        return self.model_mibps / self.cell.row.bw_mibps - 1

    @property
    def misses(self) -> list[str]:
        """What is further off than the row allows (empty: within its tolerances)."""
        out = []
        if abs(self.throughput_error) > self.check.tolerance:
            out.append(f"throughput {self.throughput_error:+.1%} (allowed ±{self.check.tolerance:.0%})")
        cpu = self.cell.cpu_error
        if self.check.cpu_tolerance is not None and (cpu is None or abs(cpu) > self.check.cpu_tolerance):
            shown = "not projected" if cpu is None else f"{cpu:+.1%}"
            out.append(f"CPU {shown} (allowed ±{self.check.cpu_tolerance:.0%})")
        return out


def check_tables() -> list[Path]:
    return sorted(CHECKS_DIR.glob("*.csv"))


@dataclass(frozen=True)
class Refusal:
    """Rows of a published table the model cannot express, and why (TABLE.refused.yaml)."""

    table: str
    rows: str  # which rows, in words
    reason: str


def refusals() -> list[Refusal]:
    """Every check table's refused rows, as ``sanlab calibrate`` lists them under the table."""
    found = []
    for path in sorted(CHECKS_DIR.glob("*.refused.yaml")):
        table = path.name.removesuffix(".refused.yaml")
        for entry in load_yaml(path) or []:
            found.append(Refusal(table, str(entry["rows"]), " ".join(str(entry["reason"]).split())))
    return found


def load_checks(path: Path) -> list[Check]:
    """One table's rows, each on the profile its ``profile`` column names, with its tolerances;
    a row that does not say where it comes from, on which profile, or how far it may be off
    (and, where it publishes a CPU figure, how far that may be off) is refused."""
    rows = read_rows(path)
    checks = []
    for number, row in enumerate(rows, start=2):
        for field in ("profile", *PROVENANCE, "tolerance"):
            if not (row.get(field) or "").strip():
                raise SanlabError(f"{path}: line {number}: '{field}' is empty; every row names it")
        cpu_given = bool((row.get("cpu_pct") or "").strip())
        if cpu_given and not (row.get("cpu_tolerance") or "").strip():
            raise SanlabError(f"{path}: line {number}: 'cpu_tolerance' is empty; a row with cpu_pct names it")
        try:
            published = measured(row, profile="")
        except SanlabError as exc:
            raise SanlabError(f"{path}: line {number}: {exc}") from None
        checks.append(
            Check(
                published,
                _fraction(path, number, "tolerance", row["tolerance"]),
                _fraction(path, number, "cpu_tolerance", row["cpu_tolerance"]) if cpu_given else None,
            )
        )
    return checks


def _fraction(path: Path, number: int, field: str, text: str) -> float:
    """A tolerance: a positive fraction of the published figure (0.05 is 5 %)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 10:
        raise SanlabError(f"{path}: line {number}: '{field}' is {text!r}; use a fraction such as 0.05 (5 %)")
    return value


def confirming_rows() -> list[Measured]:
    """The rows the model must meet within ``CARRIES`` (tests/test_checks.py holds it to that):
    published evidence that it holds where the fitted tables never went (models/core/reach.py)."""
    return [c.row for path in check_tables() for c in load_checks(path) if c.tolerance <= CARRIES]


def judge(seed: int = 1) -> list[Judged]:
    """Project every row of every check table on its profile as fitted now."""
    judged = []
    for path in check_tables():
        for check in load_checks(path):
            profile = load_profile(check.row.point.profile)
            cell = evaluate(profile, [check.row], seed)[0]
            sigma = log_iops_sigma(check.row.point, profile) or with_floor(0.0)
            judged.append(Judged(path.stem, check, cell, sigma))
    return judged


# The check table of the linux-nvme posts' rows that the joint fit does not take (the 2020
# baselines, the 2019 kernel); every other check table is a vendor's letter or paper.
KERNEL_POSTS = "linux-nvme-tcp-2019-2020"


@dataclass(frozen=True)
class Scored:
    """How a group of never-fitted rows came out: the study left out of every fit, predicted."""

    name: str
    rows: int
    mape: float  # mean |projected / published - 1| of throughput
    inside: int  # rows inside their projection's 95 % interval


def scored(judged: list[Judged]) -> list[Scored]:
    """Each check table's rows, and the vendors' rows together (every table but the kernel
    posts'): a study that no fit sees is its own leave-one-study-out split."""
    groups: dict[str, list[Judged]] = {}
    for j in judged:
        groups.setdefault(j.table, []).append(j)
    vendors = [j for j in judged if j.table != KERNEL_POSTS]
    if vendors:
        groups["vendor rows (every table but the kernel posts')"] = vendors
    return [
        Scored(
            name,
            len(rows),
            sum(abs(j.throughput_error) for j in rows) / len(rows),
            sum(j.band.inside for j in rows),
        )
        for name, rows in groups.items()
    ]
