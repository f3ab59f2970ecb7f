"""Upstream blktests across a wire, in sanlab's guests (``sanlab blktests run``): a few tests of
the nvme group with their target in the other guest, over rxe.  Long: CI cannot fetch blktests,
so this runs only with a checkout named in ``SANLAB_BLKTESTS``
(``git clone https://github.com/osandov/blktests``), through benchmarks/long_vm_tests.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sanlab.scenarios.results.blktests import read_results
from sanlab.targets.sessions import blktests_session as session

pytestmark = [pytest.mark.vm, pytest.mark.long]

# Two tests that pass over every wire here (targets/README.md): a namespace made on the target
# guest is found by the UUID blktests asked for (004), and a host connects and disconnects (008).
TESTS = ("nvme/004", "nvme/008")


@pytest.fixture
def checkout() -> Path:
    given = os.environ.get("SANLAB_BLKTESTS")
    if not given:
        pytest.skip(
            "no blktests checkout: set SANLAB_BLKTESTS to one (git clone https://github.com/osandov/blktests)"
        )
    return Path(given)


def test_nvme_tests_pass_with_their_target_across_an_rxe_cable(checkout, guest_image, tmp_path):
    plan = session.plan("rxe", "nvme", checkout, TESTS, 300)
    summary = session.run(plan, tmp_path / "run", force=False, say=print, capture=True)
    assert [t["test"] for t in summary["tests"]] == list(TESTS) and summary["timed_out"] == []
    results = read_results(tmp_path / "run" / "results")
    assert sorted({r.test for r in results}) == list(TESTS)
    assert all(r.status == "pass" and r.device.startswith("nodev_tr_rdma") for r in results), results
    # blktests' own file, and the log of the check that wrote it, are in the run folder
    for test in TESTS:
        group, number = test.split("/")
        (kept,) = (tmp_path / "run" / "results").glob(f"*/{group}/{number}")
        assert "status\tpass" in kept.read_text()
        assert "[passed]" in (tmp_path / "run" / "logs" / f"check-{group}-{number}.log").read_text()
    assert json.loads((tmp_path / "run" / "blktests.json").read_text())["counts"]["pass"] == len(TESTS)
    assert (tmp_path / "run" / "fabric.pcap").stat().st_size > 10_000  # their NVMe/RDMA crossed the cable
