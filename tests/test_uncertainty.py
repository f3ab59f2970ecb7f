"""Projections carry what the calibration leaves open: an IOPS range from the fit's posterior,
the solver's floor and the model's own error."""

from __future__ import annotations

import copy
import math

import pytest

from sanlab.models.network import Point
from sanlab.models.profile import load_profile
from sanlab.models.project import project_point
from sanlab.models.uncertainty import Z95, load_posterior, log_iops_sigma, parameter_sigma, total_sigma, touch

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


def test_a_link_bound_point_carries_only_the_floor_and_the_models_own_error():
    """No fitted parameter moves a point the wire bounds; the model's measured error still does
    (the wire caps the top)."""
    point = Point("nvme-rdma", "roce", 100, "randread", 65536, 32, 8)
    posterior = load_posterior()
    assert posterior is not None
    assert parameter_sigma(point, load_profile(point.profile), posterior) < 1e-3
    record = project_point(point)
    assert record.bottleneck == "link-in" and record.iops_range95 is not None
    low, high = record.iops_range95
    assert low < record.iops == high <= (record.bound or 0)
    expected = math.exp(Z95 * total_sigma(0.0, posterior.model_sigma))
    assert record.iops / low == pytest.approx(expected, rel=1e-3)


def test_a_point_bound_by_an_unpinned_cost_carries_a_wider_range_than_one_bound_by_a_pinned_cost():
    """NVMe/RDMA's initiator cost spans 0.9-10.5 kcycles after the fit, iSER's 1.9-9.7."""
    posterior = load_posterior()
    assert posterior is not None
    iser = parameter_sigma(ONE_JOB, load_profile(ONE_JOB.profile), posterior)
    nvme = Point("nvme-rdma", "roce", 100, "randread", 4096, 32, 1)
    rdma = parameter_sigma(nvme, load_profile(nvme.profile), posterior)
    assert rdma > 2 * iser > 0
    total = log_iops_sigma(nvme, load_profile(nvme.profile))
    assert total == pytest.approx(total_sigma(rdma, posterior.model_sigma))
    record = project_point(nvme)
    assert record.iops_range95 is not None
    low, high = record.iops_range95
    assert low < record.iops < high
