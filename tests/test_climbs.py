"""A dry run climbs back up a layer less than half as often as at bb138cb (issue #49).

benchmarks/climbs.py defines the count: over the path of sanlab modules a run's calls visit,
a climb is a step into a module of a higher layer than the one before it.  At bb138cb the
dry run of scenarios/smoke.yaml made 51 such steps at 15 distinct places; a session that
resolves the run once (the plan holds each target's faults, each link's ends and whether
its hosts are real machines) and then makes coarse calls into the recipes made 5 steps at 5
places when this bound was last tightened.  The test traces the same dry run in this process
and keeps both counts there.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
AT_BB138CB = (15, 51)  # (distinct climbs, climbing steps): benchmarks/climbs.py --at bb138cb
REACHED = (5, 5)  # the same at bda1358; lower it when a climb goes, never raise it


def _climbs_module():
    spec = importlib.util.spec_from_file_location("climbs", ROOT / "benchmarks" / "climbs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["climbs"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # imports every module of sanlab and traces a whole dry run
def test_a_dry_run_climbs_back_up_less_than_half_as_often_as_before():
    climbs = _climbs_module()
    path = climbs.visits(climbs.trace(str(ROOT / "scenarios" / "smoke.yaml")))
    assert len({module for module, _ in path}) > 20, "the trace did not follow the run"
    up = climbs.climbs(path)
    assert REACHED[0] * 2 < AT_BB138CB[0] and REACHED[1] * 2 < AT_BB138CB[1]
    listed = "\n".join(f"{a} -> {b}" for a, b in up)
    assert len(set(up)) <= REACHED[0] and len(up) <= REACHED[1], listed


def test_the_metric_counts_a_step_into_a_higher_layer_and_nothing_else():
    climbs = _climbs_module()
    path = [
        ("sanlab.targets.sessions.matrix", "run"),
        ("sanlab.targets.points", "matrix"),
        ("sanlab.scenarios.plan", "placed"),
        ("sanlab.scenarios.plan", "placed"),
        ("sanlab.targets.stacks", "export_only"),  # a climb: scenarios -> targets
        ("sanlab.emulator.qemu", "run"),
        ("sanlab.targets.sessions.matrix", "run"),  # a climb: emulator -> the sessions
        ("sanlab.commands_run", "_say"),  # a climb: the sessions -> the command line
    ]
    assert [(a[0], b[0]) for a, b in climbs.climbs(climbs.visits(path))] == [
        ("sanlab.scenarios.plan", "sanlab.targets.stacks"),
        ("sanlab.emulator.qemu", "sanlab.targets.sessions.matrix"),
        ("sanlab.targets.sessions.matrix", "sanlab.commands_run"),
    ]
