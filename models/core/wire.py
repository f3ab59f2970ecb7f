"""How protocol messages become frames on a link, and what each frame costs.

A message is what one protocol layer hands to the fabric: an iSCSI PDU, an
RDMA SEND, an RDMA WRITE of a whole buffer.  The fabric cuts it into packets
no larger than its MTU and wraps each in headers.  Two lengths matter:

* ``wire`` bytes occupy the link: every header, FCS, and for Ethernet the
  preamble and inter-frame gap (20 bytes).  Serialisation time = wire / rate.
* ``captured`` bytes are what a pcap records (``frame.len``): no preamble,
  gap or FCS.  The capture analyser measures these.

Header sizes are those of ``shared/reference/wire-formats.md``; they are
protocol facts, not measurements.  On TCP, where segments end and which pure
ACKs flow depend on how a stack hands its PDUs to the socket and on Linux's
receiver; ``stream_frames`` follows both as the kernel sources have them, so
the recipe, not a fitted ratio, decides the frame count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import zip_longest

from sanlab.scenarios.headers import (  # noqa: F401  (re-exported: the models' vocabulary)
    AETH,
    BTH,
    DDP_TAGGED,
    DDP_UNTAGGED,
    ETH_FCS,
    ETH_GAP,
    ETH_HDR,
    IB_LRH,
    IB_VCRC,
    ICRC,
    IPV4,
    MPA_CRC,
    MPA_LEN,
    RETH,
    TCP_TS,
    UDP,
)
from sanlab.scenarios.registry import FABRICS

PATH_MTUS = (256, 512, 1024, 2048, 4096)
# Linux's largest TSO/GSO super-packet and GRO merge (GSO_MAX_SIZE, 64 KiB).
GSO_MAX_SIZE = 65536

# Ethernet headers that a QEMU pcap shows versus what the wire carries.
_ETH_CAPTURED = ETH_HDR
_ETH_WIRE = ETH_HDR + ETH_FCS + ETH_GAP


@dataclass(frozen=True)
class Message:
    """One protocol message of an I/O.

    ``direction`` is 'out' (initiator to target) or 'in'.  ``kind`` names the
    RDMA operation for RDMA fabrics ('send', 'write', 'read_req', 'read_resp')
    and is 'stream' for TCP byte streams.  ``size`` is the upper-layer bytes
    carried, headers of the storage protocol included.

    Two fields say how a sender hands a stream message to TCP, which decides
    where segments end (see ``stream_frames``): ``pushes`` lists the sizes of
    its successive send calls that each end in a push (empty: one push of the
    whole message), and ``corked`` means its last send carries MSG_MORE, so
    the next message in the same direction continues its last segment.
    """

    direction: str
    kind: str
    size: int
    label: str
    pushes: tuple[int, ...] = ()
    corked: bool = False

    def __post_init__(self) -> None:
        if self.pushes and sum(self.pushes) != self.size:
            raise ValueError(f"{self.label}: pushes {self.pushes} do not add up to {self.size}")

    def push_sizes(self) -> tuple[int, ...]:
        return self.pushes or (self.size,)


@dataclass(frozen=True)
class Frame:
    direction: str
    wire: int
    captured: int
    payload: int
    is_ack: bool = False


def rdma_path_mtu(netdev_mtu: int, fabric: str) -> int:
    """The RDMA path MTU: IB uses the MTU given; RoCE fits it in the netdev MTU."""
    if FABRICS[fabric].infiniband:
        return max(m for m in PATH_MTUS if m <= max(netdev_mtu, 256))
    usable = netdev_mtu - 80
    return max((m for m in PATH_MTUS if m <= usable), default=256)


def tcp_mss(mtu: int) -> int:
    """Linux's MSS with TCP timestamps over IPv4."""
    return mtu - IPV4 - TCP_TS


def packet_payload(fabric: str, mtu: int) -> int:
    """The most data one frame carries: the TCP MSS on a byte stream (TCP, iWARP), the RDMA
    path MTU on RoCE and InfiniBand."""
    return tcp_mss(mtu) if FABRICS[fabric].carries_tcp else rdma_path_mtu(mtu, fabric)


def _rdma_packet(fabric: str, payload: int, ext: int, direction: str, ack: bool) -> Frame:
    pad = -payload % 4
    if FABRICS[fabric].infiniband:
        body = IB_LRH + BTH + ext + payload + pad + ICRC + IB_VCRC
        return Frame(direction, body, body, payload, ack)
    body = IPV4 + UDP + BTH + ext + payload + pad + ICRC
    return Frame(direction, body + _ETH_WIRE, body + _ETH_CAPTURED, payload, ack)


def _reverse(direction: str) -> str:
    return "in" if direction == "out" else "out"


def rdma_frames(message: Message, fabric: str, mtu: int) -> list[Frame]:
    """Packets of one RDMA message on RoCE or InfiniBand, with its RC ACK.

    The first packet of an RDMA WRITE and every READ request carry a RETH;
    READ responses carry an AETH on their first and last packet.  Requests
    (SEND, WRITE) are acknowledged by one coalesced ACK (BTH + AETH).
    """
    pmtu = rdma_path_mtu(mtu, fabric)
    d = message.direction
    if message.kind == "read_req":
        return [_rdma_packet(fabric, 0, RETH, d, False)]
    sizes = [pmtu] * (message.size // pmtu) + ([message.size % pmtu] if message.size % pmtu else [])
    sizes = sizes or [0]
    frames = []
    for i, size in enumerate(sizes):
        first, last = i == 0, i == len(sizes) - 1
        ext = 0
        if message.kind == "write" and first:
            ext = RETH
        elif message.kind == "read_resp" and (first or last):
            ext = AETH
        frames.append(_rdma_packet(fabric, size, ext, d, False))
    if message.kind in ("send", "write"):
        frames.append(_rdma_packet(fabric, 0, AETH, _reverse(d), True))
    return frames


def _tcp_frame(payload: int, direction: str, ack: bool = False) -> Frame:
    body = IPV4 + TCP_TS + payload
    return Frame(direction, body + _ETH_WIRE, body + _ETH_CAPTURED, payload, ack)


def _segments(size: int, mss: int) -> list[int]:
    full, rest = divmod(size, mss)
    return [mss] * full + ([rest] if rest else [])


# A GRO batch holds at most 64 KiB (the netdev's default gro_max_size).
GRO_MAX_BYTES = 65536


def corked_runs(messages: Sequence[Message], pieces: Callable[[Message], Sequence[int]]) -> list[int]:
    """Bytes a sender hands TCP between pushes: a corked message runs on into the next.

    ``pieces`` splits a message into its sends (``Message.push_sizes`` for
    the frames an idle link shows; the whole message where autocorking
    merges them on a loaded host).  A message whose last send carries
    MSG_MORE waits in the socket for the next message, if its own side
    sends that one, and the two leave as one push and arrive as one GRO
    batch.  The one home of the corking rule, for frames and super-packets.
    """
    units: list[int] = []
    carry = 0
    for here, after in zip_longest(messages, messages[1:]):
        sends = pieces(here)
        for j, size in enumerate(sends):
            carry += size
            last = j == len(sends) - 1
            if last and here.corked and after is not None and after.direction == here.direction:
                continue
            units.append(carry)
            carry = 0
    if carry:
        units.append(carry)
    return units


def _tcp_batches(flight: list[Message], mss: int) -> list[list[int]]:
    """Segment sizes grouped as the receiver takes them in: one GRO batch per push.

    A sender sets PSH on the last segment of each push, and GRO on the
    receiving side merges back-to-back segments of a flow until a PSH (or
    64 KiB), so each push arrives as one batch.
    """
    per_batch = max(1, GRO_MAX_BYTES // mss)
    batches = []
    for unit in corked_runs(flight, Message.push_sizes):
        segs = _segments(unit, mss)
        batches += [segs[i : i + per_batch] for i in range(0, len(segs), per_batch)]
    return batches


def _fpdu_batches(flight: list[Message], mss: int) -> list[list[tuple[int, int]]]:
    """FPDUs of RDMAP messages over MPA/TCP, one segment and one batch each.

    siw builds every FPDU to fill at most one segment and sends each with
    MSG_EOR, so every FPDU is pushed and GRO never merges two of them.
    Tagged messages (RDMA WRITE, READ response) carry a 14-byte DDP/RDMAP
    header, untagged ones (SEND, READ request) 18; MPA adds a 2-byte length,
    padding to 4 bytes and a 4-byte CRC.  Items are (TCP payload, data).
    """
    batches = []
    for message in flight:
        tagged = message.kind in ("write", "read_resp")
        header = MPA_LEN + (DDP_TAGGED if tagged else DDP_UNTAGGED)
        room = mss - header - MPA_CRC
        room -= room % 4
        size = 16 if message.kind == "read_req" else message.size  # sink STag/TO/len
        for chunk in _segments(size, room) or [0]:
            batches.append([(header + chunk + (-(header + chunk) % 4) + MPA_CRC, chunk)])
    return batches


def _flights(messages: list[Message]) -> list[list[Message]]:
    """Runs of consecutive messages in one direction."""
    flights: list[list[Message]] = []
    for message in messages:
        if flights and flights[-1][0].direction == message.direction:
            flights[-1].append(message)
        else:
            flights.append([message])
    return flights


def stream_frames(messages: list[Message], fabric: str, mtu: int) -> list[Frame]:
    """Segments of the messages of one I/O on TCP ('eth') or MPA/TCP ('iwarp'),
    with the pure ACKs Linux's receiver sends for them.

    The receiver follows tcp_input.c and tcp.c: after taking in a batch it
    acknowledges at once if more than one MSS is unacknowledged, or if two
    short (sub-MSS, single-segment) batches have arrived since its last ACK
    (ICSK_ACK_PUSHED2, checked when the consumer empties the socket);
    otherwise the ACK waits and rides on the receiver's next data, which at
    QD1 is its reply or the next command.  The two ends of an I/O are in
    "pingpong" (interactive) mode, so a single pushed segment does not draw
    an ACK of its own.  Delayed-ACK timer expiries after the last I/O of a
    run are not part of the steady state and are not modelled.
    """
    mss = tcp_mss(mtu)
    frames: list[Frame] = []
    for flight in _flights(messages):
        direction = flight[0].direction
        batches = (
            _fpdu_batches(flight, mss)
            if FABRICS[fabric].mpa
            else [[(s, s) for s in b] for b in _tcp_batches(flight, mss)]
        )
        unacked = short = 0
        for batch in batches:
            frames += [replace(_tcp_frame(seg, direction), payload=data) for seg, data in batch]
            unacked += sum(seg for seg, _ in batch)
            if len(batch) == 1 and batch[0][0] < mss:
                short += 1
            if unacked > mss or short >= 2:
                frames.append(_tcp_frame(0, _reverse(direction), True))
                unacked = short = 0
    return frames


def frames_for(messages: list[Message], fabric: str, mtu: int) -> list[Frame]:
    """Frames of an I/O's messages on ``fabric``: 'eth' (TCP), 'roce', 'ib' or 'iwarp'."""
    if FABRICS[fabric].carries_tcp:
        return stream_frames(messages, fabric, mtu)
    return [f for m in messages for f in rdma_frames(m, fabric, mtu)]


# InfiniBand link names give the signalling rate; 8b/10b (SDR..QDR) and
# 64b/66b (FDR) coding leave less for data.  Ethernet rates are data rates.
_IB_DATA_GBPS = {10.0: 8.0, 20.0: 16.0, 40.0: 32.0, 56.0: 54.55}


def data_rate_gbps(fabric: str, nominal_gbps: float) -> float:
    """The usable data rate of a link named by its nominal speed."""
    if FABRICS[fabric].infiniband:
        return _IB_DATA_GBPS.get(float(nominal_gbps), nominal_gbps)
    return nominal_gbps
