"""SimPy elements of the I/O path, each with one contract: ``put(io)``, then ``.out``.

Like a post-office counter: an I/O is put in, waits for a free clerk, is
served for a while, and is handed to whatever ``.out`` is wired to.  A
``Delay`` is a corridor everyone walks down at once.  Each service
completion is one bare SimPy timeout with one callback (``Clock.at``), no
process and no closure per I/O, so a projection stays cheap enough to stop
as soon as its estimate is tight.  SimPy keeps the event list: time order,
and ties in the order they were scheduled.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import simpy

Sink = Callable[[Any], None]
# What SimPy calls when a visit ends: the element's own method, given SimPy's event (the I/O is
# its value), so that no closure is made per event (a deep point schedules 434,000 of them).
Callback = Callable[[simpy.Event], None]


class Clock:
    """SimPy's Environment, seen through the one thing the model asks of it: call ``call(event)``
    ``delay`` from now (``at``; the elements make the same timeout inline), until ``stop``.
    ``now`` is the simulated time in us."""

    def __init__(self) -> None:
        self.env = simpy.Environment()
        self._until = self.env.event()

    @property
    def now(self) -> float:
        return float(self.env.now)

    def at(self, delay: float, call: Callback, arg: Any) -> None:
        """Call ``call(event)``, ``event.value`` being ``arg``, ``delay`` from now, after everything
        already due by then."""
        self.env.timeout(delay, arg).callbacks.append(call)

    def stop(self) -> None:
        """End ``run`` now, once the events already due now have run (``run(until=event)``)."""
        if not self._until.triggered:
            self._until.succeed()

    def run(self) -> None:
        self.env.run(until=self._until)


class Jitter:
    """One element's service-time multipliers (mean 1), reproducibly, a block at a time.

    Real CPUs and devices do not take exactly the same time twice: caches,
    interrupts and flash housekeeping spread service times.  A gamma law
    with coefficient of variation ``cv`` stands for that spread; each element
    draws from its own stream so one element's draws never shift another's.
    Draws come in blocks, each handed out last first.
    """

    def __init__(self, rng: np.random.Generator, cv: float, block: int = 4096):
        self._rng, self._block = rng, block
        self._shape = 1.0 / (cv * cv) if cv > 0 else 0.0

    def block(self) -> list[float]:
        """The next block of draws, in the order they are handed out."""
        values: list[float] = self._rng.gamma(self._shape, 1.0 / self._shape, self._block).tolist()
        values.reverse()
        return values


def jitter(rng: np.random.Generator, cv: float, block: int = 4096) -> Iterator[float]:
    """The draws of one element (``Jitter``), as an iterator of C's: a deep point takes 434,000
    of them, and a Python ``__next__`` for each was 4 % of its instructions.  Not a generator: a
    generator left suspended is closed whenever the garbage collector meets it, inside whatever
    code runs then."""
    if cv <= 0:
        return itertools.repeat(1.0)
    return itertools.chain.from_iterable(iter(Jitter(rng, cv, block).block, None))


class Server:
    """``servers`` identical clerks in front of one FIFO queue."""

    def __init__(self, clock: Clock, name: str, servers: int, demand: float, jitter: Iterator[float]):
        self.clock, self.name, self.demand, self.jitter = clock, name, demand, jitter
        self._timeout = clock.env.timeout  # Clock.at, one Python call less a visit
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
        self._timeout(service, io).callbacks.append(self._done)

    def _done(self, event: simpy.Event) -> None:
        io = event.value
        if self.queue:
            self._start(self.queue.popleft())
        else:
            self.free += 1
        self.out(io)


class Delay:
    """A fixed latency that every I/O spends in parallel (wire, NIC, wake-ups)."""

    def __init__(self, clock: Clock, name: str, demand: float, jitter: Iterator[float]):
        self.clock, self.name, self.demand, self.jitter = clock, name, demand, jitter
        self._timeout = clock.env.timeout  # Clock.at, one Python call less a visit
        self.busy_time = 0.0
        self.out: Sink = _unwired

    def put(self, io: Any) -> None:
        self._timeout(self.demand * next(self.jitter), io).callbacks.append(self._leave)

    def _leave(self, event: simpy.Event) -> None:
        self.out(event.value)


def _unwired(io: Any) -> None:
    raise RuntimeError("element output is not wired")
