"""A run's points on a Dask cluster (targets/sessions/cluster.py): shared out, merged in run order.

These use real Dask clusters of worker processes on this machine and the dry-run hosts
(targets/dryrun.py), so they exercise the probe, the cut, the dispatch to named workers and
the merge into one run folder in seconds; the same run on VMs, where each worker boots its own
lab, is ``test_a_cluster_run_on_vms_records_what_a_serial_run_does`` (long: benchmarks/long_vm_tests.py).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sanlab.emulator.images import image_key
from sanlab.scenarios.results.outdir import OutputFolder
from sanlab.scenarios.results.records import RESULTS
from sanlab.targets.points import chosen, matrix, planned_points
from sanlab.targets.sessions import cluster, run_session
from sanlab.validation import load_checked

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "scenarios" / "smoke.yaml"


def _records(folder: Path) -> list[dict]:
    return json.loads((folder / RESULTS).read_text())["results"]


def _fio_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("fio ")]


def test_shares_are_contiguous_cover_every_point_and_differ_by_one_at_most():
    for count in range(0, 12):
        for workers in range(1, 5):
            cut = cluster.shares(list(range(3, 3 + count)), workers)
            assert [n for share in cut for n in share] == list(range(3, 3 + count))
            assert len(cut) == min(workers, count)
            assert all(cut) and max(map(len, cut), default=0) - min(map(len, cut), default=0) <= 1


def test_local_n_is_bounded_in_one_line():
    assert cluster.check_local("local:2") == 2
    for bad in ("local:0", "local:17", "local:x", "local:-1", "local:2\n"):
        with pytest.raises(cluster.SanlabError, match=r"^--scheduler .*local:N with N from 1 to 16"):
            cluster.check_local(bad)


@pytest.mark.subprocess  # a real Dask LocalCluster of two worker processes
def test_two_workers_merge_into_the_records_and_commands_of_a_serial_run(tmp_path, guest_image):
    """The workers' probe wants the guest image in the cache (a worker without it gets no
    points): ``guest_image`` builds it, or waits on the build lock while the README's command
    builds it beside the unit tests (run before it was there, the test failed, 2026-11-27)."""
    loaded = load_checked(SMOKE)
    said: list[str] = []
    spread = run_session.fresh(SMOKE, loaded, tmp_path / "spread", force=False)
    if shutil.which("qemu-system-x86_64") is None:
        pytest.skip("the workers' probe wants QEMU on this machine")
    with cluster.local_cluster(2) as client:
        fit = cluster.fit_workers(client, loaded, said.append)
        if len(fit) < 2:
            pytest.skip(f"this machine's workers cannot boot the guests: {said}")
        cluster.rehearse_on_cluster(loaded, spread, client, said.append)
    serial = run_session.fresh(SMOKE, loaded, tmp_path / "serial", force=False)
    every = frozenset(range(planned_points(loaded)))
    cluster.merge(serial, cluster.rehearse_share(loaded, every), "share-1/")

    assert _records(tmp_path / "spread") == _records(tmp_path / "serial")
    assert len(_records(tmp_path / "spread")) == planned_points(loaded) == 24
    assert [r["rw"] for r in _records(tmp_path / "spread")][:3] == ["randwrite", "randwrite", "randread"]
    # each worker had a share of its own, and between them they sent every fio command the
    # serial walk sends, each once, in the same order
    assert sum("share " in line and " to tcp://" in line for line in said) == 2
    serial_fio = _fio_lines((tmp_path / "serial/share-1/dry-run/initiator.commands").read_text())
    spread_fio = []
    for k in (1, 2):
        spread_fio += _fio_lines((tmp_path / f"spread/share-{k}/dry-run/initiator.commands").read_text())
    assert spread_fio == serial_fio and len(serial_fio) == 24 + 8  # the verified reads fill first
    assert OutputFolder.open(tmp_path / "spread", "--out").foreign() == []  # all of it sanlab's


@pytest.mark.subprocess  # a Dask scheduler and two worker processes, one of them without QEMU
def test_a_worker_without_qemu_or_the_image_says_so_and_gets_no_points(tmp_path):
    from dask.distributed import Client, Nanny, Scheduler, SpecCluster

    if shutil.which("qemu-system-x86_64") is None:
        pytest.skip("the fit worker needs QEMU on this machine")
    loaded = load_checked(SMOKE)
    cache = tmp_path / "cache"  # the fit worker's cache: an image of the current recipe's key
    (cache / "images" / image_key()).mkdir(parents=True)
    (cache / "images" / image_key() / "manifest.json").write_text("{}")
    bare = {"SANLAB_CACHE": str(tmp_path / "empty"), "PATH": str(tmp_path / "no-bin")}
    workers = {
        "fit": {"cls": Nanny, "options": {"nthreads": 1, "env": {"SANLAB_CACHE": str(cache)}}},
        "bare": {"cls": Nanny, "options": {"nthreads": 1, "env": bare}},
    }
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": "127.0.0.1:0"}}
    said: list[str] = []
    journal = run_session.fresh(SMOKE, loaded, tmp_path / "run", force=False)
    with SpecCluster(workers=workers, scheduler=scheduler) as spec, Client(spec) as client:
        client.wait_for_workers(2, timeout=60)
        cluster.rehearse_on_cluster(loaded, journal, client, said.append)
    refusals = [line for line in said if "it gets no points" in line]
    assert len(refusals) == 1
    assert "lacks qemu-system-x86 (QEMU)" in refusals[0] and "has no debian-12 guest image" in refusals[0]
    assert re.search(r"run 'sanlab images build'", refusals[0])
    assert [line for line in said if " to tcp://" in line] == [
        next(line for line in said if line.startswith("share 1: points 1-24 to"))
    ]
    assert len(_records(tmp_path / "run")) == 24
    assert not (tmp_path / "run" / "share-2").exists()


def test_nested_folders_of_a_cluster_run_are_sanlabs_and_cleared(tmp_path):
    """A share's files sit two folders deep (share-1/dry-run/): each folder on the way is the
    run's, so --resume finds nothing foreign and --force leaves no empty folder behind."""
    folder = OutputFolder.open(tmp_path / "run", "--out")
    folder.write_text("share-1/dry-run/initiator.commands", "fio\n")
    assert folder.foreign() == []
    (tmp_path / "run" / "share-1" / "user.txt").write_text("mine")
    assert folder.foreign() == ["share-1/user.txt"]
    (tmp_path / "run" / "share-1" / "user.txt").unlink()
    folder.clear()
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [".sanlab-manifest.json"]


def test_a_share_is_the_run_order_numbers_it_names_less_what_a_resume_skips():
    loaded = load_checked(SMOKE)
    every = [p.label for work in matrix(loaded) for p in work.points]
    picked = chosen(loaded, skip=2, only=frozenset({1, 2, 3, 5, 23}))
    assert [p.label for work in picked for p in work.points] == [every[i] for i in (2, 3, 5, 23)]
    assert [work.planned.name for work in picked] == ["lio-iscsi", "tgt-iscsi", "nvmet-rdma-siw"]
    assert [p.label for work in chosen(loaded) for p in work.points] == every


TWO_POINTS = """\
description: two NVMe/TCP points, the smallest run a cluster can share out
hosts:
  - {name: initiator, role: initiator}
  - {name: target, role: target}
links:
  - {name: net, endpoints: [initiator, target], mtu: 1500}
targets:
  - {name: nvmet-tcp, host: target, stack: nvmet, transport: nvme-tcp, backstore: ramdisk, size: 32m}
workloads:
  - {rw: randwrite, bs: [4k, 64k], iodepth: 4, runtime: 3s, verify: crc32c, verify_size: 4m}
capture: true
"""
# What differs between two runs of one point however faithful they are: speeds and times.
TIMINGS = {
    "iops", "bw_mibps", "lat_mean_us", "lat_p99_us", "cpu_target_pct", "cpu_initiator_pct",
    "recovery_s", "failover_s", "failback_s", "throughput_dip_pct",
}  # fmt: skip


def _sanlab(*args: str) -> subprocess.CompletedProcess[str]:
    sanlab = Path(sys.executable).parent / "sanlab"
    return subprocess.run([str(sanlab), *args], capture_output=True, text=True, timeout=1800)


@pytest.mark.vm
@pytest.mark.long  # three labs of two VMs (one serial, one per worker): minutes under TCG
@pytest.mark.subprocess
def test_a_cluster_run_on_vms_records_what_a_serial_run_does(tmp_path):
    scenario = tmp_path / "two-points.yaml"
    scenario.write_text(TWO_POINTS)
    serial = _sanlab("run", str(scenario), "--out", str(tmp_path / "serial"))
    assert serial.returncode == 0, serial.stderr[-2000:]
    spread = _sanlab("run", str(scenario), "--out", str(tmp_path / "spread"), "--scheduler", "local:2")
    assert spread.returncode == 0, spread.stderr[-2000:]
    assert spread.stderr.count(" to tcp://127.0.0.1:") == 2, spread.stderr[-2000:]

    def kept(folder: str) -> list[dict]:
        return [{k: v for k, v in r.items() if k not in TIMINGS} for r in _records(tmp_path / folder)]

    assert kept("spread") == kept("serial")
    assert [r["verify"] for r in kept("spread")] == ["pass", "pass"]
    names = sorted(p.name for p in (tmp_path / "serial" / "fio").iterdir())
    assert sorted(p.name for p in (tmp_path / "spread" / "fio").iterdir()) == names
    for k in (1, 2):  # each worker's own lab captured its own point
        assert (tmp_path / "spread" / f"share-{k}" / "net.pcap").stat().st_size > 0
        assert list((tmp_path / "spread" / f"share-{k}" / "logs").glob("*.dmesg"))
    assert OutputFolder.open(tmp_path / "spread", "--out").foreign() == []


def test_a_worker_without_the_kernel_the_scenario_brings_says_so(tmp_path):
    """The probe, as a worker runs it: a kernel path that is not there on the worker's machine."""
    from sanlab.scenarios.loader import load_scenario

    scenario = tmp_path / "brought.yaml"
    scenario.write_text(TWO_POINTS.replace("capture: true", "guest: {kernel: ./no-such-linux.deb}"))
    host, problems = cluster.probe(load_scenario(scenario))
    assert host and any(
        p.startswith("cannot boot the kernel './no-such-linux.deb' there: ") and "no such file" in p
        for p in problems
    )
