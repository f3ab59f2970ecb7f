"""How protocol messages become frames on a link, and what each frame costs.

A message is what one protocol layer hands to the fabric: an iSCSI PDU, an
RDMA SEND, an RDMA WRITE of a whole buffer.  The fabric cuts it into packets
no larger than its MTU and wraps each in headers.  Two lengths matter:

* ``wire`` bytes occupy the link: every header, FCS, and for Ethernet the
  preamble and inter-frame gap (20 bytes).  Serialisation time = wire / rate.
* ``captured`` bytes are what a pcap records (``frame.len``): no preamble,
  gap or FCS.  The capture analyser measures these.

Header sizes are those of ``shared/reference/wire-formats.md``; they are
protocol facts, not measurements.
"""

from __future__ import annotations

from dataclasses import dataclass

ETH_HDR, ETH_FCS, ETH_GAP = 14, 4, 20
IPV4, UDP, TCP_TS = 20, 8, 32
BTH, RETH, AETH, ICRC = 12, 16, 4, 4
IB_LRH, IB_VCRC = 8, 2
MPA_LEN, MPA_CRC, DDP_TAGGED, DDP_UNTAGGED = 2, 4, 14, 18
PATH_MTUS = (256, 512, 1024, 2048, 4096)

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
    """

    direction: str
    kind: str
    size: int
    label: str


@dataclass(frozen=True)
class Frame:
    direction: str
    wire: int
    captured: int
    payload: int
    is_ack: bool = False


def rdma_path_mtu(netdev_mtu: int, fabric: str) -> int:
    """The RDMA path MTU: IB uses the MTU given; RoCE fits it in the netdev MTU."""
    if fabric == "ib":
        return max(m for m in PATH_MTUS if m <= max(netdev_mtu, 256))
    usable = netdev_mtu - 80
    return max((m for m in PATH_MTUS if m <= usable), default=256)


def tcp_mss(mtu: int) -> int:
    """Linux's MSS with TCP timestamps over IPv4."""
    return mtu - IPV4 - TCP_TS


def _rdma_packet(fabric: str, payload: int, ext: int, direction: str, ack: bool) -> Frame:
    pad = -payload % 4
    if fabric == "ib":
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


def tcp_frames(message: Message, mtu: int, ack_every: int) -> list[Frame]:
    """Segments of one PDU on a TCP stream, and the pure ACKs they draw.

    Linux acknowledges every ``ack_every`` full segments; a lone segment is
    acknowledged by the peer's next PDU, which carries the ACK for free.
    """
    mss = tcp_mss(mtu)
    full, rest = divmod(message.size, mss)
    frames = [_tcp_frame(mss, message.direction)] * full
    if rest:
        frames.append(_tcp_frame(rest, message.direction))
    acks = len(frames) // ack_every if len(frames) > 1 else 0
    frames += [_tcp_frame(0, _reverse(message.direction), True)] * acks
    return frames


def iwarp_frames(message: Message, mtu: int, ack_every: int) -> list[Frame]:
    """FPDUs of one RDMAP message over MPA/TCP: each FPDU fills one segment.

    Tagged messages (RDMA WRITE, READ response) carry a 14-byte DDP/RDMAP
    header, untagged ones (SEND, READ request) 18; MPA adds a 2-byte length,
    padding to 4 bytes and a 4-byte CRC.
    """
    tagged = message.kind in ("write", "read_resp")
    header = MPA_LEN + (DDP_TAGGED if tagged else DDP_UNTAGGED)
    room = tcp_mss(mtu) - header - MPA_CRC
    room -= room % 4
    size = 16 if message.kind == "read_req" else message.size  # sink STag/TO/len
    chunks = [room] * (size // room) + ([size % room] if size % room else [])
    chunks = chunks or [0]
    frames = []
    for chunk in chunks:
        fpdu = header + chunk + (-(header + chunk) % 4) + MPA_CRC
        frame = _tcp_frame(fpdu, message.direction)
        frames.append(Frame(frame.direction, frame.wire, frame.captured, chunk))
    acks = len(frames) // ack_every if len(frames) > 1 else 0
    frames += [_tcp_frame(0, _reverse(message.direction), True)] * acks
    return frames


def frames_for(message: Message, fabric: str, mtu: int, ack_every: int = 2) -> list[Frame]:
    """Frames of a message on ``fabric``: 'eth' (TCP), 'roce', 'ib' or 'iwarp'."""
    if fabric == "eth":
        return tcp_frames(message, mtu, ack_every)
    if fabric == "iwarp":
        return iwarp_frames(message, mtu, ack_every)
    return rdma_frames(message, fabric, mtu)


# InfiniBand link names give the signalling rate; 8b/10b (SDR..QDR) and
# 64b/66b (FDR) coding leave less for data.  Ethernet rates are data rates.
_IB_DATA_GBPS = {10.0: 8.0, 20.0: 16.0, 40.0: 32.0, 56.0: 54.55}


def data_rate_gbps(fabric: str, nominal_gbps: float) -> float:
    """The usable data rate of a link named by its nominal speed."""
    if fabric == "ib":
        return _IB_DATA_GBPS.get(float(nominal_gbps), nominal_gbps)
    return nominal_gbps
