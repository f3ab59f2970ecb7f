"""Core designs: data with sources, and a profile naming an unknown one is refused with the known ones."""

from __future__ import annotations

import pytest
import yaml

from sanlab.models.cores import REFERENCE_CORE, load_cores
from sanlab.models.profile import clear_cache, load_profile, profile_path
from sanlab.scenarios.errors import ScenarioError


def test_every_core_has_a_factor_inside_its_range_and_a_source():
    cores = load_cores()
    assert cores[REFERENCE_CORE].factor == 1.0
    for name, core in cores.items():
        low, high = core.range
        assert low <= core.factor <= high, name
        assert len(core.source) > 20, name


def test_the_calibrated_benches_name_their_cpus_cores():
    zeta, starwind = load_profile("zeta-2016"), load_profile("starwind-2024")
    assert (zeta.initiator.core, zeta.target.core) == ("haswell", "broadwell")
    assert (starwind.initiator.core, starwind.target.core) == ("skylake", "sunny-cove")


def test_an_unknown_core_is_refused_naming_the_known_ones(tmp_path):
    data = yaml.safe_load(profile_path("zeta-2016").read_text())
    data["initiator"]["core"] = "skylak"
    data.pop("calibration")
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(data))
    clear_cache()
    with pytest.raises(ScenarioError, match="core 'skylak' is not a known core design.*golden-cove"):
        load_profile(str(path))
