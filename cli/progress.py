"""A line on stderr while a long call gives no count of its own (a fit, say).

Within 2 s of the start, then every few seconds, it says how long the call
has run: never a made-up fraction, and nothing at all when the call is quick.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import click

FIRST_S = 1.5  # the first line: inside the 2 s a user waits before wondering
EVERY_S = 5.0


@contextmanager
def ticking(label: str, first: float = FIRST_S, every: float = EVERY_S) -> Iterator[None]:
    """Say ``label: N s so far`` on stderr while the ``with`` body runs, from ``first`` on."""
    stop = threading.Event()
    started = time.monotonic()

    def tick() -> None:
        wait = first
        while not stop.wait(wait):
            click.echo(f"  {label}: {time.monotonic() - started:.0f} s so far", err=True)
            wait = every

    thread = threading.Thread(target=tick, daemon=True, name="sanlab-progress")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
