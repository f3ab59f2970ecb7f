"""NVMe in-band authentication (DH-HMAC-CHAP) on the Debian 13 guest.

``scenarios/nvme-auth.yaml`` gives each NVMe target a secret: nvmet admits
one host NQN, which must prove it holds that secret, and the host presents
it with ``nvme connect --dhchap-secret``.  Verified writes go through; a
host that presents another secret is refused, and nothing is written.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from sanlab.emulator.blueprint import blueprint
from sanlab.emulator.lab import running_lab
from sanlab.scenarios.errors import ScenarioError
from sanlab.scenarios.loader import load_scenario, parse_scenario
from sanlab.targets import rehearsal
from sanlab.targets.dryrun import DryRunHost
from sanlab.targets.sessions import matrix
from support import SCENARIOS

AUTH = SCENARIOS / "nvme-auth.yaml"
# Another valid secret (its CRC-32 checks), which the target does not hold.
OTHER = "DHHC-1:00:VTIpqsXY4IdQ9b69vKU0MTuXDRp4aXHUQu6vh3nL1Xwi0odU:"


def _data() -> dict:
    return yaml.safe_load(AUTH.read_text())


def test_the_target_admits_one_host_nqn_with_its_secret_and_the_host_presents_it():
    scenario = load_scenario(AUTH)
    hosts = {h.name: DryRunHost(h.name) for h in scenario.hosts}
    rehearsal.rehearse(scenario, hosts, blueprint(scenario, "x", Path("/x"), None).endpoints)
    target = "\n".join(hosts["target"].commands)
    secret = scenario.targets[0].auth.secret
    host = "nqn.2026-11.org.sanlab:nvme-tcp.host.initiator"
    assert (
        "echo 0 > /sys/kernel/config/nvmet/subsystems/nqn.2026-11.org.sanlab:nvme-tcp/attr_allow_any_host"
        in target
    )
    assert f"printf %s {secret} > /sys/kernel/config/nvmet/hosts/{host}/dhchap_key" in target
    assert f"rmdir /sys/kernel/config/nvmet/hosts/{host}" in target  # made, so removed
    connects = [c for c in hosts["initiator"].commands if "nvme connect" in c]
    assert f"--hostnqn={host} --dhchap-secret={secret}" in connects[0]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda d: d.update(guest="debian-12"),
            "targets[0].auth: NVMe in-band authentication needs guest debian-13",
        ),
        (
            lambda d: d["targets"][0].update(stack="lio", transport="iscsi"),
            "targets[0].auth: NVMe in-band authentication is for nvme-tcp and nvme-rdma; not iscsi",
        ),
        (lambda d: d["targets"][0]["auth"].update(secret="DHHC-1:00:$(id):"), "targets[0].auth.secret"),
        (lambda d: d["targets"][0]["auth"].update(secret="hunter2"), "DHHC-1:0N:<base64>:"),
    ],
)
def test_authentication_mistakes_are_named_before_anything_boots(change, expected):
    data = copy.deepcopy(_data())
    change(data)
    with pytest.raises(ScenarioError) as err:
        parse_scenario(data, "auth.yaml")
    assert expected in str(err.value)


@pytest.mark.vm
@pytest.mark.long  # needs the Debian 13 image (a 100-165 s build in CI): benchmarks/long_vm_tests.py
def test_the_right_secret_carries_verified_writes_and_a_wrong_one_is_refused(debian_13_image, tmp_path):
    data = copy.deepcopy(_data())
    wrong = dict(data["targets"][0], name="wrong-secret")
    wrong["auth"] = dict(wrong["auth"], initiator_secret=OTHER)
    data["targets"].append(wrong)
    scenario = parse_scenario(data, "auth.yaml")
    captured = tmp_path / "capture"
    captured.mkdir()
    with running_lab(scenario, "test-auth", print, captured, keep_logs=False) as lab:
        records = matrix.run(scenario, lab.vms, lab.blueprint.endpoints, tmp_path, print, cables=lab)
        kernel = lab.vms["initiator"].run("dmesg", timeout=30).stdout
    good, refused = records[:2], records[2]
    for record in good:
        assert record.error is None and record.verify == "pass", record
        assert record.verified_bytes == 8 << 20 and record.verify_errors == 0, record
    assert kernel.count("authenticated with hash hmac(sha256)") >= 2  # every admin queue, TCP and RDMA
    assert (
        refused.error is not None and "nvme connect to nqn.2026-11.org.sanlab:wrong-secret" in refused.error
    )
    assert refused.verified_bytes is None and refused.iops is None  # no fio ran: nothing written
    # dhchap.lua reads the exchanges from the run's own capture: every queue's Success1 on TCP
    # and RDMA, and the wrong secret's AUTH_Failure1 after its Reply
    said = _dhchap_messages(captured / "roce.pcap")
    assert said.count("0x03") >= 4 and said.count("0xf1") == 1, said
    assert said[said.index("0xf1") - 1] == "0x02"  # the controller refused the host's Reply


def _dhchap_messages(pcap: Path) -> list[str]:
    import subprocess

    from sanlab.dissectors.plugins import tshark_args
    from support import require_tool

    argv = [require_tool("tshark"), *tshark_args(), "-r", str(pcap), "-Y", "sanlab_dhchap"]
    out = subprocess.run(
        [*argv, "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,", "-e", "sanlab_dhchap.message"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    return [m for line in out.stdout.split() for m in line.split(",")]
