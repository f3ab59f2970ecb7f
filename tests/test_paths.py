"""The path-length table's loader (models/core/paths.py) and the benchmark's arithmetic
(benchmarks/path_profile.py): what the table holds, and that a broken table is one line."""

from __future__ import annotations

import csv
import io
import sys
from collections import Counter
from pathlib import Path

import pytest

from sanlab.models.core import paths
from sanlab.models.core.paths import COLUMNS, GROUPS, SIDES, host_groups, load_paths, nic_groups, write_rows
from sanlab.scenarios.errors import SanlabError

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import path_profile as prof  # noqa: E402


def _cell_rows(
    transport: str = "nvme-tcp", provider: str = "none", stack: str = "nvmet", value: float = 100.0
):
    return [
        {
            "transport": transport, "stack": stack, "provider": provider, "rw": "randread", "bs": 4096,
            "iodepth": 1, "side": side, "group": group, "instructions_per_io": value + i,
            "ci95_per_io": 5.0, "samples": 10, "ios": 3000, "frames_per_io": 6.5,
        }
        for side in SIDES
        for i, group in enumerate(GROUPS)
    ]  # fmt: skip


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    out = io.StringIO()
    writer = csv.DictWriter(out, COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(out.getvalue())
    return path


def test_host_cost_leaves_out_the_nic_stand_ins() -> None:
    assert "tcpip" in host_groups("nvme-tcp") and "tcpip" not in host_groups("nvme-rdma")
    for transport in ("iscsi", "iser", "srp", "nvme-tcp", "nvme-rdma"):
        assert not {"provider", "virtio", "background"} & set(host_groups(transport))
        assert {"provider", "virtio"} <= set(nic_groups(transport))
    assert "tcpip" in nic_groups("iser")
    with pytest.raises(SanlabError, match="'fc' is not one of"):
        host_groups("fc")


def test_a_table_round_trips_and_sums_the_host_groups(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.csv", _cell_rows())
    table = load_paths(path)
    cell = table.find("nvme-tcp", "randread", 4096, 1)
    wanted = sum(100.0 + GROUPS.index(g) for g in host_groups("nvme-tcp"))
    assert table.per_io(cell, "initiator") == pytest.approx(wanted)
    assert table.per_io(cell, "target", ("provider",)) == pytest.approx(100.0 + GROUPS.index("provider"))
    assert table.frames_per_io(cell) == 6.5
    assert table.ci95(cell, "target") == pytest.approx(5.0 * len(host_groups("nvme-tcp")) ** 0.5)
    with pytest.raises(SanlabError, match="0 cells for nvme-tcp randread 4096 QD32"):
        table.find("nvme-tcp", "randread", 4096, 32)


def test_write_rows_replaces_only_the_cells_it_measured(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    write_rows(path, _cell_rows() + _cell_rows("nvme-rdma", "rxe"))
    write_rows(path, _cell_rows("nvme-rdma", "rxe", value=7.0))
    table = load_paths(path)
    assert len(table.cells()) == 2
    rdma = table.find("nvme-rdma", "randread", 4096, 1, "rxe")
    assert table.group(rdma, "initiator", "app").instructions_per_io == 7.0
    tcp = table.find("nvme-tcp", "randread", 4096, 1)
    assert table.group(tcp, "initiator", "app").instructions_per_io == 100.0


@pytest.mark.parametrize(
    ("column", "value", "expect"),
    [
        ("group", "gpu", "column 'group' is 'gpu'; give one of app"),
        ("instructions_per_io", "-3", "column 'instructions_per_io' is '-3'"),
        ("instructions_per_io", "nan", "column 'instructions_per_io' is 'nan'"),
        ("bs", "4k", "column 'bs' is '4k'"),
        ("provider", "rxe", "provider 'rxe' does not fit transport 'nvme-tcp'"),
        ("side", "both", "column 'side' is 'both'"),
        ("transport", "nvme-fc", "column 'transport' is 'nvme-fc'"),
    ],
)
def test_a_bad_cell_is_one_line_naming_row_and_column(
    tmp_path: Path, column: str, value: str, expect: str
) -> None:
    rows = _cell_rows()
    rows[3][column] = value
    with pytest.raises(SanlabError, match=f"t.csv: row 5: {expect}" if column != "provider" else expect):
        load_paths(_write(tmp_path / "t.csv", rows))


def test_a_duplicate_a_gap_or_a_missing_column_is_refused(tmp_path: Path) -> None:
    rows = _cell_rows()
    with pytest.raises(SanlabError, match="row 30: a second row for"):
        load_paths(_write(tmp_path / "t.csv", rows + [rows[0]]))
    with pytest.raises(SanlabError, match="lacks initiator app"):
        load_paths(_write(tmp_path / "t.csv", rows[1:]))
    (tmp_path / "c.csv").write_text("transport,stack\nnvme-tcp,nvmet\n")
    with pytest.raises(SanlabError, match="no column 'provider'"):
        load_paths(tmp_path / "c.csv")


def test_the_shipped_table_loads_and_every_cell_costs_the_host_something() -> None:
    if not paths.PATHS_CSV.exists():
        pytest.skip("no path table measured yet")
    table = load_paths()
    assert table.cells()
    for cell in table.cells():
        for side in SIDES:
            assert table.per_io(cell, side) > 1000, (
                cell,
                side,
            )  # no storage I/O costs under 1 k instructions


def test_samples_go_to_their_groups_by_module_then_longest_prefix() -> None:
    mapping = prof.Mapping.load()
    assert mapping.group("kworker/0:1", "[nvme_tcp]", "[k] nvme_tcp_io_work") == "transport"
    assert mapping.group("swapper", "[rdma_rxe]", "[k] rxe_responder") == "provider"
    assert mapping.group("fio", "[kernel.kallsyms]", "[k] blk_mq_submit_bio") == "block"
    assert mapping.group("fio", "[kernel.kallsyms]", "[k] rq_qos_done") == "block"  # not the scheduler's rq_
    assert mapping.group("fio", "[kernel.kallsyms]", "[k] page_frag_alloc_align") == "tcpip"  # not mm's page_
    assert mapping.group("swapper", "[kernel.kallsyms]", "[k] default_idle") == "halt"
    assert mapping.group("fio", "libc.so.6", "[.] memcpy") == "app"
    assert mapping.group("python3", "libpython3.11.so", "[.] _PyEval") == "background"
    assert mapping.group("perf", "[kernel.kallsyms]", "[k] memcpy_erms") == "perf"
    assert mapping.group("fio", "[kernel.kallsyms]", "[k] some_new_function") == "kernel_other"
    assert set(mapping.modules.values()) | {g for _, g in mapping.prefixes} <= set(GROUPS)


def test_two_runs_give_instructions_per_io_and_the_idle_share_is_taken_off() -> None:
    report = (
        "  10.00%|   400|fio|[kernel.kallsyms]|[k] blk_mq_submit_bio\n"
        " 5%|100|swapper|[kernel.kallsyms]|[k] default_idle\n# a comment line\n"
    )
    rows = prof.parse_report(report)
    assert rows == [
        ("fio", "[kernel.kallsyms]", "[k] blk_mq_submit_bio", 400),
        ("swapper", "[kernel.kallsyms]", "[k] default_idle", 100),
    ]
    rates = prof.idle_rates(Counter({"halt": 1000, "irq": 50}))
    assert rates == {"irq": 0.05}
    long = prof.corrected(Counter({"irq": 300, "halt": 2000}), rates)
    short = prof.corrected(Counter({"irq": 100, "halt": 1000}), rates)
    got = prof.per_io(long["irq"], short["irq"], 300, 100, ios=1000, worth=50_000)
    assert got.instructions == pytest.approx((200 - 50) * 50_000 / 1000)
    assert got.ci95 == pytest.approx(1.96 * 20 * 50)
    with pytest.raises(SanlabError, match="no halted samples"):
        prof.idle_rates(Counter({"irq": 3}))
    with pytest.raises(SanlabError, match="nothing to divide by"):
        prof.per_io(1.0, 0.0, 1, 0, ios=0, worth=1.0)


def test_the_shipped_table_has_every_cell_the_benchmark_measures_for_every_transport() -> None:
    """Issue #46: every transport, read and write, 4 KiB and 64 KiB, QD 1 and 32, on the
    default guest; each of the benchmark's seven targets (a transport over its stack and
    provider) has all eight cells, and the seven cover every transport sanlab runs."""
    import path_lengths

    from sanlab.models.core.paths import PathCell
    from sanlab.scenarios.registry import TRANSPORTS

    cells = set(load_paths().cells())
    wanted = {
        PathCell(transport, stack, provider, rw, bs, qd)
        for transport, stack, _, provider in path_lengths.TARGETS
        for rw, bs, qd in path_lengths.CELLS
    }
    assert sorted(wanted - cells, key=str) == []
    assert {t for t, *_ in path_lengths.TARGETS} == set(TRANSPORTS)
    assert len(wanted) == 56
