"""Published measurements (models/data/published/*.csv) as model points.

These tables are inputs to fitting and to comparison, never constants of
the model: this module only reads them.  A row becomes a ``Point`` on the
profile of the same name plus the measured figures.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sanlab.models.network import LOCAL, Point
from sanlab.scenarios.errors import SanlabError
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


PUBLISHED_DIR = Path(__file__).resolve().parent / "data" / "published"


def calibration_dir(explicit: str | Path | None = None) -> Path:
    """Where the published CSVs are: ``--data DIR`` when given, else the tables that ship
    inside the package (models/data/published, with their provenance in its README).

    Nothing outside the package is searched: a clone or a wheel stands on its own, and a
    folder beside the checkout is never read by surprise."""
    folder = Path(explicit) if explicit else PUBLISHED_DIR
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
    if rows and "message_id" in rows[0]:
        if not select:
            raise SanlabError(f"{path}: a table of posts needs the profile's calibration.select")
        return [measured(r, profile) for r in from_posts(rows, select)]
    return [measured(row, profile) for row in rows]


POST_SELECT = ("note_contains", "initiator_contains", "fabric", "link_gbps", "mtu")


def from_posts(rows: list[dict[str, str]], select: dict[str, Any]) -> list[dict[str, str]]:
    """The rows of a posts table (models/data/published/linux-nvme-tcp-2019-2020.csv) that
    ``select`` picks, in the columns ``measured`` reads.

    The posts state transport, queue depth, jobs, IOPS and mean latency; the
    link (fabric, rate, MTU) is the profile's assumption, given in ``select``;
    a host polled where its fio used hipri; each row is a 4 KiB random read
    (what the posts and their README say)."""
    unknown = sorted(set(select) - set(POST_SELECT))
    if unknown:
        raise SanlabError(f"calibration.select: {', '.join(unknown)} unknown (use {', '.join(POST_SELECT)})")
    picked = []
    for row in rows:
        if str(select.get("note_contains", "")) not in row["note"]:
            continue
        if str(select.get("initiator_contains", "")) not in row["initiator"]:
            continue
        iops = float(row["iops"])
        picked.append(
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
                "lat_mean_ms": str(float(row["lat_mean_us"]) / 1000),
                "poll": "1" if "hipri" in row["initiator"] else "0",
            }
        )
    return picked


def read_rows(path: Path) -> list[dict[str, str]]:
    """A published table's rows as its CSV header names them."""
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


_YES, _NO = ("1", "yes", "true"), ("", "0", "no", "false")


def _flag(row: dict[str, str], column: str) -> bool:
    """A yes/no column (a digest), empty or absent meaning no; anything else is refused."""
    text = (row.get(column) or "").strip().lower()
    if text not in _YES + _NO:
        raise SanlabError(f"column '{column}' is {text!r}; use 1 or 0 (yes/no, true/false)")
    return text in _YES


def measured(row: dict[str, str], profile: str) -> Measured:
    """One published row as a point on ``profile`` (or its own ``profile`` column); a table
    may name each row's ``mtu``, ``backend`` and ``target_stack``, else the profile's apply,
    and say whether the host polled (``poll``: fio's hipri on NVMe poll queues)."""
    local = row.get("setup") == "local"
    lat = row.get("lat_mean_ms")
    cpu = row.get("cpu_pct")
    point = Point(
        transport=LOCAL if local else row["transport"],
        fabric="eth" if local else row["fabric"],
        link_gbps=float(row["link_gbps"]) or 100.0,
        rw=row["rw"],
        bs=parse_size(row["bs"]),
        iodepth=int(row["iodepth"]),
        numjobs=int(row["numjobs"]),
        profile=row.get("profile") or profile,
        mtu=int(row["mtu"]) if row.get("mtu") else None,
        backend=row.get("backend") or None,
        target_stack=row.get("target_stack") or None,
        header_digest=_flag(row, "header_digest"),
        data_digest=_flag(row, "data_digest"),
        poll=_flag(row, "poll"),
    )
    return Measured(
        point=point,
        iops=float(row["iops"]),
        bw_mibps=float(row["bw_mibps"]),
        lat_mean_us=float(lat) * 1000 if lat else None,
        cpu_pct=float(cpu) if cpu else None,
    )
