"""Which SCSI-over-RDMA paths notice a pulled cable: the trials behind targets/README's
"iSER multipath works over siw, not over rxe" and "SRP multipath is not built".

Three scenarios, each a cable pulled for 20 s, 2 s into 16 MiB of verified 4 KiB
random writes at QD 4, run as a user would (``sanlab run --json``):

- ``iser-siw``: tgt iSER on two soft-iWARP links under dm-multipath: the dead
  path's session fails and I/O moves to the other (a failover time).  With
  upstream siw, once in 15 runs a block failed verification: a ghost write
  from the dead path's old socket (targets/README.md); the image's siw
  closes abortively, which ends it (vm-images/README.md).  Should one
  appear, run ``sanlab analyze`` on the record's capture of link a to see
  the retransmission that carried it;
- ``iser-siw-upstream``: the same with ``siw.abortive_close=0`` on the guests'
  kernel command line ($SANLAB_GUEST_KERNEL_ARGS): upstream siw's graceful
  close, whose old connection sends initiator data once the cable is back;
- ``iser-rxe``: LIO iSER on two Soft-RoCE links under dm-multipath: nothing
  fails the dead path's session, so I/O waits for the cable (no failover);
- ``srp-rxe``: LIO SRP on one Soft-RoCE link: whether ib_srp notices the
  outage at all (it did not: the I/O stood still and went on after it).

    python benchmarks/rdma_path_pulls.py [debian-12|debian-13] [TRIAL ...]   # all: about 5 min

Each record's failover, failback and recovery times are printed, with its
verification, and for each link's capture the retransmissions that carried
other bytes than their first sending (``sanlab analyze`` warns of the same)
and, for each TCP connection silent for 5 s or more, how many bytes its
opener (the initiator) sent after that silence: what a dead path's old
socket carried once the cable was back.
The figures are emulation's: which mechanism fires, not how fast real
hardware would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dpkt
import yaml

from sanlab.dissectors.rewrites import rewritten_retransmissions, tcp_segments
from sanlab.emulator.qemu import KERNEL_ARGS

PULL = {"at": "2s", "link": "a", "action": "down", "for": "20s"}
WRITES = {
    "name": "pull",
    "rw": "randwrite",
    "bs": "4k",
    "iodepth": 4,
    "verify": "crc32c",
    "verify_size": "16m",
}
HOSTS = [{"name": "initiator", "role": "initiator"}, {"name": "target", "role": "target"}]
SILENCE_S = 5.0  # a connection this long silent was cut off (the pull is 20 s)
# Each trial's extra guest kernel parameters ($SANLAB_GUEST_KERNEL_ARGS).
KERNEL = {"iser-siw-upstream": "siw.abortive_close=0"}


def _link(name: str, driver: str) -> dict[str, object]:
    fabric = "iwarp" if driver == "siw" else "roce"
    return {"name": name, "endpoints": ["initiator", "target"], "fabric": fabric, "rdma_driver": driver}


def scenarios(guest: str) -> dict[str, dict[str, object]]:
    """The three trials, by name."""

    def one(description: str, links: list[dict[str, object]], target: dict[str, object]) -> dict[str, object]:
        return {
            "description": description,
            "guest": guest,
            "hosts": HOSTS,
            "links": links,
            "targets": [{"host": "target", "size": "32m", **target}],
            "workloads": [WRITES],
            "faults": [PULL],
            "capture": True,
        }

    two = {"paths": ["a", "b"]}
    return {
        "iser-siw": one(
            "tgt iSER multipath over siw, path A pulled for 20 s",
            [_link("a", "siw"), _link("b", "siw")],
            {"name": "tgt", "stack": "tgt", "transport": "iser", "backstore": "file", **two},
        ),
        "iser-siw-upstream": one(
            "tgt iSER multipath over upstream siw (graceful close), path A pulled for 20 s",
            [_link("a", "siw"), _link("b", "siw")],
            {"name": "tgt", "stack": "tgt", "transport": "iser", "backstore": "file", **two},
        ),
        "iser-rxe": one(
            "LIO iSER multipath over rxe, path A pulled for 20 s",
            [_link("a", "rxe"), _link("b", "rxe")],
            {"name": "lio", "stack": "lio", "transport": "iser", **two},
        ),
        "srp-rxe": one(
            "LIO SRP over one rxe cable, pulled for 20 s",
            [_link("a", "rxe")],
            {"name": "lio", "stack": "lio", "transport": "srp"},
        ),
    }


def run(name: str, data: dict[str, object], folder: Path) -> int:
    """Run one trial; print its records; its exit code."""
    spec = folder / f"{name}.yaml"
    spec.write_text(yaml.safe_dump(data))
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "sanlab", "run", str(spec), "--out", str(folder / name), "--json"],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, KERNEL_ARGS: KERNEL.get(name, "")},
    )
    took = time.monotonic() - started
    if done.returncode != 0 and not (folder / name / "results.json").exists():
        print(f"{name}: exit {done.returncode} in {took:.0f} s: {done.stderr.strip()[-400:]}")
        return done.returncode
    for r in json.loads((folder / name / "results.json").read_text())["results"]:
        print(
            f"{name}: verify {r['verify']} ({(r['verified_bytes'] or 0) >> 20} MiB), "
            f"failover {r.get('failover_s')} s, failback {r.get('failback_s')} s, "
            f"I/O back {r.get('recovery_s')} s after the cable, "
            f"error {r.get('error')} ({took:.0f} s)"
        )
    for pcap in sorted((folder / name).glob("*.pcap")):
        rewrites = rewritten_retransmissions(pcap)
        print(f"{name}: {pcap.name}: {len(rewrites)} retransmission(s) carrying other bytes")
        for rewrite in rewrites:
            print(f"  {rewrite.line()}")
        for (opener, port), sent in sorted(sent_after_silence(pcap).items()):
            quiet = f"{SILENCE_S:.0f} s of silence"
            print(f"{name}: {pcap.name}: {opener}:{port} sent {sent} bytes after {quiet}")
    return done.returncode


def sent_after_silence(pcap: Path) -> dict[tuple[str, int], int]:
    """For each TCP connection with a silence of SILENCE_S or more, the payload bytes its
    opener (the side that sent the SYN) sent after the last such silence, by (address, port)."""
    with pcap.open("rb") as handle:
        times = [stamp for stamp, _ in dpkt.pcap.UniversalReader(handle)]
    openers: dict[frozenset[tuple[str, int]], tuple[str, int]] = {}
    timeline: dict[frozenset[tuple[str, int]], list[tuple[float, tuple[str, int], int]]] = {}
    for seg in tcp_segments(pcap):
        ends = frozenset({(seg.src, seg.sport), (seg.dst, seg.dport)})
        if seg.syn and seg.ack is None:
            openers[ends] = (seg.src, seg.sport)
        timeline.setdefault(ends, []).append((times[seg.number - 1], (seg.src, seg.sport), len(seg.payload)))
    found = {}
    for ends, events in timeline.items():
        gaps = [i for i in range(1, len(events)) if events[i][0] - events[i - 1][0] >= SILENCE_S]
        if ends in openers and gaps:
            after = events[gaps[-1] :]
            found[openers[ends]] = sum(size for _, who, size in after if who == openers[ends])
    return found


def main(guest: str, chosen: list[str]) -> int:
    trials = scenarios(guest)
    unknown = sorted(set(chosen) - set(trials))
    if unknown:
        print(f"no trial {', '.join(unknown)} (trials: {', '.join(trials)})", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="sanlab-pulls-") as tmp:
        codes = [run(name, data, Path(tmp)) for name, data in trials.items() if name in (chosen or trials)]
    return max(codes)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "debian-12", sys.argv[2:]))
