"""The one result record that emulation and projection both produce.

An emulated fio run and a model projection of the same point come out as the
same shape, so they can be set side by side, plotted together and compared
cell by cell.  ``mode`` tells them apart and must never be blurred: emulated
figures are the speed of a software-emulated VM, not of hardware.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from sanlab.scenarios.files import write_atomically
from sanlab.scenarios.results.outdir import OutputFolder

RESULTS = "results.json"


# A fact a host states in words (a model name, a driver): one line of at most 200 characters.
Text = Annotated[str, Field(max_length=200, pattern=r"^[^\n\r]*$")]


class NicFacts(BaseModel):
    """The NIC on the record's link, as the host reported it (``ethtool -i``, /sys, ``lspci``)."""

    model_config = ConfigDict(extra="forbid")

    model: Text = ""  # e.g. 'Mellanox MT28800 Family [ConnectX-5 Ex]'; a profile's NIC name when projected
    driver: Text = ""
    firmware: Text = ""
    speed_gbps: Annotated[float, Field(gt=0, le=3200, allow_inf_nan=False)] | None = None
    mtu: Annotated[int, Field(ge=68, le=65536)] | None = None
    pcie: Text = ""  # 'x16 8.0 GT/s PCIe' (sysfs current_link_width and _speed)


class HostFacts(BaseModel):
    """What one host of a point was: enough for a model to stand in for it (``lscpu``, ``uname``)."""

    model_config = ConfigDict(extra="forbid")

    cpu_model: Text = ""
    sockets: Annotated[int, Field(ge=1, le=64)] | None = None
    cores: Annotated[int, Field(ge=1, le=65536)] | None = None  # physical cores, all sockets
    threads: Annotated[int, Field(ge=1, le=65536)] | None = None  # logical CPUs, all sockets
    # the clock the cores sustain (lscpu's max MHz, else the current)
    ghz: Annotated[float, Field(gt=0, le=10, allow_inf_nan=False)] | None = None
    core: Text | None = None  # the core design (models/cores.yaml), where the record's maker knows it
    kernel: Text = ""
    nic: NicFacts | None = None


class BackendFacts(BaseModel):
    """The device behind the target: its kind (as the profiles name kinds) and model."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["null", "ramdisk", "nvme", "file", "block"]
    model: Text = ""  # 'null_blk', 'RAM disk', or the drive's model ('nvme list', /sys/block/*/device/model)


class MachineFacts(BaseModel):
    """Both hosts of a point, by role."""

    model_config = ConfigDict(extra="forbid")

    initiator: HostFacts | None = None
    target: HostFacts | None = None


class ResultRecord(BaseModel):
    """One measured or projected point of a workload matrix."""

    model_config = ConfigDict(extra="forbid")

    # emulated: software VMs (function, not speed); measured: real machines
    # over SSH; projected: the model.
    mode: Literal["emulated", "measured", "projected"]
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
    # The host that ran fio (measured and emulated points).
    initiator: str | None = None
    # I/Os fio saw fail, and blocks whose read-back did not match what was
    # written (measured and emulated points; None where fio said nothing).
    io_errors: int | None = None
    verify_errors: int | None = None
    # Seconds from the end of a fault to the first I/O completed after it;
    # None where no fault hit the point.
    recovery_s: float | None = None
    # Multipath: the longest stall of I/O while a path was down, when the
    # I/O carried on over another path before it came back (the failover
    # time); None where no fault hit the point or nothing completed meanwhile.
    failover_s: float | None = None
    # Multipath: seconds from the pulled path's return to every path of the
    # device being in use again (the initiator's own view: NVMe controllers
    # live, dm-multipath paths active); None where no path was pulled or not
    # every path came back within a minute.
    failback_s: float | None = None
    # Under a fault: how far the completion rate fell while the link was out,
    # as a percentage of the rate before it (100: no I/O completed meanwhile).
    throughput_dip_pct: float | None = None
    # Bytes fio read back and checked against their crc32c headers; a
    # ``pass`` means every byte the job covered was among them.
    verified_bytes: int | None = None
    # Projection-only figures (None for emulation).
    profile: str | None = None
    wire_gbps: float | None = None
    bottleneck: str | None = None
    bound: float | None = None  # the analytic wire limit, IOPS
    iops_ci95: tuple[float, float] | None = None
    # 95 % range of IOPS from what the calibration tables leave open (the
    # fitted parameters' posterior) and the model's own error, measured in
    # cross-validation - not from simulation noise.
    iops_range95: tuple[float, float] | None = None
    # The kind of limit that binds the point (link, pcie, nic-message, cpu, device, or latency
    # when none is half busy: models/core/regimes.py), and whether any row the model was fitted to
    # was bound the same way (None: the fit does not say); where none was, the range widens.
    regime: str | None = None
    regime_fitted: bool | None = None
    seed: int | None = None
    # Incast: how many initiators share the target's port.  Set on the
    # aggregate of an emulated point (IOPS and bandwidth are the sum of the
    # initiators' records beside it, CPU % the average) and on projections.
    initiators: int | None = None
    # On real machines: what preflight read of each host (CPU, kernel, tools, every NIC), by role.
    hardware: dict[str, Any] | None = None
    # The machine the point describes, in the one shape runs and projections share (what
    # ``sanlab calibrate --runs`` builds a profile from): measured from the hosts on real
    # machines, the profile's own on a projection.
    machine: MachineFacts | None = None
    backend: BackendFacts | None = None
    # Set when a matrix cell failed; the run goes on and records why.
    error: str | None = None
    # What went wrong on the way but was recovered from (a stalled link that
    # was restarted and the target run again): a passing cell can carry one.
    # On a projection: the edge of the published tables' reach it lies past, if any (models/core/reach.py).
    note: str | None = None
    # A reproducer's point that failed as its kernel bug says, on a kernel the bug lists: the
    # one-line reason (scenarios/results/known_bad.py, the home of the word).  Its error stays.
    # Written only when set: every other record is what it was before reproducers existed.
    known_bad: Text | None = None

    @model_serializer(mode="wrap")
    def _known_bad_only_when_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("known_bad", "") is None:
            del data["known_bad"]
        return data


def _sum(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def aggregate(records: list[ResultRecord]) -> ResultRecord:
    """Several initiators' records of one point, as one: what the shared target served.

    IOPS, bandwidth, bytes and errors add up; mean latency is weighted by
    each initiator's IOPS; p99 is the worst initiator's (a bound, since
    percentiles do not add); CPU % is the average.  It passes only if every
    initiator's run passed, and it fails if any failed.
    """
    first = records[0]
    iops = _sum([r.iops for r in records])
    weighted = _sum([(r.iops or 0) * r.lat_mean_us if r.lat_mean_us is not None else None for r in records])
    verdicts = {r.verify for r in records}
    errors = [f"{r.initiator}: {r.error}" for r in records if r.error]

    def mean(values: list[float | None]) -> float | None:
        total = _sum(values)
        return None if total is None else round(total / len(values), 1)

    return first.model_copy(
        update={
            "initiator": "+".join(r.initiator or "?" for r in records),
            "initiators": len(records),
            "iops": round(iops, 1) if iops is not None else None,
            "bw_mibps": _sum([r.bw_mibps for r in records]),
            "lat_mean_us": round(weighted / iops, 1) if weighted is not None and iops else None,
            "lat_p99_us": max((r.lat_p99_us for r in records if r.lat_p99_us is not None), default=None),
            "cpu_initiator_pct": mean([r.cpu_initiator_pct for r in records]),
            "cpu_target_pct": mean([r.cpu_target_pct for r in records]),
            "verify": "fail" if "fail" in verdicts else "pass" if verdicts == {"pass"} else "off",
            "verified_bytes": _sum([r.verified_bytes for r in records]),
            "io_errors": _sum([r.io_errors for r in records]),
            "verify_errors": _sum([r.verify_errors for r in records]),
            "recovery_s": max((r.recovery_s for r in records if r.recovery_s is not None), default=None),
            "failover_s": max((r.failover_s for r in records if r.failover_s is not None), default=None),
            "failback_s": max((r.failback_s for r in records if r.failback_s is not None), default=None),
            "throughput_dip_pct": max(
                (r.throughput_dip_pct for r in records if r.throughput_dip_pct is not None), default=None
            ),
            "error": "\n".join(errors) or None,
            "note": None,
        }
    )


def results_document(records: list[ResultRecord], run: dict[str, object] | None = None) -> dict[str, object]:
    """The on-disk and ``--json`` form: ``{"run": {...}, "results": [records]}``."""
    document: dict[str, object] = {"run": run} if run is not None else {}
    document["results"] = [r.model_dump(mode="json") for r in records]
    return document


def write_results(records: list[ResultRecord], path: Path, run: dict[str, object] | None = None) -> None:
    """Write results atomically: a crash never leaves a half-written results.json."""
    write_atomically(path, json.dumps(results_document(records, run), indent=2) + "\n")


class RunJournal:
    """A run's results.json, rewritten (atomically) after every point, so none is lost.

    ``run.status`` says how far it got: ``running`` while points are still
    coming, then ``complete``, ``failed`` (the run itself stopped on an
    error) or ``interrupted`` (Ctrl-C or SIGTERM): a reader always knows
    whether the list is whole.  It is written through the run's output
    folder, whose manifest it keeps current: ``settle`` enters what the
    run's other writers (fio, captures, logs) have added since.
    """

    def __init__(
        self,
        folder: OutputFolder,
        scenario: str,
        planned: int,
        settle: Callable[[], None] = lambda: None,
        kept: Sequence[ResultRecord] = (),
    ):
        self.folder, self.settle = folder, settle
        self.path = folder.root / RESULTS
        self.records: list[ResultRecord] = list(kept)
        self.run: dict[str, object] = {
            "scenario": scenario,
            "status": "running",
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "planned_points": planned,
        }
        self._write()

    def add(self, record: ResultRecord) -> None:
        self.records.append(record)
        self._write()

    def drop_last(self, count: int) -> None:
        """Withdraw the last ``count`` records (a target about to be run again replaces them)."""
        if count:
            del self.records[-count:]
            self._write()

    def replace(self, records: Sequence[ResultRecord], **run: object) -> None:
        """The same points, judged afresh (a reproducer's known-bad verdicts), and facts of the run."""
        self.records = list(records)
        self.run.update(run)
        self._write()

    def finish(self, status: Literal["complete", "failed", "interrupted"], detail: str = "") -> None:
        self.run["status"] = status
        self.run["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        if detail:
            self.run["detail"] = detail
        self._write()

    def _write(self) -> None:
        self.folder.write_text(RESULTS, json.dumps(results_document(self.records, self.run), indent=2) + "\n")
        self.settle()
