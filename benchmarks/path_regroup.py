"""Rebuild models/data/paths/path-lengths.csv from path-lengths.runs.jsonl's symbols, grouped again.

    .venv/bin/python benchmarks/path_regroup.py

For a change to models/data/paths/path-groups.yaml, or for runs whose kallsyms map was read before
a module loaded (2026-11-27's first table: the initiator's map was read at calibration, before
nvme_tcp, libiscsi, ib_srp... were loaded): each kernel symbol's module now comes from the
guest image's own .ko files.  No VM is started.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import path_lengths as bench  # noqa: E402
import path_profile as prof  # noqa: E402

from sanlab.emulator.images import require_image  # noqa: E402
from sanlab.models.core.paths import write_rows  # noqa: E402


def regroup(
    entry: dict[str, object], modules: dict[str, str], mapping: prof.Mapping
) -> list[dict[str, object]]:
    reports = entry["symbols"]
    assert isinstance(reports, list) and len(reports) == 4, (
        "a cell has four reports: short and long, both guests"
    )
    # Short run's two reports, then the long run's; within each, in the order they finished.
    ordered = [*sorted(reports[:2], key=lambda r: r["host"] != "initiator"),
               *sorted(reports[2:], key=lambda r: r["host"] != "initiator")]  # fmt: skip
    assert [r["host"] for r in ordered] == ["initiator", "target"] * 2, "a report is missing"
    counts = [
        dict(prof.grouped(prof.in_modules([tuple(r) for r in rep["rows"]], modules), mapping))  # type: ignore[misc]
        for rep in ordered
    ]
    short = (counts[0], counts[1], *entry["short"][2:])  # type: ignore[index]
    long = (counts[2], counts[3], *entry["long"][2:])  # type: ignore[index]
    idle = tuple(Counter(r) for r in entry["idle"])  # type: ignore[union-attr]
    key = {k: entry[k] for k in ("transport", "stack", "provider", "rw", "bs", "iodepth")}
    return bench.cell_rows(key, (short, long), idle, float(str(entry["worth"])))  # type: ignore[arg-type]


def main() -> int:
    modules = prof.image_module_symbols(require_image("debian-12").initrd)
    mapping = prof.Mapping.load()
    rows: list[dict[str, object]] = []
    raw = bench.RAW if bench.RAW.exists() else bench.RAW.with_name(bench.RAW.name + ".gz")
    text = gzip.decompress(raw.read_bytes()).decode() if raw.suffix == ".gz" else raw.read_text()
    for line in text.splitlines():
        entry = json.loads(line)
        if "symbols" not in entry:
            continue
        cell = regroup(entry, modules, mapping)
        if float(str(cell[0]["frames_per_io"])) < 1:  # its I/O never crossed its cable: another device
            print(f"left out: {entry['transport']}/{entry['provider']} {entry['rw']} {entry['bs']} "
                  f"QD{entry['iodepth']}: {cell[0]['frames_per_io']} frames per I/O on its link")  # fmt: skip
            continue
        rows += cell
    write_rows(bench.OUT, rows)
    print(f"{len(rows)} rows regrouped into {bench.OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
