"""Published measurements (models/data/published/*.csv) as model points.

These tables are inputs to fitting and to comparison, never constants of
the model: this module only reads them.  A row becomes a ``Point`` on the
profile of the same name plus the measured figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sanlab.models.core.network import Point
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.reading import csv_number, read_csv
from sanlab.scenarios.registry import FABRIC_NAMES, LOCAL, TRANSPORT_NAMES
from sanlab.scenarios.sizes import parse_size


@dataclass(frozen=True)
class Measured:
    point: Point
    iops: float
    bw_mibps: float
    lat_mean_us: float | None
    cpu_pct: float | None

    @property
    def label(self) -> str:
        p = self.point
        marks = ("+hdgst" if p.header_digest else "") + ("+ddgst" if p.data_digest else "")
        marks += "+poll" if p.poll else ""
        shape = f"{p.rw} {p.bs // 1024}k j{p.numjobs}q{p.iodepth}{marks}"
        return f"{p.transport}/{p.fabric}/{p.link_gbps:g} {shape}"


PUBLISHED_DIR = Path(__file__).resolve().parent.parent / "data" / "published"


def calibration_dir(explicit: str | Path | None = None) -> Path:
    """Where the published CSVs are: ``--data DIR`` when given, else the tables that ship
    inside the package (models/data/published, with their provenance in its README).

    Nothing outside the package is searched: a clone or a wheel stands on its own, and a
    folder beside the checkout is never read by surprise."""
    folder = Path(explicit) if explicit is not None else PUBLISHED_DIR
    if explicit is not None and not Path(folder).is_dir():
        raise SanlabError(
            f"calibration tables: {str(folder)!r} is not a folder; give --data a folder of tables"
        )
    if not Path(folder, "zeta-2016.csv").is_file():
        raise SanlabError(
            f"calibration tables: {folder} holds no zeta-2016.csv; give --data a folder of "
            f"tables like {PUBLISHED_DIR}"
        )
    return folder


def load_table(path: Path, profile: str, select: dict[str, Any] | None = None) -> list[Measured]:
    """Rows of one published table as points on ``profile`` (or on a row's own ``profile``
    column, with its ``mtu`` where the table gives one).  A table of mailing-list posts
    (a ``message_id`` column) is read through ``select`` (``from_post``)."""
    rows = read_rows(path)
    source = f"calibration table {path}"
    if rows and "message_id" in rows[0]:
        if not isinstance(select, dict) or not select:
            raise SanlabError(f"{path}: a table of posts needs the profile's calibration.select")
        return [measured(r, profile, source, line) for line, r in from_posts(rows, select, source)]
    return [measured(row, profile, source, line) for line, row in enumerate(rows, start=2)]


POST_SELECT = ("note_contains", "initiator_contains", "fabric", "link_gbps", "mtu")


POST_COLUMNS = ("note", "initiator", "transport", "iodepth", "numjobs", "iops", "lat_mean_us")


def from_posts(
    rows: list[dict[str, str]], select: dict[str, Any], source: str = "posts"
) -> list[tuple[int, dict[str, str]]]:
    """The rows of a posts table (models/data/published/linux-nvme-tcp-2019-2020.csv) that
    ``select`` picks, in the columns ``measured`` reads.

    The posts state transport, queue depth, jobs, IOPS and mean latency; the
    link (fabric, rate, MTU) is the profile's assumption, given in ``select``;
    a host polled where its fio used hipri; each row is a 4 KiB random read
    (what the posts and their README say)."""
    unknown = sorted(set(select) - set(POST_SELECT))
    if unknown:
        raise SanlabError(f"calibration.select: {', '.join(unknown)} unknown (use {', '.join(POST_SELECT)})")
    missing = [c for c in POST_COLUMNS if rows and c not in rows[0]]
    if missing:
        raise SanlabError(
            f"{source}: no column {', '.join(missing)} (a table of posts has {', '.join(POST_COLUMNS)})"
        )
    picked = []
    for line, row in enumerate(rows, start=2):
        if str(select.get("note_contains", "")) not in row["note"]:
            continue
        if str(select.get("initiator_contains", "")) not in row["initiator"]:
            continue
        iops = csv_number(source, line, "iops", row["iops"], 0, 1e9)
        lat = csv_number(source, line, "lat_mean_us", row["lat_mean_us"], 0, 1e9)
        picked.append(
            (
                line,
                {
                    "transport": row["transport"],
                    "fabric": str(select["fabric"]),
                    "link_gbps": str(select["link_gbps"]),
                    "mtu": str(select.get("mtu", "")),
                    "rw": "randread",
                    "bs": "4k",
                    "iodepth": row["iodepth"],
                    "numjobs": row["numjobs"],
                    "iops": row["iops"],
                    "bw_mibps": str(iops * 4096 / 2**20),
                    "lat_mean_ms": str(lat / 1000),
                    "poll": "1" if "hipri" in row["initiator"] else "0",
                },
            )
        )
    return picked


def read_rows(path: Path) -> list[dict[str, str]]:
    """A published table's rows as its CSV header names them, through the one reader
    (scenarios/reading.py: regular file, bounded, no NUL byte, no ragged row)."""
    return read_csv(path, "calibration table")


_YES, _NO = ("1", "yes", "true"), ("", "0", "no", "false")
REQUIRED = ("transport", "fabric", "link_gbps", "rw", "bs", "iodepth", "numjobs", "iops", "bw_mibps")
RWS = ("read", "write", "randread", "randwrite")


def _flag(row: dict[str, str], column: str, where: str = "") -> bool:
    """A yes/no column (a digest), empty or absent meaning no; anything else is refused."""
    text = (row.get(column) or "").strip().lower()
    if text not in _YES + _NO:
        raise SanlabError(f"{where}column '{column}' is {text!r}; use 1 or 0 (yes/no, true/false)")
    return text in _YES


def _where(source: str, line: int) -> str:
    """'FILE: row N: ', or nothing when the caller names the file and line (models/calibration/checks.py)."""
    return f"{source}: row {line}: " if line else ""


def _choice(source: str, line: int, row: dict[str, str], column: str, allowed: tuple[str, ...]) -> str:
    value = row[column]
    if value not in allowed:
        raise SanlabError(
            f"{_where(source, line)}column '{column}' is {value[:40]!r}; use {', '.join(allowed)}"
        )
    return value


def measured(row: dict[str, str], profile: str, source: str = "table", line: int = 0) -> Measured:
    """One published row as a point on ``profile`` (or its own ``profile`` column); a table
    may name each row's ``mtu``, ``backend`` and ``target_stack``, else the profile's apply,
    and say whether the host polled (``poll``: fio's hipri on NVMe poll queues).

    Each cell is checked (scenarios/reading.py's ``csv_number``): a missing column, a word
    where a figure belongs, NaN or a figure beyond physics is one line naming the file, row,
    column and value."""
    missing = [c for c in REQUIRED if c not in row and not (c in ("transport", "fabric") and "setup" in row)]
    if missing:
        raise SanlabError(f"{source}: no column {', '.join(missing)} (a table has {', '.join(REQUIRED)})")
    local = row.get("setup") == LOCAL.name  # the drive measured on its own, no transport between

    def number(column: str, low: float, high: float, whole: bool = False) -> float:
        return csv_number(source, line, column, row[column], low, high, whole)

    lat, cpu, mtu = row.get("lat_mean_ms"), row.get("cpu_pct"), row.get("mtu")
    try:
        bs = parse_size(row["bs"])
    except ValueError:
        raise SanlabError(
            f"{_where(source, line)}column 'bs' is {row['bs'][:40]!r}; give a size like 4k"
        ) from None
    point = Point(
        transport=LOCAL.name if local else _choice(source, line, row, "transport", TRANSPORT_NAMES),
        fabric=LOCAL.fabrics[0] if local else _choice(source, line, row, "fabric", FABRIC_NAMES),
        link_gbps=number("link_gbps", 0, 800) or 100.0,
        rw=_choice(source, line, row, "rw", RWS),
        bs=bs,
        iodepth=int(number("iodepth", 1, 4096, whole=True)),
        numjobs=int(number("numjobs", 1, 4096, whole=True)),
        profile=row.get("profile") or profile,
        mtu=int(number("mtu", 576, 65520, whole=True)) if mtu else None,
        backend=row.get("backend") or None,
        target_stack=row.get("target_stack") or None,
        header_digest=_flag(row, "header_digest", _where(source, line)),
        data_digest=_flag(row, "data_digest", _where(source, line)),
        poll=_flag(row, "poll", _where(source, line)),
    )
    return Measured(
        point=point,
        iops=number("iops", 0, 1e9),
        bw_mibps=number("bw_mibps", 0, 1e7),
        lat_mean_us=number("lat_mean_ms", 0, 1e6) * 1000 if lat else None,
        cpu_pct=number("cpu_pct", 0, 100_000) if cpu else None,
    )
