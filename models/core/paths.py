"""The path-length table: guest instructions per I/O of the code sanlab runs, by group.

models/data/paths/path-lengths.csv is measured by benchmarks/path_lengths.py (QEMU's instruction
count with perf in the guests; models/data/paths/README.md gives the method, its error
and provenance).  A model turns it into cost as path length × cycles per instruction, so the
ratios between transports come from the code rather than from one vendor's CPU column.

This module only reads (and, for the benchmark, writes) the table; the columns and API are
described in models/data/paths/README.md.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.reading import csv_number, read_csv
from sanlab.scenarios.registry import TRANSPORTS
from sanlab.scenarios.writing import write_file

PATHS_CSV = Path(__file__).resolve().parent.parent / "data" / "paths" / "path-lengths.csv"
COLUMNS = (
    "transport", "stack", "provider", "rw", "bs", "iodepth", "side", "group",
    "instructions_per_io", "ci95_per_io", "samples", "ios", "frames_per_io",
)  # fmt: skip
# Where the instructions ran (models/data/paths/path-groups.yaml maps symbols to them).
GROUPS = (
    "app", "block", "backend", "transport", "tcpip", "rdma_core", "irq", "copy", "sched", "mm",
    "kernel_other", "provider", "virtio", "background",
)  # fmt: skip
# The soft-RDMA provider and virtio stand in for the NIC; background is the guest's own chores.
NIC_GROUPS = ("provider", "virtio")
NOT_HOST = (*NIC_GROUPS, "background")
HOST_GROUPS = tuple(g for g in GROUPS if g not in NOT_HOST)
PROVIDERS = ("none", "rxe", "siw")
RWS = ("randread", "randwrite")
SIDES = ("initiator", "target")
STACKS = ("lio", "tgt", "nvmet")


def host_groups(transport: str) -> tuple[str, ...]:
    """The groups that are the host's cost for ``transport``: all but the NIC stand-ins, and
    for an RDMA transport not the kernel's TCP/UDP/IP either (rxe's UDP and siw's TCP are what
    an RNIC does in silicon)."""
    if transport not in TRANSPORTS:
        raise SanlabError(f"path table: transport {transport!r} is not one of {', '.join(TRANSPORTS)}")
    if TRANSPORTS[transport].rdma:
        return tuple(g for g in HOST_GROUPS if g != "tcpip")
    return HOST_GROUPS


def nic_groups(transport: str) -> tuple[str, ...]:
    """What stands in for the NIC: the provider and virtio, and for RDMA the IP stack too."""
    return tuple(g for g in GROUPS if g not in host_groups(transport) and g != "background")


@dataclass(frozen=True, order=True)
class PathCell:
    transport: str
    stack: str
    provider: str
    rw: str
    bs: int
    iodepth: int


@dataclass(frozen=True)
class PathRow:
    cell: PathCell
    side: str
    group: str
    instructions_per_io: float
    ci95_per_io: float
    samples: int
    ios: int
    frames_per_io: float  # Ethernet frames on the wire, both ways, per I/O (the cell's, on every row)


def _choice(source: str, line: int, column: str, text: str, allowed: tuple[str, ...]) -> str:
    if text not in allowed:
        raise SanlabError(
            f"{source}: row {line}: column '{column}' is {text!r}; give one of {', '.join(allowed)}"
        )
    return text


def _row(source: str, line: int, raw: dict[str, str]) -> PathRow:
    def number(column: str, high: float, whole: bool = False) -> float:
        return csv_number(source, line, column, raw[column], 0.0, high, whole)

    transport = _choice(source, line, "transport", raw["transport"], tuple(TRANSPORTS))
    cell = PathCell(
        transport,
        _choice(source, line, "stack", raw["stack"], STACKS),
        _choice(source, line, "provider", raw["provider"], PROVIDERS),
        _choice(source, line, "rw", raw["rw"], RWS),
        int(number("bs", 1 << 24, whole=True)),
        int(number("iodepth", 4096, whole=True)),
    )
    if cell.bs < 512 or cell.iodepth < 1:
        raise SanlabError(f"{source}: row {line}: bs {cell.bs} or iodepth {cell.iodepth} below 512 and 1")
    if (cell.provider == "none") == TRANSPORTS[transport].rdma:
        raise SanlabError(
            f"{source}: row {line}: provider {cell.provider!r} does not fit transport {transport!r}"
        )
    return PathRow(
        cell,
        _choice(source, line, "side", raw["side"], SIDES),
        _choice(source, line, "group", raw["group"], GROUPS),
        number("instructions_per_io", 1e9),
        number("ci95_per_io", 1e9),
        int(csv_number(source, line, "samples", raw["samples"], -1e9, 1e9, whole=True)),
        int(number("ios", 1e12, whole=True)),
        number("frames_per_io", 1e6),
    )


@dataclass(frozen=True)
class PathTable:
    rows: dict[tuple[PathCell, str, str], PathRow]
    source: str

    def cells(self) -> list[PathCell]:
        return sorted({cell for cell, _, _ in self.rows})

    def group(self, cell: PathCell, side: str, group: str) -> PathRow:
        try:
            return self.rows[(cell, side, group)]
        except KeyError:
            raise SanlabError(f"{self.source}: no row for {cell} {side} {group}") from None

    def per_io(self, cell: PathCell, side: str, groups: tuple[str, ...] | None = None) -> float:
        """Instructions per I/O on ``side``: the host's cost (``host_groups``) unless ``groups``
        names others."""
        chosen = host_groups(cell.transport) if groups is None else groups
        return sum(self.group(cell, side, g).instructions_per_io for g in chosen)

    def ci95(self, cell: PathCell, side: str, groups: tuple[str, ...] | None = None) -> float:
        """The 95 % half-width of ``per_io``'s sum: the groups' intervals added in quadrature
        (their samples are disjoint, so independent)."""
        chosen = host_groups(cell.transport) if groups is None else groups
        return float(sum(self.group(cell, side, g).ci95_per_io ** 2 for g in chosen) ** 0.5)

    def frames_per_io(self, cell: PathCell) -> float:
        """Ethernet frames both ways per I/O: what a per-packet cost multiplies."""
        return self.group(cell, "initiator", "app").frames_per_io

    def find(self, transport: str, rw: str, bs: int, iodepth: int, provider: str | None = None) -> PathCell:
        """The one measured cell of that shape (any stack; ``provider`` picks rxe or siw)."""
        found = [
            c for c in self.cells()
            if (c.transport, c.rw, c.bs, c.iodepth) == (transport, rw, bs, iodepth)
            and provider in (None, c.provider)
        ]  # fmt: skip
        if len(found) != 1:
            what = f"{transport} {rw} {bs} QD{iodepth}" + (f" over {provider}" if provider else "")
            raise SanlabError(f"{self.source}: {len(found)} cells for {what}, not one")
        return found[0]


def load_paths(path: Path = PATHS_CSV) -> PathTable:
    """The table, every row typed and checked; a cell must carry every group on both sides."""
    source = f"path table {path}"
    rows: dict[tuple[PathCell, str, str], PathRow] = {}
    for line, raw in enumerate(read_csv(path, "path table", COLUMNS), start=2):
        row = _row(source, line, raw)
        key = (row.cell, row.side, row.group)
        if key in rows:
            raise SanlabError(f"{source}: row {line}: a second row for {row.cell} {row.side} {row.group}")
        rows[key] = row
    for cell in {c for c, _, _ in rows}:
        missing = [f"{s} {g}" for s in SIDES for g in GROUPS if (cell, s, g) not in rows]
        if missing:
            raise SanlabError(f"{source}: {cell} lacks {', '.join(missing[:4])}")
    return PathTable(rows, source)


@cache
def default_paths() -> PathTable:
    """The committed table, read once a process (the model reads it for every profile it builds)."""
    return load_paths()


# What the model reads per I/O (models/core/costs.py): a side's transport code with its RDMA
# core, and on a target its own block layer (the backend is the profile's).  fio and the
# initiator's block layer are the application's cost, every transport alike; TCP/IP is per packet,
# copy per byte, and the rest (sched, mm, irq, the kernel's other code) cannot be told apart from
# the soft RNIC's on RDMA without call graphs (models/data/paths/README.md).
STACK_GROUPS = {"initiator": ("transport", "rdma_core"), "target": ("transport", "rdma_core", "block")}
PATH_BS = 4096  # the cells a per-I/O cost is read from: 4 KiB, the least per-byte work


@dataclass(frozen=True)
class StackPath:
    """One side's transport code per I/O: thousands of instructions, averaged over its 4 KiB
    cells (reads and writes, QD 1 and 32, each soft RNIC that carried it), and those cells."""

    kinstr: float
    ci95: float  # the mean's 95 % half-width from sampling (the cells' in quadrature)
    cells: tuple[PathCell, ...]


def stack_path(table: PathTable, transport: str, side: str, stack: str | None = None) -> StackPath | None:
    """The initiator's (any target stack) or target ``stack``'s per-I/O path for ``transport``,
    or None where the table has no 4 KiB cell of it."""
    cells = tuple(
        c for c in table.cells() if (c.transport, c.bs) == (transport, PATH_BS) and stack in (None, c.stack)
    )
    if not cells:
        return None
    groups = STACK_GROUPS[side]
    per_cell = [table.per_io(c, side, groups) for c in cells]
    spread = sum(table.ci95(c, side, groups) ** 2 for c in cells) ** 0.5 / len(cells)
    return StackPath(sum(per_cell) / len(cells) / 1e3, spread / 1e3, cells)


@cache
def default_stack_path(transport: str, side: str, stack: str | None = None) -> StackPath | None:
    """``stack_path`` of the committed table, once a process: every profile the fit builds asks."""
    return stack_path(default_paths(), transport, side, stack)


def write_rows(path: Path, new: list[dict[str, object]]) -> None:
    """The benchmark's rows into the table: they replace the rows of the same cells."""
    kept: list[dict[str, object]] = []
    if path.exists():
        replaced = {tuple(str(r[c]) for c in COLUMNS[:6]) for r in new}
        old = read_csv(path, "path table", COLUMNS)
        kept = [dict(r) for r in old if tuple(r[c] for c in COLUMNS[:6]) not in replaced]
    every = sorted(
        kept + new,
        key=lambda r: (*(str(r[c]) for c in COLUMNS[:4]), int(str(r["bs"])), int(str(r["iodepth"])),
                       SIDES.index(str(r["side"])), GROUPS.index(str(r["group"]))),
    )  # fmt: skip
    out = io.StringIO()
    writer = csv.DictWriter(out, COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(every)
    write_file(path, out.getvalue(), what="path table")
