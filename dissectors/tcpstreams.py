"""TCP connections as byte ranges: which frame carried which bytes of each direction.

Attribution needs two answers from TCP: which PDU's bytes a segment holds
(so a segment is owned by the I/O whose bytes it mostly carries), and which
byte a pure ACK acknowledges (so the ACK is owned by whoever sent that
byte).  Both are positions in a direction's byte stream, counted from the
byte after the SYN (or from the lowest sequence number seen, when the
capture began mid-connection).  Retransmissions cover the same positions
again and so fall to the same owner.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from sanlab.dissectors.frames import Frame

SEQ_SPACE = 1 << 32
LOOK_BACK = 64  # segments searched backwards for one that covers a byte (retransmits overlap)


@dataclass
class Direction:
    """One direction of a TCP connection: its segments by stream position."""

    src: tuple[str, int]
    base: int | None = None  # sequence number of the stream's first byte
    segments: list[tuple[int, int, Frame]] = field(default_factory=list)  # (offset, length, frame)
    _starts: list[int] = field(default_factory=list)

    def offset(self, seq: int) -> int:
        return (seq - (self.base or 0)) % SEQ_SPACE

    def seal(self) -> None:
        """Place every data segment once the stream's base is known."""
        data = [f for _, _, f in self.segments]
        if self.base is None:
            self.base = min((f.seq for f in data), default=0)
        self.segments = sorted(
            ((self.offset(f.seq), f.tcp_len, f) for f in data), key=lambda s: (s[0], s[2].number)
        )
        self._starts = [s[0] for s in self.segments]

    def covering(self, position: int) -> list[tuple[int, int, Frame]]:
        """Segments holding the byte at a stream position, earliest frame first."""
        at = bisect.bisect_right(self._starts, position)
        found = [s for s in self.segments[max(0, at - LOOK_BACK) : at] if s[0] <= position < s[0] + s[1]]
        return sorted(found, key=lambda s: s[2].number)

    def overlapping(self, start: int, end: int) -> list[tuple[int, int, Frame]]:
        """Segments holding any byte of [start, end)."""
        first = max(0, bisect.bisect_right(self._starts, start) - LOOK_BACK)
        last = bisect.bisect_left(self._starts, end)
        return [s for s in self.segments[first:last] if s[0] + s[1] > start]


@dataclass
class Connection:
    """Both directions of one TCP connection (tshark's tcp.stream)."""

    stream: int
    server_port: int
    directions: dict[tuple[str, int], Direction] = field(default_factory=dict)

    def direction(self, frame: Frame) -> Direction:
        key = (frame.src, frame.sport)
        return self.directions.setdefault(key, Direction(key))

    def reverse(self, frame: Frame) -> Direction | None:
        return self.directions.get((frame.dst, frame.dport))


def connections(frames: list[Frame], server_ports: set[int]) -> dict[int, Connection]:
    """Every TCP connection of the capture, its data segments placed by stream position."""
    found: dict[int, Connection] = {}
    for frame in frames:
        if frame.tcp_len < 0:
            continue
        port = (
            frame.dport if frame.dport in server_ports else frame.sport if frame.sport in server_ports else 0
        )
        conn = found.setdefault(frame.stream, Connection(frame.stream, port or min(frame.sport, frame.dport)))
        direction = conn.direction(frame)
        if frame.syn and direction.base is None:
            direction.base = (frame.seq + 1) % SEQ_SPACE
        if frame.tcp_len > 0:
            direction.segments.append((0, frame.tcp_len, frame))
    for conn in found.values():
        for direction in conn.directions.values():
            direction.seal()
    return found
