"""The null backstore (null_blk through configfs) on each emulated stack.

null_blk discards writes, so no verified workload can use it (validation
refuses that); these runs read without verification and check that every
stack exports the device and fio gets IOPS from it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from support import REPO

pytestmark = pytest.mark.vm

SCENARIO = {
    "hosts": [{"name": "initiator", "role": "initiator"}, {"name": "target", "role": "target"}],
    "links": [{"name": "roce", "endpoints": ["initiator", "target"], "fabric": "roce"}],
    "targets": [
        {
            "name": "nvmet-null",
            "host": "target",
            "stack": "nvmet",
            "transport": "nvme-rdma",
            "backstore": None,
        },
        {"name": "lio-null", "host": "target", "stack": "lio", "transport": "iscsi", "backstore": None},
        {"name": "tgt-null", "host": "target", "stack": "tgt", "transport": "iscsi", "backstore": None},
    ],
    "workloads": [{"rw": "randread", "bs": "4k", "iodepth": 4, "runtime": "2s"}],
}


def test_every_stack_serves_null_blk(guest_image, tmp_path):
    path = tmp_path / "null.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    result = subprocess.run(
        [sys.executable, "-m", "sanlab", "run", str(path), "--out", str(tmp_path / "out"), "--json"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    records = json.loads(result.stdout)["results"]
    assert {r["target_stack"] for r in records} == {"nvmet", "lio", "tgt"}
    for r in records:
        assert r["error"] is None and r["iops"] > 0 and r["verify"] == "off", r
