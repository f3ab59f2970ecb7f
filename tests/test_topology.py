"""Switched fabrics as data: segments, ports, a target's initiators, and the mistakes named.

No VM boots here: the plan a lab would make (NICs, sockets, addresses,
what the fabric VM builds) and the commands a run would send are checked
as they are computed.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sanlab.emulator.blueprint import blueprint
from sanlab.scenarios.errors import SanlabError, ScenarioError
from sanlab.scenarios.loader import load_scenario, parse_scenario
from sanlab.scenarios.results.records import ResultRecord, aggregate
from sanlab.scenarios.topology import FABRIC_HOST, initiators_of, ports, segments
from sanlab.targets import rehearsal
from sanlab.targets.dryrun import DryRunHost
from sanlab.targets.fio import FioJob
from support import SCENARIOS

INCAST = SCENARIOS / "incast.yaml"


def incast_data() -> dict:
    return yaml.safe_load(INCAST.read_text())


def problems(data: dict) -> str:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(data, "x.yaml")
    return str(err.value)


def leaf_spine() -> dict:
    """Two leaves under one spine: one segment, one trunk per leaf."""
    data = incast_data()
    data["switches"] = [{"name": "leaf1"}, {"name": "leaf2"}, {"name": "spine"}]
    data["links"] = [
        {"name": "i1-l1", "endpoints": ["i1", "leaf1"], "fabric": "roce"},
        {"name": "i2-l2", "endpoints": ["i2", "leaf2"], "fabric": "roce"},
        {"name": "t-l2", "endpoints": ["target", "leaf2"], "fabric": "roce"},
        {"name": "up1", "endpoints": ["leaf1", "spine"], "fabric": "roce", "rate": "1gbit", "delay": "50us"},
        {"name": "up2", "endpoints": ["leaf2", "spine"], "fabric": "roce", "rate": "1gbit"},
    ]
    # a flow from leaf1 to the target on leaf2 crosses both trunks
    data["background"] = [{"switch": "leaf1", "to": "target", "rate": "1mbit"}]
    return data


def test_incast_scenario_has_two_initiators_for_each_target():
    scenario = load_scenario(INCAST)
    assert segments(scenario) == {"s1": 0}
    assert [(p.link, p.host, p.switch) for p in ports(scenario)] == [
        ("i1-s1", "i1", "s1"),
        ("i2-s1", "i2", "s1"),
        ("t-s1", "target", "s1"),
    ]
    for target in scenario.targets:
        assert initiators_of(scenario, target) == [("i1", "i1-s1"), ("i2", "i2-s1")]


def test_leaf_spine_is_one_segment_and_its_trunks_are_not_cables():
    scenario = parse_scenario(leaf_spine(), "ls.yaml")
    assert set(segments(scenario).values()) == {0}
    assert [lk.name for lk in scenario.plan.links if lk.kind == "trunk"] == ["up1", "up2"]
    assert initiators_of(scenario, scenario.targets[0]) == [("i1", "i1-l1"), ("i2", "i2-l2")]
    lab = blueprint(scenario, "ls", Path("/tmp/ls"), None)
    assert sorted(nic.link for nic in lab.specs[FABRIC_HOST].nics) == ["i1-l1", "i2-l2", "t-l2"]
    assert lab.fabric is not None
    assert [(t["a"], t["b"], t["bw_mbit"], t["delay_us"]) for t in lab.fabric["trunks"]] == [
        ("leaf1", "spine", 1000.0, 50),
        ("leaf2", "spine", 1000.0, None),
    ]


def test_plan_joins_every_host_port_to_the_fabric_vm_and_captures_at_the_switch(tmp_path):
    scenario = load_scenario(INCAST)
    lab = blueprint(scenario, "incast", tmp_path, tmp_path / "pcaps")
    fabric = lab.specs[FABRIC_HOST]
    assert (fabric.cpus, fabric.memory_mib) == (1, 1024)
    assert lab.addresses == {
        ("i1-s1", "i1"): "169.254.100.1",
        ("i2-s1", "i2"): "169.254.100.2",
        ("t-s1", "target"): "169.254.100.3",
    }
    for port in fabric.nics:
        host = port.link.split("-")[0].replace("t", "target")
        (host_nic,) = lab.specs[host].nics
        # the two ends of one datagram cable name each other's sockets
        assert (host_nic.peer_socket, port.peer_socket) == (port.local_socket, host_nic.local_socket)
        assert port.capture == tmp_path / "pcaps" / f"{port.link}.pcap"
        assert host_nic.capture is None
    assert lab.fabric is not None
    macs = {p["name"]: p["mac"] for p in lab.fabric["ports"]}
    assert macs == {nic.link: nic.mac for nic in fabric.nics}
    assert lab.endpoints[("t-s1", "target")].rdma_device == "rxe_t-s1"
    (flow,) = lab.fabric["flows"]
    assert (flow["switch"], flow["ip"], flow["server"], flow["port"]) == (
        "s1",
        "169.254.100.200/24",
        "169.254.100.3",
        5201,
    )


def test_a_run_connects_every_initiator_to_its_own_stretch_of_the_lun():
    scenario = load_scenario(INCAST)
    hosts = {h.name: DryRunHost(h.name) for h in scenario.hosts}
    rehearsal.rehearse(scenario, hosts, blueprint(scenario, "x", Path("/x"), None).endpoints)
    for host, offset in (("i1", None), ("i2", "--offset=4194304")):
        fio = [c for c in hosts[host].commands if c.startswith("fio ")]
        assert len(fio) == 3  # nvme-tcp, nvme-rdma and iscsi
        assert all((offset in c) if offset else ("--offset=" not in c) for c in fio)
        assert sum("nvme connect" in c for c in hosts[host].commands) == 2
        assert sum("--login" in c for c in hosts[host].commands) == 1


def test_fio_job_starts_at_its_offset():
    job = FioJob("/dev/x", "randwrite", 4096, 4, 2, 10, True, 1 << 20, first_offset=4 << 20)
    argv = job.argv()
    assert "--offset=4194304" in argv and "--offset_increment=1048576" in argv
    assert "--offset=4194304" in job.fill_argv()


def _record(initiator: str, iops: float, lat: float, verify: str = "pass", error: str | None = None):
    return ResultRecord(
        mode="emulated",
        transport="nvme-tcp",
        fabric="eth",
        target_stack="nvmet",
        mtu=1500,
        rw="randwrite",
        bs=4096,
        iodepth=4,
        numjobs=1,
        iops=iops,
        bw_mibps=iops * 4 / 1024,
        lat_mean_us=lat,
        lat_p99_us=lat * 3,
        verify=verify,
        initiator=initiator,
        io_errors=0,
        verify_errors=0 if verify == "pass" else 2,
        verified_bytes=8 << 20,
        error=error,
    )


def test_aggregate_adds_up_and_passes_only_when_every_initiator_passed():
    both = aggregate([_record("i1", 300, 10), _record("i2", 100, 30)])
    assert (both.initiator, both.initiators, both.iops, both.verify) == ("i1+i2", 2, 400, "pass")
    assert both.lat_mean_us == 15.0  # weighted by IOPS: (300*10 + 100*30) / 400
    assert both.lat_p99_us == 90 and both.verified_bytes == 16 << 20
    one_bad = aggregate([_record("i1", 300, 10), _record("i2", 100, 30, "fail", "2 bad blocks")])
    assert one_bad.verify == "fail" and one_bad.verify_errors == 2
    assert one_bad.error == "i2: 2 bad blocks"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d["links"][0].update(endpoints=["i1", "s9"]), "'s9' is not a host"),
        (lambda d: d["switches"].append({"name": "fabric"}), "name of the VM that runs the switches"),
        (lambda d: d["switches"].append({"name": "s2"}), "'s2' has no links"),
        (lambda d: d["switches"].append({"name": "i1"}), "host and switch names are unique"),
        (lambda d: d["links"][1].update(mtu=9000), "links[1].mtu: 9000 differs from links[0]"),
        (lambda d: d["links"][1].update(fabric="iwarp"), "every port of a segment carries one fabric"),
        (
            lambda d: d["targets"][0].update(stack="lio", transport="srp"),
            "lio serves several initiators over iscsi, iser so far",
        ),
        (lambda d: d["workloads"][0].update(verify_size="20m"), "2 initiators x 1 job(s) of 20m"),
        (
            lambda d: d.update(faults=[{"at": "1s", "link": "t-s1", "action": "delay", "delay": "20ms"}]),
            "'t-s1' ends at a switch: it can be taken down (a switch port down), not given delay bursts",
        ),
        (
            lambda d: d.update(faults=[{"at": "1s", "target": "nvme-tcp", "action": "reset"}]),
            "a reset acts on one initiator's connections",
        ),
        (lambda d: d["hosts"].append({"name": "fabric", "role": "initiator"}), "clashes with the VM"),
        (lambda d: d["background"][0].update(switch="s7"), "background[0].switch: 's7' is not a switch"),
        (lambda d: d["background"][0].update(to="nobody"), "'nobody' has no port on 's1'"),
    ],
)
def test_topology_mistakes_are_named(change, expected):
    data = copy.deepcopy(incast_data())
    change(data)
    assert expected in problems(data)


def test_a_target_no_initiator_reaches_is_refused():
    data = incast_data()
    data["switches"].append({"name": "s2"})
    data["links"][2]["endpoints"] = ["target", "s2"]
    assert "no initiator host reaches 'target'" in problems(data)


def test_background_flows_need_a_switch():
    data = yaml.safe_load((SCENARIOS / "flap.yaml").read_text())
    data["background"] = [{"switch": "s1", "to": "target", "rate": "1mbit"}]
    assert "background flows start at a switch" in problems(data)


def test_switches_are_refused_between_real_machines():
    data = incast_data()
    for host in data["hosts"]:
        host["ssh"] = f"root@{host['name']}"
    data.pop("capture")
    assert "switches are emulated" in problems(data)


@pytest.mark.subprocess  # starts sanlab, a tool or a helper as a process
def test_the_model_projects_as_many_initiators_as_the_topology_puts_on_the_target():
    done = subprocess.run(
        [sys.executable, "-m", "sanlab", "model", str(INCAST), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)["results"]
    assert [(r["transport"], r["initiators"], r["mode"]) for r in results] == [
        ("nvme-rdma", 2, "projected"),
        ("nvme-tcp", 2, "projected"),
    ]
    assert all(r["iops"] <= r["bound"] for r in results)


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ({"action": "loss"}, "faults[0].loss: action loss needs loss"),
        ({"action": "delay", "loss": "5%"}, "faults[0].loss: goes with action loss, not delay"),
        ({"action": "down", "delay": "20ms"}, "faults[0].delay: goes with action delay, not down"),
        ({"action": "loss", "loss": "5%", "shaped": True}, "bursts go on unshaped links only"),
    ],
)
def test_burst_mistakes_are_named(fault, expected):
    data = yaml.safe_load((SCENARIOS / "burst.yaml").read_text())
    if fault.pop("shaped", False):
        data["links"][0]["rate"] = "1gbit"
    data["faults"] = [{"at": "1s", "link": "roce", **fault}]
    assert expected in problems(data)


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ({"action": "restart"}, "faults[0].target: None is not a named target"),
        ({"action": "restart", "target": "nvme-tcp", "link": "roce"}, "give target, not link"),
        ({"action": "down", "target": "nvme-tcp"}, "goes with action restart or reset, not down"),
        ({"action": "down"}, "action down needs the link it acts on"),
        ({"action": "reset", "target": "iser"}, "reset is built for iscsi, nvme-tcp, nvme-rdma; not iser"),
        ({"action": "restart", "target": "nvme-tcp", "loss": "5%"}, "goes with action loss, not restart"),
    ],
)
def test_target_fault_mistakes_are_named(fault, expected):
    data = yaml.safe_load((SCENARIOS / "restart.yaml").read_text())
    data["targets"].append(
        {"name": "iser", "host": "target", "stack": "lio", "transport": "iser", "size": "32m"}
    )
    data["faults"] = [{"at": "1s", **fault}]
    assert expected in problems(data)


def test_a_restart_or_reset_hits_only_its_own_target():
    scenario = load_scenario(SCENARIOS / "restart.yaml")
    hosts = {h.name: DryRunHost(h.name) for h in scenario.hosts}
    rehearsal.rehearse(scenario, hosts, blueprint(scenario, "x", Path("/x"), None).endpoints)
    target = hosts["target"].commands
    stops = [c for c in target if c.startswith("echo 0 > ") and c.endswith("tpgt_1/enable")]
    assert len(stops) == 1 and "sanlab:iscsi/" in stops[0]  # iscsi's restart, nothing else
    assert sum(c.startswith(": > /tmp/sanlab-restart-") for c in target) == 1  # nvme-tcp only
    resets = [c for c in hosts["initiator"].commands if "reset_controller" in c]
    assert len(resets) == 2 and "sanlab:nvme-rdma " in resets[0] and "sanlab:nvme-tcp-reset " in resets[1]
    cuts = [c for c in hosts["initiator"].commands if "ss -tnK" in c]  # the iSCSI session reset
    assert cuts == [
        "n=$( (ss -tnK dst 169.254.10.2 dport = :3260) | grep -c ESTAB ); "
        "[ \"$n\" -gt 0 ] || { echo 'no iSCSI connection to cut' >&2; exit 1; }"
    ]


def test_a_vm_socket_path_too_long_for_qemu_is_refused_before_any_boot():
    """A VM listens on its links' sockets and on its own (agent, console, monitor); the
    longest of them, initiator.console.sock, is one byte over QEMU's limit here while every
    link socket fits, and the plan names it."""
    scenario = load_scenario(SCENARIOS / "pair-rxe.yaml")
    fits = Path("/" + "r" * 83)  # 84 + 1 + len("initiator.console.sock") = 107 bytes
    assert blueprint(scenario, "long", fits, None).specs
    with pytest.raises(SanlabError, match=r"initiator\.console\.sock is over 107 bytes"):
        blueprint(scenario, "long", Path("/" + "r" * 84), None)


@pytest.mark.parametrize(("stack", "transport"), [("lio", "iscsi"), ("lio", "iser"), ("tgt", "iscsi")])
def test_lio_and_tgt_admit_every_initiator_of_a_shared_target(stack, transport):
    """Each initiator logs in with an IQN of its own; the export must have an ACL for each."""
    data = incast_data()
    shared = {"name": "shared", "host": "target", "stack": stack, "transport": transport, "size": "32m"}
    data["targets"] = [dict(shared, backstore="file") if stack == "tgt" else shared]
    scenario = parse_scenario(data, "incast.yaml")  # valid: it raises otherwise
    hosts = {h.name: DryRunHost(h.name) for h in scenario.hosts}
    rehearsal.rehearse(scenario, hosts, blueprint(scenario, "x", Path("/x"), None).endpoints)
    target = "\n".join(hosts["target"].commands)
    for initiator in ("i1", "i2"):
        name = f"iqn.2026-11.org.sanlab:initiator.{initiator}"
        admitted = f"--initiator-name {name}" if stack == "tgt" else f"/acls/{name}/lun_0/map"
        assert admitted in target
        logins = [c for c in hosts[initiator].commands if "iface.initiatorname" in c]
        assert logins and all(name in c for c in logins)


def test_a_restart_of_a_shared_target_is_applied_once_and_every_initiator_rides_it_out():
    data = incast_data()
    data["faults"] = [{"at": "2s", "target": "nvme-tcp", "action": "restart", "for": "3s"}]
    scenario = parse_scenario(data, "incast.yaml")  # valid: it raises otherwise
    hosts = {h.name: DryRunHost(h.name) for h in scenario.hosts}
    rehearsal.rehearse(scenario, hosts, blueprint(scenario, "x", Path("/x"), None).endpoints)
    stops = [c for c in hosts["target"].commands if c.startswith(": > /tmp/sanlab-restart-")]
    assert len(stops) == 1  # one initiator's side applies it, for both
