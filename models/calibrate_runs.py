"""A profile for the user's own machines, fitted to their ``sanlab run`` records.

The published tables calibrate the shipped profiles; a user with two
servers calibrates one of their own.  Their ``results.json`` records (real
or emulated) become measured cells; a base profile gives the parts the
records cannot describe (NIC, PCIe, devices); the parameters the records
can pin - each stack's CPU cost per I/O on each side, the application's
cost, the NIC's fixed latency and per-packet cost - are fitted by the same
least squares as ``sanlab calibrate``.  Each parameter gets a 95 %
interval from the fit's Jacobian; one the cells do not constrain is said
to be so, with the whole physical range as its interval.

The profile is written, self-contained, to the user's profile folder
(``$SANLAB_PROFILES``, else ``$XDG_DATA_HOME/sanlab/profiles``, else
``~/.local/share/sanlab/profiles``), where ``sanlab model --profile NAME``
finds it.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import json
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sanlab.models.calibrate import Fit, evaluate, profile_task
from sanlab.models.calibrate_sim import solve_by_simulation
from sanlab.models.metrics import mape
from sanlab.models.network import Point, default_stack
from sanlab.models.params import get_param, set_param
from sanlab.models.profile import (
    Profile,
    clear_cache,
    load_profile,
    profile_names,
    stack_cost,
    user_profile_dir,
)
from sanlab.models.published import Measured
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.files import read_bounded
from sanlab.scenarios.schema import MAX_IODEPTH, MAX_NUMJOBS, BlockSize, Fabric, ReadWrite, Stack, Transport

# Physical ranges for what the records can pin (kcycles per I/O, µs, kcycles per packet).
STACK_RANGE = (0.2, 500.0)
ONE_WAY_RANGE = (0.2, 20.0)
PER_PACKET_RANGE = (0.05, 20.0)


# A run's results.json: a few thousand records at most; 64 MiB is far past any real one.
MAX_RESULTS_BYTES = 64 << 20
MAX_RECORDS = 100_000
Finite = Annotated[float, Field(allow_inf_nan=False)]


class RunCell(BaseModel):
    """The fields of one run record that a fit reads, each checked against what a run can
    measure: a NaN, a negative rate or a 1e300 IOPS is refused, named, never fitted."""

    model_config = ConfigDict(extra="ignore", strict=False)

    transport: Transport
    fabric: Fabric
    link_gbps: Annotated[Finite, Field(gt=0, le=800)] | None = None
    rw: ReadWrite
    bs: BlockSize
    iodepth: Annotated[int, Field(ge=1, le=MAX_IODEPTH)]
    numjobs: Annotated[int, Field(ge=1, le=MAX_NUMJOBS)]
    iops: Annotated[Finite, Field(gt=0, le=1e9)]
    bw_mibps: Annotated[Finite, Field(ge=0, le=1e7)] | None = None
    lat_mean_us: Annotated[Finite, Field(gt=0, le=1e8)] | None = None
    mtu: Annotated[int, Field(ge=576, le=9000)] | None = None
    target_stack: Stack | None = None


def rows_from_runs(dirs: list[Path], profile: Profile) -> list[Measured]:
    """Every record of the runs with figures and no error, as a measured cell."""
    rows: list[Measured] = []
    for folder in dirs:
        path = folder / "results.json"
        for index, record in enumerate(_records(path)):
            if record.get("error") or record.get("iops") in (None, 0) or record.get("verify") == "fail":
                continue
            rows.append(_measured(_cell(record, path, index), profile))
    if not rows:
        raise SanlabError(f"no usable records in {', '.join(str(d) for d in dirs)} (all failed or empty)")
    return rows


def _records(path: Path) -> list[dict[str, Any]]:
    """The records of one results.json, read in bounded time and memory."""
    try:
        document = json.loads(read_bounded(path, MAX_RESULTS_BYTES, "--runs"))
    except ValueError as exc:
        raise SanlabError(f"{path}: not valid JSON ({exc})") from None
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
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        value = repr(error.get("input"))[:40]
        raise SanlabError(f"{path}: results[{index}].{where} = {value}: {error['msg'].lower()}") from None


def _measured(cell: RunCell, profile: Profile) -> Measured:
    link = cell.link_gbps or profile.nic_for(cell.fabric, 100.0).link_gbps[0]
    point = Point(
        transport=cell.transport,
        fabric=cell.fabric,
        link_gbps=float(link),
        rw=cell.rw,
        bs=cell.bs,
        iodepth=cell.iodepth,
        numjobs=cell.numjobs,
        profile=profile.name,
        mtu=cell.mtu,
        target_stack=cell.target_stack,
    )
    return Measured(point, cell.iops, cell.bw_mibps or 0.0, cell.lat_mean_us, None)


def starting_profile(base: str, name: str, rows: list[Measured]) -> dict[str, Any]:
    """The base profile resolved into one self-contained document, with the costs of
    every stack the records use made its own, and the parameters to fit."""
    profile = load_profile(base)
    raw = profile.model_dump(mode="json")
    raw["name"] = name
    # The application's cost is the stacks' (fitted to the published tables)
    # and is not refitted: on any initiator it only ever adds to each
    # transport's own cost, so the records could pin the sums, never the parts.
    fit: dict[str, list[float]] = {}
    for row in rows:
        p = row.point
        stack = p.target_stack or default_stack(profile, p.transport)
        key = f"{stack}/{p.transport}"
        raw["costs"].setdefault(key, stack_cost(profile, stack, p.transport).model_dump(mode="json"))
        fit[f"costs.{key}.initiator_kcycles_per_io"] = list(STACK_RANGE)
        fit[f"costs.{key}.target_kcycles_per_io"] = list(STACK_RANGE)
        nic = profile.nic_for(p.fabric, p.link_gbps).name
        fit[f"nics.{nic}.one_way_us"] = list(ONE_WAY_RANGE)
        fit[f"nics.{nic}.host_kcycles_per_packet"] = list(PER_PACKET_RANGE)
    # A cost the base profile sets to zero lives elsewhere in the model (the stack
    # charges it on another side, say): it stays zero rather than be invented.
    fit = {name: bounds for name, bounds in fit.items() if get_param(raw, name) > 0}
    raw["calibration"] = {"fit": fit}
    return raw


def calibrate_runs(dirs: list[Path], name: str, base: str) -> tuple[Fit, list[Measured], dict[str, Any]]:
    """Fit a profile called ``name`` to the runs in ``dirs``; nothing is written."""
    if name in profile_names(shipped_only=True):
        raise SanlabError(f"--name {name}: a shipped profile has that name; choose another")
    rows = rows_from_runs(dirs, load_profile(base))
    raw = starting_profile(base, name, rows)
    rows = [dataclasses.replace(r, point=dataclasses.replace(r.point, profile=name)) for r in rows]
    return solve_by_simulation(profile_task(raw, rows)), rows, raw


def write_profile(raw: dict[str, Any], result: Fit, dirs: list[Path], base: str) -> Path:
    """The fitted profile, self-contained, in the user's profile folder."""
    document = copy.deepcopy(raw)
    for param, value in result.params.items():
        _set(document, param, value)
    document["description"] = f"fitted by 'sanlab calibrate --runs' from {len(result.used)} cells on {base}"
    document["calibration"] = {
        "runs": [str(d) for d in dirs],
        "base": base,
        "written": datetime.date.today().isoformat(),
        "intervals_95": {k: [round(lo, 4), round(hi, 4)] for k, (lo, hi) in result.intervals.items()},
        "unconstrained": result.unconstrained,
    }
    folder = user_profile_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{raw['name']}.yaml"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(document, sort_keys=False, width=100))
    tmp.replace(path)
    clear_cache()
    return path


def _set(document: dict[str, Any], param: str, value: float) -> None:
    set_param(document, param, value)


def calibrate_and_write(dirs: list[Path], name: str, base: str, seed: int = 1) -> dict[str, Any]:
    """Fit, write the profile, and score it: ``{"profile", "parameters", "cells", "iops_mape_pct"}``.

    Each parameter has its value, its 95 % interval and whether the cells
    pinned it (not at a bound, and an interval clearly narrower than its
    physical range).
    """
    result, rows, raw = calibrate_runs(dirs, name, base)
    path = write_profile(raw, result, dirs, base)
    cells = evaluate(load_profile(name), rows, seed)
    parameters = {
        param: {
            "value": value,
            "interval_95": list(result.intervals[param]),
            "pinned": param not in result.unpinned,
        }
        for param, value in result.params.items()
    }
    error = mape([c.iops_error for c in cells])
    return {
        "profile": str(path),
        "parameters": parameters,
        "cells": [
            {
                "cell": c.row.label,
                "measured_iops": c.row.iops,
                "model_iops": round(c.iops, 1),
                "error_pct": round(100 * c.iops_error, 2),
                "bottleneck": c.bottleneck,
            }
            for c in cells
        ],
        "iops_mape_pct": round(error, 2) if error is not None else None,
        "fitted_cells": len(rows),
    }
