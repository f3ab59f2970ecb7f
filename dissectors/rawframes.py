"""The bytes of captured frames, read with dpkt (pcap and pcapng alike).

tshark decodes the protocols; some questions need the bytes themselves:
the TCP payloads the analyser frames into iSCSI and NVMe/TCP PDUs (to know
which byte of a stream belongs to which PDU), and the SQEs and CQEs of
NVMe/RDMA capsules that Wireshark 4.0 leaves undecoded.  Frames are
numbered from 1 in file order, as tshark numbers them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dpkt

# Link types whose frames the analyser unpacks (pcap LINKTYPE_* numbers).
ETHERNET, RAW_IP, RAW_IPV4, LINUX_SLL, LINUX_SLL2 = 1, 101, 228, 113, 276


def _frames(pcap: Path) -> Iterator[tuple[int, int, bytes]]:
    """(frame number, link type, bytes) of every frame in the file."""
    with pcap.open("rb") as handle:
        try:
            reader = dpkt.pcap.UniversalReader(handle)
        except (ValueError, dpkt.dpkt.NeedData) as exc:
            raise ValueError(f"{pcap}: not a pcap or pcapng file ({exc})") from None
        link = reader.datalink()
        for number, (_, data) in enumerate(reader, start=1):
            yield number, link, bytes(data)


def frame_bytes(pcap: Path, numbers: set[int]) -> dict[int, bytes]:
    """The whole captured bytes of the frames asked for."""
    return {number: data for number, _, data in _frames(pcap) if number in numbers}


def _ip(link: int, data: bytes) -> dpkt.ip.IP | None:
    packet: object
    if link == ETHERNET:
        packet = dpkt.ethernet.Ethernet(data).data
    elif link == LINUX_SLL:
        packet = dpkt.sll.SLL(data).data
    elif link == LINUX_SLL2:
        packet = dpkt.sll2.SLL2(data).data
    elif link in (RAW_IP, RAW_IPV4):
        packet = dpkt.ip.IP(data)
    else:
        return None
    return packet if isinstance(packet, dpkt.ip.IP) else None


def tcp_payloads(pcap: Path, numbers: set[int]) -> dict[int, bytes]:
    """The TCP payload of each frame asked for (IP's total length trims any padding)."""
    found: dict[int, bytes] = {}
    for number, link, data in _frames(pcap):
        if number not in numbers:
            continue
        try:
            ip = _ip(link, data)
        except (dpkt.dpkt.UnpackError, dpkt.dpkt.NeedData):
            continue
        if ip is not None and isinstance(ip.data, dpkt.tcp.TCP):
            found[number] = bytes(ip.data.data)
    return found
