"""A profile of the user's own machines, fitted to their ``sanlab run`` records.

The published tables calibrate the shipped profiles; a user with two
servers calibrates one of their own.  Each ``measured`` record of their
``results.json`` is a cell, and it says which machine it ran on: both hosts'
CPUs, the NIC, the MTU, the target stack, the backend device
(``ResultRecord.machine`` and ``.backend``).  The profile is built from
those facts (``models/core/machine.py``), so it projects the user's machine, not
the base's; the base profile (``--base``, else the default) lends only what
no record states.  The parameters the cells can pin - each stack's CPU
cost per I/O on each side, the NIC's fixed latency and per-packet cost, an
NVMe drive's read and write latency - are fitted by the same least squares
as ``sanlab calibrate``, corrected towards the simulator
(``calibrate_sim.py``); each gets a 95 % interval from the fit's Jacobian.

A fit that misses one of its own cells by more than ``POOR_FIT`` is not
written (unless the user accepts it, and then the profile says so): it
means the records leave out a fact of the machine, and a projection from
it would carry the miss.  Emulated records are refused: their figures are a
software VM's speed, not a machine's.

The profile is written, self-contained, to the user's profile folder
(``$SANLAB_PROFILES``, else ``$XDG_DATA_HOME/sanlab/profiles``, else
``~/.local/share/sanlab/profiles``), where ``sanlab model --profile NAME``
finds it.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sanlab.models.calibration.calibrate import CellError, Fit, evaluate, profile_task
from sanlab.models.calibration.calibrate_sim import solve_by_simulation
from sanlab.models.core.costs import stack_cost
from sanlab.models.core.machine import Described, machine_parts
from sanlab.models.core.metrics import mape
from sanlab.models.core.network import Point, default_stack
from sanlab.models.core.params import get_param, set_param
from sanlab.models.core.profile import Profile
from sanlab.models.core.profile_files import clear_cache, load_profile, profile_names, user_profile_dir
from sanlab.models.core.published import Measured
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.files import read_bounded
from sanlab.scenarios.invalid import first_problem
from sanlab.scenarios.reading import parse_json
from sanlab.scenarios.registry import FABRICS, TRANSPORTS
from sanlab.scenarios.results.outdir import OutputFolder
from sanlab.scenarios.results.records import BackendFacts, MachineFacts
from sanlab.scenarios.schema import (
    DEFAULT_PROFILE,
    MAX_IODEPTH,
    MAX_NUMJOBS,
    BlockSize,
    Fabric,
    ReadWrite,
    Stack,
    Transport,
)
from sanlab.scenarios.semantics import MAX_OUTSTANDING

Say = Callable[[str], None]

# Physical ranges for what the records can pin (kcycles per I/O, µs, kcycles per packet, µs, GB/s).
STACK_RANGE = (0.2, 500.0)
ONE_WAY_RANGE = (0.2, 20.0)
PER_PACKET_RANGE = (0.05, 20.0)
DEVICE_LATENCY_RANGE = (1.0, 5000.0)
DEVICE_RATE_RANGE = (0.1, 60.0)  # GB/s
# A fit that misses any of its own cells by more than this is refused: the records leave out a fact.
POOR_FIT = 0.10

# A run's results.json: a few thousand records at most; 64 MiB is far past any real one.
MAX_RESULTS_BYTES = 64 << 20
MAX_RECORDS = 20_000  # read, over all the folders
MAX_FOLDERS = 100
MAX_CELLS = 400  # fitted: each round simulates every cell once
Finite = Annotated[float, Field(allow_inf_nan=False, strict=True)]


class RunCell(BaseModel):
    """The fields of one run record that a fit reads, each checked against what a run can
    measure: a NaN, a negative rate, ``iops: true`` or a 1e300 IOPS is refused, named, never fitted."""

    model_config = ConfigDict(extra="ignore", strict=False)

    mode: str
    transport: Transport
    fabric: Fabric
    link_gbps: Annotated[Finite, Field(gt=0, le=800)] | None = None
    rw: ReadWrite
    bs: BlockSize
    iodepth: Annotated[int, Field(ge=1, le=MAX_IODEPTH, strict=True)]
    numjobs: Annotated[int, Field(ge=1, le=MAX_NUMJOBS, strict=True)]
    iops: Annotated[Finite, Field(gt=0, le=1e9)]
    bw_mibps: Annotated[Finite, Field(ge=0, le=1e7)] | None = None
    lat_mean_us: Annotated[Finite, Field(gt=0, le=1e8)] | None = None
    mtu: Annotated[int, Field(ge=576, le=9000, strict=True)] | None = None
    target_stack: Stack | None = None
    machine: MachineFacts | None = None
    backend: BackendFacts | None = None

    @model_validator(mode="after")
    def _possible(self) -> RunCell:
        if self.iodepth * self.numjobs > MAX_OUTSTANDING:
            raise ValueError(
                f"iodepth {self.iodepth} x numjobs {self.numjobs} is {self.iodepth * self.numjobs} I/Os "
                f"in flight; at most {MAX_OUTSTANDING}"
            )
        if TRANSPORTS[self.transport].rdma != FABRICS[self.fabric].rdma:
            raise ValueError(f"{self.transport} does not run over fabric {self.fabric!r}")
        return self


@dataclass
class Cells:
    """The usable records of the runs, as cells and as the machine they describe."""

    rows: list[Measured]
    described: list[Described]
    skipped: int = 0


def unique_folders(dirs: list[Path], say: Say) -> list[Path]:
    """Each run folder once, however often it is named (the same records twice would weigh double)."""
    seen: dict[Path, Path] = {}
    for folder in dirs:
        seen.setdefault(folder.resolve(), folder)
    if len(seen) < len(dirs):
        say(f"--runs: {len(dirs) - len(seen)} folder(s) named more than once; each is read once")
    return list(seen.values())


def read_cells(dirs: list[Path], say: Say = lambda m: None) -> Cells:
    """Every measured record of the runs with figures and no error, as a cell; bounded."""
    if len(dirs) > MAX_FOLDERS:
        raise SanlabError(f"--runs: {len(dirs):,} run folders; at most {MAX_FOLDERS} are read at once")
    documents, total = [], 0
    for folder in dirs:  # stop at the first file past the cap, not after reading them all
        documents.append((folder / "results.json", _records(folder / "results.json")))
        total += len(documents[-1][1])
        if total > MAX_RECORDS:
            raise SanlabError(f"--runs: {total:,} records or more in all; at most {MAX_RECORDS:,} are read")
    say(f"reading {total:,} records from {len(dirs)} run folder(s)")
    found = Cells([], [])
    for path, records in documents:
        for index, record in enumerate(records):
            if record.get("error") or record.get("iops") in (None, 0) or record.get("verify") == "fail":
                found.skipped += 1
                continue
            cell = _cell(record, path, index)
            where = f"{path}: results[{index}]"
            if cell.mode != "measured":
                raise SanlabError(
                    f"{where}: mode {cell.mode!r}: only measured records (sanlab run on real hosts) "
                    "calibrate a machine; emulated figures are a software VM's speed"
                )
            found.rows.append(_measured(cell))
            found.described.append(
                Described(where, cell.fabric, cell.link_gbps, cell.mtu, cell.transport,
                          cell.target_stack, cell.machine, cell.backend)
            )  # fmt: skip
    if not found.rows:
        raise SanlabError(f"no usable records in {', '.join(str(d) for d in dirs)} (all failed or empty)")
    if len(found.rows) > MAX_CELLS:
        raise SanlabError(f"--runs: {len(found.rows):,} usable records; at most {MAX_CELLS} are fitted")
    return found


def _records(path: Path) -> list[dict[str, Any]]:
    """The records of one results.json, read in bounded time and memory."""
    document = parse_json(read_bounded(path, MAX_RESULTS_BYTES, "--runs"), str(path))
    records = document.get("results") if isinstance(document, dict) else None
    if not isinstance(records, list):
        raise SanlabError(f'{path}: not a sanlab run\'s results (no "results" list)')
    if len(records) > MAX_RECORDS:
        raise SanlabError(f"{path}: holds {len(records):,} records; at most {MAX_RECORDS:,} are read")
    for index, record in enumerate(records):
        if not isinstance(record, dict):
            raise SanlabError(f"{path}: results[{index}] is not a record (an object)")
    return records


def _cell(record: dict[str, Any], path: Path, index: int) -> RunCell:
    try:
        return RunCell.model_validate(record)
    except ValidationError as exc:
        raise first_problem(exc, str(path), RunCell, at=("results", index)) from None


def _measured(cell: RunCell) -> Measured:
    nic = cell.machine.initiator.nic if cell.machine and cell.machine.initiator else None
    link = cell.link_gbps or (nic.speed_gbps if nic else None) or 100.0
    point = Point(
        transport=cell.transport,
        fabric=cell.fabric,
        link_gbps=float(link),
        rw=cell.rw,
        bs=cell.bs,
        iodepth=cell.iodepth,
        numjobs=cell.numjobs,
        mtu=cell.mtu,
        target_stack=cell.target_stack,
        backend={"file": "ramdisk", "block": "nvme"}.get(cell.backend.kind, cell.backend.kind)
        if cell.backend
        else None,
    )
    return Measured(point, cell.iops, cell.bw_mibps or 0.0, cell.lat_mean_us, None)


def starting_profile(base: str, name: str, cells: Cells) -> tuple[dict[str, Any], list[str]]:
    """The machine the records describe, with the base's unpinned costs, as one self-contained
    document; the parameters to fit; and a warning per fact the records left out."""
    lender = load_profile(base)
    parts, warnings = machine_parts(cells.described, lender)
    raw = lender.model_dump(mode="json") | parts | {"name": name}
    try:
        machine = Profile.model_validate(raw)
    except ValidationError as exc:
        raise first_problem(
            exc, "the machine the records describe is not one a profile can hold", Profile
        ) from None
    fit: dict[str, list[float]] = {}
    for row in cells.rows:
        p = row.point
        stack = p.target_stack or default_stack(machine, p.transport)
        key = f"{stack}/{p.transport}"
        raw["costs"].setdefault(key, stack_cost(lender, stack, p.transport).model_dump(mode="json"))
        fit[f"costs.{key}.initiator_kcycles_per_io"] = list(STACK_RANGE)
        fit[f"costs.{key}.target_kcycles_per_io"] = list(STACK_RANGE)
        nic = machine.nic_for(p.fabric, p.link_gbps).name
        fit[f"nics.{nic}.one_way_us"] = list(ONE_WAY_RANGE)
        fit[f"nics.{nic}.host_kcycles_per_packet"] = list(PER_PACKET_RANGE)
        backend = p.backend or machine.default_backend
        if machine.backends[backend].kind == "nvme":
            side = "read" if "read" in p.rw else "write"
            fit[f"backends.{backend}.{side}_latency_us"] = list(DEVICE_LATENCY_RANGE)
            fit[f"backends.{backend}.{side}_gbytes_per_s"] = list(DEVICE_RATE_RANGE)
    for cost in raw["costs"].values():  # the machine's own costs now, fitted here: no stacks' CPI moves them
        cost.update(initiator_family=None, target_family=None)
    # A cost the base profile sets to zero lives elsewhere in the model (the stack
    # charges it on another side, say): it stays zero rather than be invented.
    raw["calibration"] = {"fit": {n: bounds for n, bounds in fit.items() if get_param(raw, n) > 0}}
    return raw, warnings


@dataclass
class Calibrated:
    """A fit of the user's runs, before it is written: what it found and how well it fits."""

    name: str
    base: str
    result: Fit
    rows: list[Measured]
    raw: dict[str, Any]
    cells: list[CellError]
    warnings: list[str] = field(default_factory=list)

    @property
    def missed(self) -> list[CellError]:
        """The cells the fit misses by more than ``POOR_FIT``, worst first."""
        bad = [c for c in self.cells if abs(c.iops_error) > POOR_FIT]
        return sorted(bad, key=lambda c: -abs(c.iops_error))

    def likely_missing(self) -> str:
        """The fact the records most likely leave out, from what they lack and where the misses are."""
        unstated = [m.group(1) for w in self.warnings for m in [re.search(r"(\S+) missing", w)] if m]
        if unstated:
            return "the records' " + ", ".join(dict.fromkeys(unstated))
        missed = self.missed
        # Reads too slow and writes too fast at one I/O in flight (or the reverse): a fixed
        # latency that differs by direction, which is a device's, not a network's or a CPU's.
        seen = {("read" in c.row.point.rw, c.iops_error > 0) for c in missed if c.bottleneck == "latency"}
        split = len({fast for _, fast in seen}) == 2 and len({read for read, _ in seen}) == 2
        split = split and len({read == fast for read, fast in seen}) == 1
        where = [c.bottleneck for c in missed]
        if split or any(b in ("device", "backend") for b in where):
            return "the backend device (is the record's backend the device that served the I/O?)"
        if sum(b.endswith("cpu") for b in where) > len(where) / 2:
            return "the hosts' cores or clock (a CPU limit, power capping, SMT)"
        if any(b.startswith("link") for b in where):
            return "the link's speed or MTU"
        return "a fact no record states (sessions, a switch, interrupt coalescing, offloads)"


def calibrate_runs(
    dirs: list[Path], name: str, base: str | None = None, seed: int = 1, say: Say = lambda m: None
) -> Calibrated:
    """Fit a profile called ``name`` to the runs in ``dirs``, scored on its own cells; nothing written."""
    if name in profile_names(shipped_only=True):
        raise SanlabError(f"--name {name}: a shipped profile has that name; choose another")
    lender = base or DEFAULT_PROFILE
    cells = read_cells(unique_folders(dirs, say), say)
    raw, warnings = starting_profile(lender, name, cells)
    for warning in warnings:
        say(f"warning: {warning}")
    rows = [dataclasses.replace(r, point=dataclasses.replace(r.point, profile=name)) for r in cells.rows]
    say(f"fitting {len(raw['calibration']['fit'])} parameters to {len(rows)} cells")
    result = solve_by_simulation(profile_task(raw, rows), seed, say=say)
    say("scoring the fit on its own cells (simulated)")
    scored = evaluate(result.profile, rows, seed)
    return Calibrated(name, lender, result, rows, raw, scored, warnings)


def write_profile(done: Calibrated, dirs: list[Path], accept_poor_fit: bool = False) -> Path:
    """The fitted profile, self-contained, in the user's profile folder; a poor fit only if accepted."""
    missed = done.missed
    if missed and not accept_poor_fit:
        labels = ", ".join(f"{c.row.label} {100 * c.iops_error:+.0f}%" for c in missed[:3])
        more = f" and {len(missed) - 3} more" if len(missed) > 3 else ""
        raise SanlabError(
            f"not written: the fit misses {len(missed)} of its own cells by more than "
            f"{100 * POOR_FIT:.0f}% ({labels}{more}); likely missing: {done.likely_missing()}; "
            "--accept-poor-fit writes it anyway"
        )
    document = copy.deepcopy(done.raw)
    for param, value in done.result.params.items():
        set_param(document, param, value)
    document["description"] = f"fitted by 'sanlab calibrate --runs' from {len(done.rows)} cells"
    document["calibration"] = {
        "runs": [str(d) for d in dirs],
        "base": done.base,
        "written": datetime.date.today().isoformat(),
        "intervals_95": {k: [round(lo, 4), round(hi, 4)] for k, (lo, hi) in done.result.intervals.items()},
        "unconstrained": done.result.unconstrained,
        "worst_cell_error_pct": round(100 * max(abs(c.iops_error) for c in done.cells), 2),
    }
    if missed:
        document["calibration"]["poor_fit"] = {c.row.label: round(100 * c.iops_error, 1) for c in missed}
        document["description"] += f"; a POOR FIT, accepted: {len(missed)} cells missed by over 10%"
    # The profile folder's manifest says which profiles sanlab wrote: only those are replaced.
    folder = OutputFolder.open(user_profile_dir(), "profile folder")
    path = folder.write_text(f"{done.name}.yaml", yaml.safe_dump(document, sort_keys=False, width=100))
    clear_cache()
    return path


def summary(done: Calibrated, path: Path | None) -> dict[str, Any]:
    """``{"profile", "parameters", "cells", "iops_mape_pct", ...}``: each parameter with its value,
    95 % interval and whether the cells pinned it; each cell with its fit error."""
    result = done.result
    error = mape([c.iops_error for c in done.cells])
    return {
        "profile": str(path) if path else None,
        "base": done.base,
        "warnings": done.warnings,
        "parameters": {
            param: {
                "value": value,
                "interval_95": list(result.intervals[param]),
                "pinned": param not in result.unpinned,
            }
            for param, value in result.params.items()
        },
        "cells": [
            {
                "cell": c.row.label,
                "measured_iops": c.row.iops,
                "model_iops": round(c.iops, 1),
                "error_pct": round(100 * c.iops_error, 2),
                "bottleneck": c.bottleneck,
            }
            for c in done.cells
        ],
        "iops_mape_pct": round(error, 2) if error is not None else None,
        "fitted_cells": len(done.rows),
        "poor_fit": [c.row.label for c in done.missed],
    }
