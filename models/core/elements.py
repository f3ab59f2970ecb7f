"""The elements of the I/O path, each with one contract: ``put(io)``, then ``.out``.

Like a post-office counter: an I/O is put in, waits for a free clerk, is
served for a while, and is handed to whatever ``.out`` is wired to.  A
``Delay`` is a corridor everyone walks down at once.  Each service
completion is one entry on a ``Clock``: an event list in time order, ties
in the order they were scheduled.  That is SimPy's discrete-event
discipline (its ``Environment`` orders events by time, priority and
insertion, and every event here is an ordinary timeout), kept to the one
thing the model uses: a callback at a time.  SimPy's general events
(callback lists, processes, failure handling) cost two to three times as
much per visit, and a projection at depth makes millions of visits; the
two give the same answer to the last bit (``tests/test_model_engine.py``
runs both).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterator
from heapq import heappop, heappush
from typing import Any

import numpy as np

Sink = Callable[[Any], None]


class Clock:
    """Simulated time and the events still to come: ``at(delay, call, arg)``, then ``run``."""

    def __init__(self) -> None:
        self.now = 0.0
        self._events: list[tuple[float, int, Sink | None, Any]] = []
        self._order = itertools.count()
        self._stopping = False

    def at(self, delay: float, call: Sink, arg: Any) -> None:
        """Call ``call(arg)`` ``delay`` from now, after everything already due by then."""
        heappush(self._events, (self.now + delay, next(self._order), call, arg))

    def stop(self) -> None:
        """End ``run`` now, once the events already due now have run (SimPy's ``run(until=event)``)."""
        if not self._stopping:
            self._stopping = True
            heappush(self._events, (self.now, next(self._order), None, None))

    def run(self) -> None:
        events = self._events
        while True:
            self.now, _, call, arg = heappop(events)
            if call is None:
                return
            call(arg)


def jitter(rng: np.random.Generator, cv: float, block: int = 4096) -> Iterator[float]:
    """An endless, reproducible supply of service-time multipliers (mean 1): ``next(draws)``.

    Real CPUs and devices do not take exactly the same time twice: caches,
    interrupts and flash housekeeping spread service times.  A gamma law
    with coefficient of variation ``cv`` stands for that spread; each element
    draws from its own stream so one element's draws never shift another's.
    Draws come in blocks, each handed out last first.
    """
    if cv <= 0:
        yield from itertools.repeat(1.0)
    shape = 1.0 / (cv * cv)
    while True:
        yield from reversed(rng.gamma(shape, 1.0 / shape, block).tolist())


class Server:
    """``servers`` identical clerks in front of one FIFO queue."""

    def __init__(self, clock: Clock, name: str, servers: int, demand: float, jitter: Iterator[float]):
        self.clock, self.name, self.demand, self.jitter = clock, name, demand, jitter
        self.free = servers
        self.queue: deque[Any] = deque()
        self.busy_time = 0.0
        self.out: Sink = _unwired

    def put(self, io: Any) -> None:
        if self.free:
            self.free -= 1
            self._start(io)
        else:
            self.queue.append(io)

    def _start(self, io: Any) -> None:
        service = self.demand * next(self.jitter)
        self.busy_time += service
        self.clock.at(service, self._done, io)

    def _done(self, io: Any) -> None:
        if self.queue:
            self._start(self.queue.popleft())
        else:
            self.free += 1
        self.out(io)


class Delay:
    """A fixed latency that every I/O spends in parallel (wire, NIC, wake-ups)."""

    def __init__(self, clock: Clock, name: str, demand: float, jitter: Iterator[float]):
        self.clock, self.name, self.demand, self.jitter = clock, name, demand, jitter
        self.busy_time = 0.0
        self.out: Sink = _unwired

    def put(self, io: Any) -> None:
        self.clock.at(self.demand * next(self.jitter), self._leave, io)

    def _leave(self, io: Any) -> None:
        self.out(io)


def _unwired(io: Any) -> None:
    raise RuntimeError("element output is not wired")
