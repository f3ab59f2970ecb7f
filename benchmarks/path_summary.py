"""A summary of models/data/path-lengths.csv: the host's instructions per I/O per cell and
side, the NIC stand-ins apart, TCP/IP per frame, and the ratios the model's fitted costs
imply beside the measured ones (what models/data/path-lengths.README.md quotes).

    .venv/bin/python benchmarks/path_summary.py [CSV]
"""

from __future__ import annotations

import sys
from pathlib import Path

from sanlab.models.paths import PATHS_CSV, PathCell, PathTable, load_paths, nic_groups

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


def main(argv: list[str]) -> int:
    table = load_paths(Path(argv[0]) if argv else PATHS_CSV)
    print("\n".join(lines(table)))
    print("\n'tcpip per frame': both sides' TCP/IP instructions over frames × 2 (sent once, received once).")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
