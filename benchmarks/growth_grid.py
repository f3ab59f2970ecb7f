"""Does more of anything ever cost IOPS?  The growth property over a whole grid, not 300 points.

The acceptance property of the model (tests/test_model_properties.py) says
IOPS never falls by more than 2 % when the link rate, the depth, the jobs,
the sessions or the NVMe queues rise.  The test checks it on 300 random
points a run, which once missed a corner for many runs: jobs sharing a
connection at low depth, where sessions cost up to 20 %.  This walks every
transport and fabric over a grid of links, I/O shapes and connection
counts, grows each point along every axis with the test's own ``grown``,
and prints the steps that lose more than 2 %, worst first.  It runs the
analytic solver (MVA), about a minute on one core.

    python benchmarks/growth_grid.py [--limit 25]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_model_properties import LINKS, PAIRS, grown, iops  # noqa: E402

from sanlab.models.core.network import Point  # noqa: E402

AXES = ("link_gbps", "iodepth", "numjobs", "sessions", "queues")
TOLERANCE = 0.98


RWS = ("randread", "randwrite", "read")
SIZES = (4096, 65536, 1 << 20)
DEPTHS = (1, 2, 8, 32)
JOBS = (1, 2, 3, 4, 16)
SESSIONS = (None, 2, 8)


def points() -> list[Point]:
    grid = []
    for (transport, fabric), *shape in itertools.product(PAIRS, LINKS, RWS, SIZES, DEPTHS, JOBS):
        link, rw, bs, depth, jobs = shape
        for sessions in SESSIONS:
            for queues in (None, 2) if transport.startswith("nvme") else (None,):
                point = Point(transport, fabric, link, rw, bs, depth, jobs, sessions=sessions, queues=queues)
                grid.append(point)
    return grid


def losses(grid: list[Point]) -> tuple[int, list[tuple[float, str, Point]]]:
    """Steps checked, and every step that lost more than the tolerance: (change, axis, point)."""
    steps, lost = 0, []
    for point in grid:
        before = iops(point)
        for axis in AXES:
            steps += 1
            after = iops(grown(point, axis))
            if after < TOLERANCE * before:
                lost.append((after / before - 1, axis, point))
    return steps, sorted(lost, key=lambda item: item[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=25, help="worst steps to print")
    args = parser.parse_args()
    started = time.monotonic()
    steps, lost = losses(points())
    print(f"{steps:,} growth steps, {len(lost)} lose more than 2 % ({time.monotonic() - started:.0f} s)")
    for axis, count in Counter(axis for _, axis, _ in lost).most_common():
        print(f"  {axis}: {count}")
    for change, axis, p in lost[: args.limit]:
        where = f"{p.transport}/{p.fabric}/{p.link_gbps:g} {p.rw} {p.bs} QD{p.iodepth} x{p.numjobs}"
        print(f"  {100 * change:+.1f} %  {axis:<9} {where} sessions={p.sessions} queues={p.queues}")
    sys.exit(1 if lost else 0)


if __name__ == "__main__":
    main()
