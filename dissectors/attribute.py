"""Give every frame of a capture exactly one owner, by the protocols' own keys.

An owner is a task (a command and everything it caused: its data, R2Ts,
response and the transport ACKs of those) or a named kind of other traffic
(connection set-up, login, discovery, keep-alive, ARP…).  Nothing is
attributed by time order, so I/Os that overlap on the wire, as they do at
any queue depth above one, are told apart:

- commands open a task under their key on their connection: the iSCSI
  initiator task tag (also on iSER), the SRP tag, the NVMe command
  identifier; data PDUs, R2Ts and responses name the same key;
- RDMA data carries the R_Key/STag of a buffer the command named
  (RETH on RoCE, the tagged DDP header on iWARP); Middle and Last packets
  continue the message their First began on that QP; an RDMA READ's
  response is found by the request's PSN (RoCE) or its sink STag (iWARP);
- an RC Acknowledge belongs to whoever sent the PSN it acknowledges, a
  TCP pure ACK to whoever sent the last byte it acknowledges.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sanlab.dissectors import frames as fr
from sanlab.dissectors.frames import Command, Fpdu, Frame, Response, Unit
from sanlab.dissectors.framing import (
    AUTHENTICATION,
    TLS_RECORD,
    IscsiDigests,
    IscsiFramer,
    NvmeQueue,
    NvmeTcpFramer,
    Pdu,
    Window,
)
from sanlab.dissectors.rawframes import each_tcp_payload
from sanlab.dissectors.tcpstreams import Connection, Direction, connections
from sanlab.dissectors.tls import KeyLog, TlsSession


@dataclass(eq=False)
class Io:
    """A task: one command and every frame it caused."""

    op: str  # read, write, or other (then category says what)
    nbytes: int
    tag: str
    initiator: str
    frames: list[Frame] = field(default_factory=list)
    latency_us: float = 0.0  # first frame of the command to the frame completing the response
    lba: int = -1
    blocks: int = 0
    category: str = ""
    start: float = 0.0
    end: float | None = None
    # Inside TLS with its keys: what the records add to this task's PDUs (framing.Pdu)
    tls_records: int = 0
    tls_bytes: int = 0
    tls_splits: int = 0

    @property
    def complete(self) -> bool:
        return self.end is not None

    @property
    def round_trips(self) -> int:
        """Bursts of frames the initiator sends (ACKs aside): 1 for a read, 2 for an R2T write."""
        bursts, sending = 0, False
        for frame in self.frames:
            if frame.is_ack:
                continue
            out = frame.src == self.initiator
            if out and not sending:
                bursts += 1
            sending = out
        return bursts


Owner = Io | str
QUEUE_SET_UP = ("login", AUTHENTICATION)  # a queue's Connect and its DH-HMAC-CHAP: never admin I/O


@dataclass
class Attribution:
    """The result: every task, and every frame's owner."""

    tasks: list[Io]
    owners: dict[int, Owner]
    tls_records: int = 0  # TLS records no key opened (NVMe/TCP inside TLS, without its keys)


class Attributor:
    """Walks the frames in capture order and decides each one's owner."""

    def __init__(self, frames: list[Frame]) -> None:
        self.frames = frames
        self.owners: dict[int, Owner] = {}
        self.tasks: list[Io] = []
        self.open: dict[tuple[object, str], Io] = {}  # (connection, tag) -> task in flight
        self.buffers: dict[tuple[str, int], Io] = {}  # (host, R_Key/STag) -> task
        self.messages: dict[tuple[object, ...], Owner] = {}  # RDMA message in progress
        self.sent: dict[tuple[object, str, int], Owner] = {}  # (connection, sender, PSN)
        self.reads: dict[tuple[object, str, int], Owner] = {}  # RDMA READ requests by PSN
        self.qp_peer: dict[tuple[str, int], tuple[str, int]] = {}
        self.admin: set[object] = set()  # NVMe admin-queue connections, from the CM's queue ID

    # -- tasks -----------------------------------------------------------
    def command(self, connection: object, cmd: Command, frame: Frame) -> Io:
        # The admin mark is the NVMe CM's word about a queue: an SRP or iSER command on a QP pair
        # that once was (or, in a merged capture, elsewhere is) an admin queue stays an I/O.
        if connection in self.admin and cmd.category not in QUEUE_SET_UP and frame.transport == "nvme-rdma":
            cmd = Command(cmd.tag, "other", cmd.nbytes, cmd.lba, cmd.blocks, cmd.keys, "admin")
        io = Io(cmd.op, cmd.nbytes, cmd.tag, frame.src, lba=cmd.lba, blocks=cmd.blocks, category=cmd.category)
        io.start = frame.start or frame.time
        self.tasks.append(io)
        self.open[(connection, cmd.tag)] = io
        for key in cmd.keys:
            self.buffers[(frame.src, key)] = io
        return io

    def response(self, connection: object, tag: str, frame: Frame) -> Owner:
        io = self.open.pop((connection, tag), None)
        if io is None:
            return "unmatched response"
        # Frames are in time order (frames.py refuses a capture that is not, past a jitter of
        # ORDER_SLACK_S), so this clamp only absorbs that jitter: a latency is never negative.
        io.end = max(frame.time, io.start)
        io.latency_us = (io.end - io.start) * 1e6
        return io

    def _decoded(self, connection: object, frame: Frame) -> Owner | None:
        """The owner a frame's decoded command or response names, if it has one."""
        owner: Owner | None = None
        for cmd in frame.commands:
            io = self.command(connection, cmd, frame)
            owner = owner or io
        for tag in frame.responses:
            done = self.response(connection, tag, frame)
            owner = owner or done
        return owner

    # -- RoCE ------------------------------------------------------------
    def pair_qps(self) -> None:
        """QP pairs from the CM: a REQ and its REP share the MAD transaction ID.
        An NVMe/RDMA REQ (or MPA request on iWARP) also says which queue it opens."""
        requests: dict[str, tuple[str, int]] = {}
        admin_ends = set()
        for frame in self.frames:
            if frame.cm_qid == 0 and frame.mpa:
                self.admin.add(("tcp", frame.stream))
            elif frame.cm_qid == 0:
                admin_ends.add((frame.src, frame.cm_qpn))
            if frame.cm_qpn < 0 or not frame.cm_tid:
                continue
            end = (frame.src, frame.cm_qpn)
            if not frame.cm_reply:
                requests[frame.cm_tid] = end
            elif frame.cm_tid in requests:
                self.qp_peer[end] = requests[frame.cm_tid]
                self.qp_peer[requests[frame.cm_tid]] = end
        for end in admin_ends:
            if end in self.qp_peer:
                self.admin.add(frozenset((end, self.qp_peer[end])))

    def qp_connection(self, frame: Frame) -> object:
        me = (frame.dst, frame.destqp)
        peer = self.qp_peer.get(me)
        return frozenset((me, peer)) if peer else frozenset((frame.src, frame.dst))

    def roce(self, frame: Frame) -> Owner:
        if frame.bth == fr.UD_SEND_ONLY:  # the CM's MADs
            return frame.category or "connection"
        conn, op = self.qp_connection(frame), frame.bth
        if op == fr.RC_ACK:
            return self.sent.get((conn, frame.dst, frame.psn), "unmatched RDMA ACK")
        if op in fr.RC_READ_RESPONSE_STARTS:
            owner = self.reads.get((conn, frame.dst, frame.psn), "unmatched RDMA data")
            self.messages[(conn, frame.src, "response")] = owner
            return owner
        if op in fr.RC_READ_RESPONSE_GOES_ON:
            return self.messages.get((conn, frame.src, "response"), "unmatched RDMA data")
        owner = self._roce_request(conn, frame)
        self.sent[(conn, frame.src, frame.psn)] = owner
        return owner

    def _roce_request(self, conn: object, frame: Frame) -> Owner:
        op = frame.bth
        if op in fr.RC_SEND_STARTS:
            owner: Owner = self._decoded(conn, frame) or frame.category or "other RDMA message"
        elif op in fr.RC_WRITE_STARTS and frame.rkey == 0:
            owner = "connection"  # a zero-length RDMA WRITE: ib_srpt's check that the QP is up
        elif op in fr.RC_WRITE_STARTS or op == fr.RC_READ_REQUEST:
            owner = self.buffers.get((frame.dst, frame.rkey), "unmatched RDMA data")
            if op == fr.RC_READ_REQUEST:
                self.reads[(conn, frame.src, frame.psn)] = owner
        elif op in fr.RC_SEND_GOES_ON or op in fr.RC_WRITE_GOES_ON:
            return self.messages.get((conn, frame.src, "request"), "unmatched RDMA data")
        else:
            return "other RDMA"
        self.messages[(conn, frame.src, "request")] = owner
        return owner

    # -- iWARP -----------------------------------------------------------
    def iwarp(self, frame: Frame) -> Owner:
        """A segment's FPDUs each find their owner; the segment goes to the one with most bytes."""
        if frame.mpa:
            return "connection"
        units, weight = list(frame.units), dict[int, int]()
        owners: list[Owner] = []
        for fpdu in frame.fpdus:
            owner = self._fpdu(("tcp", frame.stream), frame, fpdu, units)
            key = id(owner)
            if key not in weight:
                owners.append(owner)
            weight[key] = weight.get(key, 0) + fpdu.length
        if not owners:
            return "other RDMA message"
        return max(owners, key=lambda o: weight[id(o)])

    def _fpdu(self, conn: object, frame: Frame, fpdu: Fpdu, units: list[Unit]) -> Owner:
        if fpdu.tagged:  # RDMA Write or Read Response: the STag names the buffer
            return self.buffers.get((frame.dst, fpdu.stag), "unmatched RDMA data")
        message = (conn, frame.src, fpdu.qn, fpdu.msn)
        if fpdu.mo > 0:
            return self.messages.get(message, "unmatched RDMA data")
        if fpdu.opcode == fr.RDMAP_READ_REQUEST:
            owner: Owner = self.buffers.get((frame.dst, fpdu.src_stag), "unmatched RDMA data")
            if isinstance(owner, Io):
                self.buffers[(frame.src, fpdu.sink_stag)] = owner
        else:
            owner = self._unit(conn, frame, units.pop(0) if units else "other RDMA message")
        self.messages[message] = owner
        return owner

    def _unit(self, conn: object, frame: Frame, unit: Unit) -> Owner:
        if isinstance(unit, Command):
            return self.command(conn, unit, frame)
        if isinstance(unit, Response):
            return self.response(conn, unit.tag, frame)
        return unit

    # -- TCP storage protocols --------------------------------------------
    def pdu(self, conn: object, pdu: Pdu, first: Frame, last: Frame) -> Owner:
        if pdu.command:
            cmd = Command(pdu.tag, pdu.op, pdu.nbytes, pdu.lba, pdu.blocks, (), pdu.category)
            return self.command(conn, cmd, first)
        if pdu.completes:
            return self.response(conn, pdu.tag, last)
        if pdu.tag:
            return self.open.get((conn, pdu.tag), "unmatched data")
        return pdu.category


@dataclass(frozen=True)
class PduEvent:
    """A PDU, placed at the frame that carried its first byte."""

    frame: int
    conn: object
    pdu: Pdu
    first: Frame
    last: Frame
    direction: Direction


class _DirectionFramer:
    """One direction of a storage connection, framed into PDUs as its segments arrive.

    Segments come in capture order; each is placed at its stream offset (a
    retransmitted stretch adds nothing, one ahead of a gap waits), and the
    bytes are let go of as soon as the PDUs they belong to are framed.  Like
    a reassembled stream, framing stops at the first byte never captured.
    """

    def __init__(self, conn: Connection, direction: Direction, framer: IscsiFramer | NvmeTcpFramer):
        self.conn, self.direction, self.framer = conn, direction, framer
        self.window = Window()
        self.ahead: dict[int, bytes] = {}  # offset -> bytes beyond a gap, waiting for it to fill

    def feed(self, offset: int, data: bytes) -> list[Pdu]:
        if not data:
            return []
        self.ahead[offset] = max(data, self.ahead.get(offset, b""), key=len)
        self._take_contiguous()
        pdus = self.framer.pdus(self.window)
        self.window.release(self.framer.at)
        return pdus

    def _take_contiguous(self) -> None:
        end = len(self.window)
        while True:
            reachable = [o for o in self.ahead if o <= end]
            if not reachable:
                return
            for offset in reachable:
                data = self.ahead.pop(offset)
                if offset + len(data) > end:
                    self.window.append(data[end - offset :])
                    end = len(self.window)


Placed = list[tuple["_DirectionFramer", int, int]]  # a frame's storage bytes: framer, offset, length


def _framers(tcp: dict[int, Connection], kinds: dict[int, str], keys: KeyLog | None) -> dict[int, Placed]:
    """For each frame that carries storage bytes: the framer of its direction, and where its bytes go.
    With TLS session keys, an NVMe/TCP connection inside TLS is opened and framed (tls.py)."""
    by_frame: dict[int, Placed] = {}
    for conn in tcp.values():
        kind = kinds.get(conn.stream)
        if not kind:
            continue
        session = TlsSession(keys) if keys else None
        shared: IscsiDigests | NvmeQueue = IscsiDigests() if kind == "iscsi" else NvmeQueue(session=session)
        for direction in conn.directions.values():
            framer = IscsiFramer(shared) if isinstance(shared, IscsiDigests) else NvmeTcpFramer(shared)
            each = _DirectionFramer(conn, direction, framer)
            for offset, length, frame in direction.segments:
                by_frame.setdefault(frame.number, []).append((each, offset, length))
    return by_frame


def _pdu_events(
    pcap: Path, tcp: dict[int, Connection], kinds: dict[int, str], keys: KeyLog | None = None
) -> list[PduEvent]:
    """Every iSCSI and NVMe/TCP PDU of the capture, placed at the frame that carried its first byte.

    The capture's TCP payloads are read once, in order, and framed as they
    come (one Window a direction), so memory does not grow with the capture.
    """
    by_frame = _framers(tcp, kinds, keys)
    events: list[PduEvent] = []
    for number, payload in each_tcp_payload(pcap, set(by_frame)) if by_frame else ():
        for framer, offset, length in by_frame[number]:
            direction = framer.direction
            for pdu in framer.feed(offset, payload[:length]):
                first, last = direction.covering(pdu.start), direction.covering(pdu.end - 1)
                if first and last:
                    stream = ("tcp", framer.conn.stream)
                    events.append(
                        PduEvent(first[0][2].number, stream, pdu, first[0][2], last[0][2], direction)
                    )
    return sorted(events, key=lambda e: (e.frame, e.pdu.start))


def _segment_owners(events: list[PduEvent], pdu_owners: dict[int, Owner], owners: dict[int, Owner]) -> None:
    """A segment belongs to the owner of most of its bytes (the earlier PDU on a tie)."""
    share: dict[int, dict[int, int]] = {}
    for index, event in enumerate(events):
        pdu = event.pdu
        for offset, length, frame in event.direction.overlapping(pdu.start, pdu.end):
            parts = share.setdefault(frame.number, {})
            parts[index] = parts.get(index, 0) + min(offset + length, pdu.end) - max(offset, pdu.start)
    for number, parts in share.items():
        owners[number] = pdu_owners[max(parts, key=lambda i: (parts[i], -i))]


def _ack_owner(frame: Frame, conn: Connection, owners: dict[int, Owner]) -> Owner:
    reverse = conn.reverse(frame)
    if reverse is None:
        return "connection"
    acked = reverse.offset(frame.ack) - 1
    covering = reverse.covering(acked)
    if not covering:
        return "connection"
    return owners.get(covering[0][2].number, "other TCP")


def attribute(
    pcap: Path,
    frames: list[Frame],
    tcp_kinds: dict[int, str],
    server_ports: set[int],
    keys: KeyLog | None = None,
) -> Attribution:
    """Owners for every frame.  tcp_kinds names the TCP streams to frame as iscsi or nvme-tcp;
    ``keys`` (an NSS key log, tls.read_keylog) opens NVMe/TCP inside TLS."""
    tcp = connections(frames, server_ports)
    engine = Attributor(frames)
    engine.pair_qps()
    events = _pdu_events(pcap, tcp, tcp_kinds, keys)
    pdu_owners: dict[int, Owner] = {}
    pending = iter(enumerate(events))
    next_event = next(pending, None)
    for frame in frames:
        while next_event is not None and next_event[1].frame <= frame.number:
            index, event = next_event
            task = pdu_owners[index] = engine.pdu(event.conn, event.pdu, event.first, event.last)
            if isinstance(task, Io) and event.pdu.tls_records + event.pdu.tls_bytes:
                task.tls_records += event.pdu.tls_records
                task.tls_bytes += event.pdu.tls_bytes
                task.tls_splits += event.pdu.tls_splits
            next_event = next(pending, None)
        owner = _rdma_owner(engine, frame)
        if owner is not None:
            engine.owners[frame.number] = owner
    _segment_owners(events, pdu_owners, engine.owners)
    for frame in frames:  # the earlier segments of an FPDU that tshark reassembled
        if frame.fpdus and frame.number in engine.owners:
            for number in frame.segments:
                engine.owners.setdefault(number, engine.owners[frame.number])
    for frame in _unowned(frames, engine.owners):
        engine.owners[frame.number] = _other_owner(frame, tcp, engine.owners)
    shut = sum(1 for e in events if e.pdu.category == TLS_RECORD)
    return Attribution(engine.tasks, engine.owners, shut)


def _rdma_owner(engine: Attributor, frame: Frame) -> Owner | None:
    if frame.roce:
        return engine.roce(frame)
    if frame.mpa or frame.fpdus:
        return engine.iwarp(frame)
    return None


def _unowned(frames: list[Frame], owners: dict[int, Owner]) -> Iterator[Frame]:
    return (f for f in frames if f.number not in owners)


def _other_owner(frame: Frame, tcp: dict[int, Connection], owners: dict[int, Owner]) -> Owner:
    if frame.tcp_len >= 0:
        if frame.handshake:
            return "connection"
        if frame.is_ack:
            return _ack_owner(frame, tcp[frame.stream], owners)
        return _resent_owner(frame, tcp[frame.stream], owners)
    return frame.protocol or "other"


def _resent_owner(frame: Frame, conn: Connection, owners: dict[int, Owner]) -> Owner:
    """A retransmission tshark did not decode again takes the owner of the bytes' first
    sending; the tail of a PDU that tshark left undecoded, the owner of the byte before."""
    direction = conn.direction(frame)
    start = direction.offset(frame.seq)
    for position in (start, start - 1):
        for _, _, other in direction.covering(position):
            if other.number in owners:
                return owners[other.number]
    return "other TCP"
