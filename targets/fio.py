"""fio on the initiator: the command for one matrix point, its JSON read back, and its verdict.

Runs are direct I/O through libaio on the block device the transport gave
us.  A measured run is bounded by time.  A *verified* run is bounded by
size instead: each job writes its own region (``verify_size`` bytes at
``offset_increment``) and then reads every block back and checks its
crc32c header; a read workload first fills the regions with verifiable
data and then reads them, checking each block as it arrives.  A runtime
would cut the read-back short, and a run that checked nothing must never
say ``pass``: the verdict counts the bytes fio actually read back and
checked (``verified_bytes``) against the bytes the job covered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.reading import parse_json
from sanlab.scenarios.sizes import format_size

Verdict = Literal["pass", "fail", "off"]
DEFAULT_VERIFY_SIZE = 16 << 20


# fio's data-direction codes (its completion log's third field).
READ, WRITE = "0", "1"


def directions(rw: str) -> frozenset[str]:
    """fio's data-direction codes of workload ``rw``: both for a mixed one (rw, randrw), else
    the one it names."""
    if rw in ("rw", "readwrite", "randrw"):
        return frozenset({READ, WRITE})
    return frozenset({READ}) if "read" in rw else frozenset({WRITE})


@dataclass(frozen=True)
class FioJob:
    device: str
    rw: str
    bs: int
    iodepth: int
    numjobs: int
    runtime_s: float
    verify: bool
    verify_size: int = DEFAULT_VERIFY_SIZE  # bytes per job, when verifying
    # Under a fault: count failed I/Os and bad blocks and carry on, rather
    # than stop at the first, so the record can say how many there were.
    tolerant: bool = False
    # Where the first job's region starts: initiators sharing one LUN each
    # write their own stretch of it, so none overwrites what another verifies.
    first_offset: int = 0
    # Under faults, a verified job's own I/O is spread over at least this many seconds (fio's
    # rate_iops, in the workload's direction only), so that it still runs when the last fault
    # begins however fast the host: a fault that meets no I/O tests nothing (faults' missed).
    paced_s: float = 0.0

    def _common(self, name: str) -> list[str]:
        return [
            "fio",
            f"--name={name}",
            f"--filename={self.device}",
            "--direct=1",
            "--ioengine=libaio",
            f"--bs={self.bs}",
            # fio would otherwise leave a local-*-verify.state file in the
            # working directory of whoever ran it (a real host's home, say).
            "--verify_state_save=0",
        ]

    def _regions(self) -> list[str]:
        """Each job its own region, so no job overwrites blocks another will verify."""
        start = [f"--offset={self.first_offset}"] if self.first_offset else []
        return start + [f"--size={self.verify_size}", f"--offset_increment={self.verify_size}"]

    def argv(self, name: str = "sanlab") -> list[str]:
        args = self._common(name) + [
            f"--rw={self.rw}",
            f"--iodepth={self.iodepth}",
            f"--numjobs={self.numjobs}",
            "--group_reporting",
            "--output-format=json+",
        ]
        if self.tolerant:
            args.append("--continue_on_error=all")
        if self.verify:
            # Bounded by size, never by runtime: every block written is read back.
            fatal = "--verify_fatal=0" if self.tolerant else "--verify_fatal=1"
            return args + self._regions() + ["--verify=crc32c", "--do_verify=1", fatal, *self._pace()]
        return args + [
            f"--size={self.verify_size}",
            f"--runtime={max(1, round(self.runtime_s))}",
            "--time_based=1",
        ]

    def _pace(self) -> list[str]:
        """fio's cap on each job's rate that spreads its blocks over ``paced_s``: reads, writes
        or both as the workload does them (``rate_iops=READS,WRITES``; an empty side is
        unpaced), so a verified write's read-back runs at full speed."""
        if self.paced_s <= 0:
            return []
        rate = max(1, int(self.covered_bytes / self.numjobs / self.bs / self.paced_s))
        paced = directions(self.rw)
        reads, writes = (str(rate) if code in paced else "" for code in (READ, WRITE))
        return [f"--rate_iops={reads},{writes}"]

    def fill_argv(self) -> list[str]:
        """For a verified read: write each job's region first, with verify headers."""
        return self._common("fill") + [
            "--rw=write",
            "--iodepth=8",
            f"--numjobs={self.numjobs}",
            *self._regions(),
            "--verify=crc32c",
            "--do_verify=0",
            "--output-format=json",
        ]

    @property
    def covered_bytes(self) -> int:
        """What a verified run must read back and check: every job's whole region."""
        usable = self.verify_size - self.verify_size % self.bs
        return usable * self.numjobs


@dataclass(frozen=True)
class FioResult:
    iops: float
    bw_mibps: float
    lat_mean_us: float
    lat_p99_us: float
    error: int
    read_bytes: int
    written_bytes: int
    raw: dict[str, Any]
    io_errors: int = 0  # fio's total_err: I/Os that failed (with continue_on_error, all of them)


def parse(output: str, rw: str) -> FioResult:
    """The figures of a group-reported fio json+ run, for the workload's direction.

    A verified write run also reads everything back; those reads are the
    check, not the workload, so only the direction ``rw`` names is counted
    in IOPS and latency.  Both directions' byte counts are kept: the reads
    of a verified run are what it checked.
    """
    start = output.find("{")
    try:
        doc: dict[str, Any] = parse_json(output[start:], "fio's output") if start >= 0 else {}
        job = doc["jobs"][0]
    except (SanlabError, KeyError, IndexError, TypeError):
        raise SanlabError(f"fio printed no JSON result: {output[:300]!r}") from None
    part = job.get("read" if "read" in rw else "write") or {}
    iops = float(part.get("iops", 0.0))
    pct = part.get("clat_ns", {}).get("percentile", {})
    return FioResult(
        iops=iops,
        bw_mibps=float(part.get("bw", 0.0)) / 1024 if iops > 0 else 0.0,  # KiB/s -> MiB/s
        lat_mean_us=float(part.get("lat_ns", {}).get("mean", 0.0)) / 1000 if iops > 0 else 0.0,
        lat_p99_us=float(pct.get("99.000000", 0.0)) / 1000 if iops > 0 else 0.0,
        error=int(job.get("error", 0)),
        read_bytes=int((job.get("read") or {}).get("io_bytes", 0)),
        written_bytes=int((job.get("write") or {}).get("io_bytes", 0)),
        raw=doc,
        io_errors=int(job.get("total_err", 0)),
    )


# How fio reports a block whose read-back does not match (crc32c mismatch, bad header).
_VERIFY_FAILURE = re.compile(r"verify failed|verify: bad|bad magic header|bad header")


def verify_failures(stderr: str) -> int:
    """Blocks fio found corrupt on read-back, counted from its messages."""
    return sum(1 for line in stderr.splitlines() if _VERIFY_FAILURE.search(line))


@dataclass(frozen=True)
class Check:
    """What a run proved: its verdict, the bytes it checked, and why it is not a pass."""

    verify: Verdict
    verified_bytes: int | None
    problem: str | None


def judge(job: FioJob, exit_code: int, result: FioResult, bad_blocks: int = 0) -> Check:
    """``pass`` only when fio read back and checked every byte the job covered, without error."""
    if exit_code != 0 or result.error != 0 or result.io_errors or bad_blocks:
        problem = f"fio exit {exit_code}, error {result.error}"
        if result.io_errors or bad_blocks:
            problem += f", {result.io_errors} I/O errors, {bad_blocks} blocks failed verification"
        return Check("fail" if job.verify else "off", result.read_bytes if job.verify else None, problem)
    if not job.verify:
        return Check("off", None, None)
    checked, wanted = result.read_bytes, job.covered_bytes
    if "write" in job.rw and result.written_bytes < wanted:
        return Check(
            "fail",
            checked,
            f"fio wrote {format_size(result.written_bytes)} of the {format_size(wanted)} it was to verify",
        )
    if checked < wanted or checked == 0:
        return Check(
            "fail",
            checked,
            f"fio read back and checked {checked} of {wanted} bytes ({format_size(wanted)}): "
            "verification was cut short",
        )
    return Check("pass", checked, None)
