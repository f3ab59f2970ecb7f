"""Transports as data: the messages of one I/O, derived from protocol parameters.

Each function lists, in order, what crosses the link for one read or write
of ``bs`` bytes.  Nothing here is fitted: sizes come from the standards and
from the negotiated parameters (MaxRecvDataSegmentLength, FirstBurstLength,
ImmediateData, in-capsule limits, digests), whose defaults are Linux's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace

from sanlab.models.core.wire import GSO_MAX_SIZE, Frame, Message, corked_runs, frames_for
from sanlab.scenarios.headers import (  # noqa: F401  (re-exported: the recipes' vocabulary)
    DIGEST,
    ISCSI_BHS,
    ISER_HDR,
    NVME_CQE,
    NVME_SQE,
    NVME_TCP_CMD,
    NVME_TCP_DATA_HDR,
    NVME_TCP_RESP,
    SRP_CMD,
    SRP_DESC,
    SRP_RSP,
    TLS_AEAD_TAG,
    TLS_INNER_TYPE,
    TLS_MAX_RECORD,
    TLS_RECORD_HDR,
)
from sanlab.scenarios.registry import TRANSPORTS

SRP_IMM_OFFSET = 68  # SRP_CMD + room for additional CDB + the 4-byte immediate descriptor


@dataclass(frozen=True)
class ProtocolParams:
    """Negotiated parameters that shape the messages of an I/O.

    Defaults are what Linux 6.1's initiators and targets negotiate out of the
    box, as read from sanlab's captures: LIO and open-iscsi both announce a
    256 KiB MaxRecvDataSegmentLength, ImmediateData=Yes, InitialR2T=Yes,
    FirstBurstLength 64 KiB, and LIO returns a read's status in its last
    Data-In PDU (so a write up to 64 KiB needs no R2T); nvmet-tcp
    accepts 16 KiB in a command capsule and nvmet-rdma 4 KiB inline; Linux's
    SRP (SRP-2) and iSER initiators send writes of up to 8 KiB as immediate
    data in the command SEND (seen in sanlab's captures: one round trip).

    How a target hands PDUs to TCP decides where segments end (the
    initiator side is always Linux's, see ``iscsi``).  LIO sends an iSCSI
    header with a send of its own and then pushes each page of data
    separately (iscsit_fe_sendpage_sg passes no MSG_MORE); tgt corks a whole
    PDU (TCP_CORK around each write).  nvmet-tcp corks a read's response
    behind its C2HData unless the host disabled SQ flow control, in which
    case the C2HData carries the SUCCESS flag and no response is sent.
    """

    target_mrdsl: int = 262144
    initiator_mrdsl: int = 262144
    first_burst: int = 65536
    max_burst: int = 262144
    immediate_data: bool = True
    initial_r2t: bool = True
    status_in_data: bool = True
    header_digest: bool = False
    data_digest: bool = False
    nvme_tcp_in_capsule: int = 16384
    nvme_rdma_inline: int = 4096
    srp_immediate: int = 8192
    iser_immediate: int = 8192
    target_header_push: bool = True
    target_page_push: int = 4096
    nvme_tcp_sq_flow_disabled: bool = False
    tls: bool = False  # NVMe/TCP inside TLS 1.3: each PDU sealed in records

    def with_(self, **changes: object) -> ProtocolParams:
        return replace(self, **changes)  # type: ignore[arg-type]


# What a target stack negotiates, or how it hands PDUs to TCP, differently
# from Linux's defaults (LIO, nvmet).  tgt's iSER driver turns immediate data
# off and InitialR2T on, so every iSER write waits for the target's RDMA
# READ, and tgt corks each iSCSI PDU (TCP_CORK around the write).  SCST
# writes the header, then the data pages with MSG_MORE on all but the last
# (iscsi-scst write_data).  SPDK queues whole PDUs and flushes them with one
# sendmsg.
STACK_PROTOCOL: dict[str, dict[str, object]] = {
    "tgt": {
        "iser_immediate": 0,
        "immediate_data": False,
        "initial_r2t": True,
        "target_header_push": False,
        "target_page_push": 0,
    },
    "scst": {"target_page_push": 0},
    "spdk": {"target_header_push": False, "target_page_push": 0},
}


def stack_params(stack: str, base: ProtocolParams | None = None) -> ProtocolParams:
    return (base or ProtocolParams()).with_(**STACK_PROTOCOL.get(stack, {}))


@dataclass(frozen=True)
class Recipe:
    """What one I/O puts on the wire, and how many round trips it waits for."""

    transport: str
    rw: str
    bs: int
    messages: tuple[Message, ...]
    round_trips: int

    def frames(self, fabric: str, mtu: int) -> list[Frame]:
        return frames_for(list(self.messages), fabric, mtu)


def _chunks(total: int, limit: int) -> list[int]:
    full, rest = divmod(total, limit)
    return [limit] * full + ([rest] if rest else [])


PAGE = 4096


def _iscsi_pdu(direction: str, data: int, label: str, p: ProtocolParams) -> Message:
    """One iSCSI PDU and the sends that carry it.

    Linux's initiator (iscsi_sw_tcp_xmit_segment) sends the header without
    MSG_MORE, then the data segment with MSG_MORE on all but its last page:
    two pushes.  Targets follow ``p`` (see ProtocolParams).  Padding and the
    data digest ride with the last piece of data.
    """
    header = ISCSI_BHS + (DIGEST if p.header_digest else 0)
    tail = (-data % 4) + (DIGEST if p.data_digest else 0) if data else 0
    size = header + data + tail
    if direction == "out":
        split_header, page = True, 0
    else:
        split_header, page = p.target_header_push, p.target_page_push
    if not data:
        return Message(direction, "stream", size, label)
    body = _chunks(data, page) if page else [data]
    body[-1] += tail
    pushes = [header, *body] if split_header else [header + body[0], *body[1:]]
    return Message(direction, "stream", size, label, tuple(pushes))


Builder = Callable[[str, int, ProtocolParams], Recipe]
# Each transport's message ladder, registered by its builder under the registry's name.
_BUILDERS: dict[str, Builder] = {}


def builds(transport: str) -> Callable[[Builder], Builder]:
    """Registers the decorated function as ``transport``'s ladder: a name the registry knows,
    built once (a typo or a second builder fails at import, not at the first projection)."""

    def register(builder: Builder) -> Builder:
        if transport not in TRANSPORTS or transport in _BUILDERS:
            raise AssertionError(f"models/core/transports.py: {transport!r} unknown or built twice")
        _BUILDERS[transport] = builder
        return builder

    return register


@builds("iscsi")
def iscsi(rw: str, bs: int, p: ProtocolParams) -> Recipe:
    """RFC 7143: Command, Data-In or (immediate, R2T, Data-Out), Response."""
    msgs: list[Message] = []
    trips = 1
    if rw == "read":
        msgs.append(_iscsi_pdu("out", 0, "scsi-cmd", p))
        for chunk in _chunks(bs, p.initiator_mrdsl):
            msgs.append(_iscsi_pdu("in", chunk, "data-in", p))
        if not p.status_in_data:
            msgs.append(_iscsi_pdu("in", 0, "scsi-rsp", p))
        return Recipe("iscsi", rw, bs, tuple(msgs), trips)
    immediate = min(bs, p.first_burst, p.target_mrdsl) if p.immediate_data else 0
    msgs.append(_iscsi_pdu("out", immediate, "scsi-cmd", p))
    left = bs - immediate
    if left and not p.initial_r2t:
        unsolicited = min(left, p.first_burst - immediate)
        for chunk in _chunks(unsolicited, p.target_mrdsl):
            msgs.append(_iscsi_pdu("out", chunk, "data-out", p))
        left -= unsolicited
    for burst in _chunks(left, p.max_burst) if left else []:
        trips += 1
        msgs.append(_iscsi_pdu("in", 0, "r2t", p))
        for chunk in _chunks(burst, p.target_mrdsl):
            msgs.append(_iscsi_pdu("out", chunk, "data-out", p))
    msgs.append(_iscsi_pdu("in", 0, "scsi-rsp", p))
    return Recipe("iscsi", rw, bs, tuple(msgs), trips)


def _rdma_recipe(
    name: str, rw: str, bs: int, cmd: int, rsp: int, inline: int, inline_cmd: int | None = None
) -> Recipe:
    """The common shape of iSER, SRP and NVMe/RDMA: command SEND, data by the
    target's RDMA WRITE (reads) or RDMA READ (writes), response SEND."""
    msgs: tuple[Message, ...]
    if rw == "read":
        msgs = (
            Message("out", "send", cmd, "cmd"),
            Message("in", "write", bs, "rdma-write"),
            Message("in", "send", rsp, "rsp"),
        )
        return Recipe(name, rw, bs, msgs, 1)
    if bs <= inline:
        header = cmd if inline_cmd is None else inline_cmd
        msgs = (Message("out", "send", header + bs, "cmd+inline"), Message("in", "send", rsp, "rsp"))
        return Recipe(name, rw, bs, msgs, 1)
    msgs = (
        Message("out", "send", cmd, "cmd"),
        Message("in", "read_req", 0, "rdma-read-req"),
        Message("out", "read_resp", bs, "rdma-read-resp"),
        Message("in", "send", rsp, "rsp"),
    )
    return Recipe(name, rw, bs, msgs, 2)


@builds("iser")
def iser(rw: str, bs: int, p: ProtocolParams) -> Recipe:
    """RFC 7145: iSER header + BHS in SENDs; the target moves the data."""
    return _rdma_recipe("iser", rw, bs, ISER_HDR + ISCSI_BHS, ISER_HDR + ISCSI_BHS, p.iser_immediate)


@builds("srp")
def srp(rw: str, bs: int, p: ProtocolParams) -> Recipe:
    """SRP (T10): SRP_CMD with one direct descriptor; SRP_RSP without sense."""
    return _rdma_recipe("srp", rw, bs, SRP_CMD + SRP_DESC, SRP_RSP, p.srp_immediate, SRP_IMM_OFFSET)


@builds("nvme-rdma")
def nvme_rdma(rw: str, bs: int, p: ProtocolParams) -> Recipe:
    """NVMe/RDMA: 64-byte SQE capsule (inline data for small writes), 16-byte CQE."""
    return _rdma_recipe("nvme-rdma", rw, bs, NVME_SQE, NVME_CQE, p.nvme_rdma_inline)


def sealed(size: int, p: ProtocolParams) -> int:
    """A PDU's bytes on the stream: inside TLS, each record of at most 16 KiB adds its
    header, inner content type and AEAD tag (RFC 8446 5.2)."""
    if not p.tls:
        return size
    records = -(-size // TLS_MAX_RECORD)
    return size + records * (TLS_RECORD_HDR + TLS_INNER_TYPE + TLS_AEAD_TAG)


@builds("nvme-tcp")
def nvme_tcp(rw: str, bs: int, p: ProtocolParams) -> Recipe:
    """NVMe/TCP: CapsuleCmd, C2HData or (in-capsule | R2T + H2CData), CapsuleResp (each
    sealed in TLS records with ``tls``)."""
    recipe = _nvme_tcp_plain(rw, bs, p)
    if not p.tls:
        return recipe
    return replace(recipe, messages=_sealed_messages(recipe.messages, p))


def _sealed_messages(messages: tuple[Message, ...], p: ProtocolParams) -> tuple[Message, ...]:
    """Each message sealed in TLS records; a corked one shares its records with the message
    that uncorks it (kTLS closes a record only when a send is not MSG_MORE), so a read's
    C2HData and CapsuleResp are one record, not two: measured on tests/golden/nvme-tls.pcap,
    44 B of TLS per 4k read, not 66.  The shared records' bytes go to the corked message."""
    out: list[Message] = []
    held: Message | None = None
    for message in messages:
        if held is not None:
            out += [replace(held, size=sealed(held.size + message.size, p) - message.size), message]
            held = None
        elif message.corked:
            held = message
        else:
            out.append(replace(message, size=sealed(message.size, p)))
    if held is not None:
        out.append(replace(held, size=sealed(held.size, p)))
    return tuple(out)


def _nvme_tcp_plain(rw: str, bs: int, p: ProtocolParams) -> Recipe:
    hd = DIGEST if p.header_digest else 0
    dd = DIGEST if p.data_digest else 0
    msgs: tuple[Message, ...]
    if rw == "read":
        cmd = Message("out", "stream", NVME_TCP_CMD + hd, "capsule-cmd")
        data = NVME_TCP_DATA_HDR + hd + bs + dd
        if p.nvme_tcp_sq_flow_disabled:  # C2HData with the SUCCESS flag, no response
            msgs = (cmd, Message("in", "stream", data, "c2h-data"))
        else:
            msgs = (
                cmd,
                Message("in", "stream", data, "c2h-data", corked=True),
                Message("in", "stream", NVME_TCP_RESP + hd, "capsule-resp"),
            )
        return Recipe("nvme-tcp", rw, bs, msgs, 1)
    if bs <= p.nvme_tcp_in_capsule:
        msgs = (
            Message("out", "stream", NVME_TCP_CMD + hd + bs + dd, "capsule-cmd+data"),
            Message("in", "stream", NVME_TCP_RESP + hd, "capsule-resp"),
        )
        return Recipe("nvme-tcp", rw, bs, msgs, 1)
    msgs = (
        Message("out", "stream", NVME_TCP_CMD + hd, "capsule-cmd"),
        Message("in", "stream", NVME_TCP_DATA_HDR + hd, "r2t"),
        Message("out", "stream", NVME_TCP_DATA_HDR + hd + bs + dd, "h2c-data"),
        Message("in", "stream", NVME_TCP_RESP + hd, "capsule-resp"),
    )
    return Recipe("nvme-tcp", rw, bs, msgs, 2)


@functools.lru_cache(maxsize=4096)
def recipe(transport: str, rw: str, bs: int, params: ProtocolParams | None = None) -> Recipe:
    """The messages of one I/O; ``rw`` may be fio's (randread...) or plain read/write (frozen,
    so one is built once for every network that asks)."""
    direction = "read" if "read" in rw else "write"
    return _BUILDERS[transport](direction, bs, params or ProtocolParams())


@dataclass(frozen=True)
class WireCost:
    """Per-I/O totals on each direction of the link."""

    frames_out: int
    frames_in: int
    wire_out: int
    wire_in: int
    captured: int
    ack_frames: int
    # What a host's TCP stack handles with segmentation (TSO/GSO) and receive
    # (GRO) offload: a message's super-packets of up to 64 KiB, and at most one
    # pure ACK each (``super_packets``).
    super_packets: int = 0

    @property
    def frames(self) -> int:
        return self.frames_out + self.frames_in


# A fit builds every cell's network thousands of times, and a cell's frames depend only on its
# messages, fabric and MTU: cut once (WireCost is frozen, so sharing it is safe).
@functools.lru_cache(maxsize=4096)
def wire_cost(r: Recipe, fabric: str, mtu: int) -> WireCost:
    frames = r.frames(fabric, mtu)
    out = [f for f in frames if f.direction == "out"]
    inn = [f for f in frames if f.direction == "in"]
    acks = sum(1 for f in frames if f.is_ack)
    return WireCost(
        frames_out=len(out),
        frames_in=len(inn),
        wire_out=sum(f.wire for f in out),
        wire_in=sum(f.wire for f in inn),
        captured=sum(f.captured for f in frames),
        ack_frames=acks,
        super_packets=super_packets(r, acks),
    )


def super_packets(r: Recipe, acks: int) -> int:
    """Packets one I/O costs each host's TCP stack with TSO/GSO and GRO: data cut at 64 KiB, and ACKs.

    Linux's sender hands TCP its buffers and the NIC cuts them into MSS
    frames (TSO); on a busy fast NIC TCP autocorking merges a message's
    successive sends while the previous one waits in the device queue, so
    one message (with any it corks onto, ``send_units``) is one
    super-packet per 64 KiB.  The receiver's GRO merges
    the frames back, and acknowledges at most once per merged batch.  The
    frame recipes keep every push (what a capture of an idle, emulated link
    shows); this count is what a loaded host's CPU sees.
    """
    data = sum(-(-unit // GSO_MAX_SIZE) for unit in send_units(r))
    return data + min(acks, data)


def send_units(r: Recipe) -> list[int]:
    """Bytes a host hands its TCP stack in one go, a whole message at a time (autocorking),
    a corked message running on into the next (``wire.corked_runs``)."""
    return corked_runs([m for m in r.messages if m.kind == "stream"], lambda m: (m.size,))


def wire_bound_iops(cost: WireCost, link_gbps: float) -> float:
    """The physical ceiling: no more I/Os than the busier link direction can carry."""
    busiest = max(cost.wire_out, cost.wire_in)
    return link_gbps * 1e9 / 8 / busiest
