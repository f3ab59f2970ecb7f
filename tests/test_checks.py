"""Published rows the fit never sees (models/data): provenance on every row, and the model's
projection of each within what the physics should give."""

from __future__ import annotations

import pytest
import yaml

from sanlab.models.calibration import checks
from sanlab.models.calibration.calibrate import SOLVER_FLOOR, load_raw
from sanlab.models.core.network import build
from sanlab.models.core.profile_files import load_profile
from sanlab.models.core.published import from_posts, read_rows
from sanlab.scenarios.errors import SanlabError


def test_every_row_says_where_it_comes_from_and_on_which_profile():
    tables = checks.check_tables()
    assert tables, "models/data holds no published check table"
    for path in tables:
        rows = checks.load_checks(path)
        assert rows, path
        for check in rows:
            assert check.row.point.profile and check.row.point.mtu, (path, check.row.label)
            assert check.tolerance > 0, (path, check.row.label)


COLUMNS = "profile,transport,fabric,link_gbps,mtu,rw,bs,numjobs,iodepth,iops,bw_mibps,"
HEADER = COLUMNS + "{extra}source,hardware,software\n"
ROW = "chelsio-t6-100g,iser,iwarp,100,9000,randread,512k,16,8,23365,11683,{extra}{source},a T6,Windows\n"


@pytest.mark.parametrize(
    ("extra_header", "extra_row", "source", "message"),
    [
        ("tolerance,", "0.05,", "", r"bad.csv: line 2: 'source' is empty"),
        ("tolerance,", ",", "a paper", r"bad.csv: line 2: 'tolerance' is empty"),
        ("tolerance,", "5%,", "a paper", r"line 2: 'tolerance' is '5%'; use a fraction such as 0.05"),
        ("cpu_pct,tolerance,", "12,0.05,", "a paper", r"bad.csv: line 2: 'cpu_tolerance' is empty"),
        ("tolerance,data_digest,", "0.05,maybe,", "a paper", r"line 2: column 'data_digest' is 'maybe'"),
    ],
    ids=["no-source", "no-tolerance", "tolerance-not-a-fraction", "cpu-without-its-tolerance", "digest-typo"],
)
def test_a_row_without_its_source_or_tolerance_is_refused_naming_file_line_and_field(
    tmp_path, extra_header, extra_row, source, message
):
    table = tmp_path / "bad.csv"
    table.write_text(HEADER.format(extra=extra_header) + ROW.format(extra=extra_row, source=source))
    with pytest.raises(SanlabError, match=message):
        checks.load_checks(table)


@pytest.fixture(scope="module")
def judged():
    found = checks.judge(seed=1)
    assert found
    return found


# Line-rate rows judge wire overhead and the NIC's ceiling, which carry to any
# machine: a projection more than this far off means the physics is wrong.  A CPU
# figure is published in whole per cents and the fit's own CPU cells miss by 19 %
# on average, so 15 % there.  A row allowed more is a known miss, and its note must
# say so and why.
LINE_RATE_TOLERANCE = checks.CARRIES
CPU_TOLERANCE = 0.15
# Kernel NVMe/TCP rows of the public linux-nvme posts that the model can express:
# issue #30's bar for them.
KERNEL_TOLERANCE = 0.25


def test_a_row_allowed_more_than_line_rate_physics_says_it_is_a_known_miss():
    loose = []
    for path in checks.check_tables():
        for number, (check, row) in enumerate(zip(checks.load_checks(path), read_rows(path), strict=True)):
            if check.tolerance > LINE_RATE_TOLERANCE or (check.cpu_tolerance or 0) > CPU_TOLERANCE:
                loose.append(path.stem)
                note = row.get("note", "").lower()
                kernel = check.tolerance <= KERNEL_TOLERANCE and "kernel row, held to 25 %" in note
                assert "known miss" in note or kernel, (path.name, number + 2)
    assert loose  # the NVIDIA and Marvell tables carry misses the README explains


@pytest.mark.slow  # seconds of fitting, projecting or waiting
def test_a_known_miss_is_one_the_model_does_not_admit_and_line_rate_rows_are_inside(judged):
    """A row within line-rate tolerance lies inside its projection's 95 % interval; a row
    allowed more (a known miss) lies outside it: no parameter value the tables allow
    explains it, so the note that calls it physics the model lacks is not hiding a
    parameter the fit merely left open."""
    notes = {
        (path.stem, number): row.get("note", "").lower()
        for path in checks.check_tables()
        for number, row in enumerate(read_rows(path))
    }
    seen: dict[str, int] = {}
    for j in judged:
        label = (j.table, j.cell.row.label, j.throughput_error, j.log_sigma)
        note = notes[(j.table, seen.setdefault(j.table, 0))]
        seen[j.table] += 1
        assert j.log_sigma >= SOLVER_FLOOR, label
        if "known miss, inside its interval" in note:
            assert j.band.inside, label  # the note says the parameters admit it
        elif j.check.tolerance > LINE_RATE_TOLERANCE and "known miss" in note:
            assert not j.band.inside, label
        else:
            assert j.band.inside, label


def test_every_published_row_is_projected_within_its_tolerance(judged):
    """Line-rate rows within 5 % (the physics that carries to any machine); a known miss, whose
    note says why, within its recorded size: it may shrink, never grow."""
    for j in judged:
        assert not j.misses, (j.table, j.cell.row.label, j.misses)


def test_a_data_digest_costs_the_throughput_published_for_it(judged):
    """NVIDIA's software NVMe/TCP reads lose 37-38 % of their throughput to the data digest
    (84 -> 53 and 98 -> 61 Gb/s over 8 queues): 0.45 and 0.40 ns more per byte on a queue.
    The model's digest must add a like time per byte to the core that runs a queue, at each
    block size.  The time is compared, not the throughputs' ratio: the model's rows without the
    digest stop at the link (a known miss, +92 to +124 %), where the published ones stop at
    their queues' cores, so that ratio says nothing of the digest."""
    nvidia = [j for j in judged if j.table == "nvidia-nvme-tcp-2023"]
    by_size: dict[int, dict[bool, checks.Judged]] = {}
    for j in nvidia:
        by_size.setdefault(j.cell.row.point.bs, {})[j.cell.row.point.data_digest] = j
    assert len(by_size) == 2
    for bs, pair in by_size.items():
        queues = pair[True].cell.row.point.numjobs
        per_byte = {digest: queues * 2**20 / (j.cell.row.bw_mibps * 1e6) for digest, j in pair.items()}
        published = per_byte[True] - per_byte[False]  # microseconds a byte: the queue's core's
        added = {}
        for digest, j in pair.items():
            net = build(j.cell.row.point, load_profile(j.cell.row.point.profile))
            (job,) = [s for s in net.stations if s.name == "initiator-cpu"]
            added[digest] = job.demand_us / (bs // net.split)
        projected = added[True] - added[False]
        assert pair[True].model_mibps < pair[False].model_mibps
        assert abs(projected / published - 1) <= 0.15, (bs, published, projected)


KERNEL_TABLE = "linux-nvme-tcp-2019-2020"
KERNEL_STUDY = "intel-nvme-tcp-2020"


def test_every_kernel_nvme_tcp_row_is_fitted_checked_or_refused_with_its_reason(calibration_dir):
    """Each row of the shared kernel NVMe/TCP table is fitted (the intel-nvme-tcp-2020 study's
    calibration.select), projected without being fitted (models/data/KERNEL_TABLE.csv) or
    named as one the model cannot express, with why (KERNEL_TABLE.refused.yaml): none
    silently dropped, none twice."""
    shared = read_rows(calibration_dir / f"{KERNEL_TABLE}.csv")
    select = load_raw(KERNEL_STUDY)["calibration"]["select"]
    checked = read_rows(checks.CHECKS_DIR / f"{KERNEL_TABLE}.csv")
    refused = yaml.safe_load((checks.CHECKS_DIR / f"{KERNEL_TABLE}.refused.yaml").read_text())
    assert all(entry["reason"].strip() and entry["rows"].strip() for entry in refused)

    def is_checked(row):
        return any(
            row["message_id"] in c["source"]
            and (row["numjobs"], row["iodepth"], row["iops"]) == (c["numjobs"], c["iodepth"], c["iops"])
            for c in checked
        )

    def refusals(row):
        return [
            e
            for e in refused
            if e["message_id"] == row["message_id"]
            and e["note_contains"] in row["note"]
            and ("numjobs" not in e or int(row["numjobs"]) in e["numjobs"])
        ]

    def is_fitted(row):
        return select["note_contains"] in row["note"] and select["initiator_contains"] in row["initiator"]

    for number, row in enumerate(shared, start=2):
        assert is_fitted(row) + is_checked(row) + len(refusals(row)) == 1, (number, row["note"][:60])
    assert sum(is_checked(r) for r in shared) == len(checked) == 3
    assert sum(is_fitted(r) for r in shared) == len(from_posts(shared, select)) == 4


def test_refused_rows_are_listed_with_their_reason_in_one_line_each():
    """What `sanlab calibrate` prints under the check tables: table, which rows, why."""
    found = checks.refusals()
    assert {r.table for r in found} == {KERNEL_TABLE}
    assert len(found) == 5 and all(r.reason and "\n" not in r.reason for r in found)
    assert any(r.rows == "2019-09-24 baseline, 6-8 threads" for r in found)


POST_HEADER = (
    "post,message_id,transport,target,initiator,nic,cpu,rw,bs,iodepth,numjobs,iops,lat_mean_us,note\n"
)
POST_ROWS = (
    'p,m1,nvme-tcp,nvmet,"host, io_uring hipri",n,c,randread,4k,32,1,247000,113.95,with patches; batch 8\n'
    'p,m1,nvme-tcp,nvmet,"host, io_uring hipri",n,c,randread,4k,32,1,234000,122.98,baseline; batch 8\n'
    "p,m2,nvme-tcp,nvmet,host fio,n,c,randread,4k,32,2,160000,376.55,patches on target kernel\n"
)


def test_a_posts_table_is_read_through_the_profiles_select(tmp_path):
    """A post's row becomes a 4 KiB random read on the link the profile assumes, polled where
    fio used hipri; only the rows the select names are taken."""
    from sanlab.models.core.published import load_table

    table = tmp_path / "posts.csv"
    table.write_text(POST_HEADER + POST_ROWS)
    select = {"note_contains": "patche", "initiator_contains": "hipri", "fabric": "eth", "link_gbps": 100}
    (row,) = load_table(table, "intel-nvme-tcp-2020", select)
    assert row.point.poll and (row.point.bs, row.point.rw, row.point.iodepth) == (4096, "randread", 32)
    assert row.iops == 247000 and row.lat_mean_us == pytest.approx(113.95)
    assert row.point.fabric == "eth" and row.point.link_gbps == 100
    with pytest.raises(SanlabError, match="needs the profile's calibration.select"):
        load_table(table, "intel-nvme-tcp-2020")
    with pytest.raises(SanlabError, match="calibration.select: speed unknown"):
        load_table(table, "intel-nvme-tcp-2020", select | {"speed": 1})


def test_the_vendor_rows_are_scored_as_a_study_no_fit_sees(judged):
    """Leave-one-study-out for the vendors' letters: no fit takes them, so the committed fit's
    projection of them is that split; calibrate prints it beside each table's own."""
    groups = {g.name: g for g in checks.scored(judged)}
    vendors = next(g for name, g in groups.items() if name.startswith("vendor rows"))
    theirs = [j for j in judged if j.table != checks.KERNEL_POSTS]
    assert (
        vendors.rows
        == len(theirs)
        == sum(g.rows for n, g in groups.items() if n in {j.table for j in theirs})
    )
    assert vendors.mape == pytest.approx(sum(abs(j.throughput_error) for j in theirs) / len(theirs))
    assert vendors.inside == sum(j.band.inside for j in theirs)
    assert checks.KERNEL_POSTS in groups  # the kernel posts' unfitted rows are scored on their own
