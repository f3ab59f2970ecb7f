"""How long sanlab takes to answer: `sanlab --version`, and `sanlab model` of one point.

Both are fresh processes, interpreter start and imports included, as a user
types them; the median of several runs is printed beside the goal
(0.3 s and 0.6 s wall on a 2-core machine).  The figures go in docs/concepts.md.

    python benchmarks/startup.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

SANLAB = Path(sys.executable).with_name("sanlab")
POINT = ["model", "--transport", "nvme-rdma", "--fabric", "roce", "--link-gbps", "100"]
POINT += ["--rw", "randread", "--bs", "4k", "--iodepth", "32", "--numjobs", "8"]
CASES = [("sanlab --version", ["--version"], 0.3), ("sanlab model (one point)", POINT, 0.6)]


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([str(SANLAB), *argv], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    for label, argv, goal in CASES:
        timed(argv)  # a first run warms the page cache and writes the bytecode
        runs = [timed(argv) for _ in range(args.repeat)]
        median = statistics.median(runs)
        verdict = "within" if median <= goal else "OVER"
        spread = f"min {min(runs):.2f}, max {max(runs):.2f}"
        print(f"{label:<26} median {median:.2f} s ({spread}); goal {goal} s: {verdict}")


if __name__ == "__main__":
    main()
