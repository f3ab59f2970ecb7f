"""Run a network in SimPy until the IOPS estimate is tight, and read it out.

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
import simpy

from sanlab.models.elements import Delay, Jitter, Server
from sanlab.models.network import Network

# Two-sided 95% Student t quantiles, for the batch-means interval.
_T95 = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 7: 2.45, 8: 2.36, 9: 2.31, 10: 2.26}


def _t95(batches: int) -> float:
    return _T95.get(batches, 2.0 + 2.0 / max(batches - 1, 1))


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


class _Progress:
    """Counters the completion callback updates while the run goes on."""

    def __init__(self) -> None:
        self.done = 0
        self.batch_start = 0.0
        self.measure_from = 0.0
        self.busy_at_measure: list[float] | None = None


class _Io:
    __slots__ = ("start",)

    def __init__(self) -> None:
        self.start = 0.0


def simulate(net: Network, settings: Settings | None = None) -> SimResult:
    cfg = settings or Settings()
    env = simpy.Environment()
    streams = np.random.SeedSequence(cfg.seed).spawn(len(net.stations))
    elements: list[Server | Delay] = []
    for station, stream in zip(net.stations, streams, strict=True):
        jitter = Jitter(np.random.default_rng(stream), station.cv * cfg.cv_scale)
        if station.kind == "delay":
            elements.append(Delay(env, station.name, station.demand_us, jitter))
        else:
            elements.append(Server(env, station.name, station.servers, station.demand_us, jitter))
    for upstream, downstream in zip(elements, elements[1:], strict=False):
        upstream.out = downstream.put

    outstanding = net.point.outstanding * net.split
    batch = cfg.batch_size or max(200, 4 * outstanding)
    latencies: list[float] = []
    batch_rates: list[float] = []
    state = _Progress()
    stop = env.event()

    def complete(io: _Io) -> None:
        now = env.now
        latencies.append(now - io.start)
        state.done += 1
        if state.done % batch == 0:
            rate = batch / (now - state.batch_start)
            state.batch_start = now
            if state.busy_at_measure is None:  # end of warm-up: discard it
                state.busy_at_measure = [e.busy_time for e in elements]
                state.measure_from = now
                latencies.clear()
            else:
                batch_rates.append(rate)
                if _tight(batch_rates, cfg) and not stop.triggered:
                    stop.succeed()
        io.start = now
        elements[0].put(io)

    elements[-1].out = complete
    for _ in range(outstanding):
        elements[0].put(_Io())
    env.run(until=stop)

    elapsed = env.now - state.measure_from
    rates = np.array(batch_rates)
    mean_rate = float(rates.mean())
    half = _half_width(batch_rates)
    busy0 = state.busy_at_measure or [0.0] * len(elements)
    utilisation = {}
    cpu = {"initiator": 0.0, "target": 0.0}
    for station, element, before in zip(net.stations, elements, busy0, strict=True):
        if station.kind != "queue":
            continue
        busy = (element.busy_time - before) / elapsed
        utilisation[station.name] = busy / station.servers
        if station.side:
            cores = net.initiator_cores if station.side == "initiator" else net.target_cores
            cpu[station.side] += 100 * busy / cores
    lat = np.array(latencies)
    per_io = 1e6 / net.split
    return SimResult(
        iops=mean_rate * per_io,
        iops_ci95=((mean_rate - half) * per_io, (mean_rate + half) * per_io),
        lat_mean_us=float(lat.mean()),
        lat_p99_us=float(np.percentile(lat, 99)),
        utilisation=utilisation,
        cpu_pct=cpu,
        bottleneck=max(utilisation, key=lambda k: utilisation[k]) if utilisation else "latency",
        completed=state.done,
    )


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
