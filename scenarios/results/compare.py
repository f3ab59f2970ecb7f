"""Two run folders side by side, as one markdown page: what changed between two kernels.

``sanlab compare RUN_A RUN_B`` reads what two runs left (results.json, the VMs'
kernel logs, the captures) and says, per point, whether it passed or failed in
each and how long it took to recover from its faults; per I/O on the wire, how
many messages, bytes and round trips each run's captures show (the analyser's
figures, handed in as ``Ladder`` rows by the command line); and what the model
projects for each run's scenario on real hardware.  Emulated IOPS and latencies
are the speed of software emulation on whatever machine ran them, so they are
never set against each other here: the page says so.

This module only reads and writes text: the analyser (dissectors/) and the model
(models/) are called by the command line, which hands their answers in.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.files import read_bounded
from sanlab.scenarios.reading import parse_json
from sanlab.scenarios.results.known_bad import KNOWN_BAD, outcome
from sanlab.scenarios.results.records import RESULTS, ResultRecord
from sanlab.scenarios.sizes import format_size

MAX_RESULTS_BYTES = 64 << 20
MAX_LOG_BYTES = 256 << 10  # the kernel's version line is the first of its log
# What names a point in both runs: its stack, wire and fio shape (records carry no target name).
POINT_KEYS = (
    "transport",
    "target_stack",
    "fabric",
    "rdma_driver",
    "initiator",
    "rw",
    "bs",
    "iodepth",
    "numjobs",
)
EMULATED_NOTE = (
    "Emulated IOPS and latencies are the speed of software emulation on the machine that ran "
    "each run, not of the kernel: they are not compared on this page.  The model's figures "
    "below are projections to the hardware its profile names."
)
_VERSION = re.compile(r"Linux version (\S+)")


@dataclass(frozen=True)
class RunRead:
    """What one run folder holds that a comparison reads."""

    folder: Path
    scenario: str
    status: str
    records: list[ResultRecord]
    kernel: str  # the guests' 'Linux version' from their kernel logs; "" when none was kept


@dataclass(frozen=True)
class Ladder:
    """One kind of I/O on one captured link, per I/O: the analyser's wire recipe."""

    link: str
    transport: str
    op: str
    bytes: int
    count: int
    frames: float
    wire_bytes: float
    round_trips: float


def read_run(folder: Path, option: str) -> RunRead:
    """A run folder's results and kernel, or a one-line error naming the folder and what is missing."""
    if not folder.is_dir():
        raise SanlabError(f"{option} {folder}: is not a folder (give a 'sanlab run' output folder)")
    path = folder / RESULTS
    if not path.is_file() or path.is_symlink():
        raise SanlabError(f"{option} {folder}: holds no {RESULTS} of a sanlab run")
    where = f"{option} {path}"
    document = parse_json(read_bounded(path, MAX_RESULTS_BYTES, option), where)
    run = document.get("run") if isinstance(document, dict) else None
    results = document.get("results") if isinstance(document, dict) else None
    if not isinstance(run, dict) or not isinstance(results, list):
        raise SanlabError(f"{where}: not a run's results (no 'run' and 'results')")
    records = []
    for index, raw in enumerate(results):
        try:
            records.append(ResultRecord.model_validate(raw))
        except ValueError:
            raise SanlabError(f"{where}: results[{index}] is not a result record") from None
    return RunRead(
        folder, str(run.get("scenario") or ""), str(run.get("status") or "?"), records, kernel_of(folder)
    )


def kernel_of(folder: Path) -> str:
    """The first 'Linux version' in the run's kernel logs (logs/, share-K/logs/, resumed-N/)."""
    for log in sorted([*folder.glob("logs/*.dmesg"), *folder.glob("*/logs/*.dmesg")]):
        if not _inside(folder, log) or not log.is_file():
            continue
        found = _VERSION.search(_head(log, MAX_LOG_BYTES).decode(errors="replace"))
        if found:
            return found.group(1)
    return ""


def _head(path: Path, limit: int) -> bytes:
    """The first ``limit`` bytes of a regular file (never a link's, never blocking on a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return b""
    with os.fdopen(fd, "rb") as handle:
        return handle.read(limit) if stat.S_ISREG(os.fstat(handle.fileno()).st_mode) else b""


def captures(folder: Path) -> list[Path]:
    """The run's captures: its links' pcaps, and those of each share or resumed part."""
    found = [*folder.glob("*.pcap"), *folder.glob("*/*.pcap")]
    return sorted(p for p in found if _inside(folder, p) and p.is_file())


def _inside(folder: Path, path: Path) -> bool:
    """Whether ``path`` is in ``folder`` itself: no part of it below ``folder`` is a link (a
    run folder's ``share-1 -> /`` would otherwise lead a glob out of it)."""
    here = folder
    for part in path.relative_to(folder).parts:
        here = here / part
        if here.is_symlink():
            return False
    return True


def pooled(ladders: Iterable[Ladder]) -> list[Ladder]:
    """One row per (link, transport, op, size): several captures of a link (a cluster run's
    shares) pooled, each figure weighted by its I/O count."""
    groups: dict[tuple[str, str, str, int], list[Ladder]] = {}
    for row in ladders:
        groups.setdefault((row.link, row.transport, row.op, row.bytes), []).append(row)
    out = []
    for (link, transport, op, size), rows in sorted(groups.items()):
        n = sum(r.count for r in rows)

        out.append(
            Ladder(
                link, transport, op, size, n,
                _mean([(r.frames, r.count) for r in rows]),
                _mean([(r.wire_bytes, r.count) for r in rows]),
                _mean([(r.round_trips, r.count) for r in rows]),
            )
        )  # fmt: skip
    return out


def _mean(values: list[tuple[float, int]]) -> float:
    """The mean of per-I/O figures, each weighted by its count of I/Os."""
    n = sum(c for _, c in values)
    return round(sum(v * c for v, c in values) / n, 3) if n else 0.0


def _key(record: ResultRecord) -> tuple[object, ...]:
    return tuple(getattr(record, k) for k in POINT_KEYS)


def paired(
    a: Sequence[ResultRecord], b: Sequence[ResultRecord]
) -> list[tuple[ResultRecord | None, ResultRecord | None]]:
    """The two runs' records of each point, in A's order (then B's own): the k-th record of a
    point's key in A with the k-th in B's; a point one run lacks is paired with None."""
    seen: dict[tuple[object, ...], int] = {}
    keyed_b: dict[tuple[object, ...], list[ResultRecord]] = {}
    for record in b:
        keyed_b.setdefault(_key(record), []).append(record)
    pairs: list[tuple[ResultRecord | None, ResultRecord | None]] = []
    for record in a:
        key = _key(record)
        k = seen[key] = seen.get(key, -1) + 1
        others = keyed_b.get(key, [])
        pairs.append((record, others[k] if k < len(others) else None))
    for key, others in keyed_b.items():
        pairs += [(None, extra) for extra in others[seen.get(key, -1) + 1 :]]
    return pairs


def verdict(record: ResultRecord | None) -> str:
    """A point's outcome in a word (known_bad.outcome), or '-' where the run lacks it."""
    return "-" if record is None else outcome(record)


# What markdown reads as markup or a table's cell boundary; a run's strings (its scenario's
# name, status, kernel, errors) come from a file anyone may have written, so each is escaped.
_MARKUP = re.compile(r"([\\`*_\[\]<>|#])")
_BREAKS = re.compile(r"[\x00-\x1f\x7f]+")


def md(text: str) -> str:
    """``text`` as literal markdown on one line: line breaks and control characters become a
    space, markup characters are backslash-escaped (a ``|`` never splits a table's cell)."""
    return _MARKUP.sub(r"\\\1", _BREAKS.sub(" ", text))


def label(record: ResultRecord, who: bool = False) -> str:
    """A point in words; ``who`` names its initiator (where several share a target)."""
    who_ = f" ({record.initiator})" if who and record.initiators is None and record.initiator else ""
    rdma = f"/{record.rdma_driver}" if record.rdma_driver else ""
    shape = f"{record.rw} {format_size(record.bs)} qd{record.iodepth} j{record.numjobs}"
    return f"{record.transport} {record.target_stack} {record.fabric}{rdma}{who_} {shape}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _recovery(record: ResultRecord | None) -> str:
    """Recovery, failover and failback times, where a fault hit the point."""
    if record is None or (record.recovery_s, record.failover_s, record.failback_s) == (None, None, None):
        return "-"
    parts = [_seconds(record.recovery_s)]
    if record.failover_s is not None or record.failback_s is not None:
        parts.append(f"fo {_seconds(record.failover_s)} / fb {_seconds(record.failback_s)}")
    return " ".join(parts)


def page(
    a: RunRead,
    b: RunRead,
    ladders: tuple[list[Ladder], list[Ladder]] | str,
    projections: tuple[list[ResultRecord], list[ResultRecord]] | str,
) -> str:
    """The comparison as one markdown page.  ``ladders`` and ``projections`` are each run's
    rows, or a sentence saying why there are none (no captures, the model refused)."""
    lines = [f"# {md(a.scenario or a.folder.name)} vs {md(b.scenario or b.folder.name)}", ""]
    lines += _heading(a, b) + ["", "## Pass or fail, recovery (per point)", ""]
    lines += _points(a, b) + ["", "## Wire ladders (per I/O, from the captures)", ""]
    lines += [ladders, ""] if isinstance(ladders, str) else _ladders(*ladders)
    lines += ["## The model's projection (hardware, not emulation)", "", EMULATED_NOTE, ""]
    lines += [projections] if isinstance(projections, str) else _projections(*projections)
    return "\n".join(lines).rstrip() + "\n"


def _heading(a: RunRead, b: RunRead) -> list[str]:
    rows = ["| | A | B |", "|---|---|---|"]
    rows.append(f"| run folder | {md(a.folder.name)} | {md(b.folder.name)} |")
    rows.append(f"| kernel | {md(a.kernel or 'not logged')} | {md(b.kernel or 'not logged')} |")
    rows.append(f"| status | {md(a.status)} | {md(b.status)} |")
    rows.append(f"| records | {len(a.records)} | {len(b.records)} |")
    return rows


def _points(a: RunRead, b: RunRead) -> list[str]:
    pairs = paired(a.records, b.records)
    differ = sum(verdict(x) != verdict(y) for x, y in pairs)
    rows = [
        f"{len(pairs)} points; {differ} with another outcome in B than in A.  Recovery: seconds from a "
        "fault's end to the first I/O after it (fo/fb: multipath failover and failback).",
        "",
        "| point | A | B | A recovery s | B recovery s | |",
        "|---|---|---|---|---|---|",
    ]
    several = len({r.initiator for r in [*a.records, *b.records]}) > 1
    for x, y in pairs:
        name = label(x or y, several)  # type: ignore[arg-type]  # a pair holds at least one record
        mark = "**differs**" if verdict(x) != verdict(y) else ""
        rows.append(
            f"| {md(name)} | {verdict(x)} | {verdict(y)} | {_recovery(x)} | {_recovery(y)} | {mark} |"
        )
    for side, records in (("A", a.records), ("B", b.records)):
        for r in records:
            if r.error:
                rows.append(f"\n{side}, {md(label(r))}: {md(r.error.splitlines()[0][:200])}")
            if r.known_bad:
                rows.append(f"\n{side}, {md(label(r))}: {KNOWN_BAD}, {md(r.known_bad)}")
    return rows + [""]


def _ladders(a: list[Ladder], b: list[Ladder]) -> list[str]:
    keyed = {(r.link, r.transport, r.op, r.bytes): [r, None] for r in pooled(a)}
    for r in pooled(b):
        keyed.setdefault((r.link, r.transport, r.op, r.bytes), [None, None])[1] = r
    rows = [
        "Messages (frames), captured bytes and round trips per I/O; A -> B.  Two runs of one kernel "
        "differ here too (ACKs coalesce as the timing falls): rerun one kernel to see how much "
        "before reading a change as the kernel's.",
        "",
        "| link | transport | I/O | A I/Os | B I/Os | frames | bytes | round trips |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (link, transport, op, size), (x, y) in sorted(keyed.items()):
        figures = [_change(x, y, field) for field in ("frames", "wire_bytes", "round_trips")]
        counts = [str(r.count) if r else "-" for r in (x, y)]
        cells = [md(link), md(transport), md(f"{op} {format_size(size)}"), *counts, *figures]
        rows.append("| " + " | ".join(cells) + " |")
    return rows + [""]


def _change(x: Ladder | None, y: Ladder | None, field: str) -> str:
    before = getattr(x, field) if x else None
    after = getattr(y, field) if y else None
    if before is None or after is None:
        return f"{_num(before)} -> {_num(after)}"
    return _num(before) if before == after else f"**{_num(before)} -> {_num(after)}**"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _projections(a: list[ResultRecord], b: list[ResultRecord]) -> list[str]:
    rows = [
        "The model projects each run's scenario on its profile; it knows no kernel, so the two "
        "differ only where the runs' scenarios do.",
        "",
        "| point (profile) | A IOPS | B IOPS | A lat us | B lat us | bottleneck A / B |",
        "|---|---|---|---|---|---|",
    ]
    for x, y in paired(a, b):
        r = x or y
        name = f"{label(r)} ({r.profile})" if r else "?"
        iops = [f"{p.iops:,.0f}" if p and p.iops is not None else "-" for p in (x, y)]
        lat = [f"{p.lat_mean_us:.1f}" if p and p.lat_mean_us is not None else "-" for p in (x, y)]
        neck = " / ".join(p.bottleneck or "-" if p else "-" for p in (x, y))
        rows.append(f"| {md(name)} | {' | '.join(iops)} | {' | '.join(lat)} | {neck} |")
    return rows + [""]
