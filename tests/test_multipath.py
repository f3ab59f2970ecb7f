"""Native NVMe multipath across two fabrics: a path pulled under verified writes, the I/O carries on.

``scenarios/multipath.yaml`` exports one nvmet subsystem on two cables, A
and B, and connects over both; the kernel's native multipath joins the
two controllers under one block device.  Path A goes down for 20 s in the
middle of 16 MiB of verified 4k writes.  No block may fail verification,
and the record must show the I/O moved to path B while A was down
(``failover_s``, the longest stall of completions meanwhile).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from sanlab.emulator.lab import plan, running_lab
from sanlab.scenarios.errors import ScenarioError
from sanlab.scenarios.loader import load_scenario, parse_scenario
from sanlab.targets import runner
from sanlab.targets.dryrun import DryRunHost
from sanlab.targets.faults import FaultedRun, Window
from support import SCENARIOS, reruns

MULTIPATH = SCENARIOS / "multipath.yaml"


def _data() -> dict:
    return yaml.safe_load(MULTIPATH.read_text())


def test_a_multipath_target_is_exported_and_connected_on_every_path():
    scenario = load_scenario(MULTIPATH)
    hosts = {h.name: DryRunHost(h.name) for h in scenario.hosts}
    runner.rehearse(scenario, hosts, plan(scenario, "x", Path("/x"), None).endpoints)
    connects = [c for c in hosts["initiator"].commands if "nvme connect" in c]
    assert [c.split(" -a ")[1].split()[0] for c in connects] == ["169.254.10.2", "169.254.11.2"] * 2
    target = "\n".join(hosts["target"].commands)
    assert target.count("addr_traddr") == 4  # two ports per subsystem, two subsystems
    assert "/ports/1/addr_traddr" in target and "/ports/2/addr_traddr" in target
    flaps = [c for c in hosts["initiator"].commands if "ip link set dev" in c]
    assert flaps and all("dev a down" in c for c in flaps)  # the fault pulls path A only


def test_failover_is_the_longest_stall_while_the_path_was_out():
    window = Window(down=100.0, up=112.0)
    moved = FaultedRun("{}", 0, "", [window], [99.0, 99.9, 106.4, 106.5, 107.0, 113.0])
    assert moved.failover_s() == 6.5  # from 99.9, the last completion before, to 106.4
    stuck = FaultedRun("{}", 0, "", [window], [99.0, 99.9, 112.3, 112.4])
    assert stuck.failover_s() is None and stuck.recovery_s() == 0.3


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d["targets"][0].update(stack="lio", transport="iscsi"), "native NVMe multipath"),
        (lambda d: d["targets"][0].update(link="a"), "give either link or paths"),
        (lambda d: d["targets"][0].update(paths=["a", "c"]), "paths[1]: 'c' is not a link"),
        (lambda d: d["targets"][0].update(paths=["a", "a"]), "names a link twice"),
        (lambda d: d["targets"][0].update(paths=["a"]), "at least 2"),
        (
            lambda d: (
                d["hosts"].append({"name": "other", "role": "initiator"}),
                d["links"][1].update(endpoints=["other", "target"]),
            ),
            "lead to 2 hosts (initiator, other)",
        ),
    ],
)
def test_multipath_mistakes_are_named(change, expected):
    data = copy.deepcopy(_data())
    change(data)
    with pytest.raises(ScenarioError) as err:
        parse_scenario(data, "mp.yaml")
    assert expected in str(err.value)


@pytest.mark.vm
def test_a_pulled_path_fails_over_and_loses_no_block(guest_image, tmp_path):
    scenario = load_scenario(MULTIPATH)
    heard: list[str] = []

    def say(message: str) -> None:
        print(message)
        heard.append(message)

    with running_lab(scenario, "test-mpath", print, keep_logs=False) as lab:
        records = runner.run(scenario, lab.vms, lab.plan.endpoints, tmp_path, say, doctor=lab, cables=lab)
    assert [r.transport for r in records] == ["nvme-tcp", "nvme-rdma"]
    for record in records:
        assert record.error is None, record.error
        assert record.verify == "pass" and record.verified_bytes == 16 << 20, record
        assert record.io_errors == 0 and record.verify_errors == 0, record
        # I/O completed over path B while A was out: the failover took less than the outage
        assert record.failover_s is not None and 0 < record.failover_s < 20, record
        assert record.throughput_dip_pct is not None and 0 <= record.throughput_dip_pct <= 100, record
    assert sum("link a down for 20s" in m for m in heard) == 2 + reruns(records)


def test_the_throughput_dip_compares_the_outage_with_the_rate_before_it():
    window = Window(down=10.0, up=20.0)
    steady = [i / 10 for i in range(100)]  # 10 I/Os a second for 10 s
    halved = [10 + i / 5 for i in range(50)]  # 5 a second while the path is out
    assert FaultedRun("{}", 0, "", [window], steady + halved).dip_pct() == 50.0
    assert FaultedRun("{}", 0, "", [window], steady + [20.5]).dip_pct() == 100.0
    assert FaultedRun("{}", 0, "", [window], [10.5, 20.5]).dip_pct() is None  # no rate before it
