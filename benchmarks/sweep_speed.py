"""How fast does `sanlab sweep` project points, serially and on a local Dask cluster?

Issue 15's benchmark, not a timed test.  Each run is a fresh process (start,
imports, cluster start-up included) into a fresh folder; it reports points
per second, the solvers `auto` chose, and peak memory: of the sweep process
itself (serial) and of the whole process tree (local cluster, sampled).

    python benchmarks/sweep_speed.py                 # the 10,000-point grid, serial and 2 workers
    python benchmarks/sweep_speed.py --points 1000   # a smaller grid, same shape
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


def grid(points: int) -> dict:
    """A realistic what-if grid: 5 transports x 2 link rates x 5 core counts x 5 depths x 5 job
    counts x 2 sizes x read/write x 2 MTUs = 10,000 points."""
    axes = {
        "transport": ["iscsi", "iser", "srp", "nvme-tcp", "nvme-rdma"],
        "link_gbps": [25, 100],
        "cores": [4, 8, 16, 32, 64],
        "iodepth": [1, 4, 16, 32, 64],
        "numjobs": [1, 2, 4, 8, 16],
        "bs": ["4k", "64k"],
        "rw": ["randread", "randwrite"],
        "mtu": [1500, 9000],
    }
    total = 1
    for values in axes.values():
        total *= len(values)
    while total > points and len(axes["cores"]) > 1:  # shrink the grid evenly for --points
        total //= len(axes["cores"])
        axes["cores"].pop()
        total *= len(axes["cores"])
    return {"axes": axes, "goals": ["iops >= 1e6"], "pareto": {"iops": "max", "cores": "min"}}


def _tree_rss_kib(pid: int) -> int:
    """Resident memory of ``pid`` and all its descendants (any thread's children), from /proc."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            status = (entry / "status").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        rss[int(entry.name)] = next(
            (int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0
        )
    tree, todo = set(), [pid]
    while todo:
        current = todo.pop()
        tree.add(current)
        todo += [child for child, parent in parents.items() if parent == current and child not in tree]
    return sum(rss.get(p, 0) for p in tree)


def run(spec: Path, mode: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as out:
        argv = [sys.executable, "-m", "sanlab", "sweep", str(spec), "--out", out, *mode, "--json"]
        peak = 0
        started = time.perf_counter()
        process = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def sample() -> None:
            nonlocal peak
            while process.poll() is None:
                peak = max(peak, _tree_rss_kib(process.pid))
                time.sleep(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        stdout, stderr = process.communicate()
        seconds = time.perf_counter() - started
        sampler.join()
        if process.returncode != 0:
            raise SystemExit(f"sweep failed: {stderr[-2000:]}")
        summary = json.loads(stdout)
        rows = (Path(out) / "results.csv").read_text()
    return {"seconds": seconds, "summary": summary, "peak_mib": peak / 1024, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "bench.yaml"
        spec.write_text(yaml.safe_dump(grid(args.points)))
        results = {}
        for label, mode in (
            ("serial", ["--serial"]),
            (f"{args.workers} workers", ["--workers", str(args.workers)]),
        ):
            results[label] = run(spec, mode)
            r = results[label]
            s = r["summary"]
            rate = s["points"] / r["seconds"]
            print(
                f"{label:>10}: {s['points']:,} points in {r['seconds']:.1f} s = {rate:.0f} points/s; "
                f"solvers {s['solvers']}; peak memory {r['peak_mib']:.0f} MiB"
            )
        same = len({r["rows"] for r in results.values()}) == 1
        print(f"serial and parallel tables identical: {same}")


if __name__ == "__main__":
    main()
