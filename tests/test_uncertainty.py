"""Projections carry what the calibration leaves open: an IOPS range from the fit's posterior."""

from __future__ import annotations

import copy

from sanlab.models.network import Point
from sanlab.models.profile import load_profile
from sanlab.models.project import project_point
from sanlab.models.uncertainty import load_posterior, log_iops_sigma, touch

ONE_JOB = Point("iser", "roce", 100, "randread", 4096, 32, 1)


def test_every_fitted_parameter_has_a_posterior_variance():
    posterior = load_posterior()
    assert posterior is not None
    assert set(posterior.names) == set(posterior.values)
    assert posterior.covariance.shape == (len(posterior.names),) * 2
    assert all(posterior.covariance[i, i] > 0 for i in range(len(posterior.names)))


def test_a_borrowed_part_is_touched_where_its_fitted_value_is_carried():
    posterior = load_posterior()
    assert posterior is not None
    name = "starwind-2024.nics.connectx-5.host_kcycles_per_packet"
    for profile in ("modern-100g", "modern-400g"):  # from: and like: borrow the ConnectX-5's figure
        data = copy.deepcopy(load_profile(profile).model_dump(mode="json"))
        assert touch(data, name, posterior.values[name], 2.0), profile
    app = "stacks.application.kcycles_per_io"
    data = load_profile("zeta-2016").model_dump(mode="json")
    assert touch(data, app, posterior.values[app], 2.0)
    assert not touch(data, name, posterior.values[name], 2.0)  # Zeta has no ConnectX-5


def test_a_link_bound_point_is_known_as_well_as_the_link():
    record = project_point(Point("nvme-rdma", "roce", 100, "randread", 65536, 32, 8))
    assert record.bottleneck == "link-in" and record.iops_range95 is not None
    low, high = record.iops_range95
    assert low <= record.iops <= high <= (record.bound or 0)
    assert high / low < 1.05


def test_a_point_bound_by_an_unpinned_cost_carries_a_wider_range_than_one_bound_by_a_pinned_cost():
    """NVMe/RDMA's initiator cost spans 0.9-10.5 kcycles after the fit, iSER's 1.9-9.7."""
    iser = log_iops_sigma(ONE_JOB, load_profile(ONE_JOB.profile))
    nvme = Point("nvme-rdma", "roce", 100, "randread", 4096, 32, 1)
    rdma = log_iops_sigma(nvme, load_profile(nvme.profile))
    assert iser is not None and rdma is not None
    assert rdma > 2 * iser > 0
    record = project_point(nvme)
    assert record.iops_range95 is not None
    low, high = record.iops_range95
    assert low < record.iops < high
