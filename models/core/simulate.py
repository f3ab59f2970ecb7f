"""Run a network as a discrete-event simulation until the IOPS estimate is tight, and read it out.

fio's closed loop is the source: ``numjobs * iodepth`` I/Os are issued at
time zero and each completion issues the next.  Completions are counted in
batches; after a warm-up batch, the run stops when the 95% confidence
interval of the batch throughputs is within ``rel_ci`` of their mean (or
after ``max_batches``).  The same seed gives the same answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sanlab.models.core.elements import Clock, Delay, Server, jitter
from sanlab.models.core.mva import bottleneck_of
from sanlab.models.core.network import Network

# Two-sided 95% Student t quantiles, for the batch-means interval.
_T95 = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 7: 2.45, 8: 2.36, 9: 2.31, 10: 2.26}


def _t95(batches: int) -> float:
    return _T95.get(batches, 2.0 + 2.0 / max(batches - 1, 1))


# Completions per batch: four rounds of every I/O in flight, so that one batch's rate says
# little of the next's, within these bounds.  Past MAX_BATCH (more than 1,024 I/Os in flight,
# where some desk is saturated and a batch's rate varies by tenths of a per cent) the batches
# are shorter than a round, and the warm-up is one round of every I/O or a batch, whichever is
# longer: at 16,384 I/Os in flight a point simulates 37 k I/Os, not 393 k, and its IOPS, mean
# and p99 latency move by less than 1 % (docs/measurements/models.md, 2026-11-27).
MIN_BATCH = 200
MAX_BATCH = 4096


@dataclass(frozen=True)
class Settings:
    seed: int = 1
    cv_scale: float = 1.0
    rel_ci: float = 0.02
    min_batches: int = 5
    max_batches: int = 40
    batch_size: int = 0  # 0: chosen from the number of outstanding I/Os


@dataclass(frozen=True)
class SimResult:
    iops: float
    iops_ci95: tuple[float, float]
    lat_mean_us: float
    lat_p99_us: float
    utilisation: dict[str, float]
    cpu_pct: dict[str, float]
    bottleneck: str
    completed: int


class _Io:
    __slots__ = ("start",)

    def __init__(self) -> None:
        self.start = 0.0


def _elements(clock: Clock, net: Network, cfg: Settings) -> list[Server | Delay]:
    """One element per station, each with its own random stream, joined in visiting order."""
    streams = np.random.SeedSequence(cfg.seed).spawn(len(net.stations))
    elements: list[Server | Delay] = []
    for station, stream in zip(net.stations, streams, strict=True):
        draws = jitter(np.random.default_rng(stream), station.cv * cfg.cv_scale)
        if station.kind == "delay":
            elements.append(Delay(clock, station.name, station.demand_us, draws))
        else:
            elements.append(Server(clock, station.name, station.servers, station.demand_us, draws))
    for upstream, downstream in zip(elements, elements[1:], strict=False):
        upstream.out = downstream.put
    return elements


class BatchMeans:
    """The measurement, apart from the model: completions in batches, warm-up discarded.

    It watches the last station's output like a port monitor: each
    completed I/O's latency, the completion rate of each batch, and the
    stations' busy time from the end of the warm-up (the first ``warm_up``
    completions).  It ends the run once the batch means pin the rate
    (``Settings.rel_ci``).
    """

    def __init__(
        self, clock: Clock, elements: list[Server | Delay], batch: int, cfg: Settings, warm_up: int = 0
    ):
        self.clock, self.elements, self.batch, self.cfg = clock, elements, batch, cfg
        self.latencies: list[float] = []
        self.batch_rates: list[float] = []
        self.done = 0
        self.warm_up = warm_up or batch
        self.batch_end = self.warm_up  # the completion that ends the running batch
        self.batch_start = 0.0
        self.measure_from = 0.0
        self.busy_at_measure: list[float] | None = None

    def complete(self, io: _Io) -> None:
        """An I/O left the last station: count it, and send it round again (fio's closed loop)."""
        now = self.clock.now
        self.latencies.append(now - io.start)
        self.done += 1
        if self.done == self.batch_end:
            self._end_batch(now)
        io.start = now
        self.elements[0].put(io)

    def _end_batch(self, now: float) -> None:
        size = self.batch if self.busy_at_measure is not None else self.warm_up
        rate = size / (now - self.batch_start)
        self.batch_start, self.batch_end = now, self.batch_end + self.batch
        if self.busy_at_measure is None:  # end of warm-up: discard it
            self.busy_at_measure = [e.busy_time for e in self.elements]
            self.measure_from = now
            self.latencies.clear()
            return
        self.batch_rates.append(rate)
        if _tight(self.batch_rates, self.cfg):
            self.clock.stop()

    def result(self, net: Network) -> SimResult:
        elapsed = self.clock.now - self.measure_from
        mean_rate = float(np.array(self.batch_rates).mean())
        half = _half_width(self.batch_rates)
        utilisation, cpu = self._busy(net, elapsed)
        lat = np.array(self.latencies)
        per_io = 1e6 / net.split
        return SimResult(
            iops=mean_rate * per_io,
            iops_ci95=((mean_rate - half) * per_io, (mean_rate + half) * per_io),
            lat_mean_us=float(lat.mean()),
            lat_p99_us=float(np.percentile(lat, 99)),
            utilisation=utilisation,
            cpu_pct=cpu,
            bottleneck=bottleneck_of(utilisation),
            completed=self.done,
        )

    def _busy(self, net: Network, elapsed: float) -> tuple[dict[str, float], dict[str, float]]:
        """Each queue's utilisation, and each side's CPU %, over the measured part of the run."""
        busy0 = self.busy_at_measure or [0.0] * len(self.elements)
        # A server's service is counted when it starts, so a desk busy to the end has a part of
        # its last services counted before they ran: no desk is busier than its clerks.
        busy = [
            (station, min((element.busy_time - before) / elapsed, station.servers))
            for station, element, before in zip(net.stations, self.elements, busy0, strict=True)
            if station.kind == "queue"
        ]
        utilisation = {station.name: cores / station.servers for station, cores in busy}
        return utilisation, net.cpu_pct(busy)


def simulate(net: Network, settings: Settings | None = None) -> SimResult:
    """Run ``net`` as fio's closed loop until the batch means pin the rate."""
    cfg = settings or Settings()
    clock = Clock()
    elements = _elements(clock, net, cfg)
    outstanding = net.point.outstanding * net.split
    batch = cfg.batch_size or max(MIN_BATCH, min(4 * outstanding, MAX_BATCH))
    monitor = BatchMeans(clock, elements, batch, cfg, max(batch, outstanding))
    elements[-1].out = monitor.complete
    for _ in range(outstanding):
        elements[0].put(_Io())
    clock.run()
    return monitor.result(net)


def _tight(rates: list[float], cfg: Settings) -> bool:
    n = len(rates)
    if n >= cfg.max_batches:
        return True
    if n < cfg.min_batches:
        return False
    return _half_width(rates) <= cfg.rel_ci * sum(rates) / n


def _half_width(rates: list[float]) -> float:
    """Half-width of the 95 % batch-means interval of the mean rate."""
    n = len(rates)
    if n < 2:
        return 0.0
    mean = sum(rates) / n
    std = math.sqrt(sum((r - mean) ** 2 for r in rates) / (n - 1))
    return _t95(n) * std / math.sqrt(n)
