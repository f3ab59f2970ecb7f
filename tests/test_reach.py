"""How far the published tables reach, and the note a projection past them carries (models/core/reach.py)."""

from __future__ import annotations

import pytest

from sanlab.models.calibration import checks
from sanlab.models.calibration.calibrate import evaluate, load_raw, table_for
from sanlab.models.calibration.calibrate_studies import check_write, study_names
from sanlab.models.core import reach
from sanlab.models.core.network import Point
from sanlab.models.core.profile_files import load_profile
from sanlab.models.core.project import project_point
from sanlab.models.core.published import Measured
from sanlab.models.core.report import Cell, text_table
from sanlab.scenarios.errors import SanlabError

EDGE = {"nvme-tcp": reach.Reach(gbytes_per_s=7.0, job_gbytes_per_s=2.0)}


@pytest.mark.slow  # seconds of fitting, projecting or waiting
def test_the_committed_reach_is_what_the_published_rows_reach(calibration_dir):
    """stacks.fit.yaml's reach is measured from the fitted rows (with the committed fit's projections
    of them) and the rows the model must meet, so it moves when either does and cannot be edited by
    hand unseen."""
    rows: list[tuple[Measured, float | None]] = []
    for name in study_names():
        table = table_for(load_raw(name), calibration_dir)
        rows += [(c.row, c.iops) for c in evaluate(load_profile(name), table, seed=1)]
    rows += [(row, None) for row in checks.confirming_rows()]
    measured = {name: r.as_dict() for name, r in reach.measure(rows).items()}
    committed = {name: r.as_dict() for name, r in reach.load().items()}
    assert measured == committed
    assert set(committed) == {"iscsi", "iser", "srp", "nvme-tcp", "nvme-rdma"}


def test_beyond_names_each_edge_it_crossed_and_nothing_inside():
    assert reach.beyond("nvme-tcp", 7.0, 2.0, EDGE) is None
    assert reach.beyond("nvme-tcp", 7.5, 2.1, EDGE) is None  # within the headroom: the same regime
    total = reach.beyond("nvme-tcp", 20.0, 1.0, EDGE)
    assert total is not None and "20.0 GB/s in all" in total and "a job" not in total
    job = reach.beyond("nvme-tcp", 3.0, 3.0, EDGE)
    assert job is not None and "3.00 GB/s a job" in job and "in all" not in job
    both = reach.beyond("nvme-tcp", 40.0, 9.0, EDGE)
    assert both is not None and "40.0 GB/s in all" in both and "9.00 GB/s a job" in both
    assert "no published table measured srp" in (reach.beyond("srp", 1.0, 1.0, EDGE) or "")
    assert reach.beyond("nvme-tcp", 40.0, 9.0, {}) is None  # a fit that recorded no reach claims nothing


def test_a_job_rate_counts_every_initiator_of_an_incast():
    assert reach.job_gbytes_per_s(8000, numjobs=4, initiators=2) == pytest.approx(8000 * 2**20 / 8 / 1e9)


def test_a_projection_past_the_tables_says_so_and_one_inside_them_does_not():
    """NVIDIA's 200 Gb/s NVMe/TCP point (twice the published throughput, a narrow interval) is
    flagged in the record and the printed table; a QD 1 point on the same link is not (data
    rates, not link speeds, are the edge), nor is a StarWind-like one."""
    past = Point("nvme-tcp", "eth", 200, "randread", 512 * 1024, 128, 8, profile="nvidia-cx7-2023")
    qd1 = Point("nvme-tcp", "eth", 200, "randread", 4096, 1, 1, profile="nvidia-cx7-2023")
    inside = Point("nvme-tcp", "eth", 100, "randread", 4096, 1, 1, profile="starwind-2024")
    flagged = project_point(past, parameter_range=False)
    assert flagged.note and "GB/s in all" in flagged.note and "GB/s a job" in flagged.note
    assert project_point(qd1, parameter_range=False).note is None
    assert project_point(inside, parameter_range=False).note is None
    assert "note, nvidia: extrapolated" in text_table([Cell("nvidia", flagged, None)], "t")


@pytest.mark.slow  # seconds of fitting, projecting or waiting
def test_rows_the_model_meets_extend_the_reach_and_a_known_miss_does_not():
    """Mellanox's NVMe/RDMA and Chelsio's iSER at about 11 GB/s, met within line-rate tolerance,
    carry the reach past the fitted tables' 6-7 GB/s; NVIDIA's NVMe/TCP rows, a known miss,
    confirm nothing and lie past it."""
    committed = reach.load()
    assert committed["nvme-rdma"].gbytes_per_s > 11 and committed["iser"].gbytes_per_s > 11
    assert committed["nvme-tcp"].gbytes_per_s < 8
    past = {j.table for j in checks.judge(seed=1) if j.extrapolated}
    assert past == {"nvidia-nvme-tcp-2023"}


def test_a_fit_written_without_its_cross_validation_is_refused():
    """stacks.fit.yaml records the cross-validation the READMEs quote; writing without it erased it."""
    with pytest.raises(SanlabError, match="--no-cross-validate"):
        check_write(None, cross_validate=False)
