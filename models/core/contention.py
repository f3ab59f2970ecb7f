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

The busy cores are those the I/O path's own work keeps busy (its CPU desks'
demand, without contention's waits) at the rate the network clears; that rate
and the contention decide each other, so ``hostcpu`` solves the two together
(``settled``), on the rate ``stations.network_rate`` works out for the solver
too.  The costs fitted to the published
tables already carry the contention of their rows, so an I/O pays only for
the busy cores past the busiest host a fitted row had (``Contention.start``,
which ``sanlab calibrate --write`` records).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from sanlab.models.core.costs import Contention
from sanlab.models.core.paths import SIDES
from sanlab.models.core.stations import Station

# The fixed point's tolerance (a share of the rate, well under closed.SETTLED's spread over the
# customers) and the most steps it may take.
ROOT = 1e-12
ROUNDS = 60


def side_demands(stations: list[Station]) -> dict[str, float]:
    """Each side's CPU work an I/O (its queue desks' demand, microseconds), before contention."""
    return {
        side: sum(s.demand_us for s in stations if s.side == side and s.kind == "queue") for side in SIDES
    }


def busy_at(
    rate: float, demand: dict[str, float], hosts: dict[str, int], cores: dict[str, int]
) -> dict[str, float]:
    """Cores each side's host keeps busy with the I/O path's own work at ``rate`` I/Os a
    microsecond (all hosts), over its ``hosts`` alike, at most its ``cores``."""
    return {side: min(float(cores[side]), rate * demand[side] / hosts[side]) for side in SIDES}


def settled(rate_under: Callable[[float], float], free: float) -> float:
    """The rate the network clears under the contention of the load it carries: the root of
    ``rate_under(x) = x``, where ``rate_under`` is the network's rate with the contention of
    ``x`` I/Os a microsecond, falling as ``x`` grows, and ``free`` the rate without any.  The
    root lies between ``rate_under(free)`` and ``free``; the Illinois method closes in on it
    (regula falsi that halves a stuck end's weight) to ``ROOT``, so a network given more at
    every load settles no lower."""
    low = rate_under(free)
    high, f_high = free, low - free  # rate_under(free) is low: no second solve
    f_low = rate_under(low) - low  # >= 0: less load, less contention
    if f_high >= 0 or f_low <= 0:
        return high if f_high >= 0 else low
    kept = 0  # +1: the low end moved last, -1: the high end
    for _ in range(ROUNDS):
        mid = (low * f_high - high * f_low) / (f_high - f_low)
        f_mid = rate_under(mid) - mid
        if abs(f_mid) <= ROOT * mid or high - low <= ROOT * high:
            return mid
        if f_mid > 0:
            low, f_low = mid, f_mid
            f_high = f_high / 2 if kept == 1 else f_high
            kept = 1
        else:
            high, f_high = mid, f_mid
            f_low = f_low / 2 if kept == -1 else f_low
            kept = -1
    return (low + high) / 2


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
