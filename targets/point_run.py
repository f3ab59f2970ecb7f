"""One point's fio run on a connected target, and the record it becomes.

fio runs in the background, watched for a device that stops completing I/O, with the
point's faults on its timeline; the CPU of both hosts is sampled around it and fio's raw
JSON is kept beside the records.  A point that fails is a record with its error (and, when
the kernel holds tasks stuck, where they wait), never an exception.
"""

from __future__ import annotations

from pathlib import Path

from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.hosts import Say
from sanlab.scenarios.results.records import ResultRecord
from sanlab.scenarios.writing import write_file
from sanlab.targets import faults
from sanlab.targets.fault_measures import FaultedRun
from sanlab.targets.fault_wiring import injector
from sanlab.targets.fio import FioJob, judge, parse, verify_failures
from sanlab.targets.host import Host, kernel_tail
from sanlab.targets.kernel_stacks import stuck_tasks
from sanlab.targets.points import Point, job_for, verify_size
from sanlab.targets.stacks import Wiring

# A verified run is bounded by size, not time: under TCG 16 MiB of 4k blocks
# written and read back takes about 15 s; this is the limit for a stuck one.
VERIFIED_RUN_TIMEOUT = 900.0


def _cpu_sample(host: Host) -> tuple[int, int]:
    fields = host.run("head -n1 /proc/stat", timeout=30).stdout.split()[1:]
    values = [int(v) for v in fields]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return sum(values), idle


def _busy_pct(before: tuple[int, int], after: tuple[int, int]) -> float:
    total, idle = after[0] - before[0], after[1] - before[1]
    return round(100.0 * (total - idle) / total, 2) if total > 0 else 0.0


def point_record(base: dict[str, object], p: Point, **figures: object) -> ResultRecord:
    point = {"rw": p.rw, "bs": p.bs, "iodepth": p.iodepth, "numjobs": p.numjobs}
    return ResultRecord.model_validate(base | point | figures)


def _run_fio(
    p: Point, job: FioJob, wire: Wiring, timeout: float, say: Say, inject: faults.Inject | None = None
) -> FaultedRun:
    """fio in the background, watched for a device that stops completing I/O, with the
    point's faults (if any) on its timeline, applied by ``inject`` (default: this wiring's).
    A run without faults has no windows, so every fault measure of it is None."""
    if not p.faults:
        return faults.run_watched(wire.initiator_host, job.argv(), timeout, job.device)
    inject = inject or injector(p, wire, job.device)
    return faults.run_faulted(
        wire.initiator_host, job.argv(), p.faults, inject, say, timeout, job.device, rw=p.rw
    )


def run_point(
    p: Point,
    device: str,
    wire: Wiring,
    raw_dir: Path,
    base: dict[str, object],
    say: Say = lambda m: None,
    share: int | None = None,
    inject: faults.Inject | None = None,
) -> ResultRecord:
    """One fio run of point ``p`` and its record.

    ``share`` numbers the initiator when several share the target: its
    region of the LUN, and its name in the raw fio file's.  ``inject``
    applies the point's faults (a shared target's initiators share one).
    """
    verify = p.workload.verify != "off"
    if verify_size(p) < p.bs:
        return point_record(
            base, p, error=f"{p.target.size} bytes cannot hold {p.numjobs} jobs of {p.bs}-byte blocks"
        )
    job = job_for(p, device, share or 0)
    initiator, target = wire.initiator_host, wire.target_host
    if verify and "read" in p.rw and (unfilled := _fill(initiator, job)):
        return point_record(base, p, error=unfilled, verify="fail")
    before = _cpu_sample(initiator), _cpu_sample(target)
    timeout = VERIFIED_RUN_TIMEOUT if verify else p.workload.runtime + 600
    result = _run_fio(p, job, wire, timeout, say, inject)
    after = _cpu_sample(initiator), _cpu_sample(target)
    stem = p.label.replace(" ", "_") + (f"_{initiator.name}" if share is not None else "")
    write_file(raw_dir / f"{stem}.json", result.output or "{}", what="fio output")
    try:
        fio = parse(result.output, p.rw)
    except SanlabError as exc:
        detail = f"{exc}; fio stderr: {result.stderr.strip()[-300:]}"
        return point_record(base, p, error=detail, verify="fail" if verify else "off")
    bad_blocks = verify_failures(result.stderr)
    check = judge(job, result.exit_code, fio, bad_blocks)
    problem = check.problem or result.missed()
    if problem and (result.exit_code != 0 or fio.error != 0 or fio.io_errors or bad_blocks):
        problem += _evidence(result, initiator, target)
    return point_record(
        base,
        p,
        iops=round(fio.iops, 1),
        bw_mibps=round(fio.bw_mibps, 3),
        lat_mean_us=round(fio.lat_mean_us, 1),
        lat_p99_us=round(fio.lat_p99_us, 1),
        cpu_initiator_pct=_busy_pct(before[0], after[0]),
        cpu_target_pct=_busy_pct(before[1], after[1]),
        verify=check.verify,
        verified_bytes=check.verified_bytes,
        io_errors=fio.io_errors,
        verify_errors=bad_blocks,
        error=problem,
        **result.figures(multipath=bool(p.target.paths)),
    )


def _fill(initiator: Host, job: FioJob) -> str | None:
    """Write what a verified read checks; why that failed, or None."""
    filled = initiator.run(job.fill_argv(), timeout=VERIFIED_RUN_TIMEOUT)
    return None if filled.ok else f"fio fill failed: {filled.stderr.strip()[-300:]}"


def _evidence(result: FaultedRun, initiator: Host, target: Host) -> str:
    """What a failed fio run's error adds: its stderr, both kernel logs, tasks stuck in a kernel."""
    told = f": {result.stderr.strip()[-300:]}"
    told += "".join(f"\n  {h.name} kernel log: {kernel_tail(h)}" for h in (initiator, target))
    return told + stuck_tasks(initiator, target)


def outcome(record: ResultRecord) -> str:
    if record.error is not None:
        return f"FAILED: {record.error}"
    told = f"{record.iops:.0f} IOPS ({record.mode}), verify {record.verify}"
    if record.throughput_dip_pct is not None:
        told += f", throughput dip {record.throughput_dip_pct:.0f}%"
    if record.failover_s is not None:
        told += f", failed over in {record.failover_s:.2f} s"
    if record.failback_s is not None:
        told += f", all paths back {record.failback_s:.2f} s after the fault"
    elif record.recovery_s is not None:
        told += f", I/O back {record.recovery_s:.2f} s after the fault"
    if record.note:
        told += f"; {record.note}"
    return told


def prefixed(say: Say, name: str) -> Say:
    """``say`` with the target's name in front, for steps deep inside a stack."""
    return lambda message: say(f"{name}: {message}")
