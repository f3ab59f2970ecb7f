"""Contention between a host's cores: what an I/O pays for the other cores running its path.

Linux's storage path is built per CPU (blk-mq's queues and tags, one NVMe
queue per CPU), yet every I/O still touches some lines all the host's cores
share: a namespace's and a subsystem's counters, a NIC queue's lock, the
allocator.  While one core holds or pulls such a line the others that want it
wait, so an I/O's work grows with the cores busy beside it: Amdahl's law, the
contention term of Gunther's universal scalability law.  Here the growth is
linear, ``cycles_per_busy_core`` for every other busy core, so a saturated
host still gains IOPS from every core it is given (the gain only shrinks);
the coherence term that would make it lose (USL's kappa) is left out, as no
table here shows a host losing IOPS to more cores.

The busy cores are those the host's I/O work keeps busy without contention
(its CPU desks' demand at the network's throughput bound), so a point's own
contention never feeds back into its load.  The costs fitted to the published
tables already carry the contention of their rows, so an I/O pays only for
the busy cores past the busiest host a fitted row had (``Contention.start``,
which ``sanlab calibrate --write`` records).
"""

from __future__ import annotations

from dataclasses import replace

from sanlab.models.core.costs import Contention
from sanlab.models.core.paths import SIDES
from sanlab.models.core.stations import Station, throughput_bound


def busy_cores(
    stations: list[Station], customers: int, hosts: dict[str, int], cores: dict[str, int]
) -> dict[str, float]:
    """Cores each side's host keeps busy with the I/O path, without contention: its queue desks'
    demand an I/O at the network's throughput bound, over its ``hosts`` alike, at most its
    ``cores``."""
    rate = throughput_bound(stations, customers)  # I/Os a microsecond, all hosts
    out = {}
    for side in SIDES:
        demand = sum(s.demand_us for s in stations if s.side == side and s.kind == "queue")
        out[side] = min(float(cores[side]), rate * demand / hosts[side])
    return out


def extra_kcycles(contention: Contention, side: str, busy: float) -> float:
    """What an I/O on ``side`` pays for its host's ``busy`` cores past the fitted rows' busiest."""
    return contention.cycles_per_busy_core * max(0.0, busy - contention.start(side)) / 1000


def contended(stations: list[Station], side: str, extra_us: float) -> list[Station]:
    """``side``'s desks with ``extra_us`` an I/O of contention on its first CPU desk (the jobs' or
    queues' cores, where the I/O's own work runs), named ``SIDE-contention`` in its parts."""
    if extra_us <= 0:
        return stations
    out, done = [], False
    for s in stations:
        if not done and s.side == side and s.kind == "queue":
            s = replace(
                s, demand_us=s.demand_us + extra_us, parts=(*s.parts, (f"{side}-contention", extra_us))
            )
            done = True
        out.append(s)
    return out


def busier(busy: dict[str, float], fitted: dict[str, float]) -> list[str]:
    """The sides whose host keeps more cores busy than the fitted rows' busiest did."""
    return [side for side in SIDES if side in busy and side in fitted and busy[side] > fitted[side]]


def past_fitted(busy: dict[str, float], fitted: dict[str, float]) -> str | None:
    """What a projection whose hosts are busier than any fitted row's says of it: its contention
    is the prior's, never measured (the range spans the prior); None within the fitted rows'."""
    over = [
        f"the {side} keeps {busy[side]:.2f} cores busy (fitted rows: at most {fitted[side]:.2f})"
        for side in busier(busy, fitted)
    ]
    if not over:
        return None
    return (
        f"extrapolated: {' and '.join(over)}; contention between its cores there is a prior's,"
        " never measured, and the range spans it"
    )
