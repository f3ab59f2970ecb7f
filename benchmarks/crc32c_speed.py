"""How many cycles a byte does CRC32C cost on this host?  The model's digest cost, measured.

iSCSI and NVMe/TCP digests are CRC32C over each PDU's header and data.
This runs Google's ``google-crc32c`` (hardware CRC32 instruction, several
streams at once, as Linux's crc32c-intel) over buffers of the sizes a
digest covers, takes the best of several rounds, and turns bytes per second
into cycles per byte with the CPU's nominal clock from /proc/cpuinfo.  The
figure to compare is ``Host.crc32c_cycles_per_byte`` in models/core/profile.py
(0.14 by default).

    pip install google-crc32c
    python benchmarks/crc32c_speed.py [--seconds 0.5]
"""

from __future__ import annotations

import argparse
import os
import re
import time
from pathlib import Path

import google_crc32c

SIZES = (48, 4096, 65536, 1 << 20)  # a header, a page, a 64 KiB and a 1 MiB data segment


def nominal_ghz() -> float | None:
    """The CPU's clock as /proc/cpuinfo states it (model name's '@ x.xxGHz', else cpu MHz)."""
    text = Path("/proc/cpuinfo").read_text()
    named = re.search(r"model name.*@ ([0-9.]+)GHz", text)
    if named:
        return float(named.group(1))
    mhz = re.search(r"cpu MHz\s*:\s*([0-9.]+)", text)
    return float(mhz.group(1)) / 1000 if mhz else None


def rate(size: int, seconds: float) -> float:
    """Best bytes per second over five rounds of ``seconds`` each."""
    data = os.urandom(size)
    best = 0.0
    for _ in range(5):
        count, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            for _ in range(64):
                google_crc32c.value(data)
            count += 64
        best = max(best, count * size / elapsed)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=0.5)
    args = parser.parse_args()
    ghz = nominal_ghz()
    print(f"google-crc32c {google_crc32c.implementation}, CPU {ghz or '?'} GHz")
    for size in SIZES:
        bps = rate(size, args.seconds)
        cpb = f"{ghz * 1e9 / bps:.3f} cycles/byte" if ghz else "clock unknown"
        print(f"{size:>8} B: {bps / 1e9:7.2f} GB/s  {cpb}")


if __name__ == "__main__":
    main()
