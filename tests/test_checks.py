"""Published rows the fit never sees (models/data): provenance on every row, and the model's
projection of each within what the physics should give."""

from __future__ import annotations

import pytest

from sanlab.models import checks
from sanlab.scenarios.errors import SanlabError

# Line-rate rows judge wire overhead and the NIC's ceiling, which carry to any
# machine: a projection more than this far off means the physics is wrong.
LINE_RATE_TOLERANCE = 0.05


def test_every_row_says_where_it_comes_from_and_on_which_profile():
    tables = checks.check_tables()
    assert tables, "models/data holds no published check table"
    for path in tables:
        rows = checks.load_checks(path)
        assert rows, path
        for row in rows:
            assert row.point.profile and row.point.mtu, (path, row.label)


def test_a_row_without_its_source_is_refused_naming_file_line_and_field(tmp_path):
    table = tmp_path / "bad.csv"
    table.write_text(
        "profile,transport,fabric,link_gbps,mtu,rw,bs,numjobs,iodepth,iops,bw_mibps,source,hardware,software\n"
        "chelsio-t6-100g,iser,iwarp,100,9000,randread,512k,16,8,23365,11683,,a T6,Windows\n"
    )
    with pytest.raises(SanlabError, match=r"bad.csv: line 2: 'source' is empty"):
        checks.load_checks(table)


def test_published_line_rate_is_projected_within_five_percent():
    judged = checks.judge(seed=1)
    assert judged
    for j in judged:
        assert abs(j.throughput_error) <= LINE_RATE_TOLERANCE, (j.table, j.cell.row.label, j.throughput_error)
