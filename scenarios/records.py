"""The one result record that emulation and projection both produce.

An emulated fio run and a model projection of the same point come out as the
same shape, so they can be set side by side, plotted together and compared
cell by cell.  ``mode`` tells them apart and must never be blurred: emulated
figures are the speed of a software-emulated VM, not of hardware.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict


class ResultRecord(BaseModel):
    """One measured or projected point of a workload matrix."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["emulated", "projected"]
    transport: str
    fabric: str
    rdma_driver: str | None = None
    target_stack: str
    link_gbps: float | None = None
    mtu: int
    rw: str
    bs: int
    iodepth: int
    numjobs: int
    iops: float | None = None
    bw_mibps: float | None = None
    lat_mean_us: float | None = None
    lat_p99_us: float | None = None
    cpu_target_pct: float | None = None
    cpu_initiator_pct: float | None = None
    verify: Literal["pass", "fail", "off"] = "off"
    # Projection-only figures (None for emulation).
    profile: str | None = None
    wire_gbps: float | None = None
    bottleneck: str | None = None
    bound: float | None = None  # the analytic wire limit, IOPS
    iops_ci95: tuple[float, float] | None = None
    seed: int | None = None
    # Set when a matrix cell failed; the run goes on and records why.
    error: str | None = None
    # What went wrong on the way but was recovered from (a stalled link that
    # was restarted and the target run again): a passing cell can carry one.
    note: str | None = None


def results_document(records: list[ResultRecord]) -> dict[str, list[dict[str, object]]]:
    """The on-disk and ``--json`` form: ``{"results": [records]}``."""
    return {"results": [r.model_dump(mode="json") for r in records]}


def write_results(records: list[ResultRecord], path: Path) -> None:
    """Write results atomically: a crash never leaves a half-written results.json."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".results-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(results_document(records), handle, indent=2)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
