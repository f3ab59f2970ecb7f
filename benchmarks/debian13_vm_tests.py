"""Every VM test on the Debian 13 guest (Linux 6.12), run and timed.

CI runs the VM tests on Debian 12, the default guest; Debian 13's own
tests (its smoke, restart faults, TLS and authentication) are long tests
that benchmarks/long_vm_tests.py runs.  This runs
all of them with $SANLAB_GUEST=debian-13, which makes every lab boot the
Debian 13 image whatever its scenario says, and prints pytest's verdicts
and times for docs/measurements/targets.md: each file's verdicts and slowest
test, how each guest started (restored from a snapshot or booted cold, read
from the QEMUs the run started: guest_starts.py), and the snapshots it saved.
Extra arguments go to pytest (test files, to split the run).

    python benchmarks/debian13_vm_tests.py      # about 20 minutes under TCG on 2 cores
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from guest_starts import Watch, summary

from sanlab.emulator.images import image_key
from sanlab.emulator.snapshots import MANIFEST, MANIFEST_BYTES, snapshots_dir
from sanlab.scenarios.reading import load_json

REPO = Path(__file__).resolve().parent.parent
GUEST = "debian-13"


@dataclass
class FileTally:
    """One test file's verdicts and its slowest test."""

    verdicts: Counter[str] = field(default_factory=Counter)
    slowest: tuple[float, str] = (-1.0, "")


def per_file(junit: Path) -> list[str]:
    """Each test file's passed, failed and skipped counts and its slowest test, from the
    JUnit XML pytest wrote for this run."""
    files: dict[str, FileTally] = defaultdict(FileTally)
    for case in ET.parse(junit).getroot().iter("testcase"):
        tally = files[case.get("classname", "?").rsplit(".", 1)[-1]]
        failed = case.find("failure") is not None or case.find("error") is not None
        tally.verdicts[
            "skipped" if case.find("skipped") is not None else "failed" if failed else "passed"
        ] += 1
        tally.slowest = max(tally.slowest, (float(case.get("time", "0")), case.get("name", "?")))
    return [
        f"  {name}: {t.verdicts['passed']} passed, {t.verdicts['failed']} failed, "
        f"{t.verdicts['skipped']} skipped; slowest {t.slowest[1]} {t.slowest[0]:.0f} s"
        for name, t in sorted(files.items())
    ]


def snapshots_saved(since: float) -> list[str]:
    """The Debian 13 snapshots saved during the run: NICs and seconds to save, from their manifests."""
    key, lines = image_key(GUEST), []
    for path in sorted(snapshots_dir().glob(f"*/{MANIFEST}")):
        facts = load_json(path, "snapshot manifest", MANIFEST_BYTES)
        if isinstance(facts, dict) and facts.get("image") == key and float(facts.get("saved", 0)) >= since:
            shape = facts.get("shape") if isinstance(facts.get("shape"), dict) else {}
            lines.append(
                f"  snapshot {facts.get('key')}: {shape.get('nics')} NICs, saved in {facts.get('seconds')} s"
            )
    return lines


def main() -> int:
    started, wall = time.monotonic(), time.time()
    junit = Path(tempfile.mkdtemp(prefix="sanlab-d13-")) / "junit.xml"
    with Watch(os.getpid()) as watch:
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-m",
                "vm and not long",
                "-n",
                "2",
                "--dist",
                "loadfile",
                "-q",
                "-rfEs",
            ]
            + ["--durations=15", "-p", "no:cacheprovider", f"--junitxml={junit}", *sys.argv[1:]],
            cwd=REPO,
            env=dict(os.environ, SANLAB_GUEST=GUEST),
        )
    lines = [f"VM tests on {GUEST}: exit {run.returncode} in {time.monotonic() - started:.0f} s"]
    lines += per_file(junit) if junit.is_file() else ["  (pytest wrote no JUnit XML)"]
    lines += summary(watch.starts()) + snapshots_saved(wall)
    print("\n".join(lines), file=sys.stderr)
    print(f"(pytest's JUnit XML: {junit})", file=sys.stderr)
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
