"""Build test frames by hand and write them to a pcap (for dissector tests).

RoCEv2 frames: Ethernet / IPv4 / UDP 4791 / BTH / payload / ICRC.  TCP
frames: Ethernet / IPv4 / TCP with consecutive sequence numbers per
direction, so Wireshark's stream reassembly sees a plausible stream.
"""

from __future__ import annotations

import struct
from pathlib import Path

MAC_A, MAC_B = bytes.fromhex("525400000001"), bytes.fromhex("525400000002")
IP_A, IP_B = bytes([169, 254, 10, 1]), bytes([169, 254, 10, 2])


def _ipv4(proto: int, payload: bytes, src: bytes, dst: bytes) -> bytes:
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 1, 0x4000, 64, proto, 0, src, dst)
    return header + payload


def roce(payload: bytes, opcode: int = 0x04, qp: int = 0x11, psn: int = 0, a_to_b: bool = True) -> bytes:
    """One RC packet (default: SEND Only) carrying ``payload``."""
    pad = -len(payload) % 4
    bth = struct.pack(
        "!BBHB3sB3s", opcode, pad << 4, 0xFFFF, 0, qp.to_bytes(3, "big"), 0x80, psn.to_bytes(3, "big")
    )
    body = bth + payload + b"\0" * pad + b"\0\0\0\0"
    udp = struct.pack("!HHHH", 49152, 4791, 8 + len(body), 0) + body
    src, dst = (IP_A, IP_B) if a_to_b else (IP_B, IP_A)
    macs = (MAC_B + MAC_A) if a_to_b else (MAC_A + MAC_B)
    return macs + b"\x08\x00" + _ipv4(17, udp, src, dst)


class TcpStream:
    """Both directions of one TCP connection; ``send`` returns a frame."""

    def __init__(self, client_port: int, server_port: int):
        self.ports = (client_port, server_port)
        self.seq = {True: 1000, False: 5000}

    def send(self, payload: bytes, from_client: bool = True) -> bytes:
        frame = self.segment(self.seq[from_client], payload, from_client)
        self.seq[from_client] = (self.seq[from_client] + len(payload)) % (1 << 32)
        return frame

    def segment(self, seq: int, payload: bytes, from_client: bool = True, flags: int = 0x18) -> bytes:
        """A segment at a given sequence number (a retransmission, say), acknowledging all the
        other side has sent; ``flags`` PSH and ACK unless given (0x02: a SYN)."""
        sport, dport = self.ports if from_client else self.ports[::-1]
        ack = self.seq[not from_client] if flags & 0x10 else 0
        tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, 65535, 0, 0)
        src, dst = (IP_A, IP_B) if from_client else (IP_B, IP_A)
        macs = (MAC_B + MAC_A) if from_client else (MAC_A + MAC_B)
        return macs + b"\x08\x00" + _ipv4(6, tcp + payload, src, dst)


def write_pcap(path: Path, frames: list[bytes]) -> Path:
    with path.open("wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, frame in enumerate(frames):
            out.write(struct.pack("<IIII", 1_700_000_000, i * 100, len(frame), len(frame)))
            out.write(frame)
    return path
