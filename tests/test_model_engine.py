"""The simulator's event list is SimPy's discipline: run on SimPy itself, every figure is the same.

``models/core/elements.Clock`` replaced SimPy's ``Environment`` for speed
(issue #46).  Here the same network runs once on the Clock and once on a
Clock made of SimPy's own events (a timeout per visit, ``run(until=event)``
to stop), and the two records must agree to the last bit: the order of
simultaneous events, the stop, and every draw.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import simpy

from sanlab.models.core import simulate as simulate_module
from sanlab.models.core.elements import Clock
from sanlab.models.core.network import Point, build
from sanlab.models.core.simulate import Settings, simulate


class SimpyClock:
    """The Clock's contract, kept by SimPy's Environment and its events."""

    def __init__(self) -> None:
        self.env = simpy.Environment()
        self.until = self.env.event()

    @property
    def now(self) -> float:
        return float(self.env.now)

    def at(self, delay: float, call: Any, arg: Any) -> None:
        self.env.timeout(delay).callbacks.append(lambda _event: call(arg))

    def stop(self) -> None:
        if not self.until.triggered:
            self.until.succeed()

    def run(self) -> None:
        self.env.run(until=self.until)


POINTS = [
    Point("nvme-tcp", "eth", 100, "randread", 4096, 32, 16, cores=8),  # the CPU pool, many jobs
    Point("iser", "roce", 100, "randread", 4096, 8, 4),
    Point("iscsi", "eth", 25, "randwrite", 65536, 4, 2),
    Point("nvme-rdma", "roce", 100, "read", 1 << 20, 4, 1),  # split into concurrent requests
    Point("srp", "ib", 56, "randread", 512, 1, 1),  # QD 1: every tie is a hand-off
]


@pytest.mark.parametrize("point", POINTS, ids=lambda p: f"{p.transport}-{p.bs}-{p.iodepth}x{p.numjobs}")
def test_the_clock_gives_simpys_answer_to_the_last_bit(point, monkeypatch):
    net = build(point)
    ours = simulate(net, Settings(seed=3))
    monkeypatch.setattr(simulate_module, "Clock", SimpyClock)
    theirs = simulate(net, Settings(seed=3))
    assert dataclasses.asdict(ours) == dataclasses.asdict(theirs)


def test_without_jitter_the_tie_order_still_matches():
    """cv 0: every service of a desk takes the same time, so events tie often; ties go in order."""
    net = build(Point("iser", "roce", 100, "randread", 4096, 16, 8))
    ours = simulate(net, Settings(cv_scale=0))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(simulate_module, "Clock", SimpyClock)
        theirs = simulate(net, Settings(cv_scale=0))
    assert dataclasses.asdict(ours) == dataclasses.asdict(theirs)


def test_the_clock_runs_ties_in_the_order_they_were_scheduled_and_stops_after_them():
    clock, seen = Clock(), []
    clock.at(1.0, seen.append, "b")
    clock.at(0.5, seen.append, "a")
    clock.at(1.0, lambda _: clock.stop(), None)
    clock.at(1.0, seen.append, "c")  # due at the stop's time but scheduled before it: runs
    clock.at(2.0, seen.append, "never")
    clock.run()
    assert seen == ["a", "b", "c"] and clock.now == 1.0


@pytest.mark.slow  # a reference run of 74 k simulated I/Os
def test_short_batches_at_depth_agree_with_four_rounds_a_batch():
    """Past 1,024 I/Os in flight a batch is shorter than a round and the warm-up one round
    (simulate.MAX_BATCH); the figures stay within the interval's 2 % of the long run's."""
    point = Point("iser", "roce", 100, "randread", 4096, 64, 96)  # 6,144 I/Os in flight
    net = build(point)
    short = simulate(net)
    # Two batches of four rounds after a warm-up of four: the long run, shortened to its least.
    long = simulate(net, Settings(batch_size=4 * point.outstanding, min_batches=2))
    assert short.completed < long.completed / 2
    assert short.iops == pytest.approx(long.iops, rel=0.02)
    assert short.lat_mean_us == pytest.approx(long.lat_mean_us, rel=0.02)
    assert short.lat_p99_us == pytest.approx(long.lat_p99_us, rel=0.02)
    assert short.cpu_pct == pytest.approx(long.cpu_pct, rel=0.02)
