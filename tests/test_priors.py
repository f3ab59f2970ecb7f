"""Priors: every fitted parameter has a sourced one; the fit leans on them only where the data are silent."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from sanlab.models.calibration.calibrate import fit, load_raw, solve, table_for
from sanlab.models.calibration.calibrate_studies import joint_task, load_studies, stacks_raw, study_names
from sanlab.models.core.priors import PRIOR_WEIGHT, RANGE_SIGMAS, Prior, load_priors
from sanlab.models.core.uncertainty import load_posterior, unfitted_priors
from sanlab.scenarios.errors import SanlabError


def test_every_parameter_a_shipped_profile_fits_has_a_sourced_prior():
    priors = load_priors()
    fitted = {name for profile in study_names() for name in load_raw(profile)["calibration"]["fit"]}
    fitted |= {f"stacks.{name}" for name in stacks_raw()["calibration"]["fit"]}
    assert fitted and fitted <= set(priors), sorted(fitted - set(priors))
    # A prior no profile fits is not idle: the range tries it at both ends of its range, since
    # the data leave all of it open (models/core/uncertainty.py).  Every such prior must be one.
    posterior = load_posterior()
    assert posterior is not None
    candidates = set(unfitted_priors(posterior))
    unfitted = {name for name in set(priors) - fitted if not any(f.endswith(f".{name}") for f in fitted)}
    assert unfitted <= candidates, (
        f"priors neither fitted nor a range candidate: {sorted(unfitted - candidates)}"
    )
    for name, prior in priors.items():
        assert prior.unit and len(prior.source) > 20, name


@pytest.mark.parametrize(
    "entry, complaint",
    [
        (
            {"value": 5, "range": [1, 20], "unit": "kcycles", "source": "a reasoned guess", "vaule": 4},
            "vaule",
        ),
        ({"value": 50, "range": [1, 20], "unit": "kcycles", "source": "a reasoned guess"}, "outside"),
        ({"value": 5, "range": [20, 1], "unit": "kcycles", "source": "a reasoned guess"}, "low < high"),
        ({"value": 5, "range": [1, 20], "unit": "kcycles"}, "source"),
    ],
)
def test_a_bad_prior_is_refused_naming_the_parameter(tmp_path: Path, entry, complaint):
    path = tmp_path / "priors.yaml"
    path.write_text(yaml.safe_dump({"initiator.app_kcycles_per_io": entry}))
    with pytest.raises(SanlabError) as err:
        load_priors(path)
    assert "initiator.app_kcycles_per_io" in str(err.value) and complaint in str(err.value)


def test_a_profile_fitting_a_parameter_without_a_prior_is_refused():
    raw = load_raw("zeta-2016")
    raw["calibration"]["fit"] = [*raw["calibration"]["fit"], "target.wakeup_us"]
    with pytest.raises(SanlabError, match="target.wakeup_us.*no prior"):
        fit(raw, table_for(raw, None))


def test_the_prior_term_is_zero_at_the_value_and_one_weight_per_sigma():
    prior = Prior(value=4.0, range=(1.0, 16.0), unit="kcycles", source="a test prior, reasoned")
    assert prior.sigma == pytest.approx(math.log(16) / RANGE_SIGMAS)
    assert prior.residual(math.log(4.0)) == 0
    assert prior.residual(math.log(4.0) + prior.sigma) == pytest.approx(PRIOR_WEIGHT)


@pytest.mark.slow  # seconds of fitting, projecting or waiting
def test_a_parameter_no_cell_sees_stays_at_its_prior_and_is_flagged():
    """Without Zeta's 56 Gb/s cells no cell is SRP: SCST's SRP cost is its prior's (or iSER's, by
    `like`); SRP's initiator is its path × the RDMA family's CPI, which other cells pin."""
    studies = load_studies(None, None)
    task = replace(joint_task(studies, lambda r: r.point.link_gbps != 56), like={})
    result = solve(task)
    priors = load_priors()
    for name in ("stacks.targets.scst/srp.kcycles_per_io",):
        assert result.unpinned[name] == "no cell moves it"
        assert result.params[name] == pytest.approx(priors[name].value, rel=1e-3)
        prior = priors[name]
        centre, spread = math.log(prior.value), 1.96 * prior.sigma  # the prior's own 95 %, within its range
        expected = (
            max(prior.range[0], math.exp(centre - spread)),
            min(prior.range[1], math.exp(centre + spread)),
        )
        assert result.intervals[name] == pytest.approx(expected, rel=0.05)


@pytest.mark.slow  # seconds of fitting, projecting or waiting
def test_a_parameter_the_cells_pin_has_an_interval_much_narrower_than_its_prior():
    result = solve(joint_task(load_studies(None, None)))
    name = "stacks.paths.cpi.kernel-tcp"  # both benches' iSCSI and NVMe/TCP cells see it
    low, high = result.intervals[name]
    assert name not in result.unpinned
    assert math.log(high / low) < 0.25 * 2 * 1.96 * load_priors()[name].sigma
