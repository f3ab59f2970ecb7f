"""TLS 1.3 records opened with the session's keys, so NVMe/TCP inside TLS frames like plain NVMe/TCP.

sanlab makes both ends of an NVMe/TCP-in-TLS session, so it keeps the
session's secrets (an NSS key log, targets/nvme_tls.py).  With them each
record of a direction is opened (RFC 8446 section 5.2: the AEAD's key and
IV from the traffic secret, the nonce the IV XOR the record's sequence
number, the record header as associated data), and its application data
is the NVMe/TCP byte stream, framed as any other.  The handshake's records
use the handshake secrets, the kernel's (kTLS) records after it the
application secrets; a record one key does not open is tried with the
next (and with a KeyUpdate's successor), so no record boundary is guessed.

What TLS adds on the wire is kept per PDU: the record headers, each
record's content-type byte and AEAD tag, and the records a PDU is split
into (a 16 KiB read's C2HData does not fit one 16 KiB record).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field, replace
from pathlib import Path

from sanlab.dissectors.framing import TLS_HANDSHAKE, TLS_RECORD, NvmeTcpFramer, Pdu, Window
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.files import read_bounded

HANDSHAKE, APPLICATION_DATA = 22, 23
CLIENT_HELLO, SERVER_HELLO = 1, 2
RECORD_HEADER = 5
MAX_KEYLOG_BYTES = 16 << 20
# TLS 1.3 cipher suites: (AEAD, key bytes, hash)
SUITES = {
    0x1301: ("aes-gcm", 16, "sha256"),
    0x1302: ("aes-gcm", 32, "sha384"),
    0x1303: ("chacha20-poly1305", 32, "sha256"),
    0x1304: ("aes-ccm", 16, "sha256"),
}
LABELS = {
    "client": ("CLIENT_HANDSHAKE_TRAFFIC_SECRET", "CLIENT_TRAFFIC_SECRET_0"),
    "server": ("SERVER_HANDSHAKE_TRAFFIC_SECRET", "SERVER_TRAFFIC_SECRET_0"),
}
KeyLog = dict[bytes, dict[str, bytes]]  # client random -> {label: secret}
KEY_UPDATES = 4  # successors of the application secret tried before a record is given up


def read_keylog(path: Path) -> KeyLog:
    """An NSS key log: client random -> {label: secret}.  Bounded; a line that is not
    ``LABEL HEX HEX`` is skipped (comments, another program's lines)."""
    text = read_bounded(path, MAX_KEYLOG_BYTES, "--keylog").decode("ascii", "replace")
    keys: dict[bytes, dict[str, bytes]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 3 or line.startswith("#"):
            continue
        try:
            random, secret = bytes.fromhex(parts[1]), bytes.fromhex(parts[2])
        except ValueError:
            continue
        keys.setdefault(random, {})[parts[0]] = secret
    if not keys:
        raise SanlabError(
            f"--keylog {path}: no TLS secrets in it (an NSS key log: LABEL RANDOM SECRET a line)"
        )
    return keys


def _expand_label(secret: bytes, label: str, length: int, digest: str) -> bytes:
    """HKDF-Expand-Label (RFC 8446 section 7.1) with an empty context."""
    full = b"tls13 " + label.encode()
    info = length.to_bytes(2, "big") + bytes([len(full)]) + full + b"\0"
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(secret, block + info + bytes([counter]), digest).digest()
        out, counter = out + block, counter + 1
    return out[:length]


def _aead(kind: str, key: bytes) -> object:
    from cryptography.hazmat.primitives.ciphers.aead import AESCCM, AESGCM, ChaCha20Poly1305

    if kind == "aes-gcm":
        return AESGCM(key)
    if kind == "aes-ccm":
        return AESCCM(key)
    return ChaCha20Poly1305(key)


@dataclass
class _Key:
    aead: object
    iv: bytes
    secret: bytes
    seq: int = 0


@dataclass
class TlsSession:
    """One TLS connection: what its hellos said and the secrets the key log holds for it."""

    keylog: KeyLog
    client_random: bytes = b""
    suite: int = 0

    def secrets(self, role: str) -> list[bytes]:
        found = self.keylog.get(self.client_random, {})
        return [found[label] for label in LABELS[role] if label in found]


@dataclass
class Opened:
    """A record's content once opened: its inner content type and its bytes."""

    inner_type: int
    data: bytes


@dataclass
class TlsDirection:
    """One direction's records: learns its role from its first handshake message, then opens
    each protected record with the first key (of the handshake's, the application's and its
    updates) that authenticates it."""

    session: TlsSession
    role: str = ""
    keys: list[_Key] = field(default_factory=list)
    tried: bool = False
    failed: bool = False

    def hello(self, record: bytes) -> None:
        """A plaintext handshake record: ClientHello gives the random, ServerHello the suite."""
        if len(record) < RECORD_HEADER + 4 + 2 + 32 or record[0] != HANDSHAKE:
            return
        kind, body = record[RECORD_HEADER], record[RECORD_HEADER + 4 :]
        if kind == CLIENT_HELLO:
            self.role = "client"
            self.session.client_random = body[2:34]
        elif kind == SERVER_HELLO and len(body) >= 35:
            self.role = "server"
            at = 34 + 1 + body[34]  # past legacy_session_id_echo
            self.session.suite = int.from_bytes(body[at : at + 2], "big")

    def unseal(self, record: bytes) -> Opened | None:
        """The record's content, or None when no key of this session authenticates it."""
        if not self.tried:
            self.tried = True
            self._load()
        for index, key in enumerate(self.keys):
            opened = self._try(key, record)
            if opened is not None:
                del self.keys[:index]  # earlier keys are done with
                key.seq += 1
                return opened
        self.failed = True
        return None

    def _load(self) -> None:
        if self.session.suite not in SUITES or not self.role:
            return
        kind, size, digest = SUITES[self.session.suite]
        secrets = self.session.secrets(self.role)
        if len(secrets) == 2:  # the application secret's updates follow it
            for _ in range(KEY_UPDATES):
                secrets.append(
                    _expand_label(secrets[-1], "traffic upd", hashlib.new(digest).digest_size, digest)
                )
        for secret in secrets:
            key = _expand_label(secret, "key", size, digest)
            self.keys.append(_Key(_aead(kind, key), _expand_label(secret, "iv", 12, digest), secret))

    @staticmethod
    def _try(key: _Key, record: bytes) -> Opened | None:
        from cryptography.exceptions import InvalidTag

        nonce = bytes(a ^ b for a, b in zip(key.iv, key.seq.to_bytes(12, "big"), strict=True))
        try:
            plain = key.aead.decrypt(nonce, record[RECORD_HEADER:], record[:RECORD_HEADER])  # type: ignore[attr-defined]
        except InvalidTag:
            return None
        content = plain.rstrip(b"\0")
        if not content:
            return None
        return Opened(content[-1], content[:-1])


class OpenedStream:
    """One direction of an NVMe/TCP-in-TLS connection whose records this session's keys open:
    each record becomes the NVMe/TCP PDUs of its application data (framed by ``inner``), placed
    back on the TCP stream.  A PDU's stream span takes in its records' headers when it begins a
    record and their types and tags when it ends one, so the spans of consecutive PDUs meet and
    every byte of a record has one PDU."""

    def __init__(self, session: TlsSession, inner: NvmeTcpFramer):
        self.direction, self.inner = TlsDirection(session), inner
        self.plain = Window()
        self.spans: list[tuple[int, int, int, int]] = []  # (plain start, plain end, record start, end)

    def record(self, at: int, end: int, record: bytes) -> list[Pdu]:
        if record[0] != APPLICATION_DATA:  # the hellos (and a compatibility CCS) in the clear
            self.direction.hello(record)
            return [Pdu(at, end, category=TLS_HANDSHAKE)]
        opened = self.direction.unseal(record)
        if opened is None:
            return [Pdu(at, end, category=TLS_RECORD)]
        if opened.inner_type != APPLICATION_DATA or not opened.data:  # Finished, tickets, alerts
            return [Pdu(at, end, category=TLS_HANDSHAKE)]
        start = len(self.plain)
        self.plain.append(opened.data)
        self.spans.append((start, len(self.plain), at, end))
        pdus = [self._placed(pdu) for pdu in self.inner.pdus(self.plain)]
        self.plain.release(self.inner.at)
        self.spans = [s for s in self.spans if s[1] > self.inner.at]
        return pdus

    def _placed(self, pdu: Pdu) -> Pdu:
        inside = [s for s in self.spans if s[0] < pdu.end and s[1] > pdu.start]
        first, last = inside[0], inside[-1]
        start = first[2] if pdu.start == first[0] else first[2] + RECORD_HEADER + pdu.start - first[0]
        end = last[3] if pdu.end == last[1] else last[2] + RECORD_HEADER + pdu.end - last[0]
        return replace(
            pdu,
            start=start,
            end=end,
            tls_records=sum(1 for s in inside if s[2] >= start),
            tls_bytes=(end - start) - (pdu.end - pdu.start),
            tls_splits=len(inside) - 1,
        )
