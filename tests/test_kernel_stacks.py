"""Stuck-task summaries from real guest stacks (``grep -H`` of /proc/*/{comm,status,stack}).

Both inputs were read from a pair-siw lab: one idle, one while ``nvme connect
-t rdma`` waited on a target whose link dropped every packet (siw connects
TCP in blocking mode inside rdma_cm's worker, so the Connect hangs there).
"""

from __future__ import annotations

from sanlab.targets import kernel_stacks
from support import REPO

DATA = REPO / "tests" / "data"


def test_an_idle_guest_has_nothing_stuck():
    text = (DATA / "stacks-idle-siw.txt").read_text()
    tasks = kernel_stacks.parse(text)
    assert len(tasks) > 50 and any(t.comm == "siw_tx/0" for t in tasks)  # siw's idle tx thread is seen
    assert kernel_stacks.stuck(text) == []


def test_a_connect_to_a_blackholed_target_shows_where_it_waits():
    lines = kernel_stacks.stuck((DATA / "stacks-siw-connect-blackholed.txt").read_text())
    assert lines == [  # in PID order
        "kworker/u2:0+rdma_cm (S): inet_stream_connect <- siw_connect [siw] <- iw_cm_connect [iw_cm]"
        " <- rdma_connect_locked [rdma_cm] <- nvme_rdma_cm_handler [nvme_rdma]",
        "nvme (S): nvme_rdma_alloc_queue [nvme_rdma] <- nvme_rdma_setup_ctrl [nvme_rdma]"
        " <- nvme_rdma_create_ctrl [nvme_rdma] <- nvmf_dev_write [nvme_fabrics]",
    ]


def test_garbage_is_not_an_error():
    assert kernel_stacks.stuck("grep: /proc/12/stack: Permission denied\nnonsense\n") == []
