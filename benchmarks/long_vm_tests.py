"""The VM tests too long for CI's time, run and timed: each names why it is long.

CI runs every VM test but these (``-m "vm and not long"``); they hold the
same assertions and run here, with their times printed for the docs.

    python benchmarks/long_vm_tests.py          # needs the system packages and the guest image

Measured on the 2-core development machine under TCG:
- the reboot of both guests a stall only a reboot clears, per soft-RDMA
  driver: 212 s (siw) and 252 s (rxe) (emulator/README.md);
- the reboot of both guests when one's agent is silent (a wedged kernel),
  per driver: 51-53 s run alone (emulator/README.md);
- all eight smoke targets through SSH: 173 s, where CI runs one target per
  stack (targets/README.md);
- the whole smoke scenario on the Debian 13 guest: 200-340 s
  (tests/test_smoke_debian13.py);
- the whole restart scenario (six targets: nvmet, LIO and tgt restarted,
  NVMe/RDMA and NVMe/TCP controllers and an iSCSI session reset) on both
  guests: Debian 12 155-270 s beside the other VM tests, Debian 13 137-194 s
  (CI runs one of each kind on Debian 12: tgt restarted, an NVMe/TCP
  controller reset, an iSCSI session reset);
- the loss and delay bursts over NVMe/TCP as well as NVMe/RDMA: the pair
  took 67-129 s in CI's tier, which keeps NVMe/RDMA over rxe;
- a switch port down under a shared target, four VMs: 74-100 s
  (tests/test_port_down.py);
- the smoke file as written (8 MiB written, 4 MiB read back per target;
  tests/test_smoke.py): beside other work on 2026-11-27 it had run 18 of
  its 24 points after 12 minutes and 361 CPU-seconds of its two QEMUs,
  about a third of the VM tier; CI runs every target and workload of it
  with a quarter of the bytes;
- incast as written (4 MiB per initiator; tests/test_incast.py), where CI
  verifies 2 MiB per initiator;
- NVMe/TCP TLS and NVMe in-band authentication on Debian 13: 40 and 33 s,
  but the Debian 13 image they need is a second build (97 s cold, 166 s
  beside the tests) (tests/test_nvme_tls.py, tests/test_nvme_auth.py).
- the whole smoke scenario on Debian's backports kernel, brought as a .deb
  (guest: {kernel: FILE}), siw compiled for it: 220 s from nothing (siw.ko's
  packages fetched and compiled in a chroot, 43 s; image derived, snapshot
  saved), 233 s with siw.ko cached beside other helpers' work; the same
  kernel as a built tree, NVMe/RDMA verified: 72 s
  (tests/test_own_kernel_vm.py).
- a run's two points serially, then over a local Dask cluster of two workers,
  each booting its own two VMs: 98 s in all (2026-11-27: 36 s serial, 57 s
  spread, four VMs sharing two cores), records equal but for timings
  (tests/test_run_cluster.py).

With all of them CI took 27 minutes (1,623 s, 2026-11-25); with the first
three out, 24 minutes on a cached image, too close to its 25 once the
second image is built too; without them, CI boots no Debian 13 guest.
On QEMU 10 (2026-11-26) CI took 1,595-1,655 s on this machine and 1,613 s
on the landing machine, so half the restart scenario moved here as well.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "long", "--durations=0", "-q", "-p", "no:cacheprovider"],
        cwd=REPO,
    )
    print(f"long VM tests: exit {run.returncode} in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
