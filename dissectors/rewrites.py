"""TCP retransmissions whose bytes differ from the segment they repeat.

A TCP sender that transmits from the caller's pages (zero-copy: iscsi_tcp's
and nvme-tcp's data, siw's RDMA payloads) reads those pages again when it
retransmits.  Normally the pages are not reused until the command
completes, which needs the peer's answer, which needs the bytes.  But when
a path dies, the initiator fails its commands locally and multipath sends
them down another path; they complete there and the application reuses
its buffers while the dead path's socket still holds them.  When the
cable returns, the old socket retransmits: the same sequence numbers, new
bytes.  A target whose end of that connection is still open accepts them
and executes a write nobody sent at that point - a ghost write (the
linux-nvme list's name for it; NVMe 2.1's Command Quiesce Time exists for
it).  iscsi_tcp and nvme-tcp close a dead socket abortively, which
discards the queued bytes; upstream siw closes it gracefully, and sanlab
saw one tear a block under tgt's iSER over siw (targets/README.md, "Ghost
writes") until its guests' siw was patched to abort too
(vm-images/siw-abortive-close.patch).

A capture shows it as a retransmission that covers bytes an earlier,
unacknowledged segment already carried, with different contents.  Only
unacknowledged bytes are kept, so memory is bounded by what was in flight
(and by ``MAX_HELD`` if one direction's ACKs were not captured).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import dpkt

from sanlab.dissectors.rawframes import ETHERNET, ethernet_tcp_offsets, frames_of, ip_of

SEQ_SPACE = 1 << 32
HALF = 1 << 31
MAX_HELD = 64 << 20  # bytes of unacknowledged payload kept per direction
LOOK_BACK = 64  # held segments searched backwards for overlap (as tcpstreams does)


@dataclass(frozen=True)
class Rewrite:
    """Bytes a retransmission carried that differ from what the first transmission carried."""

    first_frame: int
    again_frame: int
    src: str
    dst: str
    sport: int
    dport: int
    seq: int  # the retransmission's raw sequence number
    length: int  # of its bytes, how many an earlier segment carried (and so were compared)
    differing: int  # of those, how many differ
    owner: str = ""  # whose bytes they were, when the analyser knows (the write and its LBA)

    def document(self) -> dict[str, object]:
        return dict(self.__dict__)

    def line(self) -> str:
        whose = f" ({self.owner})" if self.owner else ""
        return (
            f"frames {self.first_frame} and {self.again_frame}: {self.src}:{self.sport} -> "
            f"{self.dst}:{self.dport} seq {self.seq}, {self.differing} of {self.length} bytes differ" + whose
        )


@dataclass(frozen=True)
class Segment:
    number: int
    src: str
    dst: str
    sport: int
    dport: int
    seq: int
    ack: int | None  # None when the ACK flag is clear
    syn: bool
    payload: bytes


@dataclass
class _Held:
    """One direction's unacknowledged bytes, by unwrapped stream position."""

    last_seq: int | None = None
    last_pos: int = 0
    starts: list[int] = field(default_factory=list)
    segments: list[tuple[int, int, bytes]] = field(default_factory=list)  # (start, frame, payload)
    size: int = 0

    def position(self, seq: int) -> int:
        """The stream position of a sequence number, unwrapping 32-bit wraps near the last one."""
        if self.last_seq is None:
            self.last_seq, self.last_pos = seq, 0
            return 0
        delta = (seq - self.last_seq + HALF) % SEQ_SPACE - HALF
        return self.last_pos + delta

    def note(self, seq: int) -> int:
        at = self.position(seq)
        if at > self.last_pos:
            self.last_seq, self.last_pos = seq, at
        return at

    def compare(self, start: int, payload: bytes) -> tuple[int, int, int | None]:
        """(bytes compared, bytes differing, first frame that differs) against the held bytes."""
        end, compared, differing, first = start + len(payload), 0, 0, None
        at = bisect.bisect_left(self.starts, end)
        for begin, frame, held in self.segments[max(0, at - LOOK_BACK) : at]:
            lo, hi = max(start, begin), min(end, begin + len(held))
            if lo >= hi:
                continue
            ours, theirs = payload[lo - start : hi - start], held[lo - begin : hi - begin]
            changed = sum(a != b for a, b in zip(ours, theirs, strict=True))
            compared, differing = compared + hi - lo, differing + changed
            if changed and first is None:
                first = frame
        return compared, differing, first

    def hold(self, start: int, number: int, payload: bytes) -> None:
        """Keep the bytes no held segment has yet: held segments never overlap, so each byte is
        compared with its first transmission only."""
        for lo, hi in self._uncovered(start, start + len(payload)):
            at = bisect.bisect_left(self.starts, lo)
            self.starts.insert(at, lo)
            self.segments.insert(at, (lo, number, payload[lo - start : hi - start]))
            self.size += hi - lo
        while self.size > MAX_HELD and self.segments:
            self.release_first()

    def _uncovered(self, start: int, end: int) -> list[tuple[int, int]]:
        gaps, cursor = [], start
        at = bisect.bisect_left(self.starts, end)
        for begin, _, held in self.segments[max(0, at - LOOK_BACK) : at]:
            if begin + len(held) <= cursor:
                continue
            if begin > cursor:
                gaps.append((cursor, min(begin, end)))
            cursor = max(cursor, begin + len(held))
        if cursor < end:
            gaps.append((cursor, end))
        return gaps

    def release_first(self) -> None:
        self.starts.pop(0)
        self.size -= len(self.segments.pop(0)[2])

    def acknowledged(self, ack: int) -> None:
        """Forget every held segment wholly below the peer's ACK."""
        if self.last_seq is None:
            return
        upto = self.position(ack)
        while self.segments and self.segments[0][0] + len(self.segments[0][2]) <= upto:
            self.release_first()


def rewritten_retransmissions(pcap: Path) -> list[Rewrite]:
    """Every retransmission in the capture whose bytes differ from the first transmission's."""
    held: dict[tuple[str, int, str, int], _Held] = {}
    found: list[Rewrite] = []
    for seg in tcp_segments(pcap):
        key = (seg.src, seg.sport, seg.dst, seg.dport)
        if seg.syn:  # a connection (again) on these ports: a sequence space of its own
            held[key] = _Held()
        mine = held.setdefault(key, _Held())
        if seg.ack is not None:
            held.setdefault((seg.dst, seg.dport, seg.src, seg.sport), _Held()).acknowledged(seg.ack)
        if not seg.payload:
            if seg.syn:
                mine.note(seg.seq + 1)
            continue
        start = mine.note(seg.seq)
        compared, differing, first = mine.compare(start, seg.payload)
        if first is not None:
            found.append(
                Rewrite(
                    first, seg.number, seg.src, seg.dst, seg.sport, seg.dport, seg.seq, compared, differing
                )
            )
        mine.hold(start, seg.number, seg.payload)
    return found


def tcp_segments(pcap: Path) -> Iterator[Segment]:
    """Every IPv4 TCP segment of the capture, in file order."""
    for number, link, data in frames_of(pcap):
        segment = _from_ethernet(number, data) if link == ETHERNET else None
        if segment is None:
            segment = _from_dpkt(number, link, data)
        if segment is not None:
            yield segment


def _from_ethernet(number: int, data: bytes) -> Segment | None:
    """An Ethernet/IPv4/TCP frame read from its headers' own fields, five times faster than
    dpkt; None for anything else, which dpkt then reads."""
    offsets = ethernet_tcp_offsets(data)
    if offsets is None:
        return None
    at, tcp, end = offsets
    flags = data[tcp + 13]
    return Segment(
        number,
        _address(data[at + 12 : at + 16]),
        _address(data[at + 16 : at + 20]),
        int.from_bytes(data[tcp : tcp + 2], "big"),
        int.from_bytes(data[tcp + 2 : tcp + 4], "big"),
        int.from_bytes(data[tcp + 4 : tcp + 8], "big"),
        int.from_bytes(data[tcp + 8 : tcp + 12], "big") if flags & dpkt.tcp.TH_ACK else None,
        bool(flags & dpkt.tcp.TH_SYN),
        data[tcp + (data[tcp + 12] >> 4) * 4 : end],
    )


def _from_dpkt(number: int, link: int, data: bytes) -> Segment | None:
    try:
        ip = ip_of(link, data)
    except (dpkt.dpkt.UnpackError, dpkt.dpkt.NeedData):
        return None
    if ip is None or not isinstance(ip.data, dpkt.tcp.TCP):
        return None
    tcp = ip.data
    return Segment(
        number,
        _address(ip.src),
        _address(ip.dst),
        tcp.sport,
        tcp.dport,
        tcp.seq,
        tcp.ack if tcp.flags & dpkt.tcp.TH_ACK else None,
        bool(tcp.flags & dpkt.tcp.TH_SYN),
        bytes(tcp.data),
    )


def _address(raw: bytes) -> str:
    return ".".join(str(b) for b in raw)
