"""Turn a capture into per-I/O wire recipes: frames, bytes, ACKs, round trips, latency.

tshark (with sanlab's Lua plugins) decodes every frame; each frame is then
classified as a command, a response, a pure transport ACK, or data.  An I/O
is the command of a read or write, every frame of that connection until its
response (matched by tag, ITT or CID), and the pure ACKs that follow before
anything else.  That attribution needs I/Os that do not overlap on the wire,
as in a queue-depth-1 capture; overlapping I/Os are counted and reported.

``wire_bytes_per_io`` sums the captured frame lengths (``frame.len``) of
those frames, ACKs included - what the models' ``captured`` bytes predict.
"""

from __future__ import annotations

import re
import shutil
import stat
import statistics
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from sanlab.dissectors.plugins import tshark_args
from sanlab.scenarios.errors import SanlabError, ToolMissing
from sanlab.scenarios.headers import ICRC, NVME_CQE, NVME_SQE, ROCE_PAYLOAD_OFFSET
from sanlab.scenarios.ports import ISCSI_PORT, ISCSI_TCP_PORTS, NVME_PORT

FIELDS = (
    "frame.number",
    "frame.time_epoch",
    "frame.len",
    "frame.cap_len",
    "ip.src",
    "ip.dst",
    "tcp.len",
    "udp.dstport",
    "infiniband.bth.opcode",
    "srp_rdma.opcode",
    "srp_rdma.tag",
    "srp_rdma.cdb.opcode",
    "srp_rdma.desc.len",
    "iscsi.opcode",
    "iscsi.initiatortasktag",
    "iscsi.scsicommand.R",
    "iscsi.scsicommand.W",
    "iscsi.scsicommand.expecteddatatransferlength",
    "sanlab_iser.iscsi.opcode",
    "sanlab_iser.iscsi.itt",
    "sanlab_iser.iscsi.edtl",
    "sanlab_iser.scsi.opcode",
    "nvme.cmd.opc",
    "nvme.cmd.cid",
    "nvme.cmd.nlb",
    "nvme.cqe.cid",
    "nvme-tcp.type",
    "sanlab_nvmeof.kind",
    "sanlab_nvmeof.opcode",
    "sanlab_nvmeof.cid",
    "sanlab_nvmeof.nlb",
    "sanlab_iwarp.rdmap.opcode",
    "iser.flags",
    "tcp.segment",
    "scsi_sbc.opcode",
    "nvme.cmd.sgl1.len",
    "sanlab_nvmeof.sgl_length",
    "iscsi.scsidata.S",
    "nvme.cmd.nsid",
    "sanlab_nvmeof.nsid",
    "nvme-tcp.data.length",
    "_ws.col.Protocol",
    "_ws.col.Info",
)
ADMIN_NSIDS = {0, 0xFFFFFFFF}  # admin commands share opcodes 1 and 2 with Write and Read
RC_ACK = 17  # RC Acknowledge
RC_SEND_FIRST = 0
RC_SEND_ONLY = (4, 23)  # SEND Only, SEND Only with Invalidate
CQE = NVME_CQE
ROCE_PAYLOAD = ROCE_PAYLOAD_OFFSET
SCSI_READ, SCSI_WRITE = {0x28, 0x88}, {0x2A, 0x8A}  # READ/WRITE (10) and (16) CDB opcodes
# iSCSI opcodes (RFC 7143), as the analyser meets them.
ISCSI_SCSI_COMMAND, ISCSI_SCSI_RESPONSE, ISCSI_DATA_IN = 0x01, 0x21, 0x25
# SRP information units (T10 SRP).
SRP_CMD_IU, SRP_RSP_IU = 0x02, 0xC1
# NVM command set opcodes.
NVME_WRITE, NVME_READ = 0x01, 0x02


@dataclass
class Frame:
    number: int
    time: float
    length: int
    src: str
    dst: str
    is_ack: bool
    send_first: bool = False  # an RC SEND First (a capsule split over packets)
    send_only: bool = False  # an RC SEND Only
    first_segment: int = 0  # first frame of a PDU tshark reassembled into this one
    label: str = ""  # what Wireshark's packet list says of it (protocol: info)
    data_bytes: int = 0  # NVMe/TCP C2H/H2C data carried
    commands: list[tuple[str, str, int]] = field(default_factory=list)  # (tag, op, bytes)
    responses: list[str] = field(default_factory=list)  # tags


@dataclass
class Io:
    op: str
    nbytes: int
    tag: str
    initiator: str
    frames: list[Frame] = field(default_factory=list)
    latency_us: float = 0.0  # first frame of the command to the frame completing the response

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


@dataclass(frozen=True)
class Group:
    op: str
    bytes: int
    count: int
    frames_per_io: float
    wire_bytes_per_io: float
    ack_frames_per_io: float
    round_trips_per_io: float
    lat_mean_us: float
    lat_p99_us: float


@dataclass(frozen=True)
class Analysis:
    transport: str
    fabric: str
    groups: list[Group]
    overlapping_ios: int
    ios: list[Io] = field(default_factory=list)

    def document(self) -> dict[str, object]:
        return {
            "transport": self.transport,
            "fabric": self.fabric,
            "overlapping_ios": self.overlapping_ios,
            "groups": [g.__dict__ for g in self.groups],
        }


def _split(value: str) -> list[str]:
    return [v for v in value.split(",") if v] if value else []


def _int(text: str) -> int:
    return int(text, 0) if text.startswith("0x") else int(text)


# Captures the analyser reads: its keys are IP addresses, so it needs IP frames.
DECODE_AS = re.compile(r"^(tcp|udp)\.port==[0-9]{1,5},[a-z0-9_.-]{1,32}$")


def _sanlab_ports() -> list[str]:
    """Decode-as rules for the ports sanlab's own stacks use beyond the IANA ones."""
    return [f"tcp.port=={port},iscsi" for port in ISCSI_TCP_PORTS if port != ISCSI_PORT]


def _check_file(pcap: Path) -> None:
    try:
        info = pcap.stat()
    except OSError as exc:
        raise SanlabError(f"{pcap}: cannot read ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise SanlabError(f"{pcap}: not a regular file (give a .pcap or .pcapng capture)")
    if info.st_size == 0:
        raise SanlabError(f"{pcap}: empty file, not a capture")


def _tshark_error(stderr: str) -> str:
    """tshark's complaint without its 'Running as user root' banner."""
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip() and not ln.startswith("Running as user")]
    return " ".join(lines)[-400:] or "no reason given"


def read_frames(pcap: Path, decode_as: tuple[str, ...] = ()) -> tuple[list[Frame], set[str]]:
    tshark = shutil.which("tshark")
    if tshark is None:
        raise ToolMissing("tshark", "install it with: apt-get install tshark")
    _check_file(pcap)
    for rule in decode_as:
        if not DECODE_AS.match(rule):
            raise SanlabError(
                f"--decode-as {rule!r}: use tcp.port==PORT,PROTOCOL (e.g. tcp.port==3262,iscsi)"
            )
    args = [tshark, *tshark_args(), "-r", str(pcap), "-T", "fields"]
    args += ["-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=,"]
    for rule in (*_sanlab_ports(), *decode_as):
        args += ["-d", rule]
    for name in FIELDS:
        args += ["-e", name]
    run = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        raise SanlabError(f"{pcap}: tshark could not read it: {_tshark_error(run.stderr)}")
    rows = [
        dict(zip(FIELDS, (line.split("\t") + [""] * len(FIELDS))[: len(FIELDS)], strict=True))
        for line in run.stdout.splitlines()
    ]
    _check_rows(pcap, rows)
    frames: list[Frame] = []
    seen: set[str] = set()
    for row in rows:
        if row["ip.src"]:
            frames.append(_classify(row, seen))
    if "nvme-rdma" in seen and "roce" in seen:
        _inline_capsules(pcap, frames)
    return frames, seen


def _check_rows(pcap: Path, rows: list[dict[str, str]]) -> None:
    """Refuse what would be misread: no IP frames at all, or frames cut short by a snaplen."""
    if not rows:
        raise SanlabError(f"{pcap}: holds no frames")
    if not any(row["ip.src"] for row in rows):
        raise SanlabError(
            f"{pcap}: none of its {len(rows)} frames is IPv4; the analyser reads Ethernet "
            "(or raw IP) captures of iSCSI, iSER, SRP and NVMe-oF"
        )
    cut = [row for row in rows if row["frame.cap_len"] and row["frame.cap_len"] != row["frame.len"]]
    if cut:
        raise SanlabError(
            f"{pcap}: {len(cut)} of {len(rows)} frames were cut short when captured "
            f"(snaplen {max(int(r['frame.cap_len']) for r in cut)} bytes); the analyser needs whole "
            "frames: capture again without a snaplen"
        )


def _inline_capsules(pcap: Path, frames: list[Frame]) -> None:
    """NVMe/RDMA writes with inline data span SEND First..Last, which tshark 4.0
    leaves undecoded, and then it cannot decode their completions either.  The
    64-byte SQE is whole in the SEND First and a CQE is a 16-byte SEND Only,
    so read both from the raw frames (QEMU writes classic pcap)."""
    commands = {f.number: f for f in frames if f.send_first and not f.commands}
    completions = {
        f.number: f
        for f in frames
        if f.send_only and not f.responses and f.length == ROCE_PAYLOAD + CQE + ICRC
    }
    for number, raw in _pcap_frames(pcap, set(commands) | set(completions)):
        if number in completions:
            cqe = raw[ROCE_PAYLOAD : ROCE_PAYLOAD + CQE]
            completions[number].responses.append(str(int.from_bytes(cqe[12:14], "little")))
            continue
        sqe = raw[ROCE_PAYLOAD : ROCE_PAYLOAD + NVME_SQE]
        if len(sqe) < NVME_SQE:
            continue
        cid = str(int.from_bytes(sqe[2:4], "little"))
        nsid = str(int.from_bytes(sqe[4:8], "little"))
        keyed = sqe[39] >> 4 == 4
        length = int.from_bytes(sqe[32 : 35 if keyed else 36], "little")
        _nvme_command(commands[number], cid, sqe[0], [str(length)], [nsid])


def _pcap_frames(pcap: Path, numbers: set[int]) -> list[tuple[int, bytes]]:
    data = pcap.read_bytes()
    magic = data[:4]
    if magic not in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        return []  # pcapng or big-endian: no raw fallback
    found, offset, number = [], 24, 0
    while offset + 16 <= len(data):
        incl = int.from_bytes(data[offset + 8 : offset + 12], "little")
        number += 1
        if number in numbers:
            found.append((number, data[offset + 16 : offset + 16 + incl]))
        offset += 16 + incl
    return found


def _classify(row: dict[str, str], seen: set[str]) -> Frame:
    tcp_len = _split(row["tcp.len"])
    bth = _split(row["infiniband.bth.opcode"])
    frame = Frame(
        number=int(row["frame.number"]),
        time=float(row["frame.time_epoch"]),
        length=int(row["frame.len"]),
        src=row["ip.src"],
        dst=row["ip.dst"],
        is_ack=(bool(tcp_len) and tcp_len[0] == "0") or (bool(bth) and _int(bth[0]) == RC_ACK),
        send_first=bool(bth) and _int(bth[0]) == RC_SEND_FIRST,
        send_only=bool(bth) and _int(bth[0]) in RC_SEND_ONLY,
    )
    frame.data_bytes = sum(int(v) for v in _split(row["nvme-tcp.data.length"]))
    frame.label = f"{row['_ws.col.Protocol']}: {row['_ws.col.Info']}".strip(": ")
    segments = [int(n) for n in _split(row["tcp.segment"])]
    frame.first_segment = min(segments) if segments else frame.number
    if row["udp.dstport"] == "4791":
        seen.add("roce")
    if row["sanlab_iwarp.rdmap.opcode"]:
        seen.add("iwarp")
    _srp(row, frame, seen)
    _iscsi(row, frame, seen)
    _nvme(row, frame, seen)
    return frame


def _scsi_kind(cdb: int) -> str:
    return "read" if cdb in SCSI_READ else "write" if cdb in SCSI_WRITE else "other"


def _srp(row: dict[str, str], frame: Frame, seen: set[str]) -> None:
    ops = _split(row["srp_rdma.opcode"])
    if not ops:
        return
    seen.add("srp")
    tags = _split(row["srp_rdma.tag"])
    for op, tag in zip(ops, tags, strict=False):
        if _int(op) == SRP_CMD_IU:
            kind = _scsi_kind(_int(_split(row["srp_rdma.cdb.opcode"])[0]))
            length = sum(int(v) for v in _split(row["srp_rdma.desc.len"]))
            frame.commands.append((tag, kind, length))
        elif _int(op) == SRP_RSP_IU:
            frame.responses.append(tag)


def _iscsi(row: dict[str, str], frame: Frame, seen: set[str]) -> None:
    if row["sanlab_iser.iscsi.opcode"]:
        seen.add("iser")
        ops, itts = _split(row["sanlab_iser.iscsi.opcode"]), _split(row["sanlab_iser.iscsi.itt"])
        edtl, scsi = _split(row["sanlab_iser.iscsi.edtl"]), _split(row["sanlab_iser.scsi.opcode"])
        for op, itt in zip(ops, itts, strict=False):
            code = _int(op) & 0x3F
            if code == ISCSI_SCSI_COMMAND and edtl and scsi:
                kind = _scsi_kind(_int(scsi.pop(0)))
                frame.commands.append((itt, kind, int(edtl.pop(0))))
            elif code == ISCSI_SCSI_RESPONSE:
                frame.responses.append(itt)
        return
    ops = _split(row["iscsi.opcode"])
    if not ops:
        return
    seen.add("iser" if row["iser.flags"] else "iscsi")
    itts = _split(row["iscsi.initiatortasktag"])
    edtl = _split(row["iscsi.scsicommand.expecteddatatransferlength"])
    scsi = _split(row["scsi_sbc.opcode"])
    status_in_data = _split(row["iscsi.scsidata.S"])
    for op, itt in zip(ops, itts, strict=False):
        code = _int(op) & 0x3F
        if code == ISCSI_DATA_IN and status_in_data and status_in_data.pop(0) in ("1", "True"):
            frame.responses.append(itt)  # status collapsed into the last Data-In
        elif code == ISCSI_SCSI_COMMAND and edtl:
            kind = _scsi_kind(_int(scsi.pop(0)) if scsi else -1)
            frame.commands.append((itt, kind, int(edtl.pop(0))))
        elif code == ISCSI_SCSI_RESPONSE:
            frame.responses.append(itt)


def _nvme(row: dict[str, str], frame: Frame, seen: set[str]) -> None:
    if row["sanlab_nvmeof.kind"]:
        seen.add("nvme-rdma")
        kinds, cids = _split(row["sanlab_nvmeof.kind"]), _split(row["sanlab_nvmeof.cid"])
        ops, lengths = _split(row["sanlab_nvmeof.opcode"]), _split(row["sanlab_nvmeof.sgl_length"])
        nsids = _split(row["sanlab_nvmeof.nsid"])
        for kind, cid in zip(kinds, cids, strict=False):
            if kind == "command" and ops:
                _nvme_command(frame, cid, _int(ops.pop(0)), lengths, nsids)
            elif kind == "completion":
                frame.responses.append(str(_int(cid)))
        return
    ops, cids = _split(row["nvme.cmd.opc"]), _split(row["nvme.cmd.cid"])
    if ops or row["nvme.cqe.cid"]:
        seen.add("nvme-tcp" if row["nvme-tcp.type"] else "nvme-rdma")
    lengths, nsids = _split(row["nvme.cmd.sgl1.len"]), _split(row["nvme.cmd.nsid"])
    for op, cid in zip(ops, cids, strict=False):
        _nvme_command(frame, cid, _int(op), lengths, nsids)
    frame.responses += [str(_int(c)) for c in _split(row["nvme.cqe.cid"])]


def _nvme_command(frame: Frame, cid: str, opcode: int, lengths: list[str], nsids: list[str]) -> None:
    """A read or write's size is its SGL data length (the block size is the target's).

    NVMe/TCP's transport SGL has no length field in tshark 4.0; such reads
    are sized from the C2HData PDUs of the I/O instead (see group_ios).
    """
    length = _int(lengths.pop(0)) if lengths else 0
    nsid = _int(nsids.pop(0)) if nsids else 1
    kind = "read" if opcode == NVME_READ else "write" if opcode == NVME_WRITE else "other"
    if nsid in ADMIN_NSIDS:
        kind = "other"
    frame.commands.append((str(_int(cid)), kind, length))


def group_ios(frames: list[Frame]) -> tuple[list[Io], int]:
    """I/Os from the first segment of the command PDU to the frame completing the
    response, plus the pure ACKs that follow, on the initiator-target pair."""
    index = {f.number: i for i, f in enumerate(frames)}
    commands: list[tuple[int, int, str, str, int]] = []
    responses: dict[str, list[int]] = {}
    for i, frame in enumerate(frames):
        for tag, op, nbytes in frame.commands:
            commands.append((index.get(frame.first_segment, i), i, tag, op, nbytes))
        for tag in frame.responses:
            responses.setdefault(tag, []).append(i)
    starts = sorted({c[0] for c in commands})
    ios: list[Io] = []
    spans: list[tuple[int, int]] = []
    for start, at, tag, op, nbytes in sorted(commands):
        if op not in ("read", "write"):
            continue
        end = next((r for r in responses.get(tag, []) if r >= at), None)
        if end is None:
            continue
        stop = end + 1
        next_start = next((s for s in starts if s > end), len(frames))
        while stop < min(len(frames), next_start) and frames[stop].is_ack:
            stop += 1
        pair = {frames[at].src, frames[at].dst}
        members = [f for f in frames[start:stop] if {f.src, f.dst} == pair]
        if nbytes == 0:
            nbytes = sum(f.data_bytes for f in members)
        latency = (frames[end].time - frames[start].time) * 1e6
        ios.append(Io(op, nbytes, tag, frames[at].src, members, latency))
        spans.append((start, end))
    overlaps = sum(1 for a, b in zip(spans, spans[1:], strict=False) if b[0] <= a[1])
    return ios, overlaps


def summarise(ios: list[Io]) -> list[Group]:
    groups: dict[tuple[str, int], list[Io]] = {}
    for io in ios:
        groups.setdefault((io.op, io.nbytes), []).append(io)
    out = []
    for (op, nbytes), members in sorted(groups.items()):
        lats = sorted(io.latency_us for io in members)
        p99 = lats[min(len(lats) - 1, int(round(0.99 * (len(lats) - 1))))]
        n = len(members)
        out.append(
            Group(
                op=op,
                bytes=nbytes,
                count=n,
                frames_per_io=round(sum(len(io.frames) for io in members) / n, 3),
                wire_bytes_per_io=round(sum(f.length for io in members for f in io.frames) / n, 1),
                ack_frames_per_io=round(sum(f.is_ack for io in members for f in io.frames) / n, 3),
                round_trips_per_io=round(statistics.mean(io.round_trips for io in members), 3),
                lat_mean_us=round(statistics.mean(lats), 1),
                lat_p99_us=round(p99, 1),
            )
        )
    return out


TRANSPORT_ORDER = ("srp", "iser", "nvme-rdma", "nvme-tcp", "iscsi")


def analyze(pcap: Path, decode_as: tuple[str, ...] = ()) -> Analysis:
    frames, seen = read_frames(pcap, decode_as)
    transport = next((t for t in TRANSPORT_ORDER if t in seen), None)
    if transport is None:
        ports = ", ".join(str(p) for p in (*ISCSI_TCP_PORTS, NVME_PORT))
        raise SanlabError(
            f"{pcap}: no iSCSI, iSER, SRP or NVMe-oF traffic recognised (TCP ports {ports}, RoCE UDP "
            "4791, iWARP); for other ports add --decode-as tcp.port==PORT,iscsi (or nvme-tcp)"
        )
    fabric = "iwarp" if "iwarp" in seen else "roce" if "roce" in seen else "eth"
    ios, overlaps = group_ios(frames)
    return Analysis(transport, fabric, summarise(ios), overlaps, ios)
