"""What a faulted fio run did, measured from its completions against the faults' windows.

The run itself (fio in the background, the faults on its timeline) is ``faults``; this is
what its record says of it: how long I/O took to come back, to move to another path, to
use every path again, how far throughput fell, and whether the faults met any I/O at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class Window:
    """When the cable was out, on the initiator's clock (epoch seconds)."""

    down: float
    up: float
    # Multipath: when every path was in use again after it (None: not timed, or never).
    restored: float | None = None


@dataclass(frozen=True)
class FaultedRun:
    """What fio said, and what the faults did while it ran."""

    output: str  # fio's JSON
    exit_code: int
    stderr: str
    windows: list[Window]
    # Every completion time of the workload's own direction (initiator's clock, epoch seconds):
    # a verified write's read-back is the check, not the workload, as in fio.parse's IOPS.
    completions: list[float]
    # The quiet stretch before a cable's return that still counts as I/O flowing over the
    # other path (a slow emulated I/O takes a second or so).
    TAIL_S: ClassVar[float] = 2.0
    # How much longer than any pause before the faults a pause after them must be to be a stall.
    STALL_FACTOR: ClassVar[float] = 4.0

    def failover_s(self) -> float | None:
        """The longest stall of I/O while the cable was out, when I/O completed again before it
        came back (over another path); None when nothing completed while it was out, or when
        the I/O that did complete then stopped until the cable came back (the in-flight
        I/O of the moment it was pulled, not a failover).  A job that finished while the
        cable was out failed over: its quiet end is no stall.

        Measured from the last completion before the cable went, so it is
        the time multipath took to move the I/O to the path that was left.
        """
        if not self.windows:
            return None
        window = self.windows[-1]
        during = sorted(c for c in self.completions if window.down <= c < window.up)
        if not during:
            return None
        before = [c for c in self.completions if c < window.down]
        stamps = [max(before, default=window.down), *during]
        longest = max(b - a for a, b in zip(stamps, stamps[1:], strict=False))
        resumed = any(c >= window.up for c in self.completions)  # fio still ran when the cable came back
        if resumed and window.up - during[-1] > max(longest, self.TAIL_S):
            return None  # the I/O stopped again and waited for the cable
        return round(longest, 3)

    def failback_s(self) -> float | None:
        """Seconds from the last fault's end to every path being in use again (multipath)."""
        if not self.windows or self.windows[-1].restored is None:
            return None
        return round(self.windows[-1].restored - self.windows[-1].up, 3)

    def dip_pct(self) -> float | None:
        """How far throughput fell while the cable was out: 100 x (1 - the completion rate
        during the outage / the rate before it).  100 means no I/O completed at all; None
        when there is no rate before the fault to compare with.
        """
        if not self.windows or not self.completions:
            return None
        window = self.windows[0]
        first = min(self.completions)
        before = sum(1 for c in self.completions if c < window.down)
        if before < 2 or window.down - first <= 0 or window.up <= window.down:
            return None
        during = sum(1 for c in self.completions if window.down <= c < window.up)
        ratio = (during / (window.up - window.down)) / (before / (window.down - first))
        return round(max(0.0, 100 * (1 - ratio)), 1)

    def missed(self) -> str | None:
        """Why a fault tested nothing: the workload's own I/O had all completed before the last
        fault began (a fast machine's verified write, a fault timed too late); None when I/O was
        still completing once it began (so at every earlier one too), or when no completion was
        logged."""
        if not self.windows or not self.completions:
            return None
        early = self.windows[-1].down - max(self.completions)
        if early <= 0:
            return None
        which = "the fault" if len(self.windows) == 1 else "the last fault"
        return (
            f"the workload's last I/O completed {early:.2f} s before {which} began, so it was"
            " tested against no I/O: give the workload more to do (verify_size, runtime)"
            " or the fault an earlier 'at'"
        )

    def figures(self, multipath: bool) -> dict[str, object]:
        """What a point's record says of its faults (all None without any); a failover only
        where another path could take over."""
        return {
            "recovery_s": self.recovery_s(),
            "failover_s": self.failover_s() if multipath else None,
            "failback_s": self.failback_s(),
            "throughput_dip_pct": self.dip_pct(),
            "note": self.stalled_again(),
        }

    def recovery_s(self) -> float | None:
        """Seconds from the end of the last fault to the first I/O completed after it."""
        if not self.windows:
            return None
        up = self.windows[-1].up
        after = [c for c in self.completions if c >= up]
        return round(min(after) - up, 3) if after else None

    def stalled_again(self) -> str | None:
        """Whether I/O stopped again once it was back: the longest stretch without a completion
        after the first one past the last fault's end, when it is longer than ``TAIL_S`` and
        than ``STALL_FACTOR`` times the longest stretch before the first fault (a slow emulated
        I/O is no stall).  ``recovery_s`` alone would hide it: a transport can complete the I/O
        in flight as the cable returns, then stop to reconnect."""
        if not self.windows:
            return None
        up = self.windows[-1].up
        after = sorted(c for c in self.completions if c >= up)
        before = sorted(c for c in self.completions if c < self.windows[0].down)
        gaps = [(b - a, a) for a, b in zip(after, after[1:], strict=False)]
        if not gaps:
            return None
        longest, began = max(gaps)
        usual = max((b - a for a, b in zip(before, before[1:], strict=False)), default=0.0)
        if longest <= max(self.TAIL_S, self.STALL_FACTOR * usual):
            return None
        return (
            f"I/O came back {after[0] - up:.2f} s after the fault, then stopped for {longest:.2f} s"
            f" from {began - up:.2f} s after it (before the fault the longest pause was {usual:.2f} s)"
        )
