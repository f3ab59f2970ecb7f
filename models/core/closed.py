"""The closed network's recursion, one home for the model's two uses of it.

``stations.network_rate`` solves the whole network of desks with it (what
``mva`` reports, and what ``hostcpu`` chooses layouts and settles contention
on); ``hostcpu`` also solves one host's two candidate layouts with the rest of
the round trip as a delay, for its first guess.  Both follow mean value
analysis: with N customers, each desk's residence time is its demand times one
plus the queue an arriving customer finds (the queue with N-1 customers), and
a desk of several servers is Seidmann's faster single clerk plus a fixed delay.
"""

from __future__ import annotations

from collections.abc import Iterable

# A step that raises the throughput by less than this share is past saturation: the rest of the
# customers add at most (N - n) times it, a few parts in a million at the largest populations.
SETTLED = 1e-9


def seidmann(desks: Iterable[tuple[float, int]]) -> tuple[float, list[float]]:
    """(demand, servers) desks as Seidmann's approximation has them: the fixed delay they add in
    all, and each desk's single clerk's demand."""
    pairs = list(desks)
    return sum(d * (c - 1) / c for d, c in pairs), [d / c for d, c in pairs]


def throughput(delay: float, demands: list[float], customers: int) -> float:
    """Customers per unit time around a cycle of ``delay`` and single-clerk ``demands`` with
    ``customers`` in it (the loop runs thousands of times a fit: plain floats)."""
    lengths = [0.0] * len(demands)
    rate = 0.0
    for n in range(1, max(customers, 1) + 1):
        residence = [d * (1 + q) for d, q in zip(demands, lengths)]  # noqa: B905 (same length)
        previous, rate = rate, n / (delay + sum(residence))
        lengths = [rate * r for r in residence]
        if rate - previous < SETTLED * rate:
            break  # saturated: more customers only queue at the bottleneck
    return rate
