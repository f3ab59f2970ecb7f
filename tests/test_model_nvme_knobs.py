"""Polling and I/O queues are NVMe hosts' knobs: given for a SCSI transport, a one-line error."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sanlab.scenarios.errors import ScenarioError
from sanlab.scenarios.loader import parse_scenario

POINT = ["--fabric", "eth", "--link-gbps", "100", "--rw", "randread", "--bs", "4k", "--iodepth", "1"]


def sanlab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sanlab", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("knob", [["--poll"], ["--queues", "2"]])
def test_a_scsi_transport_refuses_nvme_knobs_in_one_line(knob):
    run = sanlab("model", "--transport", "iscsi", *POINT, "--numjobs", "1", *knob)
    assert run.returncode != 0
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "is for NVMe hosts" in lines[0] and "nvme-tcp or nvme-rdma" in lines[0]


def test_a_scenario_projection_inherits_the_check_from_its_targets():
    data = {
        "projections": [{"transport": "iser", "fabric": "roce", "poll": True}],
        "workloads": [{"rw": "randread", "bs": "4k", "iodepth": 1, "numjobs": 1}],
    }
    with pytest.raises(ScenarioError, match=r"projections\[0\]\.poll.*not iser"):
        parse_scenario(data, "x.yaml")


def test_nvme_with_both_knobs_projects():
    run = sanlab(
        "model", "--transport", "nvme-tcp", *POINT, "--numjobs", "4", "--poll", "--queues", "2", "--json"
    )
    assert run.returncode == 0, run.stderr
