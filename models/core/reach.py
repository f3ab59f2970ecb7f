"""How far the published tables reach, so that a projection past them says so.

A parameter interval (``models/core/uncertainty.py``) says what the published
tables leave open inside the regime they measured.  Past that regime it
says nothing: NVMe/TCP at 200 Gb/s with 8 jobs projects the link with a
narrow interval, because the link bounds it and no parameter moves a link,
while NVIDIA measured half of it (``models/data/nvidia-nvme-tcp-2023.csv``).
What was crossed there is an edge of the data: no published row of NVMe/TCP
that the model was fitted to or met moved more than about 7 GB/s in all, or
2.4 GB/s through one job.  So each transport's reach is measured when
``sanlab calibrate --write`` runs (``reach`` in ``stacks.fit.yaml``): over
the fitted rows, and over the never-fitted rows the model must meet within
line-rate tolerance (``checks.confirming_rows``; a known miss confirms
nothing).  A projection beyond it carries a note naming the edge; the
figure itself is not changed, only no longer presented as checked.  Data
rates, not link speeds, are the edge: a QD 1 request on a faster link is
no further from the tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sanlab.models.core.network import Point
from sanlab.models.core.profile_files import STACKS_FILE, fit_path, read_fit
from sanlab.models.core.published import Measured

GB = 1e9
MIB = 2**20


@dataclass(frozen=True)
class Reach:
    """The most data a second, in all and through one fio job, over a transport's published rows."""

    gbytes_per_s: float
    job_gbytes_per_s: float

    def as_dict(self) -> dict[str, float]:
        return {
            "gbytes_per_s": round(self.gbytes_per_s, 3),
            "job_gbytes_per_s": round(self.job_gbytes_per_s, 3),
        }


def gbytes_per_s(bw_mibps: float) -> float:
    return bw_mibps * MIB / GB


def job_gbytes_per_s(bw_mibps: float, numjobs: int, initiators: int = 1) -> float:
    """Data one fio job moves a second, in GB/s (an incast's IOPS are all its initiators')."""
    return gbytes_per_s(bw_mibps) / max(1, numjobs * initiators)


def measure(rows: Iterable[tuple[Measured, float | None]]) -> dict[str, Reach]:
    """Each transport's reach over published rows, each with the IOPS the model gave it where it
    was fitted (None for a row that only checked the model).

    A fitted row reaches as far as the table or the model went there,
    whichever is further: a projection that overshoots a fitted cell is a
    miss that cell already shows, not an extrapolation.  A local row has no
    transport.
    """
    reach: dict[str, Reach] = {}
    for row, modelled_iops in rows:
        point = row.point
        if not point.networked:
            continue
        bw = max(row.bw_mibps, (modelled_iops or 0.0) * point.bs / MIB)
        seen = reach.get(point.transport, Reach(0.0, 0.0))
        reach[point.transport] = Reach(
            max(seen.gbytes_per_s, gbytes_per_s(bw)),
            max(seen.job_gbytes_per_s, job_gbytes_per_s(bw, point.numjobs)),
        )
    return dict(sorted(reach.items()))


def from_fit(document: Mapping[str, Any] | None) -> dict[str, Reach]:
    """The reach a fit file records (none in a fit written before it was measured)."""
    recorded = (document or {}).get("reach") or {}
    return {
        name: Reach(float(r["gbytes_per_s"]), float(r["job_gbytes_per_s"])) for name, r in recorded.items()
    }


_LOADED: dict[str, dict[str, Reach]] = {}


def load() -> dict[str, Reach]:
    """The committed joint fit's reach (read once; ``clear`` after a new fit is written)."""
    if "" not in _LOADED:
        path = fit_path(STACKS_FILE)
        _LOADED[""] = from_fit(read_fit(path) if path.is_file() else None)
    return _LOADED[""]


def clear() -> None:
    _LOADED.clear()


def beyond(
    transport: str, rate: float, job_rate: float, reach: Mapping[str, Reach], headroom: float = 1.1
) -> str | None:
    """What edge of the published data a projection moving ``rate`` GB/s (``job_rate`` a job) crossed.

    One sentence, or None inside the tables.  ``headroom`` keeps a
    projection a few per cent past the fastest published row (the same regime,
    measured) from being called an extrapolation.  A fit that recorded no
    reach (written before it was measured) makes no claim.
    """
    if not reach:
        return None
    seen = reach.get(transport)
    if seen is None:
        return f"extrapolated: no published table measured {transport}"
    crossed = []
    if rate > seen.gbytes_per_s * headroom:
        crossed.append(f"{rate:.1f} GB/s in all (published rows reach {seen.gbytes_per_s:.1f})")
    if job_rate > seen.job_gbytes_per_s * headroom:
        crossed.append(f"{job_rate:.2f} GB/s a job (published rows reach {seen.job_gbytes_per_s:.2f})")
    if not crossed:
        return None
    return (
        f"extrapolated: {' and '.join(crossed)} over {transport}; "
        "no published table checked the model here, and the interval does not cover it"
    )


# No table in shared/ measured NVMe/TCP inside TLS: its cost is a cryptography paper's.
TLS_UNCHECKED = (
    "extrapolated: TLS's AES-GCM cost is a cryptography paper's (models/stacks.yaml), never checked "
    "against a measurement of NVMe/TCP with TLS"
)


def past(point: Point, bw_mibps: float) -> str | None:
    """The edge of the committed fit's reach a projection of ``point`` moving ``bw_mibps`` crossed."""
    job_rate = job_gbytes_per_s(bw_mibps, point.numjobs, point.initiators)
    edge = beyond(point.transport, gbytes_per_s(bw_mibps), job_rate, load())
    if point.tls:
        return f"{edge}; {TLS_UNCHECKED.removeprefix('extrapolated: ')}" if edge else TLS_UNCHECKED
    return edge
