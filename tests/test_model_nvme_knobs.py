"""Polling and I/O queues are NVMe hosts' knobs: given for a SCSI transport, a one-line error."""

from __future__ import annotations

import pytest

from sanlab.scenarios.errors import ScenarioError
from sanlab.scenarios.loader import parse_scenario
from support import sanlab_here

POINT = ["--fabric", "eth", "--link-gbps", "100", "--rw", "randread", "--bs", "4k", "--iodepth", "1"]


sanlab = sanlab_here  # in this process: the fast tier starts none


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


def test_every_solver_counts_a_polling_job_s_core_as_busy():
    """The simulator, the fit's MVA and a sweep's MVA count CPU % one way (Network.cpu_pct)."""
    from sanlab.models.calibration.calibrate import busy_pct
    from sanlab.models.core import mva
    from sanlab.models.core.network import Point, build
    from sanlab.models.core.simulate import simulate
    from sanlab.models.sweeps.sweep import _by_mva

    net = build(Point("nvme-rdma", "roce", 100, "randread", 4096, 1, 4, poll=True))
    floor = net.spinning_pct
    assert floor > 0
    solution = mva.solve(net)
    assert busy_pct(net, solution, "initiator") >= floor
    assert simulate(net).cpu_pct["initiator"] >= floor
    assert _by_mva(net.point, net, solution, 1).cpu_initiator_pct >= round(floor, 2)
