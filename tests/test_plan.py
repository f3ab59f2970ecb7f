"""The scenario resolved once: names, link kinds and placements that every layer reads.

Each layer used to work default names and a target's link out again from
the raw file.  These tests hold the plan to what the file says, show that
it is computed once per scenario, and fail if a layer goes back to
deriving it (the topology helpers are called only by the plan).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from sanlab.scenarios.loader import load_scenario, parse_scenario
from sanlab.scenarios.plan import default_target_name
from sanlab.scenarios.schema import Scenario
from support import SCENARIOS

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("emulator", "targets", "models", "dissectors", "cli", "docs", "scenarios")
# What only the plan may call: everything else reads scenario.plan.
DERIVING = {"link_name", "target_link", "initiators_of", "is_switched", "ports", "segments"}
HOME = {ROOT / "scenarios" / "topology.py", ROOT / "scenarios" / "plan.py"}


def test_default_names_are_given_once():
    data = {
        "hosts": [{"name": "t", "role": "target"}, {"name": "i", "role": "initiator"}],
        "links": [{"endpoints": ["t", "i"]}],
        "targets": [{"host": "t", "stack": "lio", "transport": "iscsi"}],
        "workloads": [{"rw": ["randread"], "bs": [4096], "iodepth": [1]}],
    }
    plan = parse_scenario(data, "x.yaml").plan
    assert plan.link_names == ["link0"]
    assert (
        plan.target_names == ["lio-iscsi-0"] == [default_target_name(t, 0) for t in [plan.targets[0].target]]
    )
    placed = plan.targets[0]
    assert placed.link is plan.links[0] and placed.paths == ("link0",)
    assert placed.initiators == (("i", "link0"),) and not placed.shared
    assert plan.links[0].kind == "cable" and plan.links[0].rdma_driver is None


def test_a_switched_target_is_placed_with_every_initiator_on_its_segment():
    plan = load_scenario(SCENARIOS / "incast.yaml").plan
    kinds = {lk.name: lk.kind for lk in plan.links}
    assert set(kinds.values()) == {"port"}
    for placed in plan.targets:
        assert placed.link is not None and placed.link.kind == "port"
        assert [host for host, _ in placed.initiators] == ["i1", "i2"] and placed.shared
        assert all(via in kinds for _, via in placed.initiators)
    assert {p.host for p in plan.ports} == {"i1", "i2", "target"}


def test_a_multipath_target_lists_its_paths_and_serves_on_the_first():
    plan = load_scenario(SCENARIOS / "multipath.yaml").plan
    placed = next(t for t in plan.targets if len(t.paths) > 1)
    assert placed.link is not None and placed.link.name == placed.paths[0]
    assert placed.paths == tuple(placed.target.paths or ())


def test_the_plan_is_worked_out_once_and_afresh_for_a_changed_copy():
    scenario = load_scenario(SCENARIOS / "smoke.yaml")
    assert scenario.plan is scenario.plan
    renamed = scenario.model_copy(
        update={"links": [lk.model_copy(update={"name": "renamed"}) for lk in scenario.links]}
    )
    assert renamed.plan.link_names == ["renamed"] * len(scenario.links)
    assert scenario.plan.link_names != renamed.plan.link_names


def test_an_unknown_name_is_a_one_line_key_error():
    plan = load_scenario(SCENARIOS / "smoke.yaml").plan
    with pytest.raises(KeyError, match="no link 'nope' \\(links: "):
        plan.link("nope")
    with pytest.raises(KeyError, match="no target 'nope' \\(targets: "):
        plan.target("nope")


def test_a_scenario_that_does_not_validate_still_has_a_plan():
    """Validation reads the plan too, so resolving must not fail on the mistakes it reports."""
    data = yaml.safe_load((SCENARIOS / "smoke.yaml").read_text())
    data["targets"][0]["link"] = "nowhere"
    scenario = Scenario.model_validate(data)
    assert scenario.plan.targets[0].link is None and scenario.plan.targets[0].initiators == ()


def _calls(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.id if isinstance(func, ast.Name) else getattr(func, "attr", ""))
    return names


def test_no_layer_derives_what_the_plan_holds():
    found = {
        str(path.relative_to(ROOT)): sorted(_calls(path) & DERIVING)
        for layer in LAYERS
        for path in (ROOT / layer).rglob("*.py")
        if path not in HOME
    }
    assert {k: v for k, v in found.items() if v} == {}


def test_the_derivation_check_can_fail():
    assert _calls(ROOT / "scenarios" / "plan.py") >= {"link_name", "target_link", "initiators_of", "ports"}
