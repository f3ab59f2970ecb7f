"""Never destroy what you did not create: other exports on a target host survive sanlab.

The target VM is given a foreign LIO iSCSI export (on the same RAM-disk HBA
that sanlab's LIO export uses), a foreign NVMe subsystem on nvmet port 1,
and a foreign file.  Then sanlab runs targets there: one that passes, one
whose names collide with foreign objects (refused, before or after it made
its own backing), and one interrupted by Ctrl-C in the middle of its points.
After each, the foreign objects are intact and nothing of sanlab's is left.
Each case runs twice: through the guests' agent, and over SSH (sshd in the
guests), the way sanlab reaches real machines.
"""

from __future__ import annotations

import pytest
import yaml

from sanlab.emulator.lab import running_lab
from sanlab.scenarios.loader import parse_scenario
from sanlab.targets.naming import iqn
from sanlab.targets.sessions import matrix
from support import SCENARIOS

pytestmark = pytest.mark.vm

CFS = "/sys/kernel/config"
FOREIGN_IQN = "iqn.2020-01.com.example:foreign"
FOREIGN_NQN = "nqn.2020-01.com.example:foreign"
FOREIGN = f"""
set -e
modprobe target_core_mod; modprobe iscsi_target_mod; modprobe nvmet-tcp
mkdir -p {CFS}/target/core/rd_mcp_0/foreign
echo rd_pages=256 > {CFS}/target/core/rd_mcp_0/foreign/control
echo 1 > {CFS}/target/core/rd_mcp_0/foreign/enable
mkdir -p {CFS}/target/iscsi/{FOREIGN_IQN}/tpgt_1/lun/lun_0
ln -s {CFS}/target/core/rd_mcp_0/foreign {CFS}/target/iscsi/{FOREIGN_IQN}/tpgt_1/lun/lun_0/foreign
mkdir {CFS}/nvmet/subsystems/{FOREIGN_NQN}
mkdir {CFS}/nvmet/ports/1
echo tcp > {CFS}/nvmet/ports/1/addr_trtype; echo ipv4 > {CFS}/nvmet/ports/1/addr_adrfam
echo 127.0.0.1 > {CFS}/nvmet/ports/1/addr_traddr; echo 4499 > {CFS}/nvmet/ports/1/addr_trsvcid
ln -s {CFS}/nvmet/subsystems/{FOREIGN_NQN} {CFS}/nvmet/ports/1/subsystems/{FOREIGN_NQN}
echo precious > /dev/shm/sanlab-clash0.img
"""
INVENTORY = (
    f"ls {CFS}/target/iscsi; ls {CFS}/target/core/rd_mcp_0; ls {CFS}/nvmet/subsystems; "
    f"ls {CFS}/nvmet/ports; readlink {CFS}/target/iscsi/{FOREIGN_IQN}/tpgt_1/lun/lun_0/foreign; "
    "cat /dev/shm/sanlab-clash0.img; ls /dev/shm"
)


def _scenario(targets: list[dict]):
    data = yaml.safe_load((SCENARIOS / "pair-rxe.yaml").read_text())
    data["targets"] = targets
    # Two points a target, so that Ctrl-C after the first lands in the middle of its points
    # (a third block size only added a point's TCG time to each target: issue #50).
    data["workloads"] = [
        {"rw": "randwrite", "bs": ["4k", "16k"], "iodepth": 2, "verify": "crc32c", "verify_size": "1m"}
    ]
    return parse_scenario(data, "foreign.yaml")


@pytest.fixture(scope="module")
def lab(guest_image):
    scenario = _scenario([])
    with running_lab(scenario, "test-foreign", print, keep_logs=False, ssh=True) as running:
        running.vms["target"].run(FOREIGN, timeout=60).check()
        yield running


def _inventory(lab) -> str:
    return lab.vms["target"].run(INVENTORY, timeout=60).stdout


VIA = ["agent", "ssh"]


def _run(lab, targets: list[dict], tmp_path, via: str, say=print):
    hosts = lab.vms if via == "agent" else lab.ssh_hosts
    return matrix.run(_scenario(targets), hosts, lab.blueprint.endpoints, tmp_path, say)


@pytest.mark.parametrize("via", VIA)
def test_a_run_leaves_foreign_exports_alone(lab, tmp_path, via):
    before = _inventory(lab)
    assert FOREIGN_IQN in before and FOREIGN_NQN in before and "precious" in before
    records = _run(
        lab,
        [
            {"name": "mine-lio", "host": "target", "stack": "lio", "transport": "iscsi", "size": "8m"},
            {"name": "mine-nvme", "host": "target", "stack": "nvmet", "transport": "nvme-tcp", "size": "8m"},
            {"name": "mine-srp", "host": "target", "stack": "lio", "transport": "srp", "size": "8m"},
        ],
        tmp_path,
        via,
    )
    assert [r.error for r in records] == [None] * 6, [r.error for r in records if r.error]
    assert all(r.verify == "pass" for r in records)
    assert _inventory(lab) == before


@pytest.mark.parametrize("via", VIA)
def test_a_target_whose_names_are_taken_is_refused_and_harms_nothing(lab, tmp_path, via):
    """'clash' would need /dev/shm/sanlab-clash0.img (foreign, refused before anything is made);
    'taken' would need an iSCSI target that already exists (refused after its backing was made)."""
    shell = lab.vms["target"]
    shell.run(f"mkdir -p {CFS}/target/iscsi/{iqn('taken')}/tpgt_1", timeout=30).check()
    before = _inventory(lab)
    records = _run(
        lab,
        [
            {"name": "clash", "host": "target", "stack": "nvmet", "transport": "nvme-tcp", "size": "8m"},
            {
                "name": "taken",
                "host": "target",
                "stack": "lio",
                "transport": "iscsi",
                "size": "8m",
                "backstore": "file",
            },
        ],
        tmp_path,
        via,
    )
    assert all(r.error and "did not create" in r.error for r in records), [r.error for r in records]
    assert _inventory(lab) == before
    assert "sanlab-taken0.img" not in shell.run("ls /var/tmp", timeout=30).stdout  # its own backing went
    shell.run(f"rmdir {CFS}/target/iscsi/{iqn('taken')}/tpgt_1 {CFS}/target/iscsi/{iqn('taken')}", timeout=30)


@pytest.mark.parametrize("via", VIA)
def test_ctrl_c_in_the_middle_of_a_target_undoes_only_its_own_objects(lab, tmp_path, via):
    before = _inventory(lab)

    def interrupt_after_first_point(message: str) -> None:
        if message.startswith("[1/"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(
            lab,
            [{"name": "cut", "host": "target", "stack": "lio", "transport": "iscsi", "size": "8m"}],
            tmp_path,
            via,
            interrupt_after_first_point,
        )
    assert _inventory(lab) == before
    sessions = lab.vms["initiator"].run("iscsiadm -m session 2>&1; true", timeout=30).stdout
    assert "cut" not in sessions
