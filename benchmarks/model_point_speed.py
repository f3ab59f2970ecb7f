"""How long one `sanlab model` point and one `sanlab calibrate` take (issue #46: < 1 s and < 2 min).

Each is run as a fresh process (interpreter start and imports included), and
the CPU time the process spent is read beside the wall time: on a machine
shared with other work the wall time stretches while the CPU time does not,
so both are printed, with the load average before and after.  The points
are the heaviest the issue names: 48 jobs at QD 16 of 512 B NVMe/RDMA reads
(768 I/Os in flight, bound by the NIC's messages), 16 NVMe/TCP jobs at QD 32
on 8 cores, and 64 jobs at QD 64 from four initiators.  The calibration's
cross-validation runs in one process per core (its CPU time is counted too).

    python benchmarks/model_point_speed.py [--repeat 3] [--no-calibrate]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SANLAB = [sys.executable, "-m", "sanlab"]
POINTS = {
    "nvme-rdma 512 B, 48 jobs QD 16": [
        "model", "--profile", "mellanox-nvmeof-2017", "--transport", "nvme-rdma", "--fabric", "roce",
        "--link-gbps", "100", "--rw", "randread", "--bs", "512", "--iodepth", "16", "--numjobs", "48",
    ],
    "nvme-tcp 4 KiB, 16 jobs QD 32, 8 cores": [
        "model", "--transport", "nvme-tcp", "--fabric", "eth", "--link-gbps", "100", "--rw", "randread",
        "--bs", "4k", "--iodepth", "32", "--numjobs", "16", "--cores", "8",
    ],
    "iser 4 KiB, 64 jobs QD 64, 4 initiators": [
        "model", "--transport", "iser", "--fabric", "roce", "--link-gbps", "100", "--rw", "randread",
        "--bs", "4k", "--iodepth", "64", "--numjobs", "64", "--initiators", "4",
    ],
}  # fmt: skip


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=REPO)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-calibrate", action="store_true")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    start = [timed([*SANLAB, "--version"]) for _ in range(args.repeat)]
    imports = statistics.median(w for w, _ in start)
    print(f"interpreter and imports (sanlab --version): median {imports:.2f} s wall")
    for label, argv in POINTS.items():
        runs = [timed([*SANLAB, *argv]) for _ in range(args.repeat)]
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"sanlab model, {label}: median {wall:.2f} s wall, {cpu:.2f} s CPU")
    if not args.no_calibrate:
        wall, cpu = timed([*SANLAB, "calibrate"])
        print(f"sanlab calibrate (cross-validation included): {wall:.1f} s wall, {cpu:.1f} s CPU")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
