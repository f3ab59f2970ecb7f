"""NVMe's key strings, checked as nvme-cli and libnvme check them before they use one.

Two formats share one shape, ``PREFIX:HH:BASE64:``: HH is the hash in hex,
BASE64 the key followed by the little-endian CRC-32 (zlib's, the one
nvme-cli's ``crc32()`` computes) of the key.

- A DH-HMAC-CHAP secret, ``DHHC-1:HH:...:`` (NVMe Base 8.3.5.5.9): nvme-cli
  2.13-2.16 ``check_dhchap_key()`` (nvme.c) takes HH 00-03; the whole
  string is 59 characters for 01 (SHA-256), 83 for 02 (SHA-384) and 103
  for 03 (SHA-512), so the key is 32, 48 or 64 bytes to match the hash;
  00 (no transform) takes any of the three; then the CRC must match.
- A configured TLS PSK, ``NVMeTLSkey-1:HH:...:`` (NVMe/TCP 3.6.1.5):
  libnvme 1.13-1.16 ``nvme_import_tls_key_versioned()`` (src/nvme/linux.c,
  what ``nvme check-tls-key`` calls) takes version 1 only and HH 00-02; the
  whole string is 65 characters for 01 (32 bytes, SHA-256) and 89 for 02
  (48 bytes, SHA-384); then the CRC must match.  sanlab also refuses 00 (a
  PSK used without a hash): its TLS path is exercised with 01 and 02 only.

The base64 must be canonical (RFC 4648, padded, no stray bits), as
``nvme gen-dhchap-key`` and ``gen-tls-key`` print it: nvme-cli's own
decoder would drop stray bits silently; a hand-edited key that has them is
refused here rather than used as some other key.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
import zlib

DHCHAP_PREFIX = "DHHC-1"
TLS_PREFIX = "NVMeTLSkey-1"
# Key bytes each hash takes (00: any of them, as nvme-cli allows).
DHCHAP_KEY_BYTES: dict[int, tuple[int, ...]] = {0: (32, 48, 64), 1: (32,), 2: (48,), 3: (64,)}
TLS_KEY_BYTES: dict[int, tuple[int, ...]] = {1: (32,), 2: (48,)}
_HASH_NAMES = {0: "none", 1: "SHA-256", 2: "SHA-384", 3: "SHA-512"}
_SHAPE = re.compile(r"^(?P<prefix>[A-Za-z0-9-]+):(?P<hash>[0-9a-f]{2}):(?P<body>[^:]*):\Z")


def interchange(prefix: str, hash_id: int, key: bytes) -> str:
    """``key`` in the interchange format: the key and its CRC-32 (little-endian), in base64."""
    crc = struct.pack("<I", zlib.crc32(key))
    return f"{prefix}:{hash_id:02x}:{base64.b64encode(key + crc).decode()}:"


def check_dhchap_secret(text: str) -> str:
    """``text`` if it is a DH-HMAC-CHAP secret nvme-cli accepts; else a ValueError saying why."""
    return _check(text, DHCHAP_PREFIX, DHCHAP_KEY_BYTES, "a DH-HMAC-CHAP secret")


def check_tls_psk(text: str) -> str:
    """``text`` if it is a configured PSK libnvme accepts; else a ValueError saying why."""
    return _check(text, TLS_PREFIX, TLS_KEY_BYTES, "a TLS PSK")


def _check(text: str, prefix: str, sizes: dict[int, tuple[int, ...]], what: str) -> str:
    form = f"{prefix}:HH:<base64 of key and CRC-32>:"
    if not isinstance(text, str) or len(text) > 200:
        raise ValueError(f"is not {what} ({form})")
    shape = _SHAPE.match(text)
    if shape is None or shape["prefix"] != prefix:
        raise ValueError(f"is not {what}: write {form}, as nvme-cli prints it")
    hash_id = int(shape["hash"], 16)
    if hash_id not in sizes:
        allowed = ", ".join(f"{h:02x} ({_HASH_NAMES[h]})" for h in sizes)
        raise ValueError(f"{what} with hash {shape['hash']}: the hash is one of {allowed}")
    raw = _canonical_base64(shape["body"], what)
    key, crc = raw[:-4], raw[-4:]
    if len(key) not in sizes[hash_id]:
        bytes_ = " or ".join(str(n) for n in sizes[hash_id])
        raise ValueError(
            f"{what} with hash {hash_id:02x} ({_HASH_NAMES[hash_id]}) holds a {bytes_}-byte key; "
            f"this one holds {max(len(key), 0)} bytes"
        )
    if struct.unpack("<I", crc)[0] != zlib.crc32(key):
        raise ValueError(f"{what} whose CRC-32 does not match its key (mistyped or cut?)")
    return text


def _canonical_base64(body: str, what: str) -> bytes:
    """The bytes ``body`` encodes, if it is canonical base64 of at least a CRC's four bytes."""
    try:
        raw = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raw = None
    if raw is None or len(raw) < 4 or base64.b64encode(raw).decode() != body:
        raise ValueError(f"{what} whose key part is not base64 as nvme-cli prints it")
    return raw
