"""Transports as data: the messages of one I/O, derived from protocol parameters.

Each function lists, in order, what crosses the link for one read or write
of ``bs`` bytes.  Nothing here is fitted: sizes come from the standards and
from the negotiated parameters (MaxRecvDataSegmentLength, FirstBurstLength,
ImmediateData, in-capsule limits, digests), whose defaults are Linux's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sanlab.models.wire import Frame, Message, frames_for

ISCSI_BHS, DIGEST, ISER_HDR = 48, 4, 28
SRP_CMD, SRP_DESC, SRP_RSP = 48, 16, 36
SRP_IMM_OFFSET = 68  # SRP_CMD + room for additional CDB + the 4-byte immediate descriptor
NVME_SQE, NVME_CQE = 64, 16
NVME_TCP_CMD, NVME_TCP_RESP, NVME_TCP_DATA_HDR = 72, 24, 24
RDMA_TRANSPORTS = ("iser", "srp", "nvme-rdma")


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

    def with_(self, **changes: object) -> ProtocolParams:
        return replace(self, **changes)  # type: ignore[arg-type]


# What a target stack negotiates differently from Linux's defaults.  tgt's iSER
# driver turns immediate data off and InitialR2T on for its targets, so every
# iSER write waits for the target's RDMA READ.
STACK_PROTOCOL: dict[str, dict[str, object]] = {
    "tgt": {"iser_immediate": 0, "immediate_data": False, "initial_r2t": True},
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

    def frames(self, fabric: str, mtu: int, ack_every: int = 2) -> list[Frame]:
        return [f for m in self.messages for f in frames_for(m, fabric, mtu, ack_every)]


def _chunks(total: int, limit: int) -> list[int]:
    full, rest = divmod(total, limit)
    return [limit] * full + ([rest] if rest else [])


def _iscsi_pdu(data: int, p: ProtocolParams) -> int:
    size = ISCSI_BHS + (DIGEST if p.header_digest else 0)
    if data:
        size += data + (-data % 4) + (DIGEST if p.data_digest else 0)
    return size


def iscsi(rw: str, bs: int, p: ProtocolParams) -> Recipe:
    """RFC 7143: Command, Data-In or (immediate, R2T, Data-Out), Response."""
    msgs: list[Message] = []
    trips = 1
    if rw == "read":
        msgs.append(Message("out", "stream", _iscsi_pdu(0, p), "scsi-cmd"))
        for chunk in _chunks(bs, p.initiator_mrdsl):
            msgs.append(Message("in", "stream", _iscsi_pdu(chunk, p), "data-in"))
        if not p.status_in_data:
            msgs.append(Message("in", "stream", _iscsi_pdu(0, p), "scsi-rsp"))
        return Recipe("iscsi", rw, bs, tuple(msgs), trips)
    immediate = min(bs, p.first_burst, p.target_mrdsl) if p.immediate_data else 0
    msgs.append(Message("out", "stream", _iscsi_pdu(immediate, p), "scsi-cmd"))
    left = bs - immediate
    if left and not p.initial_r2t:
        unsolicited = min(left, p.first_burst - immediate)
        for chunk in _chunks(unsolicited, p.target_mrdsl):
            msgs.append(Message("out", "stream", _iscsi_pdu(chunk, p), "data-out"))
        left -= unsolicited
    for burst in _chunks(left, p.max_burst) if left else []:
        trips += 1
        msgs.append(Message("in", "stream", _iscsi_pdu(0, p), "r2t"))
        for chunk in _chunks(burst, p.target_mrdsl):
            msgs.append(Message("out", "stream", _iscsi_pdu(chunk, p), "data-out"))
    msgs.append(Message("in", "stream", _iscsi_pdu(0, p), "scsi-rsp"))
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


def iser(rw: str, bs: int, p: ProtocolParams) -> Recipe:
    """RFC 7145: iSER header + BHS in SENDs; the target moves the data."""
    return _rdma_recipe("iser", rw, bs, ISER_HDR + ISCSI_BHS, ISER_HDR + ISCSI_BHS, p.iser_immediate)


def srp(rw: str, bs: int, p: ProtocolParams) -> Recipe:
    """SRP (T10): SRP_CMD with one direct descriptor; SRP_RSP without sense."""
    return _rdma_recipe("srp", rw, bs, SRP_CMD + SRP_DESC, SRP_RSP, p.srp_immediate, SRP_IMM_OFFSET)


def nvme_rdma(rw: str, bs: int, p: ProtocolParams) -> Recipe:
    """NVMe/RDMA: 64-byte SQE capsule (inline data for small writes), 16-byte CQE."""
    return _rdma_recipe("nvme-rdma", rw, bs, NVME_SQE, NVME_CQE, p.nvme_rdma_inline)


def nvme_tcp(rw: str, bs: int, p: ProtocolParams) -> Recipe:
    """NVMe/TCP: CapsuleCmd, C2HData or (in-capsule | R2T + H2CData), CapsuleResp."""
    hd = DIGEST if p.header_digest else 0
    dd = DIGEST if p.data_digest else 0
    msgs: tuple[Message, ...]
    if rw == "read":
        msgs = (
            Message("out", "stream", NVME_TCP_CMD + hd, "capsule-cmd"),
            Message("in", "stream", NVME_TCP_DATA_HDR + hd + bs + dd, "c2h-data"),
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


_BUILDERS = {"iscsi": iscsi, "iser": iser, "srp": srp, "nvme-tcp": nvme_tcp, "nvme-rdma": nvme_rdma}


def recipe(transport: str, rw: str, bs: int, params: ProtocolParams | None = None) -> Recipe:
    """The messages of one I/O; ``rw`` may be fio's (randread...) or plain read/write."""
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

    @property
    def frames(self) -> int:
        return self.frames_out + self.frames_in


def wire_cost(r: Recipe, fabric: str, mtu: int, ack_every: int = 2) -> WireCost:
    frames = r.frames(fabric, mtu, ack_every)
    out = [f for f in frames if f.direction == "out"]
    inn = [f for f in frames if f.direction == "in"]
    return WireCost(
        frames_out=len(out),
        frames_in=len(inn),
        wire_out=sum(f.wire for f in out),
        wire_in=sum(f.wire for f in inn),
        captured=sum(f.captured for f in frames),
        ack_frames=sum(1 for f in frames if f.is_ack),
    )


def wire_bound_iops(cost: WireCost, link_gbps: float) -> float:
    """The physical ceiling: no more I/Os than the busier link direction can carry."""
    busiest = max(cost.wire_out, cost.wire_in)
    return link_gbps * 1e9 / 8 / busiest
