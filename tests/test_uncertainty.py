"""Projections carry what the calibration leaves open: an IOPS range from the fit's posterior,
the solver's floor and the model's own error; a range no limit could bind inside of; and a
regime, named, with whether any fitted row shares it (issue #46 item 4)."""

from __future__ import annotations

import copy
import math
from dataclasses import replace

import pytest

from sanlab.models.core.network import Point
from sanlab.models.core.priors import load_priors
from sanlab.models.core.profile_files import load_profile
from sanlab.models.core.project import project_point
from sanlab.models.core.regimes import KINDS, fitted_regimes, key_of, kind_of
from sanlab.models.core.report import Cell, text_table
from sanlab.models.core.uncertainty import (
    Z95,
    candidate_shifts,
    load_posterior,
    log_iops_sigma,
    own_error,
    parameter_sigma,
    point_spread,
    total_sigma,
    touch,
    unfitted_priors,
    widths,
)

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
    assert low < record.iops <= high <= (record.bound or 0)
    expected = math.exp(Z95 * total_sigma(0.0, own_error(posterior, record.regime_fitted)))
    assert record.iops / low >= expected * (1 - 1e-3)  # more only where a limit lies inside


def test_a_point_bound_by_an_unpinned_cost_carries_a_wider_range_than_one_bound_by_a_pinned_cost():
    """NVMe/RDMA's initiator cost spans 0.9-10.5 kcycles after the fit, iSER's 1.9-9.7."""
    posterior = load_posterior()
    assert posterior is not None
    iser = parameter_sigma(ONE_JOB, load_profile(ONE_JOB.profile), posterior)
    nvme = Point("nvme-rdma", "roce", 100, "randread", 4096, 32, 1)
    rdma = parameter_sigma(nvme, load_profile(nvme.profile), posterior)
    assert rdma > 1.5 * iser > 0
    total = log_iops_sigma(nvme, load_profile(nvme.profile))
    assert total == pytest.approx(total_sigma(rdma, posterior.model_sigma))
    record = project_point(nvme)
    assert record.iops_range95 is not None
    low, high = record.iops_range95
    assert low < record.iops < high


# NVMe/RDMA at 512 B, 56 jobs on 56 cores a host: the example of a range clipped at the wire.
SMALL_ON_MANY = Point("nvme-rdma", "roce", 100, "randread", 512, 32, 56, backend="null", cores=56)


@pytest.mark.parametrize("point", [SMALL_ON_MANY, replace(SMALL_ON_MANY, cores=None), ONE_JOB])
def test_no_limit_the_data_allow_could_bind_below_the_range(point):
    """Whatever binds the point, each kind of limit (the wire, the slot, the NIC's messages, the
    cores, the drive) whose cap the fitted parameters allow to fall inside the range is inside
    it: the range's low end is at or below every limit's 95 % low end."""
    posterior = load_posterior()
    assert posterior is not None
    profile = load_profile(point.profile)
    record = project_point(point)
    assert record.iops_range95 is not None and record.iops is not None
    error = own_error(posterior, record.regime_fitted)
    spread = point_spread(point, profile, posterior, math.log(record.iops))
    assert spread.limits  # the limits are read, not assumed
    for headroom, sigma in spread.limits:
        limit_low = record.iops * math.exp(headroom - Z95 * math.hypot(sigma, error))
        assert record.iops_range95[0] <= limit_low * (1 + 1e-3), (headroom, sigma)


def test_every_record_names_its_regime_and_whether_a_fitted_row_shares_it():
    """The regime is the binding desk's kind; 'fitted' is whether the committed fit recorded a
    row of that regime (stacks.fit.yaml's ``regimes``), read, not assumed."""
    fitted = fitted_regimes()
    assert fitted, "stacks.fit.yaml records no regimes: run sanlab calibrate --write"
    assert all(key.split()[0] in KINDS for key in fitted)
    for point in (SMALL_ON_MANY, ONE_JOB, Point("nvme-rdma", "roce", 100, "randread", 65536, 32, 8)):
        record = project_point(point)
        assert record.regime == kind_of(record.bottleneck) and record.regime in KINDS
        assert record.regime_fitted == (key_of(record.bottleneck, point.transport, point.rw) in fitted)


def test_where_no_fitted_row_shares_the_regime_the_range_is_wider():
    """The same point, read as unpinned, carries the error cross-validation showed on unpinned
    cells and the physics candidates' spread (at QD 1: interrupt moderation, a core woken from
    C1E): never narrower, and wider below."""
    posterior = load_posterior()
    assert posterior is not None and posterior.unpinned_sigma >= 0
    point = replace(ONE_JOB, iodepth=1)
    profile = load_profile(point.profile)
    iops = project_point(point).iops or 0.0
    pinned, free = widths(point, profile, iops, True), widths(point, profile, iops, False)
    assert pinned is not None and free is not None
    assert free.low > pinned.low and free.high >= pinned.high
    assert own_error(posterior, False) == pytest.approx(
        math.hypot(posterior.model_sigma, posterior.unpinned_sigma)
    )


def test_interrupt_moderation_and_wakeups_are_candidates_at_qd1_and_matter_less_at_the_wire():
    """At QD 1 an interrupt's coalescing delay and a core's wake-up are in every I/O's wait; a
    point the wire bounds feels them (and any prior no fit takes) less."""
    qd1 = replace(ONE_JOB, iodepth=1)
    low, high = candidate_shifts(qd1, load_profile(qd1.profile))
    assert low > 0.1 and high >= 0.0
    wire = Point("nvme-rdma", "roce", 100, "randread", 65536, 32, 8)
    assert candidate_shifts(wire, load_profile(wire.profile))[0] < low


def test_a_prior_no_fit_takes_is_a_candidate_over_its_whole_range():
    """The priors the committed fit does not take are read from models/priors.yaml, never listed
    by hand: each is a fitted parameter's complement."""
    posterior = load_posterior()
    assert posterior is not None
    free = unfitted_priors(posterior)
    for name in load_priors():
        taken = any(n == name or n.endswith(f".{name}") for n in posterior.names)
        assert (name in free) is not taken, name
    assert all(low < high for low, high in free.values())


def test_the_table_prints_the_regime_and_marks_one_no_fitted_row_shares():
    """Narrow: a '?' after the bottleneck where no fitted row shares the regime; wide: the regime."""
    record = project_point(SMALL_ON_MANY)
    unfitted = record.model_copy(update={"regime_fitted": False})
    fitted = record.model_copy(update={"regime_fitted": True})
    narrow = text_table([Cell("a", unfitted, None), Cell("b", fitted, None)], "t").splitlines()
    rows = {line.split()[0]: line for line in narrow if line[:2] in ("a ", "b ")}
    assert f"{record.bottleneck:<14} ?" in rows["a"] and "?" not in rows["b"]
    assert max(len(line) for line in narrow) <= 120
    wide = text_table([Cell("a", unfitted, None)], "t", wide=True)
    assert "regime" in wide and f"{record.regime}?" in wide
