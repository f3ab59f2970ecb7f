"""Upstream blktests' results, read as its ``check`` script writes them.

blktests (https://github.com/osandov/blktests) is not copied into sanlab: the user
gives a checkout.  Its ``check`` writes, for each test it ran or skipped,
``results/<dev>/<group>/<NNN>``: one ``key<TAB>value`` line per key, always
``description``, ``date`` and ``status`` (``pass``, ``fail`` or ``not run``), and for
a test that ran, ``exit_status`` and ``runtime`` (bash's ``%Rs``: ``12.345s``); a
failure's ``reason`` (``output``: the output differed from ``tests/G/NNN.out``,
kept beside as ``NNN.out.bad``; ``exit``: a non-zero exit; ``dmesg``: the kernel
log held a BUG, WARNING or Oops since the test began, kept as ``NNN.dmesg``); and
any figure the test recorded itself (``read iops``, say).  ``<dev>`` is the test
device's name, or ``nodev`` for a test that needs none, with ``_`` and a
condition appended when the test ran once per condition (``nodev_tr_rdma``:
NVMe over RDMA).  Why a test did not run is printed, never written: a ``not
run`` file has no reason.  Files that are not one of these (a ``.full`` log, a
``tmpdir.*`` left by a killed run) are the test's own and only named.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from sanlab.scenarios.errors import SanlabError

Status = Literal["pass", "fail", "not run"]
STATUSES: tuple[str, ...] = ("pass", "fail", "not run")
REASONS = ("output", "exit", "dmesg")
MAX_RESULT_BYTES = 64 << 10  # a result file is a dozen short lines; a larger one is not one
MAX_RESULTS = 20_000  # every test of every group, times conditions and devices, with room
EVIDENCE = (".out.bad", ".dmesg", ".full")  # what check keeps beside a result, by suffix
_TEST = re.compile(r"^[0-9]{3}$")
_GROUP = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_RUNTIME = re.compile(r"^([0-9]{1,9}(?:\.[0-9]{1,9})?)s$")
_STANDARD = {"description", "date", "status", "reason", "exit_status", "runtime"}


@dataclass(frozen=True)
class BlktestsResult:
    """One test's outcome on one device (or condition), as blktests wrote it."""

    test: str  # 'nvme/002'
    device: str  # 'nodev', 'nodev_tr_rdma', 'nvme0n1'
    status: Status
    description: str
    date: str
    reason: str | None = None  # a failure's: output, exit or dmesg
    exit_status: int | None = None
    runtime_s: float | None = None
    figures: dict[str, str] = field(default_factory=dict)  # what the test recorded itself
    evidence: tuple[str, ...] = ()  # files beside it: NNN.out.bad, NNN.dmesg, NNN.full


def read_results(root: Path, option: str = "results") -> list[BlktestsResult]:
    """Every result under ``root`` (blktests' ``results/``), by test then device; a file that is
    not one blktests writes is a one-line error naming it, the line and what was expected."""
    if root.is_symlink() or not root.is_dir():
        raise SanlabError(f"{option} {root}: is not a folder (give blktests' results/ folder)")
    found: list[BlktestsResult] = []
    for device in _entries(root, option):
        if not device.is_dir() or device.name.startswith("tmpdir."):
            continue
        if not device.name.isprintable():  # it is printed: never a terminal's escape or a newline
            raise SanlabError(
                f"{option} {root}: a folder {device.name[:40]!r} is no device name blktests writes"
            )
        for group in _entries(device, option):
            if not group.is_dir() or not _GROUP.match(group.name):
                continue
            names = {p.name for p in _entries(group, option)}
            for name in sorted(n for n in names if _TEST.match(n)):
                found.append(_read_one(group / name, device.name, group.name, names))
                if len(found) > MAX_RESULTS:
                    raise SanlabError(
                        f"{option} {root}: holds over {MAX_RESULTS:,} results; not a results folder?"
                    )
    if not found:
        raise SanlabError(f"{option} {root}: holds no blktests result (results/<dev>/<group>/<NNN> files)")
    return sorted(found, key=lambda r: (r.test, r.device))


def _entries(folder: Path, option: str) -> list[Path]:
    """A folder's entries, links left out (a result is never read through one)."""
    try:
        return sorted(Path(e.path) for e in os.scandir(folder) if not e.is_symlink())
    except OSError as exc:
        raise SanlabError(f"{option} {folder}: cannot read it ({exc.strerror})") from None


def _read_one(path: Path, device: str, group: str, beside: set[str]) -> BlktestsResult:
    values = _pairs(path)
    where = f"{path}"
    missing = [k for k in ("description", "date", "status") if k not in values]
    if missing:
        raise SanlabError(f"{where}: has no {', '.join(missing)} line; not a result blktests wrote")
    status = values["status"]
    if status not in STATUSES:
        raise SanlabError(f"{where}: status {status[:40]!r} is none of {', '.join(STATUSES)}")
    reason = values.get("reason")
    if reason is not None and reason not in REASONS:
        raise SanlabError(f"{where}: reason {reason[:40]!r} is none of {', '.join(REASONS)}")
    if (status == "fail") != (reason is not None):
        raise SanlabError(
            f"{where}: status {status} with {'a' if reason else 'no'} reason; blktests pairs them"
        )
    return BlktestsResult(
        test=f"{group}/{path.name}",
        device=device,
        status=status,  # type: ignore[arg-type]  # checked against STATUSES above
        description=values["description"],
        date=values["date"],
        reason=reason,
        exit_status=_exit_status(values.get("exit_status"), where),
        runtime_s=_runtime(values.get("runtime"), where),
        figures={k: v for k, v in values.items() if k not in _STANDARD},
        evidence=tuple(path.name + s for s in EVIDENCE if path.name + s in beside),
    )


def _pairs(path: Path) -> dict[str, str]:
    """The file's ``key<TAB>value`` lines (a value may be empty; a later key wins, as in bash)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as exc:
        raise SanlabError(f"{path}: cannot read it ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise SanlabError(f"{path}: is not a regular file; not a result blktests wrote")
        data = handle.read(MAX_RESULT_BYTES + 1)
    if len(data) > MAX_RESULT_BYTES:
        raise SanlabError(f"{path}: is over {MAX_RESULT_BYTES:,} bytes; not a result blktests wrote")
    values: dict[str, str] = {}
    for number, line in enumerate(data.decode(errors="replace").splitlines(), 1):
        key, tab, value = line.partition("\t")
        if not tab or not key:
            raise SanlabError(f"{path}: line {number} {line[:60]!r} is not 'key<TAB>value'")
        values[key] = value
    return values


def _exit_status(text: str | None, where: str) -> int | None:
    if text is None:
        return None
    if not text.isdigit() or int(text) > 255:
        raise SanlabError(f"{where}: exit_status {text[:20]!r} is not an exit status (0 to 255)")
    return int(text)


def _runtime(text: str | None, where: str) -> float | None:
    if text is None:
        return None
    match = _RUNTIME.match(text)
    if not match:
        raise SanlabError(f"{where}: runtime {text[:20]!r} is not bash's '%Rs' (like 12.345s)")
    return float(match.group(1))


def counts(results: list[BlktestsResult]) -> dict[str, int]:
    """How many results have each status, every status named (0 where none)."""
    return {s: sum(r.status == s for r in results) for s in STATUSES}


_NOT_RUN = re.compile(
    r"^(?P<test>[a-z][a-z0-9_-]{0,31}/[0-9]{3})(?: \((?P<cond>[^()=]+=[^()]*)\))?.*\[not run\]\s*$"
)
_TABLE_ROW = re.compile(r"\s\.\.\.(\s|$)")  # check's runtime table ('    runtime  ...  1.2s'), not a reason


def skip_reasons(console: str) -> dict[str, list[str]]:
    """Why each test did not run, from ``check``'s console output (blktests prints the reasons
    and never writes them): ``{'nvme/002 (tr=rdma)': ['nvme_trtype=rdma is not supported in
    this test']}``.  A reason is an indented line after the test's ``[not run]`` line."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in console.splitlines()[:100_000]:
        match = _NOT_RUN.match(line)
        if match:
            key = match["test"] + (f" ({match['cond']})" if match["cond"] else "")
            current = found.setdefault(key, [])
        elif current is not None and line.startswith("    ") and line.strip():
            if not _TABLE_ROW.search(line):
                current.append(line.strip()[:200])
        else:
            current = None
    return found


CLONE = "git clone https://github.com/osandov/blktests"
# What makes a folder a blktests checkout sanlab can use: its runner, its shared shell code and
# the two groups sanlab runs across a wire.
CHECKOUT_FILES = ("check", "common/rc", "tests/nvme/rc", "tests/srp/rc")


def check_checkout(folder: Path, option: str = "--blktests") -> Path:
    """``folder`` if it is a blktests checkout, else one line saying what it lacks and what to clone."""
    if not folder.exists():
        raise SanlabError(f"{option} {folder}: does not exist; give a blktests checkout ({CLONE})")
    if folder.is_symlink() or not folder.is_dir():
        raise SanlabError(f"{option} {folder}: is not a folder; give a blktests checkout ({CLONE})")
    lacking = [name for name in CHECKOUT_FILES if not (folder / name).is_file()]
    if lacking:
        raise SanlabError(
            f"{option} {folder}: is not a blktests checkout (no {', '.join(lacking)}); "
            f"give one made with '{CLONE}'"
        )
    return folder
