"""Fast start: a guest restored from a booted snapshot against one booted cold, and what
that buys a lab, lab 1's path and the smoke run (emulator/snapshots.py).

Every figure is wall time of sanlab's own commands as a user types them, on
this machine: emulation speed, not hardware speed.  Each case runs with
snapshots (the default; the snapshot is saved first, untimed) and with
``SANLAB_SNAPSHOTS=off``, ``--repeat`` times; the median and the range
are printed, as a Markdown table for emulator/README.md.

    python benchmarks/fast_start.py [--repeat 3] [--cases pair-rxe pair-siw lab1 smoke]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

SANLAB = str(Path(sys.executable).with_name("sanlab"))
REPO = Path(__file__).resolve().parent.parent
READY = re.compile(r"^\s+(\S+): (restored|booted), ready in ([\d.]+) s", re.M)


def sanlab(*argv: str, snapshots: bool) -> tuple[float, str]:
    env = os.environ | {"SANLAB_SNAPSHOTS": "on" if snapshots else "off"}
    start = time.perf_counter()
    done = subprocess.run([SANLAB, *argv], env=env, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"sanlab {' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, done.stdout + done.stderr


def lab_up_down(scenario: str) -> Callable[[bool], dict[str, float]]:
    """`lab up` to ready (links configured, RDMA device active), then `lab down`, untimed."""

    def run(snapshots: bool) -> dict[str, float]:
        name = f"bench-{Path(scenario).stem}"
        up, out = sanlab("lab", "up", scenario, "--name", name, snapshots=snapshots)
        try:
            check = "rdma link show | grep -q ACTIVE || ip -br link show fabric | grep -q UP"
            sanlab("lab", "exec", name, "initiator", "--", "sh", "-c", check, snapshots=snapshots)
        finally:
            sanlab("lab", "down", name, snapshots=snapshots)
        guests = [float(seconds) for _host, _how, seconds in READY.findall(out)]
        return {"lab up": up, "guest agent-ready": max(guests)}

    return run


def lab1(snapshots: bool) -> dict[str, float]:
    """Lab 1's commands as its handout (docs/labs/iscsi-wire.md) gives them, typing aside."""
    name = "iscsi-wire"
    start = time.perf_counter()
    sanlab("lab", "up", "scenarios/labs/iscsi-wire.yaml", snapshots=snapshots)
    try:
        sanlab("lab", "export", name, "iscsi", snapshots=snapshots)
        sanlab("lab", "connect", name, "iscsi", snapshots=snapshots)
        read = "dd if=/dev/sda of=/dev/null bs=4k skip=1000 count=1 iflag=direct"
        sanlab("lab", "exec", name, "initiator", "--", *read.split(), snapshots=snapshots)
    finally:
        sanlab("lab", "down", name, snapshots=snapshots)
    return {"lab 1 path (up, export, connect, one read, down)": time.perf_counter() - start}


def smoke(snapshots: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as out:
        seconds, _ = sanlab("run", "scenarios/smoke.yaml", "--out", f"{out}/smoke", snapshots=snapshots)
    return {"smoke run": seconds}


CASES: dict[str, Callable[[bool], dict[str, float]]] = {
    "pair-rxe": lab_up_down("scenarios/pair-rxe.yaml"),
    "pair-siw": lab_up_down("scenarios/pair-siw.yaml"),
    "lab1": lab1,
    "smoke": smoke,
}


def measure(case: str, repeat: int) -> dict[tuple[str, bool], list[float]]:
    CASES[case](True)  # saves the snapshots this case needs; untimed
    figures: dict[tuple[str, bool], list[float]] = {}
    for _ in range(repeat):
        for snapshots in (True, False):
            for what, seconds in CASES[case](snapshots).items():
                figures.setdefault((f"{case}: {what}", snapshots), []).append(seconds)
    return figures


def cell(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} s ({min(values):.1f}-{max(values):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), default=list(CASES))
    args = parser.parse_args()
    os.chdir(REPO)
    figures: dict[tuple[str, bool], list[float]] = {}
    for case in args.cases:
        figures |= measure(case, args.repeat)
    print(f"| {os.cpu_count()} cores, median (range) of {args.repeat} | from a snapshot | cold boot |")
    print("|---|---|---|")
    for what in dict.fromkeys(what for what, _ in figures):
        print(f"| {what} | {cell(figures[(what, True)])} | {cell(figures[(what, False)])} |")


if __name__ == "__main__":
    main()
