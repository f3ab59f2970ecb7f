"""Does NVMe/RDMA over rxe reconnect after its interfaces are downed and raised, eight times?

The fabrics work (targets/README.md, 2026-11-23) found that on Debian 12's
Linux 6.1, downing the guests' interfaces (``ip link set down``, which takes
their routes with them) left rxe's QP 1 deaf after 2 of 8 flaps: a
connection-manager message sent while the port was down put QP 1 in
error, the MAD layer moved it back to RTS, its receive side stayed in
error, and NVMe/RDMA never reconnected.  sanlab's emulator has pulled
carrier instead ever since.  This benchmark repeats the reproduction on
a guest: one NVMe/RDMA target on a Soft-RoCE cable, eight points of 16 MiB
of verified 4 KiB writes, each with a 2 s flap of the interfaces inside
the guests 2 s in (no emulator cable, no link doctor), and says how many
points got their I/O back.

    python benchmarks/rxe_qp1_flaps.py debian-13     # or debian-12; about 4 minutes under TCG
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from sanlab.emulator.images import build_image
from sanlab.emulator.lab import running_lab
from sanlab.emulator.links import rdma_answers
from sanlab.scenarios.loader import parse_scenario
from sanlab.targets.sessions import matrix

FLAPS = 8


def scenario(guest: str) -> dict[str, object]:
    return {
        "description": f"rxe QP 1 reproduction: {FLAPS} interface flaps under NVMe/RDMA, {guest}",
        "guest": guest,
        "hosts": [{"name": "initiator", "role": "initiator"}, {"name": "target", "role": "target"}],
        "links": [
            {"name": "roce", "endpoints": ["initiator", "target"], "fabric": "roce", "rdma_driver": "rxe"}
        ],
        "targets": [
            {"name": "nvme-rdma", "host": "target", "stack": "nvmet", "transport": "nvme-rdma", "size": "32m"}
        ],
        "workloads": [
            {
                "name": f"flap{i}",
                "rw": "randwrite",
                "bs": "4k",
                "iodepth": 4,
                "verify": "crc32c",
                "verify_size": "16m",
            }
            for i in range(1, FLAPS + 1)
        ],
        "faults": [{"at": "2s", "link": "roce", "action": "down", "for": "2s"}],
    }


def main(guest: str) -> int:
    build_image(print, guest=guest)
    loaded = parse_scenario(scenario(guest), f"rxe-qp1-{guest}.yaml")
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory() as out,
        running_lab(loaded, f"qp1-{guest}", print, keep_logs=False) as lab,
    ):
        # no cables: the fault downs the interfaces inside the guests, as the 2026-11-23 runs did;
        # no doctor: a point that does not come back is recorded as it is, not run again
        records = matrix.run(loaded, lab.vms, lab.blueprint.endpoints, Path(out), print)
        target = lab.blueprint.endpoints[("roce", "target")].address
        cm = rdma_answers(lab.vms["target"], lab.vms["initiator"], target)  # QP 1 still hears RDMA/CM?
    back = [r for r in records if r.error is None and r.verify == "pass"]
    recoveries = ", ".join(f"{r.recovery_s:.2f}" for r in back if r.recovery_s is not None)
    print(f"{guest}: {len(back)} of {len(records)} flaps came back with every block verified", end="")
    print(f" (I/O back {recoveries} s after the interfaces)" if back else "", end="")
    print(f"; {time.monotonic() - started:.0f} s")
    if len(back) < len(records):  # a failed target ends its run: the flaps after it never ran
        print(f"  flap {len(back) + 1} did not come back: {(records[len(back)].error or '').splitlines()[0]}")
        print(f"  flaps {len(back) + 2}-{len(records)} were not run (the target had failed)")
    print(f"  afterwards an RDMA/CM connection (rping) {'came up' if cm else 'did not come up'}")
    return 0 if len(back) == len(records) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "debian-13"))
