"""A summary of models/data/paths/path-lengths.csv: the host's instructions per I/O per cell and
side, the NIC stand-ins apart, TCP/IP per frame, and the ratios the model's fitted costs
imply beside the measured ones (what models/data/paths/README.md quotes).

    .venv/bin/python benchmarks/path_summary.py [CSV]
"""

from __future__ import annotations

import sys
from pathlib import Path

from sanlab.models.core.paths import PATHS_CSV, SIDES, PathCell, PathTable, load_paths, nic_groups
from sanlab.scenarios.errors import SanlabError

# The model's fitted per-I/O costs today (models/stacks.fit.yaml, 2026-11-25), kcycles: the
# initiator's transport, and the target's where a kernel stack has one.
FITTED_INITIATOR = {"iscsi": 25.43, "iser": 4.10, "srp": 3.00, "nvme-tcp": 5.30, "nvme-rdma": 2.93}
FITTED_APP = 3.81
FITTED_TARGET = {"nvme-tcp": 5.50, "nvme-rdma": 3.10}  # nvmet/nvme-tcp; nvme-rdma borrows spdk/nvme-rdma
TCP_PACKET_KCYCLES = 6.57  # starwind-2024's connectx-5 host_kcycles_per_packet


def label(cell: PathCell) -> str:
    via = "" if cell.provider == "none" else f"/{cell.provider}"
    return f"{cell.transport}{via} ({cell.stack}) {cell.rw[4:]} {cell.bs // 1024}k QD{cell.iodepth}"


def lines(table: PathTable) -> list[str]:
    out = [
        "| cell | initiator host k | target host k | initiator NIC k | target NIC k "
        "| tcpip per frame k | frames/I/O |",
        "|---|---|---|---|---|---|---|",
    ]
    for cell in table.cells():
        host = [table.per_io(cell, s) / 1e3 for s in ("initiator", "target")]
        ci = [table.ci95(cell, s) / 1e3 for s in ("initiator", "target")]
        nic = [table.per_io(cell, s, nic_groups(cell.transport)) / 1e3 for s in ("initiator", "target")]
        frames = table.frames_per_io(cell)
        tcp = sum(table.group(cell, s, "tcpip").instructions_per_io for s in ("initiator", "target"))
        per_frame = f"{tcp / frames / 2e3:.1f}" if frames else "-"
        out.append(
            f"| {label(cell)} | {host[0]:.1f} ± {ci[0]:.1f} | {host[1]:.1f} ± {ci[1]:.1f} | {nic[0]:.1f} "
            f"| {nic[1]:.1f} | {per_frame} | {frames:.1f} |"
        )
    return out


def _cell(table: PathTable, transport: str, provider: str) -> PathCell | None:
    rw, bs, qd = "randread", 4096, 1
    try:
        return table.find(transport, rw, bs, qd, provider)
    except SanlabError:  # not measured (yet)
        return None


def comparisons(table: PathTable) -> list[str]:
    """The model's fitted costs beside the measured paths (4 KiB random reads, QD 1)."""
    out = []
    tcp = _cell(table, "nvme-tcp", "none")
    if tcp is not None:
        frames = table.frames_per_io(tcp)
        stack = sum(table.group(tcp, s, g).instructions_per_io for s in SIDES for g in ("tcpip", "irq"))
        per_pass = stack / (2 * frames)
        out.append(
            f"nvme-tcp 4k read QD1: {frames:.1f} frames/I/O; TCP/IP + IRQ {per_pass:.0f} instructions per "
            f"frame per side: the fitted {TCP_PACKET_KCYCLES} kcycles/packet needs CPI "
            f"{TCP_PACKET_KCYCLES * 1e3 / per_pass:.1f}"
        )
    for provider in ("rxe", "siw"):
        rdma = _cell(table, "nvme-rdma", provider)
        if rdma is not None:
            target = table.per_io(rdma, "target")
            out.append(
                f"nvmet-rdma over {provider}, 4k read QD1: target host {target:.0f} instructions/I/O; "
                f"the borrowed {FITTED_TARGET['nvme-rdma']} kcycles needs CPI "
                f"{FITTED_TARGET['nvme-rdma'] * 1e3 / target:.2f}"
            )
    base = _cell(table, "nvme-rdma", "rxe")
    for transport, provider in (("iscsi", "none"), ("nvme-tcp", "none"), ("iser", "rxe"), ("srp", "rxe"),
                                ("nvme-rdma", "rxe"), ("iser", "siw"), ("nvme-rdma", "siw")):  # fmt: skip
        cell = _cell(table, transport, provider)
        if cell is None or base is None:
            continue
        app = table.per_io(cell, "initiator", ("app",))
        mine = table.per_io(cell, "initiator") - app
        ref = table.per_io(base, "initiator") - table.per_io(base, "initiator", ("app",))
        fitted = FITTED_INITIATOR[transport] / FITTED_INITIATOR["nvme-rdma"]
        out.append(
            f"initiator without fio, {transport}/{provider}: {mine:.0f} instructions/I/O = "
            f"{mine / ref:.2f}x nvme-rdma/rxe's; "
            f"the fitted kcycles say {fitted:.2f}x; fio itself {app:.0f}"
        )
    return out


def main(argv: list[str]) -> int:
    table = load_paths(Path(argv[0]) if argv else PATHS_CSV)
    print("\n".join(lines(table)))
    print("\n".join(["", *comparisons(table)]))
    print("\n'tcpip per frame': both sides' TCP/IP instructions over frames × 2 (sent once, received once).")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
