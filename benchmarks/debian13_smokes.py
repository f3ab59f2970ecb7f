"""Does the Debian 13 guest's kernel crash on this QEMU?  Run the smoke and count.

Under QEMU 7.2's TCG (Debian 12's) the Debian 13 guest (Linux 6.12.117)
panicked in 6 of 40 runs of the smoke scenario, always with rxe at work,
and every oops saved CPU flags no x86-64 CPU can hold: the emulator, not
the kernel, went wrong (emulator/cpuflags.py, targets/README.md).  This
benchmark repeats the count on the QEMU found on $PATH: it runs
``scenarios/smoke.yaml`` on ``guest: debian-13`` RUNS times under each CPU
model given ($SANLAB_TCG_CPU; default max), PARALLEL runs at a time (CI
runs its VM tests two at a time), and prints, per model, how many runs
passed every point with every block verified, each oops a run ended in,
and each guest whose flags were corrupted when its run ended.

    python benchmarks/debian13_smokes.py RUNS [PARALLEL] [MODEL ...]
    python benchmarks/debian13_smokes.py 14 2               # about 50 min under TCG

Each run's output folder is kept under runs/debian13-smokes-TIME/.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import yaml

from sanlab.emulator.qemu import TCG_CPU, qemu_binary, qemu_version

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "runs" / time.strftime("debian13-smokes-%Y%m%d-%H%M%S")  # runs/ is sanlab run's own
GUEST = "debian-13"
RUN_TIMEOUT_S = 1800


@dataclass(frozen=True)
class Outcome:
    """One smoke run: whether every point passed verified, and the oops that ended it, if any."""

    model: str
    seconds: float
    passed: bool
    oops: str | None
    corrupted: tuple[str, ...] = ()  # the end-of-run warnings of guests with impossible flags


def smoke_file() -> Path:
    data = yaml.safe_load((REPO / "scenarios" / "smoke.yaml").read_text())
    data["guest"] = GUEST
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "smoke-debian-13.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run_once(scenario: Path, model: str, n: int) -> Outcome:
    out = OUT / f"{model.replace(',', '_')}-{n}"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "sanlab", "run", str(scenario), "--out", str(out), "--json"],
        env=dict(os.environ, **{TCG_CPU: model}),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        cwd=REPO,
    )
    seconds = time.monotonic() - started
    corrupted = tuple(line for line in done.stderr.splitlines() if "no x86-64 CPU can set" in line)
    try:
        records = json.loads((out / "results.json").read_text())["results"]
    except (OSError, ValueError, KeyError):
        return Outcome(model, seconds, False, "no results.json", corrupted)
    passed = bool(records) and all(r["error"] is None and r["verify"] == "pass" for r in records)
    oopses = [r["error"] for r in records if r["error"] and "panicked" in r["error"]]
    oops = oopses[0].split("its kernel panicked: ", 1)[-1].split(";")[0] if oopses else None
    return Outcome(model, seconds, passed, oops, corrupted)


def report(outcomes: list[Outcome]) -> None:
    for model in dict.fromkeys(o.model for o in outcomes):
        mine = [o for o in outcomes if o.model == model]
        passed = sum(o.passed for o in mine)
        times = sorted(o.seconds for o in mine)
        span = f"{times[0]:.0f}-{times[-1]:.0f} s a run"
        print(f"-cpu {model}: {passed} of {len(mine)} runs passed every point ({span})")
        for oops, count in Counter(o.oops for o in mine if o.oops).items():
            print(f"  {count} x kernel panic: {oops}")
        for o in mine:
            if not o.passed and not o.oops:
                print("  a failed run without a panic: see its results.json")
            for line in o.corrupted:
                print(f"  {line}")


def main(argv: list[str]) -> int:
    runs = int(argv[0]) if argv else 4
    parallel = int(argv[1]) if len(argv) > 1 else 2
    models = argv[2:] or ["max"]
    scenario = smoke_file()
    version = qemu_version(qemu_binary())
    print(f"QEMU {'.'.join(map(str, version)) if version else '(version unknown)'}: {runs} runs a model")
    jobs = [(model, n) for model in models for n in range(1, runs + 1)]
    with ThreadPoolExecutor(parallel) as pool:
        outcomes = list(pool.map(lambda job: run_once(scenario, *job), jobs))
    report(outcomes)
    return 0 if all(o.passed for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
