"""Every frame of a capture, as tshark (with sanlab's plugins) decodes it.

This is the analyser's reading step: one tshark run (tshark.py) gives, per frame, its
addresses and size, the transport keys (TCP stream and sequence numbers;
InfiniBand BTH, RETH and AETH; iWARP DDP and RDMAP), and what the storage
protocols carried over RDMA say (SRP tags and descriptors, iSER and NVMe
commands).  iSCSI and NVMe/TCP over plain TCP are framed from the stream
bytes instead (see framing.py), because a TCP segment is not a PDU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sanlab.dissectors.framing import AUTHENTICATION, FABRICS_AUTH, ISCSI_CATEGORY, scsi_op
from sanlab.dissectors.rawframes import frame_bytes
from sanlab.dissectors.tshark import INFO, RowCheck, check_time_order, fields_for, tshark_rows
from sanlab.scenarios.headers import ICRC, NVME_CQE, NVME_SQE, ROCE_PAYLOAD_OFFSET

# A frame seen twice in one capture (a capture merged with itself, a port mirrored twice) has
# the same length, addresses, IP id and transport sequence as its first copy: its protocol keys,
# not its time (two capture points stamp one frame apart; a capture may carry no times at all).
# A frame without an IPv4 id (ARP, IPv6) has no such keys and is never taken for a copy.
DUPLICATE_KEY = (
    "frame.len",
    "ip.src",
    "ip.dst",
    "ip.id",
    "tcp.srcport",
    "tcp.dstport",
    "tcp.seq_raw",
    "tcp.ack_raw",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
)
ADMIN_NSIDS = {0, 0xFFFFFFFF}  # admin commands share opcodes 1 and 2 with Write and Read
ROCE_UDP_PORT = 4791
# RC BTH opcodes (InfiniBand Architecture, volume 1, table 38).
RC_SEND_FIRST, RC_ACK = 0, 17
RC_SEND_STARTS = {0, 4, 5, 23}  # First, Only, Only with Immediate, Only with Invalidate
RC_WRITE_STARTS, RC_WRITE_GOES_ON = {6, 10, 11}, {7, 8, 9}
RC_READ_REQUEST, RC_READ_RESPONSE_STARTS, RC_READ_RESPONSE_GOES_ON = 12, {13, 16}, {14, 15}
RC_SEND_GOES_ON = {1, 2, 3, 22}
UD_SEND_ONLY = 100  # the CM's MADs ride QP1 as UD SEND Only
# iSCSI opcodes as tshark reports them for iSER over RoCE (RFC 7143).
ISCSI_SCSI_COMMAND, ISCSI_SCSI_RESPONSE, ISCSI_DATA_IN = 0x01, 0x21, 0x25
# SRP information units (T10 SRP).
SRP_CMD_IU, SRP_RSP_IU = 0x02, 0xC1
SRP_LOGIN_IUS = {0x00, 0xC0, 0xC2, 0x03, 0x80}  # LOGIN_REQ/RSP/REJ, I_LOGOUT, T_LOGOUT
# NVM command set opcodes.
NVME_WRITE, NVME_READ = 0x01, 0x02
# RDMAP opcode (RFC 5040) of the untagged read request; Write (0) and Read
# Response (2) need no name: both are tagged, and the STag names their owner.
RDMAP_READ_REQUEST = 1


@dataclass(frozen=True)
class Command:
    """A command as its PDU states it: the task key, what it asks, and the buffers it names."""

    tag: str
    op: str  # read, write or other
    nbytes: int
    lba: int = -1
    blocks: int = 0
    keys: tuple[int, ...] = ()  # R_Keys / STags of the initiator's buffers
    category: str = ""  # for non-I/O commands: admin, scsi control…


@dataclass(frozen=True)
class Response:
    """A response PDU: it ends the task with this tag."""

    tag: str


@dataclass(frozen=True)
class Fpdu:
    """One iWARP FPDU's DDP/RDMAP keys (a TCP segment may hold several)."""

    tagged: bool
    opcode: int
    length: int
    stag: int = -1
    qn: int = -1
    msn: int = -1
    mo: int = -1
    sink_stag: int = -1
    src_stag: int = -1


# What a decoded SEND carried, in order: a command, a response, or the name of other traffic.
Unit = Command | Response | str


@dataclass(slots=True)
class Frame:
    number: int
    time: float
    length: int
    src: str
    dst: str
    protocol: str = ""  # Wireshark's protocol column
    label: str = ""  # what Wireshark's packet list says of it (protocol: info)
    is_ack: bool = False  # a pure transport ACK: TCP with no payload, or an RC Acknowledge
    # TCP
    stream: int = -1
    sport: int = 0
    dport: int = 0
    seq: int = 0
    ack: int = 0
    tcp_len: int = -1  # -1: not TCP
    syn: bool = False
    handshake: bool = False  # SYN, FIN or RST
    # InfiniBand (RoCE)
    bth: int = -1
    destqp: int = -1
    psn: int = -1
    rkey: int = -1
    cm_tid: str = ""
    cm_qpn: int = -1  # the sender's QP in a CM REQ or REP
    cm_reply: bool = False  # the CM message is a REP
    cm_qid: int = -1  # the NVMe queue a CM REQ (or MPA request) connects
    # iWARP
    mpa: bool = False
    fpdus: list[Fpdu] = field(default_factory=list)
    segments: list[int] = field(default_factory=list)  # earlier frames of a PDU reassembled here
    start: float = 0.0  # time of the first of those frames
    # Storage protocols carried by RDMA, as decoded
    commands: list[Command] = field(default_factory=list)
    responses: list[str] = field(default_factory=list)  # tags
    units: list[Unit] = field(default_factory=list)  # commands, responses and others, in order
    category: str = ""  # a non-I/O PDU recognised in the frame (login…)
    transport: str = ""  # the RDMA storage protocol decoded in it (srp, iser, nvme-rdma), if any

    @property
    def roce(self) -> bool:
        return self.bth >= 0


def _split(value: str) -> list[str]:
    return [v for v in value.split(",") if v] if value else []


def _int(text: str) -> int:
    return int(text, 0) if text.lower().startswith("0x") else int(text)


def _first(row: dict[str, str], name: str, default: int = -1) -> int:
    values = _split(row[name])
    return _int(values[0]) if values else default


def read_frames(
    pcap: Path, decode_as: tuple[str, ...] = (), labels: bool = False, keylog: Path | None = None
) -> tuple[list[Frame], set[str], int]:
    """Every frame of the capture, the transports and fabrics seen in it, and how many frames
    were exact duplicates of an earlier one (left out: a capture merged with itself, say).
    With ``labels`` each frame keeps what Wireshark's packet list says of it."""
    frames: list[Frame] = []
    seen: set[str] = set()
    check = RowCheck()
    fingerprints: set[int] = set()  # hashes, not the tuples: a few bytes a frame
    duplicates = 0
    for row in tshark_rows(pcap, decode_as, fields_for(labels), keylog):
        check.see(row)
        if row["ip.id"]:
            fingerprint = hash(tuple(row[name] for name in DUPLICATE_KEY))
            if fingerprint in fingerprints:
                duplicates += 1
                continue
            fingerprints.add(fingerprint)
        frames.append(_frame(row, seen))
    check.verdict(pcap)
    check_time_order(pcap, frames)
    if "nvme-rdma" in seen and "roce" in seen:
        _inline_capsules(pcap, frames)
    times = {f.number: f.time for f in frames}
    for frame in frames:
        frame.start = min((times.get(n, frame.time) for n in frame.segments), default=frame.time)
    return frames, seen, duplicates


def _frame(row: dict[str, str], seen: set[str]) -> Frame:
    frame = Frame(
        number=int(row["frame.number"]),
        time=float(row["frame.time_epoch"]),
        length=int(row["frame.len"]),
        src=row["ip.src"],
        dst=row["ip.dst"],
        protocol=row["_ws.col.Protocol"],
        label=f"{row['_ws.col.Protocol']}: {row.get(INFO, '')}".strip(": "),
    )
    if row["tcp.stream"]:
        _tcp(row, frame)
    if row["udp.dstport"] == str(ROCE_UDP_PORT):
        seen.add("roce")
        _roce(row, frame)
    if row["sanlab_iwarp.ddp.tagged"] or row["sanlab_iwarp.mpa.key"]:
        seen.add("iwarp")
        _iwarp(row, frame)
    _srp(row, frame, seen)
    _iser(row, frame, seen)
    _nvme_rdma(row, frame, seen)
    return frame


def _tcp(row: dict[str, str], frame: Frame) -> None:
    frame.stream = int(row["tcp.stream"])
    frame.sport, frame.dport = int(row["tcp.srcport"]), int(row["tcp.dstport"])
    frame.seq, frame.ack = _first(row, "tcp.seq_raw", 0), _first(row, "tcp.ack_raw", 0)
    frame.tcp_len = _first(row, "tcp.len", 0)
    frame.syn = row["tcp.flags.syn"] in ("1", "True")
    frame.handshake = any(row[f"tcp.flags.{flag}"] in ("1", "True") for flag in ("syn", "fin", "reset"))
    frame.is_ack = frame.tcp_len == 0 and not frame.handshake


def _roce(row: dict[str, str], frame: Frame) -> None:
    frame.bth = _first(row, "infiniband.bth.opcode")
    frame.destqp, frame.psn = _first(row, "infiniband.bth.destqp"), _first(row, "infiniband.bth.psn")
    frame.rkey = _first(row, "infiniband.reth.r_key")
    frame.is_ack = frame.bth == RC_ACK
    frame.cm_tid = row["infiniband.mad.transactionid"]
    frame.cm_qpn = _first(row, "infiniband.cm.req.localqpn", _first(row, "infiniband.cm.rep.localqpn"))
    frame.cm_reply = bool(row["infiniband.cm.rep.localqpn"])
    if frame.bth == UD_SEND_ONLY or frame.cm_tid:
        frame.category = "connection"


def _iwarp(row: dict[str, str], frame: Frame) -> None:
    """The FPDUs of a segment, rebuilt from tshark's per-field lists (each list holds
    the values of the FPDUs that have that field, in order)."""
    frame.mpa = bool(row["sanlab_iwarp.mpa.key"])
    if frame.mpa:
        frame.category = "connection"
    column = {name: [_int(v) for v in _split(row[f"sanlab_iwarp.{name}"])] for name in IWARP_LISTS}
    tagged = [v in ("1", "True") for v in _split(row["sanlab_iwarp.ddp.tagged"])]
    for is_tagged, opcode, length in zip(
        tagged, column["rdmap.opcode"], column["mpa.ulpdu_length"], strict=False
    ):
        if is_tagged:
            frame.fpdus.append(Fpdu(True, opcode, length, stag=_pop(column["ddp.stag"])))
            continue
        fpdu = Fpdu(
            False,
            opcode,
            length,
            qn=_pop(column["ddp.qn"]),
            msn=_pop(column["ddp.msn"]),
            mo=_pop(column["ddp.mo"]),
        )
        if opcode == RDMAP_READ_REQUEST:
            fpdu = Fpdu(
                **{
                    **fpdu.__dict__,
                    "sink_stag": _pop(column["rdmap.sink_stag"]),
                    "src_stag": _pop(column["rdmap.src_stag"]),
                }
            )
        frame.fpdus.append(fpdu)
    frame.segments = [int(n) for n in _split(row["tcp.segment"])]


IWARP_LISTS = (
    "rdmap.opcode",
    "mpa.ulpdu_length",
    "ddp.stag",
    "ddp.qn",
    "ddp.msn",
    "ddp.mo",
    "rdmap.sink_stag",
    "rdmap.src_stag",
)


def _pop(values: list[int]) -> int:
    return values.pop(0) if values else -1


def _keys(*values: list[str]) -> tuple[int, ...]:
    return tuple(k for v in values for k in (_int(x) for x in v) if k)


def _srp(row: dict[str, str], frame: Frame, seen: set[str]) -> None:
    ops = _split(row["srp_rdma.opcode"])
    if not ops:
        return
    seen.add("srp")
    frame.transport = "srp"
    tags = _split(row["srp_rdma.tag"])
    for op, tag in zip(ops, tags, strict=False):
        code = _int(op)
        if code == SRP_CMD_IU:
            kind = scsi_op(_int(_split(row["srp_rdma.cdb.opcode"])[0]))
            _add(
                frame,
                Command(
                    tag,
                    kind,
                    sum(int(v) for v in _split(row["srp_rdma.desc.len"])),
                    _first(row, "srp_rdma.cdb.lba"),
                    _first(row, "srp_rdma.cdb.transfer_length", 0),
                    _keys(_split(row["srp_rdma.desc.key"])),
                    "" if kind != "other" else "scsi control",
                ),
            )
        elif code == SRP_RSP_IU:
            _add(frame, Response(tag))
        elif code in SRP_LOGIN_IUS:
            frame.category = "login"


@dataclass(frozen=True)
class IserFields:
    """Where one decoder puts an iSER PDU's fields: sanlab's iwarp.lua, or Wireshark's
    iser and iscsi dissectors (RoCE)."""

    opcode: str
    itt: str
    edtl: str
    scsi_opcode: str
    lba: tuple[str, ...]  # tried in order: (10) then (16)
    blocks: tuple[str, ...]
    stags: tuple[str, str]  # write, read


ISER_OVER_IWARP = IserFields(
    "sanlab_iser.iscsi.opcode",
    "sanlab_iser.iscsi.itt",
    "sanlab_iser.iscsi.edtl",
    "sanlab_iser.scsi.opcode",
    ("sanlab_iser.scsi.lba",),
    ("sanlab_iser.scsi.transfer_length",),
    ("sanlab_iser.write_stag", "sanlab_iser.read_stag"),
)
ISER_OVER_ROCE = IserFields(
    "iscsi.opcode",
    "iscsi.initiatortasktag",
    "iscsi.scsicommand.expecteddatatransferlength",
    "scsi_sbc.opcode",
    ("scsi_sbc.rdwr10.lba", "scsi_sbc.rdwr16.lba"),
    ("scsi_sbc.rdwr10.xferlen", "scsi_sbc.rdwr12.xferlen"),
    ("iser.write_stag", "iser.read_stag"),
)


def _first_of(row: dict[str, str], names: tuple[str, ...], default: int) -> int:
    return next((_first(row, n) for n in names if row[n]), default)


def _iser(row: dict[str, str], frame: Frame, seen: set[str]) -> None:
    """iSER: over iWARP from sanlab_iser, over RoCE from Wireshark's iser + iscsi."""
    if row[ISER_OVER_IWARP.opcode]:
        fields = ISER_OVER_IWARP
    elif row[ISER_OVER_ROCE.opcode] and frame.roce:
        fields = ISER_OVER_ROCE
    else:
        if row["iscsi.opcode"]:
            seen.add("iscsi")
        return
    seen.add("iser")
    frame.transport = "iser"
    lba, blocks = _first_of(row, fields.lba, -1), _first_of(row, fields.blocks, 0)
    keys = _keys(*(_split(row[name]) for name in fields.stags))
    scsi, edtl = _split(row[fields.scsi_opcode]), _split(row[fields.edtl])
    for op, itt in zip(_split(row[fields.opcode]), _split(row[fields.itt]), strict=False):
        code = _int(op) & 0x3F
        if code == ISCSI_SCSI_COMMAND and edtl:
            kind = scsi_op(_int(scsi[0])) if scsi else "other"
            category = "" if kind != "other" else "scsi control"
            _add(frame, Command(itt, kind, int(edtl.pop(0)), lba, blocks, keys, category))
        elif code == ISCSI_SCSI_RESPONSE:
            _add(frame, Response(itt))
        else:
            frame.category = ISCSI_CATEGORY.get(code, "other iSCSI")
            frame.units.append(frame.category)


def _nvme_rdma(row: dict[str, str], frame: Frame, seen: set[str]) -> None:
    frame.cm_qid = _first(row, "nvme-rdma.cm.req.qid", _first(row, "sanlab_nvmeof.cm.qid"))
    if frame.cm_qid >= 0:
        frame.category = "connection"
    if row["sanlab_nvmeof.kind"]:
        seen.add("nvme-rdma")
        frame.transport = "nvme-rdma"
        prefix = "sanlab_nvmeof."
        kinds, cids = _split(row["sanlab_nvmeof.kind"]), _split(row["sanlab_nvmeof.cid"])
        for kind, cid in zip(kinds, cids, strict=False):
            if kind == "completion":
                _add(frame, Response(str(_int(cid))))
            elif kind == "command":
                _add(
                    frame,
                    nvme_command(
                        _int(cid),
                        _first(row, prefix + "opcode"),
                        _first(row, prefix + "nsid", 1),
                        _first(row, prefix + "sgl_length", 0),
                        _first(row, prefix + "slba"),
                        _first(row, prefix + "nlb", -1),
                        _first(row, prefix + "sgl_key", 0),
                    ),
                )
        return
    if not frame.roce:
        return
    ops, cids = _split(row["nvme.cmd.opc"]), _split(row["nvme.cmd.cid"])
    if ops or row["nvme.cqe.cid"]:
        seen.add("nvme-rdma")
        frame.transport = "nvme-rdma"
    if ops:
        frame.commands.append(
            nvme_command(
                _int(cids[0]),
                _int(ops[0]),
                _first(row, "nvme.cmd.nsid", 1),
                _first(row, "nvme.cmd.sgl1.len", 0),
                _first(row, "nvme.cmd.slba"),
                _first(row, "nvme.cmd.nlb", 0) - 1,  # Wireshark shows the count, not the 0-based field
                _first(row, "nvme.cmd.sgl1.key", 0),
            )
        )
    fctypes = _split(row["nvme.fabrics.cmd.fctype"])
    for i, cid in enumerate(_split(row["nvme.fabrics.cmd.cid"])):  # Connect, Property Get/Set, Auth
        keys = _keys(_split(row["nvme.cmd.sgl1.key"]))  # Connect's data is fetched by RDMA READ
        fctype = _int(fctypes[i]) if i < len(fctypes) else -1
        category = AUTHENTICATION if fctype in FABRICS_AUTH else "login"
        _add(frame, Command(str(_int(cid)), "other", 0, keys=keys, category=category))
    for cid in _split(row["nvme.cqe.cid"]):
        _add(frame, Response(str(_int(cid))))


def _add(frame: Frame, unit: Command | Response) -> None:
    if isinstance(unit, Command):
        frame.commands.append(unit)
    else:
        frame.responses.append(unit.tag)
    frame.units.append(unit)


def nvme_command(cid: int, opcode: int, nsid: int, length: int, slba: int, nlb: int, key: int) -> Command:
    """A read or write's size is its SGL data length; admin commands (NSID 0 or all-ones,
    sharing opcodes 1 and 2 with Write and Read) are not I/Os."""
    kind = "read" if opcode == NVME_READ else "write" if opcode == NVME_WRITE else "other"
    category = ""
    if nsid in ADMIN_NSIDS:
        kind, category = "other", "admin"
    elif kind == "other":
        category = "other NVMe command"
    blocks = nlb + 1 if kind != "other" and nlb >= 0 else 0
    return Command(str(cid), kind, length, slba, blocks, (key,) if key else (), category)


def _inline_capsules(pcap: Path, frames: list[Frame]) -> None:
    """NVMe/RDMA writes with inline data span SEND First..Last, which tshark 4.0
    leaves undecoded, and then it cannot decode their completions either.  The
    64-byte SQE is whole in the SEND First and a CQE is a 16-byte SEND Only,
    so read both from the frames' bytes."""
    commands = {f.number: f for f in frames if f.bth == RC_SEND_FIRST and not f.commands}
    completions = {
        f.number: f
        for f in frames
        if f.bth in RC_SEND_STARTS - {RC_SEND_FIRST}
        and not f.responses
        and f.length == ROCE_PAYLOAD_OFFSET + NVME_CQE + ICRC
    }
    for number, raw in frame_bytes(pcap, set(commands) | set(completions)).items():
        if number in completions:
            cqe = raw[ROCE_PAYLOAD_OFFSET : ROCE_PAYLOAD_OFFSET + NVME_CQE]
            completions[number].responses.append(str(int.from_bytes(cqe[12:14], "little")))
            completions[number].transport = "nvme-rdma"
            continue
        sqe = raw[ROCE_PAYLOAD_OFFSET : ROCE_PAYLOAD_OFFSET + NVME_SQE]
        if len(sqe) < NVME_SQE:
            continue
        keyed = sqe[39] >> 4 == 4
        commands[number].transport = "nvme-rdma"
        commands[number].commands.append(
            nvme_command(
                int.from_bytes(sqe[2:4], "little"),
                sqe[0],
                int.from_bytes(sqe[4:8], "little"),
                int.from_bytes(sqe[32 : 35 if keyed else 36], "little"),
                int.from_bytes(sqe[40:48], "little"),
                int.from_bytes(sqe[48:50], "little"),
                int.from_bytes(sqe[35:39], "little") if keyed else 0,
            )
        )
