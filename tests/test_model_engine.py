"""The simulator's clock is SimPy's event list, kept to a callback at a time.

``models/core/elements.Clock`` wraps ``simpy.Environment``: a bare timeout per
visit, ``run(until=event)`` to stop.  What the batch-means monitor relies on
is checked here: ties run in the order they were scheduled, and a stop lets
the events already due run first.
"""

from __future__ import annotations

import pytest

from sanlab.models.core.elements import Clock
from sanlab.models.core.network import Point, build
from sanlab.models.core.simulate import Settings, simulate


def test_the_clock_runs_ties_in_the_order_they_were_scheduled_and_stops_after_them():
    clock, seen = Clock(), []

    def note(event):  # a callback is given SimPy's event, whose value is what was scheduled
        seen.append(event.value)

    clock.at(1.0, note, "b")
    clock.at(0.5, note, "a")
    clock.at(1.0, lambda _: clock.stop(), None)
    clock.at(1.0, note, "c")  # due at the stop's time but scheduled before it: runs
    clock.at(2.0, note, "never")
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
