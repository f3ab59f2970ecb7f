"""Choose the accelerator: KVM only when it really boots a guest, else TCG.

On some hosts /dev/kvm exists but a stock kernel hangs or QEMU aborts on an
MSR.  So the verdict comes from a short, timed boot of the real guest, and
is cached per host kernel and QEMU version.  SANLAB_ACCEL=tcg|kvm overrides.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sanlab.emulator.images import Image, cache_root
from sanlab.emulator.qemu import version_line
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.reading import load_json
from sanlab.scenarios.writing import write_file

PROBE_SECONDS = 12.0  # a KVM boot of this guest takes 2-3 s
READY_MARK = b"sanlab-guest:"


def _cache_file() -> Path:
    return cache_root() / "accel.json"


def _host_key(qemu: str) -> str:
    return f"{platform.release()} | {version_line(qemu)}"


def choose(qemu: str, image: Image, say: Callable[[str], None] = lambda m: None) -> str:
    """'kvm' or 'tcg'."""
    forced = os.environ.get("SANLAB_ACCEL")
    if forced in ("kvm", "tcg"):
        return forced
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg"
    key = _host_key(qemu)
    try:
        cached = load_json(_cache_file(), "KVM probe cache", 1 << 16)
        if isinstance(cached, dict) and cached.get("host") == key and cached.get("accel") in ("kvm", "tcg"):
            return str(cached["accel"])
    except SanlabError:
        pass  # absent, torn or planted: probe again
    say(f"probing KVM with a {PROBE_SECONDS:.0f} s test boot (once per host)")
    started = time.monotonic()
    verdict = "kvm" if probe_kvm(qemu, image) else "tcg"
    say(f"accelerator: {verdict} (probe took {time.monotonic() - started:.1f} s)")
    write_file(_cache_file(), json.dumps({"host": key, "accel": verdict}) + "\n", what="KVM probe cache")
    return verdict


def probe_kvm(qemu: str, image: Image, seconds: float = PROBE_SECONDS) -> bool:
    """Boot the guest under KVM; True if its init announces itself in time."""
    with tempfile.TemporaryDirectory(prefix="sanlab-kvm-probe-") as tmp:
        log = Path(tmp) / "console.log"
        command = [
            qemu,
            "-accel",
            "kvm",
            "-cpu",
            "host",
            "-m",
            "512",
            "-nodefaults",
            "-no-reboot",
            "-display",
            "none",
            "-serial",
            f"file:{log}",
            "-kernel",
            str(image.kernel),
            "-initrd",
            str(image.initrd),
            "-append",
            "console=ttyS0 quiet panic=-1 sanlab.host=probe",
        ]
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and proc.poll() is None:
                if log.exists() and READY_MARK in log.read_bytes():
                    return True
                time.sleep(0.25)
            return False
        finally:
            proc.kill()
            proc.wait()
