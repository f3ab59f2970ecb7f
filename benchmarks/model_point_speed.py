"""How long one `sanlab model` point and one `sanlab calibrate` take (issue #46: < 1 s and < 2 min).

Each is run as a fresh process (interpreter start and imports included), and
the CPU time the process spent is read beside the wall time: on a machine
shared with other work the wall time stretches while the CPU time does not,
so both are printed, with the load average before and after each run.

Bytecode: a user's install (pip) holds compiled ``.pyc`` files; this
project's environment sets PYTHONDONTWRITEBYTECODE=1, so there every start
compiles sanlab's own modules again (the third-party packages keep pip's).
``--bytecode`` measures either way, in a private cache (PYTHONPYCACHEPREFIX,
so nothing is written into the tree): ``with``: every module from a cache
warmed by a first run; ``without``: the same cache without sanlab's own
modules, which are then compiled at each start, as in this environment.

The points: the README's example (8 NVMe/RDMA jobs at QD 32), then the
heaviest the issue names: 48 jobs at QD 16 of 512 B NVMe/RDMA reads (768
I/Os in flight, bound by the NIC's messages), 16 NVMe/TCP jobs at QD 32 on 8
cores, 32 NVMe/TCP jobs on 32 cores whose hosts are busier than any fitted row's
(the range then solves contention's two candidates), and 64 jobs at QD 64 from
four initiators.  "start-up" is ``sanlab
model --help``: the interpreter and the verb's imports, as a point has them,
and no projection.  The calibration's cross-validation runs in one process
per core (their CPU time is counted too).

    python benchmarks/model_point_speed.py [--repeat 5] [--bytecode both] [--no-calibrate]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil  # Dask's dependency: each process's CPU while calibrate runs

REPO = Path(__file__).resolve().parent.parent
SANLAB = [sys.executable, "-m", "sanlab"]
IMPORTS = [*SANLAB, "model", "--help"]  # the verb's module imported as a point imports it, nothing projected
POINTS = {
    "README's example: nvme-rdma 4 KiB, 8 jobs QD 32": [
        "model", "--transport", "nvme-rdma", "--fabric", "roce", "--link-gbps", "100", "--rw", "randread",
        "--bs", "4k", "--iodepth", "32", "--numjobs", "8",
    ],
    "nvme-rdma 512 B, 48 jobs QD 16": [
        "model", "--profile", "mellanox-nvmeof-2017", "--transport", "nvme-rdma", "--fabric", "roce",
        "--link-gbps", "100", "--rw", "randread", "--bs", "512", "--iodepth", "16", "--numjobs", "48",
    ],
    "nvme-tcp 4 KiB, 16 jobs QD 32, 8 cores": [
        "model", "--transport", "nvme-tcp", "--fabric", "eth", "--link-gbps", "100", "--rw", "randread",
        "--bs", "4k", "--iodepth", "32", "--numjobs", "16", "--cores", "8",
    ],
    "nvme-tcp 512 B, 32 jobs on 32 cores at 400 Gb/s (past the fitted busy cores)": [
        "model", "--profile", "modern-400g", "--transport", "nvme-tcp", "--fabric", "eth", "--link-gbps",
        "400", "--rw", "randread", "--bs", "512", "--iodepth", "32", "--numjobs", "32", "--cores", "32",
        "--backend", "null",
    ],
    "iser 4 KiB, 64 jobs QD 64, 4 initiators": [
        "model", "--transport", "iser", "--fabric", "roce", "--link-gbps", "100", "--rw", "randread",
        "--bs", "4k", "--iodepth", "64", "--numjobs", "64", "--initiators", "4",
    ],
}  # fmt: skip


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, load average at the start) of one fresh process and its children."""
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    run = subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env
    )
    wall = time.perf_counter() - start
    if run.returncode:  # the ticker's lines go to stderr: shown only when the run failed
        sys.exit(f"{' '.join(argv)}: exit {run.returncode}\n{run.stderr}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), load


def environments(which: str, cache: Path) -> dict[str, dict[str, str]]:
    """The environment of each bytecode mode asked for, its cache warmed (see the docstring)."""
    base = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
    }
    writing = base | {"PYTHONPYCACHEPREFIX": str(cache)}
    for argv in (*POINTS.values(), ["calibrate", "--help"]):  # every module the runs below import
        subprocess.run([*SANLAB, *argv], check=True, stdout=subprocess.DEVNULL, cwd=REPO, env=writing)
    out = {}
    if which in ("with", "both"):
        out["with .pyc"] = writing
    if which in ("without", "both"):
        package = subprocess.run(
            [sys.executable, "-c", "import sanlab; print(sanlab.__file__)"],
            check=True,
            capture_output=True,
            text=True,
            env=base,
        ).stdout.strip()
        own = Path(package).parent  # sanlab's modules, as the import system names them
        stripped = cache.with_name(cache.name + "-without-sanlab")
        shutil.copytree(cache, stripped)
        shutil.rmtree(stripped / own.relative_to(own.anchor), ignore_errors=True)
        out["without sanlab's .pyc"] = base | {
            "PYTHONPYCACHEPREFIX": str(stripped),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    return out


def report(label: str, runs: list[tuple[float, float, float]]) -> None:
    wall = statistics.median(w for w, _, _ in runs)
    cpu = statistics.median(c for _, c, _ in runs)
    loads = f"load {min(r[2] for r in runs):.1f}-{max(r[2] for r in runs):.1f}"
    each = ", ".join(f"{w:.2f}/{c:.2f}" for w, c, _ in runs)
    print(f"  {label}: median {wall:.2f} s wall, {cpu:.2f} s CPU ({loads}; wall/CPU each: {each})")


def calibrate(env: dict[str, str], mode: str) -> None:
    """``sanlab calibrate``'s wall and CPU, and each of its processes' CPU, read from /proc while
    it runs: on idle cores its wall is at least the larger of its CPU over the cores and its
    longest process (the joint fit beside the splits' workers), which a loaded machine cannot show."""
    load = os.getloadavg()[0]
    start = time.perf_counter()
    child = psutil.Popen(
        [*SANLAB, "calibrate"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO, env=env
    )
    seen: dict[int, float] = {}
    while child.poll() is None:
        with contextlib.suppress(psutil.Error):
            for process in [child, *child.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    times = process.cpu_times()
                    seen[process.pid] = times.user + times.system
        time.sleep(0.2)
    wall = time.perf_counter() - start
    if child.returncode:
        sys.exit(f"sanlab calibrate: exit {child.returncode}\n{child.stderr.read() if child.stderr else ''}")
    cores = len(os.sched_getaffinity(0))
    main_cpu = seen.pop(child.pid, 0.0)
    total = main_cpu + sum(seen.values())
    bound = max([total / cores, main_cpu, *seen.values()])
    workers = ", ".join(f"{c:.1f}" for c in seen.values() if c >= 1.0)
    print(f"sanlab calibrate (cross-validation included; {mode}, load {load:.1f} at its start):")
    print(f"  {wall:.1f} s wall, {total:.1f} s CPU (sampled each 0.2 s)")
    print(f"  the joint fit's process {main_cpu:.1f} s CPU, the splits' workers {workers} s")
    print(f"  on {cores} idle cores at least {bound:.0f} s wall (CPU over the cores, or the longest process)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--bytecode", choices=("with", "without", "both"), default="both")
    parser.add_argument("--no-calibrate", action="store_true")
    parser.add_argument("--only-calibrate", action="store_true")
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO)
    dirty = subprocess.run(["git", "status", "--porcelain", "-uno"], capture_output=True, text=True, cwd=REPO)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    state = " (with uncommitted changes in the tree)" if dirty.stdout.strip() else ""
    print(f"{now}, commit {commit.stdout.strip()}{state}, {os.cpu_count()} cores")
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="sanlab-pyc-") as folder:
        envs = environments(args.bytecode, Path(folder) / "cache")
        for mode, env in envs.items():
            if args.only_calibrate:
                break
            print(f"{mode}:")
            report("start-up (sanlab model --help)", [timed(IMPORTS, env) for _ in range(args.repeat)])
            for label, argv in POINTS.items():
                report(f"sanlab model, {label}", [timed([*SANLAB, *argv], env) for _ in range(args.repeat)])
        if not args.no_calibrate:
            mode, env = next(iter(envs.items()))
            calibrate(env, mode)
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
