"""Real machines without a VM: inventories, the rules for real hosts and links, facts, dry runs.

The SSH path itself is tested against sshd in the guests (test_ssh_hosts.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sanlab.emulator.machines import describe, parse_facts
from sanlab.emulator.ssh import SshError, SshHost
from sanlab.scenarios.errors import ScenarioError
from sanlab.scenarios.loader import load_scenario, parse_scenario
from support import SCENARIOS

MACHINES = {
    "hosts": [{"name": "ini", "role": "initiator"}, {"name": "tgt", "role": "target"}],
    "links": [
        {
            "name": "data",
            "endpoints": ["ini", "tgt"],
            "fabric": "roce",
            "interfaces": {"ini": "ens1", "tgt": "ens2"},
        }
    ],
    "targets": [{"host": "tgt", "stack": "nvmet", "transport": "nvme-rdma"}],
}
INVENTORY = {
    "all": {
        "vars": {"ansible_user": "admin", "ansible_port": 2200},
        "hosts": {"ini": {"ansible_host": "10.0.0.1"}},
        "children": {
            "storage": {
                "vars": {
                    "ansible_user": "root",
                    "ansible_ssh_common_args": "-o ProxyJump=bastion -oCompression=yes",
                },
                "hosts": {"tgt": {"ansible_host": "10.0.0.2", "ansible_ssh_private_key_file": "~/.ssh/lab"}},
            }
        },
    }
}


def _files(tmp_path: Path, scenario: dict, inventory: dict) -> tuple[Path, Path]:
    """The scenario and inventory in ``tmp_path``, with the key file the inventory names."""
    key = tmp_path / "lab-key"
    key.write_text("a key\n")
    text = yaml.safe_dump(inventory).replace("~/.ssh/lab", str(key))
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scenario))
    (tmp_path / "inv.yaml").write_text(text)
    return tmp_path / "s.yaml", tmp_path / "inv.yaml"


def test_an_inventory_gives_each_host_its_reach(tmp_path):
    scenario_file, inventory = _files(tmp_path, MACHINES, INVENTORY)
    hosts = {h.name: h for h in load_scenario(scenario_file, inventory).hosts}
    assert (hosts["ini"].ssh, hosts["ini"].port, hosts["ini"].identity) == ("admin@10.0.0.1", 2200, None)
    tgt = hosts["tgt"]
    key = str(tmp_path / "lab-key")
    assert (tgt.ssh, tgt.port, tgt.identity) == ("root@10.0.0.2", 2200, key)  # the inner group wins
    assert tgt.ssh_options == ["ProxyJump=bastion", "Compression=yes"]


def test_a_host_missing_from_the_inventory_is_named(tmp_path):
    inventory = {"all": {"hosts": {"ini": {"ansible_host": "10.0.0.1"}}}}
    scenario_file, inventory_file = _files(tmp_path, MACHINES, inventory)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(scenario_file, inventory_file)
    assert str(caught.value) == f"{inventory_file}: hosts[1]: has no host 'tgt' of the scenario (hosts: ini)"


@pytest.mark.parametrize(
    "address", ["-oProxyCommand=touch /tmp/pwned", "10.0.0.1; reboot", "$(id)", "a b", "host`id`"]
)
def test_a_hostile_inventory_address_is_refused_before_anything_runs(tmp_path, address):
    inventory = {"all": {"hosts": {"ini": {"ansible_host": address}, "tgt": {}}}}
    scenario_file, inventory_file = _files(tmp_path, MACHINES, inventory)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(scenario_file, inventory_file)
    assert f"{scenario_file} (hosts from {inventory_file}): hosts[0].ssh:" in str(caught.value)


def test_an_ssh_flag_that_sets_no_allowed_option_is_refused_naming_the_inventory(tmp_path):
    inventory = {"all": {"hosts": {"ini": {"ansible_ssh_common_args": "-v"}, "tgt": {}}}}
    scenario_file, inventory_file = _files(tmp_path, MACHINES, inventory)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(scenario_file, inventory_file)
    assert str(caught.value).startswith(f"{inventory_file}: ini.ansible_ssh_common_args: '-v' is not a flag")


def test_inventory_flags_become_the_options_they_set(tmp_path):
    args = "-J jump@bastion:2222 -p 2200 -l admin -C -4 -oConnectTimeout=5"
    inventory = {"all": {"hosts": {"ini": {"ansible_ssh_extra_args": args}, "tgt": {}}}}
    scenario_file, inventory_file = _files(tmp_path, MACHINES, inventory)
    assert load_scenario(scenario_file, inventory_file).hosts[0].ssh_options == [
        "ProxyJump=jump@bastion:2222",
        "Port=2200",
        "User=admin",
        "Compression=yes",
        "AddressFamily=inet",
        "ConnectTimeout=5",
    ]


def _problems(data: dict) -> list[str]:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(data, "m.yaml")
    return [str(p) for p in caught.value.problems]


def _with(**changes) -> dict:
    data = yaml.safe_load(yaml.safe_dump(MACHINES))
    data["hosts"] = [dict(h, ssh=f"root@{h['name']}") for h in data["hosts"]]
    for path, value in changes.items():
        section, index, field = path.split("__")
        data[section][int(index)][field] = value
    return data


def test_a_real_machine_scenario_is_valid():
    assert parse_scenario(_with(), "m.yaml").hosts[0].ssh == "root@ini"


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"hosts__1__cpus": 4},
            "m.yaml: hosts[1].cpus: 'tgt' is a real machine: cpus and memory size VMs only",
        ),
        ({"links__0__rate": "10gbit"}, "m.yaml: links[0].rate: shapes an emulated cable"),
        (
            {"links__0__interfaces": {"ini": "ens1"}},
            "m.yaml: links[0].interfaces: name the interface at each end",
        ),
        ({"links__0__rdma_devices": {"x": "mlx5_0"}}, "m.yaml: links[0].rdma_devices.x: 'x' is not an end"),
        ({"targets__0__backstore": "device"}, "m.yaml: targets[0].device: backstore 'device' needs"),
        ({"targets__0__destroy": True}, "m.yaml: targets[0].destroy: applies to a device backstore only"),
        ({"targets__0__device": "/dev/../etc/passwd"}, "m.yaml: targets[0].device:"),
    ],
)
def test_real_machine_rules(changes, expected):
    problems = _problems(_with(**changes))
    assert any(p.startswith(expected) for p in problems), problems


def test_vm_links_do_not_name_real_devices():
    data = yaml.safe_load((SCENARIOS / "pair-rxe.yaml").read_text())
    data["links"][0]["rdma_devices"] = {"initiator": "mlx5_0", "target": "mlx5_0"}
    assert any("names a real machine's devices" in p for p in _problems(data))


def test_facts_are_read_from_the_preflight_script_output():
    values = {
        "kernel": "6.8.0-45-generic",
        "cpu_model": "AMD EPYC 9254 24-Core Processor",
        "cores": "48",
        "cpu_mhz": "2900",
        "configfs": "yes",
        "tool.fio": "yes",
        "tool.nvme": "no",
        "module.nvme_rdma": "yes",
        "nic.ens1.address": "192.168.7.1/24",
        "nic.ens1.mtu": "9000",
        "nic.ens1.speed_mbps": "100000",
        "nic.ens1.driver": "mlx5_core",
        "nic.ens1.pci_id": "0x15b3 0x101d",
        "nic.ens1.firmware": "22.39.1002 (MT_0000000359)",
        "nic.ens1.pcie": "x16 16.0 GT/s PCIe",
        "nic.ens1.rdma": "mlx5_0",
    }
    facts = parse_facts("ini", values, ["ens1", "ens9"])
    assert (facts.cores, facts.cpu_mhz, facts.tools["fio"], facts.tools["nvme"]) == (48, 2900, True, False)
    nic = facts.nics["ens1"]
    assert (nic.mtu, nic.speed_mbps, nic.rdma, nic.pcie) == (9000, 100000, "mlx5_0", "x16 16.0 GT/s PCIe")
    assert "ens9" not in facts.nics  # not there: preflight names it as missing
    lines = describe(facts)
    assert lines[0] == "ini: Linux 6.8.0-45-generic, AMD EPYC 9254 24-Core Processor x48 @ 2.90 GHz"
    assert "ens1: 192.168.7.1/24, MTU 9000, 100 Gb/s, mlx5_core fw 22.39.1002" in lines[1]
    assert "missing tools: nvme" in "\n".join(lines)


def test_ssh_argv_puts_the_destination_after_the_options(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "lab").write_text("a key\n")
    options = ("ProxyJump=bastion", "ConnectTimeout=5")
    host = SshHost("t", "root@10.0.0.2", 2200, "~/.ssh/lab", Path("/run/x"), options)
    argv = host.ssh_argv("echo 'a b'")
    assert argv[0] == "ssh" and argv[-3:] == ["--", "root@10.0.0.2", "echo 'a b'"]
    assert argv[argv.index("-p") : argv.index("-p") + 2] == ["-p", "2200"]
    assert "BatchMode=yes" in argv and "ProxyJump=bastion" in argv
    assert argv[argv.index("-i") + 1] == f"{tmp_path}/.ssh/lab"
    # ssh takes an option's first value: the scenario's time-out goes before sanlab's default,
    # and batch mode and the shared connection before anything of the scenario's.
    assert argv.index("ConnectTimeout=5") < argv.index("ConnectTimeout=15")
    assert argv.index("BatchMode=yes") < argv.index("ProxyJump=bastion")
    assert 'ControlPath="/run/x/ssh-%C"' in argv


def test_ssh_argv_of_an_ipv6_destination_drops_the_brackets():
    assert SshHost("t", "root@[fe80::1]", control_dir=Path("/run/x")).ssh_argv("true")[-2] == "root@fe80::1"


@pytest.mark.parametrize(
    "options",
    [("ProxyCommand=id",), ("ProxyJump=a`id`",), ("User=%d",), ("ControlPath=/tmp/x",), ("Port=22 x",)],
)
def test_an_ssh_host_refuses_an_option_the_allowlist_refuses_whoever_made_it(options):
    with pytest.raises(SshError, match="^t: "):
        SshHost("t", "root@10.0.0.2", control_dir=Path("/run/x"), options=options)


def test_an_ssh_destination_that_looks_like_an_option_is_refused():
    with pytest.raises(SshError, match="would be read as an option"):
        SshHost("t", "-oProxyCommand=id")


@pytest.mark.subprocess  # starts sanlab, a tool or a helper as a process
def test_dry_run_of_vms_prints_each_hosts_commands_and_boots_nothing(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "sanlab", "run", str(SCENARIOS / "smoke.yaml"), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.count("== ") == 2 and "== initiator:" in out and "== target:" in out
    target = out[out.index("== target:") :]
    assert "mkdir /sys/kernel/config/nvmet/subsystems/nqn.2026-11.org.sanlab:nvmet-tcp" in target
    assert "--verify=crc32c" in out and "nvme disconnect" in out
    assert out.rstrip().endswith("dry run: nothing was changed on any host")
    assert list(tmp_path.iterdir()) == []  # no run folder, no VM


def test_the_shipped_real_machine_example_validates_alone_and_with_its_inventory():
    folder = SCENARIOS / "machines"
    alone = load_scenario(folder / "two-servers.yaml")
    assert [h.ssh for h in alone.hosts] == [None, None]  # reached through an inventory
    reached = load_scenario(folder / "two-servers.yaml", folder / "inventory.yaml")
    assert [h.ssh for h in reached.hosts] == ["root@192.0.2.11", "root@192.0.2.12"]


@pytest.mark.subprocess  # starts sanlab, a tool or a helper as a process
def test_running_real_machines_nobody_can_reach_is_refused_in_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "sanlab", "run", str(SCENARIOS / "machines" / "two-servers.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert result.stderr.strip().endswith(
        "is for real machines, but nothing says how to reach initiator, target: "
        "give each host ssh: USER@HOST, or --inventory FILE"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", [None, "", "   "])
def test_empty_inventory_ssh_arguments_give_no_options(tmp_path, args):
    inventory = {"all": {"hosts": {"ini": {"ansible_ssh_common_args": args}, "tgt": {}}}}
    scenario_file, inventory_file = _files(tmp_path, MACHINES, inventory)
    assert load_scenario(scenario_file, inventory_file).hosts[0].ssh_options == []


def test_a_known_hosts_file_is_judged_by_what_a_link_leads_to(tmp_path):
    from sanlab.scenarios.ssh_options import check_option

    (tmp_path / "lab_known_hosts").write_text("")
    (tmp_path / "my_known_hosts").symlink_to(tmp_path / "lab_known_hosts")
    (tmp_path / "bashrc").write_text("")
    (tmp_path / "sly_known_hosts").symlink_to(tmp_path / "bashrc")
    assert check_option(f"UserKnownHostsFile={tmp_path}/my_known_hosts").endswith("my_known_hosts")
    assert check_option(f"UserKnownHostsFile={tmp_path}/new_known_hosts").endswith("new_known_hosts")
    with pytest.raises(ValueError, match="leads to"):
        check_option(f"UserKnownHostsFile={tmp_path}/sly_known_hosts")
