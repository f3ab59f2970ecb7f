"""A switch port down under a shared target: two initiators, every block of each verified.

``scenarios/port-down.yaml`` puts two initiators and an nvmet target on one
Mininet switch, and 2 s into each point the target's port on the switch
loses carrier for 3 s (the cable between switch and target pulled, both
NICs at once).  The first initiator's side applies the fault and hands its
window to the other, who reads it on its own clock: both records carry a
recovery time, and neither may lose a block.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
import yaml

from sanlab.scenarios.errors import ScenarioError
from sanlab.scenarios.loader import parse_scenario
from sanlab.targets.faults import Window, shifted
from support import SCENARIOS

PORT_DOWN = SCENARIOS / "port-down.yaml"


def _data() -> dict:
    return yaml.safe_load(PORT_DOWN.read_text())


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ({"link": "i1-s1"}, "'i1-s1' is no target's port on a switch; a switch port fault goes on t-s1"),
        (
            {"action": "loss", "loss": "5%"},
            "it can be taken down (a switch port down), not given loss bursts",
        ),
    ],
)
def test_a_switch_fault_is_a_targets_port_going_down(fault, expected):
    data = copy.deepcopy(_data())
    data["faults"] = [{**data["faults"][0], **fault}]
    with pytest.raises(ScenarioError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        parse_scenario(data, "port.yaml")


def test_a_window_is_read_on_another_clock_by_its_offset():
    assert shifted(Window(100.0, 103.0, 104.5), 0.25) == Window(100.25, 103.25, 104.75)
    assert shifted(Window(100.0, 103.0), -1.0) == Window(99.0, 102.0, None)


def _ridden_out(out, transports: tuple[str, ...]) -> list[dict]:
    """A run's records, checked: each transport's two initiators and their aggregate, every one
    verified with no error and a recovery time."""
    records = json.loads((out / "results.json").read_text())["results"]
    assert [(r["transport"], r["initiator"]) for r in records] == [
        (t, who) for t in transports for who in ("i1", "i2", "i1+i2")
    ]
    for record in records:
        assert record["error"] is None and record["verify"] == "pass", record
        assert record["io_errors"] == 0 and record["verify_errors"] == 0, record
        assert record["recovery_s"] is not None and 0 <= record["recovery_s"] < 60, record
    return records


@pytest.mark.vm
@pytest.mark.long  # four VMs, about 100 s: benchmarks/long_vm_tests.py runs it, not CI's 25 minutes
def test_both_initiators_ride_out_the_targets_port_going_down(guest_image, tmp_path):
    out = tmp_path / "port-down"
    run = subprocess.run(
        [sys.executable, "-m", "sanlab", "run", str(PORT_DOWN), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    print(run.stderr[-3000:])
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    assert run.stderr.count("link t-s1 down for 3s") == 2  # once a point, not once an initiator
    records = _ridden_out(out, ("nvme-tcp", "nvme-rdma"))
    for one in records[0:2] + records[3:5]:
        assert one["verified_bytes"] == 16 << 20, one


def test_the_link_doctor_checks_a_switch_port_across_the_switch(tmp_path):
    """A host's link to a switch has one addressed end: the doctor pings across the switch to
    the first host on another of its ports."""
    from sanlab.emulator.lab import Lab
    from sanlab.scenarios.loader import load_scenario

    lab = Lab(load_scenario(PORT_DOWN), "doctor", tmp_path, None)
    lab.vms = {name: name for name in lab.blueprint.specs}  # the hosts, by name: no VM boots here
    ends = [(vm, nic.link, address) for vm, nic, address in lab._ends("t-s1")]
    assert ends == [("target", "t-s1", "169.254.100.3"), ("i1", "i1-s1", "169.254.100.1")]
    assert [vm for vm, _, _ in lab._ends("i2-s1")] == ["i2", "i1"]


@pytest.mark.vm
@pytest.mark.long  # four VMs, about 2 min: benchmarks/long_vm_tests.py runs it, not CI's 25 minutes
def test_both_initiators_ride_out_a_restart_of_the_target_they_share(guest_image, tmp_path):
    """A restart of a shared target's service, applied once a point: nvmet NVMe/TCP and LIO
    iSCSI (each initiator with an ACL of its own) behind the switch; each initiator's record
    carries its own recovery time, and no block is lost."""
    from support import run_scenario

    data = copy.deepcopy(_data())
    data["targets"] = [
        {"name": "nvme-tcp", "host": "target", "stack": "nvmet", "transport": "nvme-tcp", "size": "32m"},
        {"name": "lio-iscsi", "host": "target", "stack": "lio", "transport": "iscsi", "size": "32m"},
    ]
    data["faults"] = [
        {"at": "2s", "target": t["name"], "action": "restart", "for": "3s"} for t in data["targets"]
    ]
    run, out = run_scenario(data, tmp_path, timeout=1200)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert run.stderr.count("stops for 3s") == 2  # once a target, not once an initiator
    _ridden_out(out, ("nvme-tcp", "iscsi"))
