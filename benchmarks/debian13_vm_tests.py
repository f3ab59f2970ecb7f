"""Every VM test on the Debian 13 guest (Linux 6.12), run and timed.

CI runs the VM tests on Debian 12, the default guest; Debian 13's own
tests (its smoke, restart faults, TLS and authentication) are long tests
that benchmarks/long_vm_tests.py runs.  This runs
all of them with $SANLAB_GUEST=debian-13, which makes every lab boot the
Debian 13 image whatever its scenario says, and prints pytest's verdicts
and times for targets/README.md.

    python benchmarks/debian13_vm_tests.py      # about 20 minutes under TCG on 2 cores
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    started = time.monotonic()
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
        + ["--durations=15", "-p", "no:cacheprovider", *sys.argv[1:]],
        cwd=REPO,
        env=dict(os.environ, SANLAB_GUEST="debian-13"),
    )
    print(
        f"VM tests on debian-13: exit {run.returncode} in {time.monotonic() - started:.0f} s", file=sys.stderr
    )
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
