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


def frames_of(pcap: Path) -> Iterator[tuple[int, int, bytes]]:
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
    return {number: data for number, _, data in frames_of(pcap) if number in numbers}


def ip_of(link: int, data: bytes) -> dpkt.ip.IP | None:
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


def ethernet_tcp_offsets(data: bytes) -> tuple[int, int, int] | None:
    """(IP header, TCP header, end of the IP packet) of an Ethernet/IPv4/TCP frame (one VLAN tag
    allowed), read from the headers' own length fields; None for anything else.  Ten times
    faster than unpacking with dpkt, which a 200 MB capture of storage traffic would spend
    seconds on."""
    at = 14
    ethertype = int.from_bytes(data[12:14], "big")
    if ethertype == 0x8100:
        ethertype, at = int.from_bytes(data[16:18], "big"), 18
    if ethertype != 0x0800 or len(data) < at + 20 or data[at + 9] != 6 or data[at] >> 4 != 4:
        return None
    ip_header, ip_total = (data[at] & 0x0F) * 4, int.from_bytes(data[at + 2 : at + 4], "big")
    tcp = at + ip_header
    if len(data) < tcp + 20 or ip_total < ip_header + 20:
        return None
    return at, tcp, at + ip_total


def _ethernet_tcp_payload(data: bytes) -> bytes | None:
    """The TCP payload of an Ethernet/IPv4 frame; None for anything else."""
    offsets = ethernet_tcp_offsets(data)
    if offsets is None:
        return None
    _, tcp, end = offsets
    return data[tcp + (data[tcp + 12] >> 4) * 4 : end]


def each_tcp_payload(pcap: Path, numbers: set[int]) -> Iterator[tuple[int, bytes]]:
    """(frame number, TCP payload) of the frames asked for, in capture order, one at a time."""
    for number, link, data in frames_of(pcap):
        if number not in numbers:
            continue
        if link == ETHERNET:
            payload = _ethernet_tcp_payload(data)
            if payload is not None:
                yield number, payload
                continue
        try:
            ip = ip_of(link, data)
        except (dpkt.dpkt.UnpackError, dpkt.dpkt.NeedData):
            continue
        if ip is not None and isinstance(ip.data, dpkt.tcp.TCP):
            yield number, bytes(ip.data.data)
