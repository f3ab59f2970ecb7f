"""iSCSI and NVMe/TCP PDUs found in a reassembled TCP byte stream, with their keys.

Attributing frames by the protocol's own keys needs to know which bytes of
a TCP stream belong to which PDU: a segment may end one PDU and start the
next, and at queue depth 4 they often belong to different I/Os.  Both
protocols say how long a PDU is in its first bytes (iSCSI: the BHS's AHS
and data segment lengths plus negotiated digests; NVMe/TCP: PLEN), so a
stream splits exactly into PDUs.  Each PDU carries its task's key (the
iSCSI initiator task tag, the NVMe command identifier) and, for commands,
what the command asks: operation, bytes, LBA.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sanlab.scenarios.headers import DIGEST, ISCSI_BHS, NVME_SQE, TLS_RECORD_HDR

if TYPE_CHECKING:
    from sanlab.dissectors.tls import OpenedStream, TlsSession

# iSCSI opcodes (RFC 7143 section 11), as the first byte's low six bits.
ISCSI_NOP_OUT, ISCSI_COMMAND, ISCSI_TMF, ISCSI_LOGIN, ISCSI_TEXT, ISCSI_DATA_OUT = (
    0x00,
    0x01,
    0x02,
    0x03,
    0x04,
    0x05,
)
ISCSI_LOGOUT, ISCSI_NOP_IN, ISCSI_RESPONSE, ISCSI_TMF_RSP, ISCSI_LOGIN_RSP = 0x06, 0x20, 0x21, 0x22, 0x23
ISCSI_TEXT_RSP, ISCSI_DATA_IN, ISCSI_LOGOUT_RSP, ISCSI_R2T = 0x24, 0x25, 0x26, 0x31
ISCSI_CATEGORY = {
    ISCSI_NOP_OUT: "keep-alive",
    ISCSI_NOP_IN: "keep-alive",
    ISCSI_LOGIN: "login",
    ISCSI_LOGIN_RSP: "login",
    ISCSI_LOGOUT: "login",
    ISCSI_LOGOUT_RSP: "login",
    ISCSI_TEXT: "negotiation",
    ISCSI_TEXT_RSP: "negotiation",
    ISCSI_TMF: "task management",
    ISCSI_TMF_RSP: "task management",
}
ISCSI_FOLLOWS_TAG = {ISCSI_DATA_OUT, ISCSI_DATA_IN, ISCSI_R2T}
FINAL_STAGE = 3  # login stage "full feature phase" in the CSG/NSG bits
# SCSI block commands: READ/WRITE (10) and (16), the only data commands the stacks send.
SCSI_READS, SCSI_WRITES = {0x28, 0x88}, {0x2A, 0x8A}

# NVMe/TCP PDU types (NVMe/TCP transport specification 1.0, section 3.6).
NVME_TCP_IC_REQ, NVME_TCP_IC_RESP, NVME_TCP_H2C_TERM, NVME_TCP_C2H_TERM = 0, 1, 2, 3
NVME_TCP_CMD, NVME_TCP_RSP, NVME_TCP_H2C_DATA, NVME_TCP_C2H_DATA, NVME_TCP_R2T = 4, 5, 6, 7, 9
NVME_TCP_CH = 8  # common header
C2H_SUCCESS = 0x08  # C2HData flag: the data completes the command, no CapsuleResp follows
NVME_WRITE, NVME_READ, NVME_FABRICS, NVME_KEEP_ALIVE = 0x01, 0x02, 0x7F, 0x18
FABRICS_CONNECT = 0x01
FABRICS_AUTH = (0x05, 0x06)  # Authentication Send, Authentication Receive (DH-HMAC-CHAP)
AUTHENTICATION = "authentication"
DISCOVERY_NQN = b"nvmexpress.discovery"


@dataclass(frozen=True)
class Pdu:
    """One PDU: where it lies in its stream, and what it says of its task."""

    start: int
    end: int
    tag: str = ""  # ITT or CID: the task it belongs to ("" when it is not a task's)
    command: bool = False  # it starts a task
    completes: bool = False  # it ends its task (a response, or data carrying the status)
    op: str = ""  # a command's operation: read, write or other
    category: str = ""  # what a non-I/O PDU or command is (login, keep-alive, admin…)
    nbytes: int = 0
    lba: int = -1
    blocks: int = 0
    # Inside TLS (tls.py): the records that begin in the PDU's span, the bytes TLS adds to it
    # (headers, inner types, tags) and the records past the first its bytes are split over.
    tls_records: int = 0
    tls_bytes: int = 0
    tls_splits: int = 0


def _pad4(n: int) -> int:
    return (n + 3) & ~3


def scsi_op(code: int) -> str:
    """read, write or other, from a SCSI CDB's opcode."""
    return "read" if code in SCSI_READS else "write" if code in SCSI_WRITES else "other"


def scsi_cdb(cdb: bytes) -> tuple[str, int, int]:
    """(read/write/other, LBA, blocks) of a SCSI CDB; READ/WRITE (10) and (16) decoded."""
    code = cdb[0] if cdb else -1
    op = scsi_op(code)
    if code in (0x28, 0x2A) and len(cdb) >= 10:
        return op, int.from_bytes(cdb[2:6], "big"), int.from_bytes(cdb[7:9], "big")
    if code in (0x88, 0x8A) and len(cdb) >= 16:
        return op, int.from_bytes(cdb[2:10], "big"), int.from_bytes(cdb[10:14], "big")
    return op, -1, 0


@dataclass
class IscsiDigests:
    """Digests are negotiated at login and apply once each side leaves it."""

    header: bool = False
    data: bool = False
    discovery: bool = False  # a SendTargets session: its login is discovery too

    def learn(self, text: bytes) -> None:
        for item in text.split(b"\0"):
            key, _, value = item.partition(b"=")
            if key in (b"HeaderDigest", b"DataDigest") and value:
                setattr(self, "header" if key == b"HeaderDigest" else "data", value == b"CRC32C")
            elif key == b"SessionType" and value == b"Discovery":
                self.discovery = True


class Window:
    """A stretch of one direction's byte stream, indexed by stream offset.

    Bytes arrive in capture order and leave once the PDUs they belong to are
    framed, so a direction holds at most the PDU being framed, never the whole
    stream: a 200 MB capture is framed in a few MB.
    """

    def __init__(self) -> None:
        self.base = 0  # the stream offset of the first byte held
        self.held = bytearray()

    def __len__(self) -> int:
        return self.base + len(self.held)

    def __getitem__(self, span: slice) -> bytes:
        start = self.base if span.start is None else span.start
        if start < self.base:
            raise IndexError(f"bytes before offset {self.base} were framed and let go")
        stop = len(self) if span.stop is None else span.stop
        return bytes(self.held[start - self.base : stop - self.base])

    def append(self, data: bytes) -> None:
        self.held += data

    def release(self, before: int) -> None:
        """Let go of the bytes before ``before`` (framed already)."""
        if before > self.base:
            del self.held[: before - self.base]
            self.base = before


class IscsiFramer:
    """Splits one direction of an iSCSI connection into PDUs, as its bytes arrive."""

    def __init__(self, digests: IscsiDigests):
        self.digests, self.at, self.logged_in = digests, 0, False

    def pdus(self, stream: bytes | Window) -> list[Pdu]:
        """The PDUs complete in ``stream`` from where the last call stopped (not a cut-off one)."""
        pdus, at, digests = [], self.at, self.digests
        while at + ISCSI_BHS <= len(stream):
            bhs = stream[at : at + ISCSI_BHS]
            opcode, flags = bhs[0] & 0x3F, bhs[1]
            data_len = int.from_bytes(bhs[5:8], "big")
            header = ISCSI_BHS + bhs[4] * 4 + (DIGEST if self.logged_in and digests.header else 0)
            data = _pad4(data_len) + (DIGEST if self.logged_in and digests.data and data_len else 0)
            end = at + header + data
            if end > len(stream):
                break
            if opcode in (ISCSI_LOGIN, ISCSI_LOGIN_RSP, ISCSI_TEXT):
                digests.learn(stream[at + header : at + header + data_len])
                self.logged_in = self.logged_in or (
                    opcode != ISCSI_TEXT and bool(flags & 0x80) and flags & 0x03 == FINAL_STAGE
                )
            pdus.append(_iscsi_pdu(at, end, bhs, digests))
            at = end
        self.at = at
        return pdus


def iscsi_pdus(stream: bytes, digests: IscsiDigests) -> list[Pdu]:
    """Split one direction of an iSCSI connection into PDUs (stops at a cut-off PDU)."""
    return IscsiFramer(digests).pdus(stream)


def _iscsi_pdu(start: int, end: int, bhs: bytes, digests: IscsiDigests) -> Pdu:
    opcode, tag = bhs[0] & 0x3F, str(int.from_bytes(bhs[16:20], "big"))
    if opcode == ISCSI_COMMAND:
        op, lba, blocks = scsi_cdb(bhs[32:48])
        category = "" if op != "other" else "scsi control"
        nbytes = int.from_bytes(bhs[20:24], "big")
        return Pdu(
            start, end, tag, command=True, op=op, category=category, nbytes=nbytes, lba=lba, blocks=blocks
        )
    if opcode == ISCSI_RESPONSE:
        return Pdu(start, end, tag, completes=True)
    if opcode in ISCSI_FOLLOWS_TAG:
        return Pdu(start, end, tag, completes=opcode == ISCSI_DATA_IN and bool(bhs[1] & 0x01))
    category = ISCSI_CATEGORY.get(opcode, "other iSCSI")
    if category in ("login", "negotiation") and digests.discovery:
        category = "discovery"
    return Pdu(start, end, category=category)


@dataclass
class NvmeQueue:
    """What an NVMe/TCP connection carries: learnt from its Fabrics Connect.  With the TLS
    session's keys (``session``, a tls.TlsSession), its records are opened and framed."""

    qid: int = -1
    discovery: bool = False
    session: TlsSession | None = None


# TLS record content types (RFC 8446 B.1): change_cipher_spec, alert, handshake, application_data.
TLS_CONTENT_TYPES = (20, 21, 22, 23)
TLS_RECORD = "TLS record (encrypted NVMe/TCP)"
TLS_HANDSHAKE = "TLS handshake"


def starts_tls(head: bytes) -> bool:
    """Does a stream begin with a TLS record?  An NVMe/TCP stream begins with an ICReq or
    ICResp (PDU type 0 or 1), so the two cannot be mistaken for each other."""
    return len(head) >= 3 and head[0] in TLS_CONTENT_TYPES and head[1] == 3 and 1 <= head[2] <= 4


class NvmeTcpFramer:
    """Splits one direction of an NVMe/TCP connection into PDUs by their PLEN, as bytes arrive;
    a direction that begins with a TLS record (NVMe/TCP's secure channel) into its records,
    whose contents cannot be read."""

    def __init__(self, queue: NvmeQueue, plain: bool = False):
        self.queue, self.at = queue, 0
        self.tls, self.plain = False, plain  # plain: TLS's opened application data, never records
        self.opened: OpenedStream | None = None

    def pdus(self, stream: bytes | Window) -> list[Pdu]:
        if self.at == 0 and not self.tls and not self.plain and starts_tls(stream[:3]):
            self.tls = True
        if self.tls:
            return self._records(stream)
        pdus, at = [], self.at
        while at + NVME_TCP_CH <= len(stream):
            plen = int.from_bytes(stream[at + 4 : at + 8], "little")
            if plen < NVME_TCP_CH or at + plen > len(stream):
                break
            pdus.append(_nvme_pdu(at, stream[at : at + plen], self.queue))
            at += plen
        self.at = at
        return pdus

    def _records(self, stream: bytes | Window) -> list[Pdu]:
        records, at = [], self.at
        while at + TLS_RECORD_HDR <= len(stream):
            end = at + TLS_RECORD_HDR + int.from_bytes(stream[at + 3 : at + 5], "big")
            if end > len(stream):
                break
            if self.queue.session is None:
                records.append(Pdu(at, end, category=TLS_RECORD))
            else:
                records += self._opened().record(at, end, stream[at:end])
            at = end
        self.at = at
        return records

    def _opened(self) -> OpenedStream:
        if self.opened is None:
            from sanlab.dissectors.tls import OpenedStream

            assert self.queue.session is not None
            self.opened = OpenedStream(self.queue.session, NvmeTcpFramer(self.queue, plain=True))
        return self.opened


def nvme_tcp_pdus(stream: bytes, queue: NvmeQueue) -> list[Pdu]:
    """Split one direction of an NVMe/TCP connection into PDUs by their PLEN."""
    return NvmeTcpFramer(queue).pdus(stream)


def _nvme_pdu(start: int, pdu: bytes, queue: NvmeQueue) -> Pdu:
    kind, end = pdu[0], start + len(pdu)
    if kind == NVME_TCP_CMD and len(pdu) >= NVME_TCP_CH + NVME_SQE:
        return _nvme_command(start, end, pdu, queue)
    if kind == NVME_TCP_RSP and len(pdu) >= 24:
        return Pdu(start, end, str(int.from_bytes(pdu[20:22], "little")), completes=True)
    if kind in (NVME_TCP_H2C_DATA, NVME_TCP_C2H_DATA, NVME_TCP_R2T) and len(pdu) >= 10:
        done = kind == NVME_TCP_C2H_DATA and bool(pdu[1] & C2H_SUCCESS)
        return Pdu(start, end, str(int.from_bytes(pdu[8:10], "little")), completes=done)
    if kind in (NVME_TCP_IC_REQ, NVME_TCP_IC_RESP):
        return Pdu(start, end, category="connection")
    return Pdu(
        start, end, category="error" if kind in (NVME_TCP_H2C_TERM, NVME_TCP_C2H_TERM) else "other NVMe/TCP"
    )


def _nvme_command(start: int, end: int, pdu: bytes, queue: NvmeQueue) -> Pdu:
    sqe = pdu[NVME_TCP_CH : NVME_TCP_CH + NVME_SQE]
    opcode, cid = sqe[0], str(int.from_bytes(sqe[2:4], "little"))
    if opcode == NVME_FABRICS:
        if sqe[4] == FABRICS_CONNECT:
            queue.qid = int.from_bytes(sqe[42:44], "little")
            queue.discovery = DISCOVERY_NQN in pdu
        category = AUTHENTICATION if sqe[4] in FABRICS_AUTH else "login"
        return Pdu(start, end, cid, command=True, op="other", category=category)
    if queue.qid == 0 or queue.discovery:
        category = "discovery" if queue.discovery else "keep-alive" if opcode == NVME_KEEP_ALIVE else "admin"
        return Pdu(start, end, cid, command=True, op="other", category=category)
    op = "read" if opcode == NVME_READ else "write" if opcode == NVME_WRITE else "other"
    return Pdu(
        start,
        end,
        cid,
        command=True,
        op=op,
        category="" if op != "other" else "other NVMe command",
        nbytes=int.from_bytes(sqe[32:36], "little"),
        lba=int.from_bytes(sqe[40:48], "little"),
        blocks=(int.from_bytes(sqe[48:50], "little") + 1) if op != "other" else 0,
    )
