"""Turn a capture into per-I/O wire recipes: frames, bytes, ACKs, round trips, latency.

tshark (with sanlab's Lua plugins) decodes every frame (frames.py); iSCSI
and NVMe/TCP are framed from the TCP byte streams (framing.py); then every
frame gets exactly one owner by the protocols' own keys (attribute.py): an
I/O, another command (login, admin, SCSI control…), or a named kind of
other traffic.  I/Os may overlap on the wire, so any queue depth works.

``wire_bytes_per_io`` sums the captured frame lengths (``frame.len``) an
I/O owns, ACKs included - what the models' ``captured`` bytes predict - and
the report's totals add up to the capture.
"""

from __future__ import annotations

import gc
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from sanlab.dissectors.attribute import Io, Owner, attribute
from sanlab.dissectors.frames import Frame, read_frames
from sanlab.dissectors.framing import TLS_RECORD
from sanlab.dissectors.rewrites import Rewrite, rewritten_retransmissions
from sanlab.dissectors.tls import read_keylog
from sanlab.dissectors.tshark import DECODE_AS
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.registry import (
    DETECTION_ORDER,
    FABRIC_DETECTION_ORDER,
    PLAIN_FABRIC,
    TCP_PORTS,
    TRANSPORTS,
    names,
)

__all__ = ["Analysis", "Frame", "Group", "Io", "analyze", "summarise"]


@dataclass(frozen=True)
class Group:
    transport: str
    op: str
    bytes: int
    count: int
    frames_per_io: float
    wire_bytes_per_io: float
    ack_frames_per_io: float
    round_trips_per_io: float
    lat_mean_us: float
    lat_p99_us: float
    # NVMe/TCP inside TLS, opened with its keys: record headers, inner types and tags (bytes),
    # the records that begin in the I/O's PDUs, and the records its PDUs are split over past one
    tls_bytes_per_io: float = 0.0
    tls_records_per_io: float = 0.0
    tls_splits_per_io: float = 0.0


@dataclass(frozen=True)
class Tally:
    """Frames and captured bytes of one kind of traffic that is not a read or write."""

    name: str
    frames: int
    bytes: int


@dataclass(frozen=True)
class Analysis:
    transport: str
    fabric: str
    groups: list[Group]
    others: list[Tally]
    frames: int  # in the capture
    bytes: int
    max_in_flight: int  # the most I/Os outstanding on the wire at once
    ios: list[Io] = field(default_factory=list)
    # Every storage transport the capture carries (the groups say which is whose), and the
    # frames left out as exact duplicates of earlier ones.
    transports: list[str] = field(default_factory=list)
    duplicates: int = 0
    # TCP retransmissions that carried other bytes than the segment they repeat (rewrites.py)
    rewrites: list[Rewrite] = field(default_factory=list)
    # NVMe/TCP inside TLS: the key log that opened it ("" without one), and its records left shut
    keylog: str = ""
    tls_records: int = 0

    @property
    def encrypted(self) -> bool:
        """NVMe/TCP inside TLS: its streams are records whose PDUs cannot be read."""
        return any(t.name == TLS_RECORD for t in self.others)

    def document(self) -> dict[str, object]:
        return {
            "transport": self.transport,
            "encrypted": self.encrypted,
            "transports": self.transports,
            "fabric": self.fabric,
            "duplicate_frames": self.duplicates,
            "rewritten_retransmissions": [r.document() for r in self.rewrites],
            "max_in_flight": self.max_in_flight,
            "groups": [_group_document(g) for g in self.groups],
            **({"keylog": Path(self.keylog).name} if self.keylog else {}),  # a name: no host's path
            **({"tls_records_unopened": self.tls_records} if self.tls_records else {}),
            "others": [t.__dict__ for t in self.others],
            "totals": {"frames": self.frames, "bytes": self.bytes},
        }


def _group_document(group: Group) -> dict[str, object]:
    """A group's figures; TLS's only where there is TLS (a plain capture's document is unchanged)."""
    tls = ("tls_bytes_per_io", "tls_records_per_io", "tls_splits_per_io")
    return {k: v for k, v in group.__dict__.items() if k not in tls or group.tls_records_per_io}


def summarise(ios: list[Io], transport_of: Callable[[Io], str] = lambda io: "") -> list[Group]:
    """I/Os grouped by transport, operation and size, with their wire recipe per I/O."""
    groups: dict[tuple[str, str, int], list[Io]] = {}
    for io in ios:
        groups.setdefault((transport_of(io), io.op, io.nbytes), []).append(io)
    out = []
    for (transport, op, nbytes), members in sorted(groups.items()):
        lats = sorted(io.latency_us for io in members)
        p99 = lats[min(len(lats) - 1, int(round(0.99 * (len(lats) - 1))))]
        n = len(members)
        out.append(
            Group(
                transport=transport,
                op=op,
                bytes=nbytes,
                count=n,
                frames_per_io=round(sum(len(io.frames) for io in members) / n, 3),
                wire_bytes_per_io=round(sum(f.length for io in members for f in io.frames) / n, 1),
                ack_frames_per_io=round(sum(f.is_ack for io in members for f in io.frames) / n, 3),
                round_trips_per_io=round(statistics.mean(io.round_trips for io in members), 3),
                lat_mean_us=round(statistics.mean(lats), 1),
                lat_p99_us=round(p99, 1),
                tls_bytes_per_io=round(sum(io.tls_bytes for io in members) / n, 1),
                tls_records_per_io=round(sum(io.tls_records for io in members) / n, 3),
                tls_splits_per_io=round(sum(io.tls_splits for io in members) / n, 3),
            )
        )
    return out


def _is_io(io: Io) -> bool:
    return io.op in ("read", "write") and io.complete


DEVICE_SCAN = "device scan"  # the kernel's reads of a new disk (partition table), not the workload
SCAN_GAP_S = 0.2  # the scan's reads follow the probe and each other within this
SCAN_READS = 16  # and are a few: MBR, GPT header and entries


def device_scan(tasks: list[Io]) -> set[int]:
    """The reads the kernel makes of a disk it has just found, as ids of their tasks.

    After login (iSCSI, SRP) or connect (NVMe-oF) the kernel probes the device
    (INQUIRY, READ CAPACITY; Identify) and at once reads its partition table: a
    read of LBA 0 right after the probe, and a few reads chained to it.  They
    are no part of the workload (lab 1's one dd came with three of them), so
    they are counted apart.  A workload starts later: a person types, fio starts.
    """
    scan: set[int] = set()
    if len({t.start for t in tasks}) <= 1:  # no usable timestamps: no telling a scan by its timing
        return scan
    by_initiator: dict[str, list[Io]] = {}
    for task in sorted(tasks, key=lambda t: t.start):
        by_initiator.setdefault(task.initiator, []).append(task)
    for mine in by_initiator.values():
        probed: float | None = None  # when the last non-I/O command (or scan read) started
        chained = 0
        for task in mine:
            if task.op not in ("read", "write"):  # a probe; the kernel interleaves a few with the scan
                probed = task.start
                continue
            near = probed is not None and task.start - probed <= SCAN_GAP_S
            if task.op == "read" and near and (chained or task.lba == 0) and chained < SCAN_READS:
                scan.add(id(task))
                probed, chained = task.start, chained + 1
            else:
                probed, chained = None, 0
    return scan


def _tally(frames: list[Frame], owners: dict[int, Owner], scan: set[int]) -> list[Tally]:
    counts: dict[str, list[int]] = {}
    for frame in frames:
        owner = owners[frame.number]
        if isinstance(owner, Io) and _is_io(owner) and id(owner) not in scan:
            continue
        if isinstance(owner, Io) and id(owner) in scan:
            name = DEVICE_SCAN
        else:
            name = owner if isinstance(owner, str) else owner.category or "unfinished I/O"
        entry = counts.setdefault(name, [0, 0])
        entry[0] += 1
        entry[1] += frame.length
    return [Tally(name, n, size) for name, (n, size) in sorted(counts.items())]


def _max_in_flight(ios: list[Io]) -> int:
    """The most I/Os outstanding at once; equal times (a capture without timestamps) fall back on
    the order of the frames that start and end each I/O."""
    starts = [(io.start, io.frames[0].number if io.frames else 0, 1) for io in ios]
    ends = [(io.end or io.start, io.frames[-1].number if io.frames else 0, -1) for io in ios]
    edges = [(time, step) for time, _, step in sorted(starts + ends)]
    depth = best = 0
    for _, step in edges:
        depth += step
        best = max(best, depth)
    return best


def _tcp_kinds(frames: list[Frame], decode_as: tuple[str, ...]) -> dict[int, str]:
    """TCP streams to frame as iSCSI or NVMe/TCP: by port (the registry's, and --decode-as),
    unless they carry MPA (iWARP)."""
    ports = dict(TCP_PORTS)
    for rule in decode_as:
        port, _, proto = rule.removeprefix("tcp.port==").partition(",")
        if rule.startswith("tcp.") and proto in names(TRANSPORTS, carrier="tcp"):
            ports[int(port)] = proto
    iwarp = {f.stream for f in frames if f.mpa or f.fpdus}
    kinds: dict[int, str] = {}
    for f in frames:
        if f.tcp_len >= 0 and f.stream not in iwarp:
            kind = ports.get(f.dport) or ports.get(f.sport)
            if kind:
                kinds[f.stream] = kind
    return kinds


def _transport_of(kinds: dict[int, str]) -> Callable[[Io], str]:
    """An I/O's transport, from its own frames: the RDMA protocol decoded, or its TCP stream's."""

    def of(io: Io) -> str:
        for frame in io.frames:
            if frame.transport:
                return frame.transport
            if frame.stream in kinds:
                return kinds[frame.stream]
        return ""

    return of


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Frames, I/Os and owners are millions of small objects and no reference cycles; the cyclic
    collector would walk the growing heap again and again (about 15 % of a large capture's time)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def keylog_beside(pcap: Path) -> Path | None:
    """The TLS key log a run keeps beside its capture (``LINK.keylog`` by ``LINK.pcap``)."""
    found = pcap.with_suffix(".keylog")
    return found if found.is_file() else None


def analyze(
    pcap: Path, decode_as: tuple[str, ...] = (), labels: bool = False, keylog: Path | None = None
) -> Analysis:
    """The capture's I/Os and other traffic; ``labels`` keeps each frame's Wireshark summary
    (for a ladder diagram: it is most of a frame's memory).  ``keylog`` (default: the one
    beside the capture) opens NVMe/TCP inside TLS."""
    keylog = keylog or keylog_beside(pcap)
    with _no_cycle_collection():
        return _analyze(pcap, decode_as, labels, keylog)


def _analyze(pcap: Path, decode_as: tuple[str, ...], labels: bool, keylog: Path | None) -> Analysis:
    keys = read_keylog(keylog) if keylog else None
    frames, seen, duplicates = read_frames(pcap, decode_as, labels, keylog)
    kinds = _tcp_kinds(frames, decode_as)
    seen |= set(kinds.values())
    transports = [t for t in DETECTION_ORDER if t in seen]
    transport = transports[0] if transports else None
    if transport is None:
        ports = ", ".join(str(p) for p in TCP_PORTS)
        raise SanlabError(
            f"{pcap}: no iSCSI, iSER, SRP or NVMe-oF traffic recognised (TCP ports {ports}, RoCE UDP "
            "4791, iWARP); for other ports add --decode-as tcp.port==PORT,iscsi (or nvme-tcp)"
        )
    fabric = next((f for f in FABRIC_DETECTION_ORDER if f in seen), PLAIN_FABRIC.name)
    servers = {int(r.split("==")[1].split(",")[0]) for r in decode_as if DECODE_AS.match(r)}
    result = attribute(pcap, frames, kinds, {*TCP_PORTS, *servers}, keys)
    for frame in frames:
        owner = result.owners[frame.number]
        if isinstance(owner, Io):
            owner.frames.append(frame)
    scan = device_scan(result.tasks)
    ios = [io for io in result.tasks if _is_io(io) and id(io) not in scan]
    return Analysis(
        transport,
        fabric,
        summarise(ios, _transport_of(kinds)),
        _tally(frames, result.owners, scan),
        len(frames),
        sum(f.length for f in frames),
        _max_in_flight(ios),
        ios,
        transports,
        duplicates,
        [replace(r, owner=_whose(result.owners.get(r.first_frame))) for r in rewritten_retransmissions(pcap)],
        str(keylog) if keylog else "",
        result.tls_records,
    )


def _whose(owner: Owner | None) -> str:
    """A rewritten retransmission's bytes named by the I/O they belong to: for a write, the
    block a ghost write would overwrite."""
    if not isinstance(owner, Io):
        return ""
    where = f" at LBA {owner.lba}" if owner.lba >= 0 else ""
    return f"{owner.op} of {owner.nbytes} bytes{where}, tag {owner.tag}"
