"""What a lab check sees in a capture: frames a display filter matches, and the analyser's figures."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from sanlab.dissectors.analyze import Analysis, analyze
from sanlab.dissectors.plugins import tshark_args
from sanlab.scenarios.errors import SanlabError, ToolMissing

FILTER_TIMEOUT_S = 600.0


def frames_matching(pcap: Path, display_filter: str) -> int:
    """How many frames of ``pcap`` a Wireshark display filter matches, with sanlab's dissectors."""
    tshark = shutil.which("tshark")
    if tshark is None:
        raise ToolMissing("tshark", "install it with: apt-get install tshark")
    args = [
        tshark,
        *tshark_args(),
        "-r",
        str(pcap),
        "-Y",
        display_filter,
        "-T",
        "fields",
        "-e",
        "frame.number",
    ]
    run = subprocess.run(args, capture_output=True, text=True, timeout=FILTER_TIMEOUT_S)
    if run.returncode != 0:
        raise SanlabError(f"tshark could not apply {display_filter!r}: {run.stderr.strip()[-200:]}")
    return len(run.stdout.split())


class Figures:
    """The analyser's per-I/O figures of each capture, worked out once per capture."""

    def __init__(self) -> None:
        self._analyses: dict[Path, Analysis] = {}

    def of(self, pcap: Path, link: str, op: str, size: int, field: str) -> object:
        """One figure (``frames_per_io``…) of the group of ``op`` I/Os of ``size`` bytes in the
        capture of ``link``."""
        if pcap not in self._analyses:
            self._analyses[pcap] = analyze(pcap)
        groups = {(g.op, g.bytes): g for g in self._analyses[pcap].groups}
        if (op, size) not in groups:
            raise SanlabError(f"the capture of {link} holds no {op} of {size} bytes yet")
        return getattr(groups[(op, size)], field)
