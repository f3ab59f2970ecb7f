"""fio on the initiator: the command for one matrix point, and its JSON read back.

Runs are direct I/O through libaio on the block device the transport gave
us.  With verify, every block carries a crc32c header: a write workload
writes and then reads everything back; a read workload first fills the
range with verifiable data and then reads it.  The raw ``json+`` output is
kept next to the record it becomes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sanlab.scenarios.errors import SanlabError


@dataclass(frozen=True)
class FioJob:
    device: str
    rw: str
    bs: int
    iodepth: int
    numjobs: int
    runtime_s: float
    verify: bool
    size: str = "16m"

    def argv(self, name: str = "sanlab") -> list[str]:
        args = [
            "fio",
            f"--name={name}",
            f"--filename={self.device}",
            "--direct=1",
            "--ioengine=libaio",
            f"--rw={self.rw}",
            f"--bs={self.bs}",
            f"--iodepth={self.iodepth}",
            f"--numjobs={self.numjobs}",
            "--group_reporting",
            "--output-format=json+",
            f"--size={self.size}",
            f"--runtime={max(1, round(self.runtime_s))}",
        ]
        if self.verify:
            # Verify every block written; a time-based run would stop before reading back.
            args += ["--verify=crc32c", "--do_verify=1", "--verify_fatal=1", "--verify_backlog=0"]
        else:
            args += ["--time_based=1"]
        return args

    def fill_argv(self) -> list[str]:
        """For a verified read: write the range first, with verify headers."""
        return [
            "fio",
            "--name=fill",
            f"--filename={self.device}",
            "--direct=1",
            "--ioengine=libaio",
            "--rw=write",
            f"--bs={self.bs}",
            "--iodepth=8",
            f"--size={self.size}",
            "--verify=crc32c",
            "--do_verify=0",
            "--output-format=json",
        ]


@dataclass(frozen=True)
class FioResult:
    iops: float
    bw_mibps: float
    lat_mean_us: float
    lat_p99_us: float
    error: int
    raw: dict[str, Any]


def parse(output: str, rw: str) -> FioResult:
    """The figures of a group-reported fio json+ run, for the workload's direction.

    A verified write run also reads everything back; those reads are the
    check, not the workload, so only the direction ``rw`` names is counted.
    """
    start = output.find("{")
    try:
        doc = json.loads(output[start:])
        job = doc["jobs"][0]
    except (ValueError, KeyError, IndexError):
        raise SanlabError(f"fio printed no JSON result: {output[:300]!r}") from None
    iops = bw = 0.0
    lat_mean = lat_p99 = 0.0
    weight = 0.0
    for direction in ("read",) if "read" in rw else ("write",):
        part = job.get(direction) or {}
        n = float(part.get("iops", 0.0))
        if n <= 0:
            continue
        iops += n
        bw += float(part.get("bw", 0.0)) / 1024  # KiB/s -> MiB/s
        lat = part.get("lat_ns", {})
        lat_mean += n * float(lat.get("mean", 0.0)) / 1000
        pct = part.get("clat_ns", {}).get("percentile", {})
        lat_p99 = max(lat_p99, float(pct.get("99.000000", 0.0)) / 1000)
        weight += n
    return FioResult(
        iops=iops,
        bw_mibps=bw,
        lat_mean_us=lat_mean / weight if weight else 0.0,
        lat_p99_us=lat_p99,
        error=int(job.get("error", 0)),
        raw=doc,
    )
