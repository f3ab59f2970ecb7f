"""The pieces of benchmarks/path_lengths.py that run no VM: the profiling image, the group
mapping and the arithmetic that turns profiler samples into instructions per I/O.

Kept apart so that tests can check the arithmetic on made-up samples without a guest.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from sanlab.emulator.cpio import CpioWriter
from sanlab.emulator.images import Image, cache_root
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.yamlfile import load_yaml

ROOT = Path(__file__).resolve().parent.parent
GROUPS_FILE = ROOT / "models" / "data" / "paths" / "path-groups.yaml"
PERF = "/usr/bin/perf"  # Debian 12's linux-perf, the guest's own distribution
GUEST_DIR = "/opt/sanlab-perf"  # where the profiling image carries perf, its libraries, the calibrator
# A loop of known length, and one `rep movsb` of known size: what a sample is worth.
CALIBRATOR_C = r"""
#include <stdlib.h>
static char src[1 << 16], dst[1 << 16];
__attribute__((noinline)) void spin(unsigned long n) { asm volatile("1: dec %0; jnz 1b" : "+r"(n)); }
__attribute__((noinline)) void movs(unsigned long bytes, unsigned long times) {
    for (unsigned long i = 0; i < times; i++) {
        void *d = dst, *s = src; unsigned long c = bytes;
        asm volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(c) : : "memory");
    }
}
int main(int argc, char **argv) {
    if (argc == 3) spin(strtoul(argv[2], 0, 10));
    if (argc == 4) movs(strtoul(argv[2], 0, 10), strtoul(argv[3], 0, 10));
    return 0;
}
"""


def _libraries(binary: str) -> list[Path]:
    """The shared libraries ``binary`` loads (ldd), the loader excepted."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    found = re.findall(r"=> (/\S+) \(", out)
    return [Path(p) for p in found]


def _calibrator(work: Path) -> Path:
    source = work / "calib.c"
    source.write_text(CALIBRATOR_C)
    binary = work / "calib"
    subprocess.run(["gcc", "-O1", "-static", "-o", str(binary), str(source)], check=True)
    return binary


def profiling_image(base: Image, say: object = print) -> Image:
    """``base`` with perf, its libraries and the calibrator appended as a second cpio archive
    (the kernel unpacks concatenated archives in order), cached beside the images under its own
    key: the default image and its key stay as they are, so CI never pays for it."""
    if not Path(PERF).is_file():
        raise SanlabError(f"{PERF} is missing: apt-get install linux-perf (Debian 12)")
    files = {f"{GUEST_DIR}/perf": Path(os.path.realpath(PERF))}
    for lib in _libraries(PERF):
        files[f"{GUEST_DIR}/lib/{lib.name}"] = Path(os.path.realpath(lib))
    digest = hashlib.sha256(base.key.encode() + CALIBRATOR_C.encode())
    for name, path in sorted(files.items()):
        digest.update(name.encode() + hashlib.sha256(path.read_bytes()).digest())
    key = digest.hexdigest()[:16]
    final = cache_root() / "profiling" / key
    if (final / "rootfs.cpio").is_file():
        return Image(key, final)
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=final.parent))
    try:
        files[f"{GUEST_DIR}/calib"] = _calibrator(work)
        shutil.copyfile(base.kernel, work / "vmlinuz")
        with open(work / "rootfs.cpio", "wb") as out:
            with open(base.initrd, "rb") as src:
                shutil.copyfileobj(src, out, 1 << 20)
            writer = CpioWriter(out)
            writer.written = out.tell()
            for folder in ("opt", GUEST_DIR.lstrip("/"), f"{GUEST_DIR.lstrip('/')}/lib"):
                writer.add(folder, stat.S_IFDIR | 0o755, 0, 0, 0)
            for name, path in sorted(files.items()):
                writer.add(name.lstrip("/"), stat.S_IFREG | 0o755, 0, 0, 0, path.read_bytes())
            writer.close()
        (work / "manifest.json").write_text((base.path / "manifest.json").read_text().replace(base.key, key))
        os.rename(work, final)
    finally:
        if work.exists():
            shutil.rmtree(work)
    return Image(key, final)


@dataclass(frozen=True)
class Mapping:
    """models/data/paths/path-groups.yaml: where each sample goes."""

    halt: frozenset[str]
    profiler: frozenset[str]
    user: dict[str, str]
    modules: dict[str, str]
    prefixes: list[tuple[str, str]]  # longest first

    @classmethod
    def load(cls, path: Path = GROUPS_FILE) -> Mapping:
        data = load_yaml(path)
        prefixes = [(p, group) for group, items in data["symbols"].items() for p in items]
        prefixes.sort(key=lambda item: -len(item[0]))
        return cls(
            frozenset(data["halt"]),
            frozenset(data["profiler_tasks"]),
            dict(data["user"]),
            dict(data["modules"]),
            prefixes,
        )

    def group(self, comm: str, dso: str, symbol: str) -> str:
        """The group of one sample: its task, its module or binary, its symbol (``[k] name``
        for the kernel, ``[.] name`` for user space, as perf report prints them)."""
        if comm in self.profiler:
            return "perf"
        kernel = symbol.startswith("[k]")
        name = symbol[3:].strip()
        if kernel and name in self.halt:
            return "halt"
        if not kernel:
            return self.user.get(comm, "background")
        module = dso.strip("[]")
        if module in self.modules:
            return self.modules[module]
        for prefix, group in self.prefixes:
            if name.startswith(prefix):
                return group
        return "kernel_other"


def parse_report(text: str) -> list[tuple[str, str, str, int]]:
    """``perf report -n -t '|' --sort comm,dso,sym`` lines as (comm, dso, symbol, samples)."""
    rows = []
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 5 or not parts[1].strip().isdigit():
            continue
        rows.append((parts[2].strip(), parts[3].strip(), "|".join(parts[4:]).strip(), int(parts[1])))
    return rows


def kallsyms_modules(text: str) -> dict[str, str]:
    """Each module symbol's module, from /proc/kallsyms' lines ``ADDR TYPE NAME [MODULE]``: perf
    names a sample in a module whose .ko it does not open after the kernel, not the module."""
    found = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3].startswith("["):
            found.setdefault(parts[2], parts[3])
    return found


def image_module_symbols(initrd: Path) -> dict[str, str]:
    """Each module function's module, read from the guest image's own .ko files (``nm``): how
    runs whose kallsyms map missed a module (loaded after it was read) are grouped again."""
    found: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as work, open(initrd, "rb") as cpio:
        data = cpio.read()
        at = 0
        while at + 110 <= len(data) and data[at : at + 6] == b"070701":
            size, namesize = int(data[at + 54 : at + 62], 16), int(data[at + 94 : at + 102], 16)
            name = data[at + 110 : at + 110 + namesize - 1].decode(errors="replace")
            start = at + 110 + namesize + (-(110 + namesize) % 4)
            if name.endswith(".ko"):
                module = "[" + Path(name).stem.replace("-", "_") + "]"
                ko = Path(work, "m.ko")
                ko.write_bytes(data[start : start + size])
                out = subprocess.run(["nm", "--defined-only", str(ko)], capture_output=True, text=True).stdout
                for line in out.splitlines():
                    parts = line.split()
                    if len(parts) == 3 and parts[1] in "tTwW":
                        found.setdefault(parts[2], module)
            at = start + size + (-size % 4)
    return found


def in_modules(
    rows: list[tuple[str, str, str, int]], modules: dict[str, str]
) -> list[tuple[str, str, str, int]]:
    """``rows`` with each kernel sample's module put where perf wrote the kernel."""
    out = []
    for comm, dso, symbol, samples in rows:
        if symbol.startswith("[k]") and dso == "[kernel.kallsyms]":
            dso = modules.get(symbol[3:].strip(), dso)
        out.append((comm, dso, symbol, samples))
    return out


def grouped(rows: list[tuple[str, str, str, int]], mapping: Mapping) -> Counter[str]:
    counts: Counter[str] = Counter()
    for comm, dso, symbol, samples in rows:
        counts[mapping.group(comm, dso, symbol)] += samples
    return counts


def unmapped(rows: list[tuple[str, str, str, int]], mapping: Mapping, top: int = 15) -> list[tuple[str, int]]:
    """The busiest kernel symbols no rule names: what a reviewer of the mapping should see."""
    left = Counter(
        {f"{dso} {sym}": n for comm, dso, sym, n in rows if mapping.group(comm, dso, sym) == "kernel_other"}
    )
    return left.most_common(top)


# Groups the guests' background and the profiler's own wake-ups put samples in, per halted
# sample: measured on idle guests, then taken off each run in proportion to its halted samples.
def idle_rates(idle: Counter[str]) -> dict[str, float]:
    halted = idle.get("halt", 0)
    if halted <= 0:
        raise SanlabError("the idle baseline has no halted samples: the guest never idled")
    return {g: n / halted for g, n in idle.items() if g not in ("halt", "perf")}


def corrected(counts: Counter[str], rates: dict[str, float]) -> dict[str, float]:
    halted = counts.get("halt", 0)
    return {g: counts.get(g, 0) - rates.get(g, 0.0) * halted for g in set(counts) | set(rates)}


@dataclass(frozen=True)
class PerIo:
    instructions: float
    ci95: float


def per_io(long: float, short: float, raw_long: int, raw_short: int, ios: int, worth: float) -> PerIo:
    """Instructions per I/O from two runs that differ only in their I/O count (``ios`` more in
    the long one): what both share (fio's start, the connection's keep-alives) cancels.
    ``worth`` is the instructions one sample stands for; the interval is Poisson's on the raw
    sample counts of both runs."""
    if ios <= 0:
        raise SanlabError(f"the long run did {ios} more I/Os than the short one; nothing to divide by")
    value = (long - short) * worth / ios
    spread = 1.96 * math.sqrt(max(raw_long + raw_short, 1)) * worth / ios
    return PerIo(max(value, 0.0), spread)
