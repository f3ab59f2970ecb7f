"""Make the golden captures the dissector and analyser tests read.

Each capture is one short lab: two VMs, one link, the real Linux (or tgt)
target, a handful of fio I/Os of known size, then a clean logout.  Run it
from the repository root after changing the guest or the stacks:

    python tests/golden/make_captures.py [NAME ...]

The pcaps are written next to this file; keep them small (a few I/Os).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from sanlab.emulator.images import build_image
from sanlab.emulator.lab import running_lab
from sanlab.scenarios.loader import parse_scenario
from sanlab.targets.stacks import Wiring, exported

HERE = Path(__file__).resolve().parent

# name: (fabric, driver, stack, transport)
CAPTURES = {
    "srp-rxe": ("roce", "rxe", "lio", "srp"),
    "iser-rxe": ("roce", "rxe", "lio", "iser"),
    "iser-siw": ("iwarp", "siw", "tgt", "iser"),
    "nvme-rdma-rxe": ("roce", "rxe", "nvmet", "nvme-rdma"),
    "nvme-rdma-siw": ("iwarp", "siw", "nvmet", "nvme-rdma"),
    "iscsi-tcp": ("roce", "rxe", "lio", "iscsi"),
    "nvme-tcp": ("roce", "rxe", "nvmet", "nvme-tcp"),
}
# Four I/Os of each kind: 4k and 16k reads and writes, one at a time (QD1).
IOS = [("randread", "4k"), ("randwrite", "4k"), ("randread", "16k"), ("randwrite", "16k")]


def capture(name: str) -> Path:
    fabric, driver, stack, transport = CAPTURES[name]
    scenario = parse_scenario(
        {
            "hosts": [{"name": "initiator", "role": "initiator"}, {"name": "target", "role": "target"}],
            "links": [
                {
                    "name": "fabric",
                    "endpoints": ["initiator", "target"],
                    "fabric": fabric,
                    "rdma_driver": driver,
                }
            ],
            "targets": [
                {
                    "name": "golden",
                    "host": "target",
                    "stack": stack,
                    "transport": transport,
                    "backstore": "ramdisk" if stack != "tgt" else "file",
                    "size": "8m",
                }
            ],
            "capture": True,
        },
        name,
    )
    with tempfile.TemporaryDirectory(prefix="sanlab-golden-") as tmp:
        with running_lab(scenario, f"golden-{name}", print, Path(tmp), keep_logs=False) as lab:
            t, i = lab.vms["target"], lab.vms["initiator"]
            wire = Wiring(
                t,
                i,
                lab.plan.addresses[("fabric", "target")],
                lab.plan.addresses[("fabric", "initiator")],
                f"{driver}_fabric",
                "fabric",
            )
            with exported(scenario.targets[0], "golden", wire) as devices:
                for rw, bs in IOS:
                    i.run(
                        f"fio --name=g --filename={devices[0]} --direct=1 --ioengine=libaio "
                        f"--rw={rw} --bs={bs} --iodepth=1 --number_ios=4 --size=1m "
                        f"--randseed=7 --output-format=terse",
                        timeout=300,
                    ).check()
        out = HERE / f"{name}.pcap"
        shutil.copy(Path(tmp) / "fabric.pcap", out)
    print(f"{out}: {out.stat().st_size} bytes")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"some of: {', '.join(CAPTURES)}")
    args = parser.parse_args()
    unknown = [n for n in args.names if n not in CAPTURES]
    if unknown:
        parser.error(f"unknown capture {unknown[0]!r} (choose from {', '.join(CAPTURES)})")
    build_image(print)
    for name in args.names or CAPTURES:
        capture(name)


if __name__ == "__main__":
    sys.exit(main())
