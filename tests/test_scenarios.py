"""Scenario files: every shipped one validates; mistakes are named precisely."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sanlab.scenarios.errors import ScenarioError
from sanlab.scenarios.loader import load_scenario
from sanlab.scenarios.schema import schema_text
from support import SCENARIOS, sanlab_here

SHIPPED = sorted(SCENARIOS.glob("*.yaml"))


sanlab = sanlab_here  # in this process: the fast tier starts none


def test_there_are_scenarios():
    names = {p.stem for p in SHIPPED}
    assert {"zeta-2016", "starwind-2024", "smoke", "pair-rxe", "pair-siw"} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_scenario_validates(path):
    result = sanlab("validate", str(path))
    assert result.returncode == 0, result.stderr
    assert f"{path}: ok" in result.stdout


def test_schema_json_is_in_sync():
    committed = (SCENARIOS / "schema.json").read_text()
    assert committed == schema_text(), "run: python -m sanlab.scenarios.schema > scenarios/schema.json"
    assert json.loads(committed)["additionalProperties"] is False


def _mutated(tmp_path: Path, change) -> Path:
    data = yaml.safe_load((SCENARIOS / "pair-rxe.yaml").read_text())
    change(data)
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_unknown_field_is_named(tmp_path):
    path = _mutated(tmp_path, lambda d: d["hosts"][0].update(colour="blue"))
    result = sanlab("validate", str(path))
    assert result.returncode == 1
    assert (
        f"{path}: hosts[0].colour: unknown field "
        "(allowed: name, role, cpus, memory, ssh, port, identity, ssh_options)" in result.stderr
    )


def test_bad_size_is_named(tmp_path):
    path = _mutated(tmp_path, lambda d: d["workloads"][0].update(bs=["4k", "5q"]))
    result = sanlab("validate", str(path))
    assert result.returncode == 1
    assert f"{path}: workloads[0].bs[1]: '5q' is not a size (use 512, 4k, 64k, 1m)" in result.stderr


def test_every_problem_is_reported_one_per_line(tmp_path):
    def break_it(d):
        d["links"][0]["fabric"] = "fddi"
        d["links"][0]["mtu"] = 100000
        d["workloads"][0]["bs"] = "5q"

    path = _mutated(tmp_path, break_it)
    lines = sanlab("validate", str(path)).stderr.strip().splitlines()
    assert len(lines) == 3
    expected = "links[0].fabric: 'fddi' is not allowed (use 'eth', 'roce', 'iwarp' or 'ib')"
    assert any(expected in line for line in lines)
    assert any("links[0].mtu" in line and "100000" in line for line in lines)


def test_link_to_unknown_host(tmp_path):
    path = _mutated(tmp_path, lambda d: d["links"][0].update(endpoints=["initiator", "storage"]))
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert str(err.value) == (
        f"{path}: links[0].endpoints[1]: 'storage' is not a host (hosts: initiator, target)"
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda d: d["targets"][0].update(transport="srp", stack="nvmet"),
            "targets[0].transport: 'srp' is not served by nvmet (use nvme-tcp, nvme-rdma)",
        ),
        (lambda d: d["targets"][0].update(stack="spdk"), "targets[0].stack: 'spdk' is for projections only"),
        (
            lambda d: d["links"][0].update(fabric="eth", rdma_driver=None),
            "needs an RDMA link, but 'fabric' is fabric 'eth'",
        ),
        (lambda d: d["links"][0].update(rdma_driver="siw"), "links[0].rdma_driver: 'siw' is iWARP, not roce"),
        (
            lambda d: d["targets"][0].update(host="initiator"),
            "targets[0].host: 'initiator' has role 'initiator', not 'target'",
        ),
        (
            lambda d: d.update(projections=[{"transport": "srp", "fabric": "iwarp"}]),
            "projections[0].fabric: SRP runs over InfiniBand and RoCE, not iWARP",
        ),
        (
            lambda d: d.update(projections=[{"profile": "nope", "transport": "iser"}]),
            "projections[0].profile: 'nope' is not a profile",
        ),
    ],
)
def test_consistency_rules(tmp_path, change, expected):
    path = _mutated(tmp_path, change)
    result = sanlab("validate", str(path))
    assert result.returncode == 1
    assert expected in result.stderr


def test_unreadable_and_malformed_files(tmp_path):
    missing = tmp_path / "missing.yaml"
    assert f"{missing}: cannot read" in sanlab("validate", str(missing)).stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("hosts: [\n")
    result = sanlab("validate", str(broken))
    assert result.returncode == 1 and "not valid YAML" in result.stderr


def test_name_defaults_to_stem():
    assert load_scenario(SCENARIOS / "zeta-2016.yaml").name == "zeta-2016"


def test_matrix_axes_accept_scalars():
    scenario = load_scenario(SCENARIOS / "zeta-2016.yaml")
    assert scenario.workloads[0].iodepth == [32] and scenario.workloads[0].bs == [4096, 16384, 65536]


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ({"stack": "lio", "transport": "srp"}, "targets[0].transport: SRP does not run over iWARP"),
        ({"stack": "lio", "transport": "iser"}, "targets[0].stack: LIO cannot serve iSER over iWARP"),
    ],
)
def test_impossible_iwarp_combinations_are_refused(tmp_path, target, expected):
    data = yaml.safe_load((SCENARIOS / "pair-siw.yaml").read_text())
    data["targets"][0].update(target)
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(data))
    result = sanlab("validate", str(path))
    assert result.returncode == 1 and expected in result.stderr
