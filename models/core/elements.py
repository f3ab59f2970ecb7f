"""SimPy elements of the I/O path, each with one contract: ``put(io)``, then ``.out``.

Like a post-office counter: an I/O is put in, waits for a free clerk, is
served for a while, and is handed to whatever ``.out`` is wired to.  A
``Delay`` is a corridor everyone walks down at once.  Service completions
are scheduled as bare SimPy timeouts with callbacks, one event per visit, so
a projection stays cheap enough to stop as soon as its estimate is tight.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
import simpy

Sink = Callable[[Any], None]


class Jitter:
    """An endless, reproducible supply of service-time multipliers (mean 1).

    Real CPUs and devices do not take exactly the same time twice: caches,
    interrupts and flash housekeeping spread service times.  A gamma law
    with coefficient of variation ``cv`` stands for that spread; each element
    draws from its own stream so one element's draws never shift another's.
    """

    def __init__(self, rng: np.random.Generator, cv: float, block: int = 4096):
        self._rng, self._cv, self._block = rng, cv, block
        self._values: list[float] = []

    def __call__(self) -> float:
        if not self._values:
            if self._cv <= 0:
                self._values = [1.0] * self._block
            else:
                shape = 1.0 / (self._cv * self._cv)
                self._values = list(self._rng.gamma(shape, 1.0 / shape, self._block))
        return self._values.pop()


class Server:
    """``servers`` identical clerks in front of one FIFO queue."""

    def __init__(self, env: simpy.Environment, name: str, servers: int, demand: float, jitter: Jitter):
        self.env, self.name, self.demand, self.jitter = env, name, demand, jitter
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
        service = self.demand * self.jitter()
        self.busy_time += service
        self.env.timeout(service).callbacks.append(lambda _event: self._done(io))

    def _done(self, io: Any) -> None:
        if self.queue:
            self._start(self.queue.popleft())
        else:
            self.free += 1
        self.out(io)


class Delay:
    """A fixed latency that every I/O spends in parallel (wire, NIC, wake-ups)."""

    def __init__(self, env: simpy.Environment, name: str, demand: float, jitter: Jitter):
        self.env, self.name, self.demand, self.jitter = env, name, demand, jitter
        self.busy_time = 0.0
        self.out: Sink = _unwired

    def put(self, io: Any) -> None:
        self.env.timeout(self.demand * self.jitter()).callbacks.append(lambda _event: self.out(io))


def _unwired(io: Any) -> None:
    raise RuntimeError("element output is not wired")
