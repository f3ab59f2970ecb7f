"""Make the golden captures the dissector and analyser tests read.

Each capture is one short lab: two VMs, one link, the real Linux (or tgt)
target, a handful of fio I/Os of known size, then a clean logout.  Run it
from the repository root after changing the guest or the stacks:

    python tests/golden/make_captures.py [NAME ...]

The pcaps are written next to this file; keep them small (a few I/Os).
``NAME-qd4`` captures keep four I/Os in flight (16 of each kind) in a
window of LBAs no kernel probe touches, and keep fio's own evidence beside
the pcap (``NAME-qd4.fio.json``): the I/Os fio issued and every I/O's
offset and completion latency from its latency log.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from sanlab.emulator.images import build_image
from sanlab.emulator.lab import running_lab
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.loader import parse_scenario
from sanlab.targets import nvme_tls
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
# On the Debian 13 guest (Linux 6.12): NVMe/TCP inside TLS 1.3, and DH-HMAC-CHAP on both
# transports; name: (transport, target fields).  The TLS capture's key log is kept beside it
# (NAME.keylog: the session's secrets, a throwaway lab's); the -qd4 one is shipped without
# its key log, as a capture whose keys nobody kept.  A "-wrong" auth capture is the host
# presenting another secret than the target holds: its connect fails.
SECRET = "DHHC-1:00:CZbCgwztvenowvMBL35wJzEAO5aJ71HS37rp6lwux9pEM5Xa:"  # scenarios/nvme-auth.yaml
OTHER = "DHHC-1:00:VTIpqsXY4IdQ9b69vKU0MTuXDRp4aXHUQu6vh3nL1Xwi0odU:"  # tests/test_nvme_auth.py
SECURE = {
    "nvme-tls": ("nvme-tcp", {"tls": True}),
    "nvme-auth-tcp": ("nvme-tcp", {"auth": {"secret": SECRET}}),
    "nvme-auth-tcp-wrong": ("nvme-tcp", {"auth": {"secret": SECRET, "initiator_secret": OTHER}}),
    "nvme-auth-rdma": ("nvme-rdma", {"auth": {"secret": SECRET}}),
    "nvme-auth-rdma-wrong": ("nvme-rdma", {"auth": {"secret": SECRET, "initiator_secret": OTHER}}),
}
TLS_NO_KEYS_FRAMES = 300  # nvme-tls-qd4.pcap is cut to its first frames: records enough to count
# Four I/Os of each kind: 4k and 16k reads and writes, one at a time (QD1).
IOS = [("randread", "4k"), ("randwrite", "4k"), ("randread", "16k"), ("randwrite", "16k")]
QD4_IOS, QD4_DEPTH = 16, 4
# QD4 I/Os stay in [2 MiB, 6 MiB) of the 8 MiB LUN, away from the partition probes.
QD4_OFFSET, QD4_SPAN = 2 << 20, 4 << 20


def capture(name: str) -> Path:
    pair = name.removesuffix("-qd4")
    if pair in SECURE:
        return secure_capture(name)
    fabric, driver, stack, transport = CAPTURES[pair]
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
            ends = lab.blueprint.endpoints
            wire = Wiring(t, i, ends[("fabric", "target")], ends[("fabric", "initiator")])
            with exported(scenario.targets[0], "golden", wire) as devices:
                if name.endswith("-qd4"):
                    evidence = [_queued_ios(i, devices[0], rw, bs) for rw, bs in IOS]
                    (HERE / f"{name}.fio.json").write_text(json.dumps(evidence, indent=1) + "\n")
                else:
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


def secure_capture(name: str) -> Path:
    """A TLS or DH-HMAC-CHAP capture on the Debian 13 guest: the QD1 I/Os of the plain
    captures (TLS), or the connect (authentication) and one read, and nothing else."""
    transport, fields = SECURE[name.removesuffix("-qd4")]
    scenario = parse_scenario(
        {
            "guest": "debian-13",
            "hosts": [{"name": "initiator", "role": "initiator"}, {"name": "target", "role": "target"}],
            "links": [
                {
                    "name": "fabric",
                    "endpoints": ["initiator", "target"],
                    "fabric": "roce",
                    "rdma_driver": "rxe",
                }
            ],
            "targets": [
                {
                    "name": "golden",
                    "host": "target",
                    "stack": "nvmet",
                    "transport": transport,
                    "size": "8m",
                    **fields,
                }
            ],
            "capture": True,
        },
        name,
    )
    with tempfile.TemporaryDirectory(prefix="sanlab-golden-") as tmp:
        with running_lab(scenario, f"golden-{name}", print, Path(tmp), keep_logs=False) as lab:
            t, i = lab.vms["target"], lab.vms["initiator"]
            ends = lab.blueprint.endpoints
            wire = Wiring(t, i, ends[("fabric", "target")], ends[("fabric", "initiator")])
            try:
                with exported(scenario.targets[0], "golden", wire) as devices:
                    _ios(name, i, devices[0])
            except SanlabError as exc:
                if not name.endswith("-wrong"):
                    raise
                print(f"{name}: refused, as it should be: {str(exc).splitlines()[0]}")
            if "tls" in fields and not name.endswith("-qd4"):
                keys = nvme_tls.merged_key_logs([nvme_tls.session_keys(vm) for vm in (i, t)])
                (HERE / f"{name}.keylog").write_bytes(keys)
                print(f"{name}.keylog: {len(keys.splitlines())} secrets")
        out = HERE / f"{name}.pcap"
        shutil.copy(Path(tmp) / "fabric.pcap", out)
    if name == "nvme-tls-qd4":  # no keys, so fio's evidence cannot be checked: its first frames do
        subprocess.run(["editcap", "-r", str(out), str(out) + ".tmp", f"1-{TLS_NO_KEYS_FRAMES}"], check=True)
        Path(str(out) + ".tmp").replace(out)
        (HERE / f"{name}.fio.json").unlink(missing_ok=True)
    print(f"{out}: {out.stat().st_size} bytes")
    return out


def _ios(name: str, host, device: str) -> None:
    if name.endswith("-qd4"):
        evidence = [_queued_ios(host, device, rw, bs) for rw, bs in IOS]
        (HERE / f"{name}.fio.json").write_text(json.dumps(evidence, indent=1) + "\n")
        return
    for rw, bs in IOS if "tls" in name else [("randread", "4k")]:
        host.run(
            f"fio --name=g --filename={device} --direct=1 --ioengine=libaio "
            f"--rw={rw} --bs={bs} --iodepth=1 --number_ios={4 if 'tls' in name else 1} --size=1m "
            f"--randseed=7 --output-format=terse",
            timeout=300,
        ).check()


def _queued_ios(host, device: str, rw: str, bs: str) -> dict[str, object]:
    """Run one fio job at QD4 and return what fio says it did, I/O by I/O."""
    host.run("rm -f /tmp/g_*.log", timeout=30).check()
    run = host.run(
        f"fio --name=g --filename={device} --direct=1 --ioengine=libaio --rw={rw} --bs={bs} "
        f"--iodepth={QD4_DEPTH} --number_ios={QD4_IOS} --offset={QD4_OFFSET} --size={QD4_SPAN} "
        "--randseed=7 --write_lat_log=/tmp/g --log_offset=1 --output-format=json",
        timeout=300,
    ).check()
    job = json.loads(run.stdout[run.stdout.index("{") :])["jobs"][0]
    op = "read" if "read" in rw else "write"
    log = host.run("cat /tmp/g_lat.1.log", timeout=30).check().stdout
    ios = [
        {"offset": int(cols[4]), "bytes": int(cols[3]), "lat_ns": int(cols[1])}
        for cols in (line.replace(" ", "").split(",") for line in log.splitlines() if line.strip())
    ]
    return {"op": op, "bs": bs, "iodepth": QD4_DEPTH, "total_ios": job[op]["total_ios"], "ios": ios}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    names = [*CAPTURES, *(f"{n}-qd4" for n in CAPTURES), *SECURE, "nvme-tls-qd4"]
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"some of: {', '.join(names)}")
    args = parser.parse_args()
    unknown = [n for n in args.names if n not in names]
    if unknown:
        parser.error(f"unknown capture {unknown[0]!r} (choose from {', '.join(names)})")
    build_image(print)
    if any(n.removesuffix("-qd4") in SECURE for n in args.names or names):
        build_image(print, guest="debian-13")
    for name in args.names or names:
        capture(name)


if __name__ == "__main__":
    sys.exit(main())
