"""Is `sanlab model scenarios/zeta-2016.yaml` faster than a plain SimPy loop?

Issue 5's speed goal, shown as a benchmark rather than a timed test: both
are run as fresh processes (interpreter start and imports included) several
times, and the medians are compared.

    python benchmarks/model_speed.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=REPO)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    model = [sys.executable, "-m", "sanlab", "model", "scenarios/zeta-2016.yaml", "--json"]
    baseline = [sys.executable, str(HERE / "simpy_baseline.py")]
    model_times = [timed(model) for _ in range(args.repeat)]
    base_times = [timed(baseline) for _ in range(args.repeat)]
    m, b = statistics.median(model_times), statistics.median(base_times)
    model_runs = ", ".join(f"{t:.2f}" for t in model_times)
    base_runs = ", ".join(f"{t:.2f}" for t in base_times)
    print(f"sanlab model zeta-2016 (30 points): median {m:.2f} s  (runs: {model_runs})")
    print(f"plain SimPy, 200,000 I/Os, 2 stages: median {b:.2f} s  (runs: {base_runs})")
    print(f"ratio model/baseline: {m / b:.2f} ({'faster' if m < b else 'SLOWER'})")


if __name__ == "__main__":
    main()
