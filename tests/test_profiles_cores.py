"""Core designs: data with sources, and a profile naming an unknown one is refused with the known ones."""

from __future__ import annotations

import pytest
import yaml

from sanlab.models.core.cores import REFERENCE_CORE, load_cores
from sanlab.models.core.profile_files import clear_cache, load_profile, profile_path
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


def test_core_is_a_what_if_like_cores(tmp_path):
    """--core golden-cove: the same machine on Sapphire Rapids cores; a CPU-bound point gains its factor."""
    from dataclasses import replace

    from sanlab.models.core import mva
    from sanlab.models.core.cores import core_factor
    from sanlab.models.core.network import Point, build

    point = Point("iscsi", "eth", 100, "randread", 4096, 1, 1)
    newer = replace(point, core="golden-cove")
    cpu = {
        p.core: next(s for s in build(p).stations if s.name == "initiator-cpu").demand_us
        for p in (point, newer)
    }
    assert cpu[None] / cpu["golden-cove"] == pytest.approx(core_factor("golden-cove"))
    assert mva.solve(build(newer)).iops > mva.solve(build(point)).iops


@pytest.mark.subprocess  # starts sanlab, a tool or a helper as a process
def test_an_unknown_core_in_a_scenario_or_a_sweep_is_refused_before_projecting(tmp_path):
    import subprocess
    import sys

    from sanlab.models.sweeps.sweep import _value_problem

    path = tmp_path / "c.yaml"
    path.write_text(
        "projections: [{transport: iscsi, fabric: eth, core: zen9}]\n"
        "workloads: [{rw: randread, bs: 4k, iodepth: 1, numjobs: 1}]\n"
    )
    for command in ("validate", "model"):
        run = subprocess.run(
            [sys.executable, "-m", "sanlab", command, str(path)], capture_output=True, text=True, timeout=120
        )
        assert run.returncode == 1, command
        assert run.stderr.strip().splitlines() == [
            f"{path}: projections[0].core: 'zen9' is not a core design (use broadwell, golden-cove, haswell, "
            "ivy-bridge, skylake, sunny-cove, zen2, zen3, zen4)"
        ], command
    assert "is not a core design" in (_value_problem("core", "zen9") or "")
    assert _value_problem("core", "zen4") is None
