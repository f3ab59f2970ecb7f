"""``sanlab calibrate --runs``: a profile fitted to run records gives back the machine that made them.

Records are projected by the model's simulator - the solver that projects,
as a real machine's runs would be measured - from a machine unlike the
default profile, with a seeded 2 % lognormal "measurement" noise, marked
``measured`` and written as ``sanlab run`` writes results.json.  Each record
says which machine it stands for (``machine``, ``backend``), as a real
run's does.  The fit starts from the default profile with every cost it
fits twice its value and no ``--base`` about the machine: the hosts, NIC,
MTU, stack and backend must come from the records.  Each recovered
parameter's 95 % interval must hold the truth, and cells left out of the
fit must be projected within 5 % on average and 10 % at worst.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sanlab.models.calibration.calibrate_runs import (
    calibrate_runs,
    read_cells,
    starting_profile,
    write_profile,
)
from sanlab.models.core.network import Point, build
from sanlab.models.core.params import get_param, set_param
from sanlab.models.core.profile_files import clear_cache, load_profile
from sanlab.models.core.project import project_point
from sanlab.models.core.simulate import Settings, simulate
from sanlab.scenarios.errors import SanlabError

NOISE = 0.02
SIMULATED = 11  # the records' seed: not the fit's (1), so the fit meets fresh batches
# A user's own machine, written by hand: hosts without ``from:`` (other cores, clock and core
# designs), a NIC of its own latency, per-packet cost, MTU and slot, other stacks (LIO, nvmet)
# and an NVMe drive of its own.  What no record states and no cell pins - the NIC's batching
# window and PCIe latency, a RAM disk's copy cost - it shares with the default profile, which
# lends them to the fit: no method could recover those from IOPS.
USER_LAB = {
    "name": "user-lab",
    "initiator": {"cpu": "AMD EPYC 7443P", "core": "zen3", "cores": 24, "ghz": 3.2},
    "target": {"cpu": "2 x Xeon Gold 6338", "core": "sunny-cove", "cores": 64, "ghz": 2.0},
    "nics": [
        {
            "from": "modern-100g",
            "like": "connectx-5",
            "name": "e810",
            "fabrics": ["eth", "roce"],
            "link_gbps": [100],
            "mtu": 4200,
            "one_way_us": 3.2,
            "host_kcycles_per_packet": 2.4,
            "pcie": {"gen": 4, "lanes": 16},
        },
    ],  # fmt: skip
    "backends": {
        "nvme": {
            "kind": "nvme",
            "name": "Samsung PM1735",
            "read_latency_us": 75,
            "write_latency_us": 22,
            "read_us_per_io": 0.1,
            "write_us_per_io": 0.1,
            "read_gbytes_per_s": 8.0,
            "write_gbytes_per_s": 3.8,
        },
        "ramdisk": {"from": "modern-100g", "name": "RAM disk"},
    },  # fmt: skip
    "default_backend": "nvme",
    "target_stacks": {"iscsi": "lio", "nvme-tcp": "nvmet", "nvme-rdma": "nvmet"},
    "max_transfer": {"nvme-tcp": 131072, "nvme-rdma": 131072},
}
MACHINES = {
    # iSCSI is left out of starwind-2024: its 24 sessions (6 LUNs x 4) are a fact no record states.
    "starwind-2024": [("nvme-rdma", "roce"), ("nvme-tcp", "eth")],
    "user-lab": [("nvme-rdma", "roce"), ("nvme-tcp", "eth"), ("iscsi", "eth")],
}


def cells(truth: str) -> list[Point]:
    """Each transport's reads and writes, 4k and 64k, QD 1 and 16, 1 and 4 jobs, on the drive;
    on the user's lab also one job at QD 1 on a RAM disk beside it (the same target, ``backstore:
    ramdisk``): those tell the network's latency from the drive's, which cells of a drive alone
    cannot (they see only the sum)."""
    shapes = itertools.product(MACHINES[truth], ["randread", "randwrite"], [4096, 65536], [1, 16], [1, 4])
    made = [
        Point(transport=t, fabric=f, link_gbps=100.0, rw=rw, bs=bs, iodepth=qd, numjobs=nj, profile=truth)
        for (t, f), rw, bs, qd, nj in shapes
    ]
    if truth == "user-lab":
        made += [dataclasses.replace(p, backend="ramdisk") for p in made if p.iodepth == 1 and p.numjobs == 1]
    return made


def record(point: Point, rng: random.Random) -> dict[str, object]:
    """A run's record of ``point`` as the simulator projects it, with measurement noise."""
    made = project_point(point, Settings(seed=SIMULATED), parameter_range=False)
    noise = math.exp(rng.gauss(0.0, NOISE))
    iops = (made.iops or 0) * noise
    return made.model_dump(mode="json") | {
        "mode": "measured",
        "profile": None,
        "iops": iops,
        "bw_mibps": iops * point.bs / 2**20,
        "lat_mean_us": (made.lat_mean_us or 0) / noise,
    }


def simulated_iops(point: Point, profile=None) -> float:
    net = build(point, profile)
    return min(simulate(net, Settings(seed=SIMULATED)).iops, net.bound_iops)


def held_out(point: Point) -> bool:
    """The 64 KiB cells at one I/O in flight a job: the fit sees 64 KiB only under load."""
    return point.bs == 65536 and point.iodepth == 1 and point.backend is None


@pytest.fixture
def profiles(tmp_path, monkeypatch):
    monkeypatch.setenv("SANLAB_PROFILES", str(tmp_path / "profiles"))
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "user-lab.yaml").write_text(yaml.safe_dump(USER_LAB, sort_keys=False))
    clear_cache()
    yield tmp_path / "profiles"
    clear_cache()


def write_run(folder: Path, points: list[Point], seed: int = 7, **change: object) -> Path:
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    records = [record(p, rng) | change for p in points]
    (folder / "results.json").write_text(json.dumps({"results": records}))
    return folder


def default_twice_off(profiles: Path, run: Path) -> None:
    """Write 'default-2x': the default profile with every parameter the fit moves at twice its value."""
    raw, _ = starting_profile("modern-100g", "x", read_cells([run]))
    base = load_profile("modern-100g").model_dump(mode="json") | {"name": "default-2x"}
    base["costs"] = raw["costs"]
    for name in raw["calibration"]["fit"]:
        if not name.startswith("nics."):
            set_param(base, name, get_param(raw, name) * 2)
    for nic in base["nics"]:
        nic["one_way_us"] *= 2
        nic["host_kcycles_per_packet"] *= 2
    for device in (d for d in base["backends"].values() if d["kind"] == "nvme"):
        device["read_latency_us"] *= 2
        device["write_latency_us"] *= 2
        device["read_gbytes_per_s"] = min(2 * device["read_gbytes_per_s"], 50)
        device["write_gbytes_per_s"] = min(2 * device["write_gbytes_per_s"], 50)
    (profiles / "default-2x.yaml").write_text(yaml.safe_dump(base, sort_keys=False))
    clear_cache()


def truth_of(truth: str, run: Path) -> dict[str, float]:
    """The values the fit should find: the truth's own, read at the fitted parameters' paths."""
    raw, _ = starting_profile(truth, "truth", read_cells([run]))
    return {name: get_param(raw, name) for name in raw["calibration"]["fit"]}


@pytest.mark.slow  # seconds of fitting, projecting or waiting
@pytest.mark.parametrize("truth", sorted(MACHINES))
def test_a_machine_unlike_the_default_is_recovered_from_its_records(profiles, tmp_path, truth):
    """Fitted without the held-back cells: every interval holds the truth; held-back cells
    within 5 % on average and 10 % at worst, projected with the written profile."""
    points = cells(truth)
    run = write_run(tmp_path / "run", [p for p in points if not held_out(p)])
    default_twice_off(profiles, run)
    done = calibrate_runs([run], "recovered", "default-2x")
    assert not done.warnings and not done.missed, (done.warnings, done.missed)
    expected = truth_of(truth, run)
    assert set(done.result.params) == set(expected)
    missed = {
        name: (expected[name], done.result.params[name], done.result.intervals[name])
        for name in expected
        if not done.result.intervals[name][0] <= expected[name] <= done.result.intervals[name][1]
    }
    assert not missed
    write_profile(done, [run])
    fitted = load_profile("recovered")
    truth_profile = load_profile(truth)
    for side in ("initiator", "target"):
        mine, real = getattr(fitted, side), getattr(truth_profile, side)
        assert (mine.cores, mine.ghz, mine.core, mine.wakeup_us) == (real.cores, real.ghz, real.core, 2.0)
    assert fitted.default_backend == "nvme" and fitted.nics[0].mtu == truth_profile.nics[0].mtu
    errors = [abs(simulated_iops(p, fitted) / simulated_iops(p) - 1) for p in points if held_out(p)]
    print(truth, "held-back errors %", [round(100 * e, 2) for e in errors])
    assert sum(errors) / len(errors) <= 0.05 and max(errors) <= 0.10, errors


@pytest.mark.slow  # seconds of fitting
def test_a_fit_that_misses_its_own_cells_is_refused_unless_accepted(profiles, tmp_path):
    """The records claim a RAM disk where an NVMe drive served them: no cost can cover it."""
    points = [p for p in cells("starwind-2024") if p.transport == "nvme-rdma"]
    run = write_run(tmp_path / "run", points, backend={"kind": "ramdisk", "model": "RAM disk"})
    done = calibrate_runs([run], "refused")
    assert done.missed
    with pytest.raises(SanlabError) as refused:
        write_profile(done, [run])
    message = str(refused.value)
    assert "\n" not in message and "not written" in message and "likely missing" in message
    assert done.missed[0].row.label in message and "--accept-poor-fit" in message
    assert "likely missing: the backend device" in message
    assert not (profiles / "refused.yaml").exists()
    written = yaml.safe_load(write_profile(done, [run], accept_poor_fit=True).read_text())
    assert written["calibration"]["poor_fit"] and "POOR FIT" in written["description"]


def test_a_record_without_backend_or_host_facts_is_fitted_after_a_warning_naming_the_field(tmp_path):
    points = cells("starwind-2024")[:2]
    run = write_run(tmp_path / "run", points, backend=None, machine=None)
    raw, warnings = starting_profile("modern-100g", "x", read_cells([run]))
    assert any("backend missing" in w for w in warnings)
    assert any("machine.initiator missing" in w for w in warnings)
    assert any("machine.target missing" in w for w in warnings)
    assert all("\n" not in w and "results[0]" in w for w in warnings)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"mode": "emulated"}, "only measured records"),
        ({"iodepth": 1024, "numjobs": 64}, "65536 I/Os in flight"),
        ({"transport": "nvme-tcp", "fabric": "roce"}, "nvme-tcp does not run over fabric 'roce'"),
        ({"iops": True}, "results[0].iops: True"),
        ({"iodepth": 4.5}, "results[0].iodepth"),
        ({"machine": {"initiator": {"ghz": 1e308}}}, "results[0].machine.initiator.ghz"),
        ({"machine": {"target": {"cpu_model": "a\nb"}}}, "results[0].machine.target.cpu_model"),
        ({"backend": {"kind": "tape"}}, "results[0].backend.kind"),
    ],
)
def test_records_no_run_could_make_are_refused_in_one_line(tmp_path, change, message):
    run = write_run(tmp_path / "run", cells("starwind-2024")[:1], **change)
    with pytest.raises(SanlabError) as refused:
        read_cells([run])
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_a_folder_named_many_times_is_read_once_and_too_many_records_are_refused_at_once(tmp_path):
    from sanlab.models.calibration.calibrate_runs import MAX_RECORDS, unique_folders

    run = write_run(tmp_path / "run", cells("starwind-2024")[:2])
    said: list[str] = []
    assert unique_folders([run] * 300, said.append) == [run]
    assert "299 folder(s) named more than once" in said[0]
    many = tmp_path / "many"
    many.mkdir()
    one = json.loads((run / "results.json").read_text())["results"][0]
    (many / "results.json").write_text(json.dumps({"results": [one] * (MAX_RECORDS + 1)}))
    with pytest.raises(SanlabError, match="at most"):
        read_cells([many])


@pytest.mark.subprocess  # starts sanlab, a tool or a helper as a process
def test_the_cli_writes_a_profile_that_model_then_uses(profiles, tmp_path):
    run = write_run(tmp_path / "run", [p for p in cells("starwind-2024") if p.transport == "nvme-rdma"])
    env = dict(os.environ, SANLAB_PROFILES=str(profiles))

    def sanlab(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "sanlab", *args], capture_output=True, text=True, env=env, timeout=120
        )

    fitted = sanlab("calibrate", "--runs", str(run), str(run), "--name", "my-lab", "--json")
    assert fitted.returncode == 0, fitted.stderr
    assert "reading 16 records" in fitted.stderr and "named more than once" in fitted.stderr
    document = json.loads(fitted.stdout)
    assert Path(document["profile"]) == profiles / "my-lab.yaml"
    assert len(document["cells"]) == 16 and all(abs(c["error_pct"]) < 10 for c in document["cells"])
    assert all(len(p["interval_95"]) == 2 for p in document["parameters"].values())
    table = sanlab("calibrate", "--runs", str(run), "--name", "my-lab-2")
    assert table.returncode == 0, table.stderr
    assert "95% [" in table.stdout and "fit error" in table.stdout
    projected = sanlab(
        "model", "--profile", "my-lab", "--transport", "nvme-rdma", "--fabric", "roce", "--link-gbps", "100",
        "--rw", "randread", "--bs", "4k", "--iodepth", "8", "--numjobs", "2", "--json",
    )  # fmt: skip
    assert projected.returncode == 0, projected.stderr
    result = json.loads(projected.stdout)["results"][0]
    # The user's own set-up by default: starwind's SPDK, MTU 1500 and Optane drive, not the base's.
    assert (result["profile"], result["target_stack"], result["mtu"]) == ("my-lab", "spdk", 1500)
    assert result["backend"]["model"] == "Intel Optane P5800X via AIO"
    for bad, message in (
        (["--name", "modern-100g"], "a shipped profile has that name"),
        (["--name", "Bad Name"], "give the new profile a name"),
        (["--name", "x", "--write"], "--write"),
    ):
        refused = sanlab("calibrate", "--runs", str(run), *bad)
        assert refused.returncode == 1 and message in refused.stderr, refused.stderr
    empty = sanlab("calibrate", "--runs", str(tmp_path), "--name", "x")
    assert empty.returncode == 1 and "results.json" in empty.stderr


def test_a_host_written_by_hand_wakes_up_as_every_shipped_one(profiles):
    """Issue #47: a user's host without ``from:`` woke in 0 us, every shipped one in 2 us."""
    from sanlab.models.core.profile import WAKEUP_US
    from sanlab.models.core.profile_files import profile_names

    mine = load_profile("user-lab")
    assert mine.initiator.wakeup_us == mine.target.wakeup_us == WAKEUP_US == 2.0
    shipped = [load_profile(n) for n in profile_names(shipped_only=True)]
    assert {p.initiator.wakeup_us for p in shipped} | {p.target.wakeup_us for p in shipped} == {WAKEUP_US}
