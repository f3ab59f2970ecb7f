"""How fast, and in how much memory, does `sanlab analyze` read a large capture?

Issue 33's bounds, shown as a benchmark rather than a timed test: on a
capture of about 200 MB, peak memory at most twice the capture's size and
time at most twice tshark's own pass over the same capture (the fields
sanlab asks for, written to /dev/null).

The capture is made from a golden one replayed many times, each copy on
its own client port and later in time, so that every copy is a connection
of its own and the analyser has as many I/Os to attribute as a long run.

    python benchmarks/analyzer_scale.py [--mb 200] [--golden nvme-tcp-qd4]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dpkt

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
GOLDEN = REPO / "tests" / "golden"
SERVER_PORTS = {3260, 3261, 4420}


def _moved(frame: bytes, copy: int) -> bytes:
    """The frame with its client TCP port moved by ``copy`` (the server's port kept)."""
    eth = dpkt.ethernet.Ethernet(frame)
    ip = eth.data
    if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP):
        return frame
    tcp = ip.data
    if tcp.sport in SERVER_PORTS:
        tcp.dport = 20000 + (tcp.dport + copy) % 30000
    elif tcp.dport in SERVER_PORTS:
        tcp.sport = 20000 + (tcp.sport + copy) % 30000
    return bytes(eth)


def make_capture(golden: Path, megabytes: int, out: Path) -> int:
    """Write ``out`` of about ``megabytes`` MB from copies of ``golden``; return the copies."""
    with open(golden, "rb") as handle:
        frames = list(dpkt.pcap.Reader(handle))
    span = frames[-1][0] - frames[0][0] + 0.01
    copies = max(1, megabytes * 1_000_000 // golden.stat().st_size)
    with open(out, "wb") as handle:
        writer = dpkt.pcap.Writer(handle, snaplen=65535)
        for copy in range(copies):
            for stamp, frame in frames:
                writer.writepkt(_moved(frame, copy), ts=stamp + copy * span)
    return copies


def measured(argv: list[str], stdout: int | None = subprocess.DEVNULL) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one child process."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.DEVNULL, cwd=REPO)
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv[0]} failed: {' '.join(argv)}")
    return time.perf_counter() - start, usage.ru_maxrss * 1024


# `sanlab analyze PCAP --json` in this process, then its own peak RSS (tshark's is its own).
ANALYZE_AND_REPORT_OWN_PEAK = """
import resource, sys
from sanlab.main import cli
pcap, out = sys.argv[1], sys.argv[2]
try:
    cli(["analyze", pcap, "--json"], standalone_mode=False)
finally:
    open(out, "w").write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024))
"""


def tshark_pass(pcap: Path) -> list[str]:
    """tshark as sanlab runs it (tshark.tshark_argv, its fields), its output thrown away."""
    from sanlab.dissectors.tshark import fields_for, tshark_argv

    return tshark_argv(pcap, (), fields_for(labels=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--golden", default="nvme-tcp-qd4")
    args = parser.parse_args()
    if not shutil.which("tshark"):
        raise SystemExit("tshark is not installed")
    with tempfile.TemporaryDirectory() as tmp:
        pcap = Path(tmp) / "big.pcap"
        copies = make_capture(GOLDEN / f"{args.golden}.pcap", args.mb, pcap)
        size = pcap.stat().st_size
        print(f"capture: {size / 1e6:.0f} MB ({copies} copies of {args.golden}.pcap)")
        t_shark, rss_shark = measured(tshark_pass(pcap))
        shark_rate = size / 1e6 / t_shark
        print(f"tshark alone:   {t_shark:6.1f} s  {shark_rate:5.1f} MB/s  peak {rss_shark / 1e6:6.0f} MB")
        own = Path(tmp) / "own-peak"
        analyze = [sys.executable, "-c", ANALYZE_AND_REPORT_OWN_PEAK, str(pcap), str(own)]
        t_ana, rss_all = measured(analyze)
        rss_ana = int(own.read_text())
        rate = size / 1e6 / t_ana
        print(f"sanlab analyze: {t_ana:6.1f} s  {rate:5.1f} MB/s  peak {rss_ana / 1e6:6.0f} MB (its own)")
        print(f"time {t_ana / t_shark:.2f} x tshark's (bound 2)")
        ratio = rss_ana / size
        print(f"sanlab's own peak {ratio:.2f} x the capture (bound 2); with tshark's {rss_all / 1e6:.0f} MB")
        mine = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(f"(this script's own peak: {mine / 1e6:.0f} MB, not counted)")


if __name__ == "__main__":
    main()
