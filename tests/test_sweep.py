"""`sanlab sweep`: grids of projections, serial or on Dask, identical either way, resumable."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner

from sanlab.main import cli
from sanlab.models.core.project import project_point
from sanlab.models.core.simulate import Settings
from sanlab.models.sweeps import sweep_run
from sanlab.models.sweeps.sweep import expand, load_spec, point_seed, solve_point, to_point
from sanlab.models.sweeps.sweep_goals import pareto_front, parse_goal
from sanlab.scenarios.errors import ScenarioError
from support import INTERRUPTIBLE, REPO

SMALL = {
    "axes": {"transport": ["nvme-tcp", "nvme-rdma", "iser"], "iodepth": [1, 32], "cores": [4, 16]},
    "fixed": {"rw": "randread", "bs": "4k", "numjobs": 4, "link_gbps": 100},
    "goals": ["iops >= 5e5"],
}


def _spec(tmp_path: Path, data: dict, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def _sweep(*args: str):
    return CliRunner().invoke(cli, ["sweep", *args])


@pytest.mark.parametrize(
    "change,expect",
    [
        ({"axes": {"colour": [1]}}, "axes.colour: not an option"),
        ({"axes": {"bs": ["5q"]}}, "axes.bs[0]: '5q' is not a size"),
        ({"axes": {"iodepth": [0]}}, "axes.iodepth[0]"),
        ({"axes": {"profile": ["modern-100g", "nosuch"]}}, "axes.profile[1]: 'nosuch' is not a profile (use"),
        ({"axes": {"core": ["zen4", "zen9"]}}, "axes.core[1]: 'zen9' is not a core design (use"),
        ({"goals": ["iops >> 3"]}, "goals[0]: 'iops >> 3' is not a goal"),
        (
            {"fixed": {"rw": "randread", "bs": "4k", "numjobs": 4, "transport": "iscsi"}},
            "fixed.transport: is also an axis",
        ),
        ({"fixed": {"bs": "4k", "numjobs": 4}}, "'rw' is required"),
        ({"pareto": {"happiness": "max"}}, "pareto.happiness: is not a field"),
        ({"solver": "magic"}, "solver"),
        ({"surprise": 1}, "unknown field"),
    ],
)
def test_a_bad_spec_is_one_line_per_problem(tmp_path, change, expect):
    result = _sweep(str(_spec(tmp_path, SMALL | change)), "--out", str(tmp_path / "out"), "--serial")
    assert result.exit_code == 1 and expect in result.output, result.output
    assert not (tmp_path / "out").exists()


def test_combinations_the_model_does_not_cover_are_skipped_and_counted(tmp_path):
    spec = SMALL | {"axes": {"transport": ["iscsi", "nvme-rdma"], "fabric": ["eth", "roce"], "iodepth": [4]}}
    grid = expand(load_spec(_spec(tmp_path, spec)))
    assert len(grid.points) == 2  # iscsi/eth and nvme-rdma/roce
    assert sum(grid.skipped.values()) == 2 and any("needs an RDMA fabric" in r for r in grid.skipped)


def test_a_point_is_seeded_by_its_coordinates_not_its_place(tmp_path):
    a = expand(load_spec(_spec(tmp_path, SMALL, "a.yaml")))
    reordered = SMALL | {"axes": dict(reversed(list(SMALL["axes"].items())))}
    b = expand(load_spec(_spec(tmp_path, reordered, "b.yaml")))
    assert {p.key: p.seed for p in a.points} == {p.key: p.seed for p in b.points}
    assert point_seed(a.points[0].key, 1) != point_seed(a.points[0].key, 2)


def test_goals_and_the_pareto_front():
    goal = parse_goal("lat_p99_us <= 100")
    assert goal.met({"lat_p99_us": 99.0}) and not goal.met({"lat_p99_us": 101}) and not goal.met({})
    rows = [
        {"iops": 100, "cores": 8, "name": "a"},
        {"iops": 200, "cores": 16, "name": "b"},
        {"iops": 150, "cores": 16, "name": "dominated by b"},
        {"iops": 90, "cores": 8, "name": "dominated by a"},
        {"iops": 300, "cores": 32, "name": "c"},
    ]
    front = pareto_front(rows, {"iops": "max", "cores": "min"})
    assert [r["name"] for r in front] == ["a", "b", "c"]


def test_where_auto_picks_mva_it_agrees_with_simulation(tmp_path):
    # Eight jobs: at four, since the path table prices LIO's SRP and iSCSI targets (issue #46),
    # SRP is bound by two desks at once, which auto rightly simulates, and too few points are MVA's.
    spec = SMALL | {
        "axes": {"transport": ["nvme-tcp", "nvme-rdma", "iser", "srp", "iscsi"], "iodepth": [1, 8, 32]},
        "fixed": SMALL["fixed"] | {"numjobs": 8},
    }
    grid = expand(load_spec(_spec(tmp_path, spec)))
    checked = 0
    for point in grid.points:
        row = solve_point(point, "auto", needs_p99=False)
        if row["solver"] != "mva":
            continue
        sim = project_point(to_point(point.coords), Settings(seed=point.seed))
        assert abs(row["iops"] / sim.iops - 1) < 0.03, (point.key, row["iops"], sim.iops)
        checked += 1
    assert checked >= len(grid.points) // 3


@pytest.mark.subprocess  # starts sanlab, a tool or a helper as a process
def test_serial_and_local_cluster_give_identical_tables(tmp_path):
    spec = _spec(tmp_path, SMALL)
    serial = _sweep(str(spec), "--out", str(tmp_path / "serial"), "--serial")
    assert serial.exit_code == 0, serial.output
    workers = str(min(2, sweep_run.usable_cores()))  # more than the cores is refused unless told
    parallel = _sweep(str(spec), "--out", str(tmp_path / "parallel"), "--workers", workers)
    assert parallel.exit_code == 0, parallel.output
    for name in ("results.csv", "goals.csv", "pareto.csv"):
        assert (tmp_path / "serial" / name).read_text() == (tmp_path / "parallel" / name).read_text()
    rows = list(csv.DictReader((tmp_path / "serial" / "results.csv").open()))
    assert len(rows) == 12 and {r["solver"] for r in rows} <= {"mva", "sim"}
    table = pq.read_table(tmp_path / "serial" / "results.parquet")
    assert table.num_rows == 12 and {"iops", "transport", "cores", "solver", "bottleneck"} <= set(
        table.column_names
    )
    goals = list(csv.DictReader((tmp_path / "serial" / "goals.csv").open()))
    assert goals and all(float(r["iops"]) >= 5e5 for r in goals)
    assert (tmp_path / "serial" / "pareto.png").stat().st_size > 10_000


def test_another_spec_into_the_same_folder_is_refused(tmp_path):
    out = tmp_path / "out"
    assert _sweep(str(_spec(tmp_path, SMALL)), "--out", str(out), "--serial").exit_code == 0
    other = SMALL | {"goals": ["iops >= 1e6"]}
    result = _sweep(str(_spec(tmp_path, other, "other.yaml")), "--out", str(out), "--serial")
    assert result.exit_code == 1 and "holds a sweep of another spec" in result.output


@pytest.mark.subprocess  # starts sanlab, a tool or a helper as a process
def test_an_interrupted_sweep_resumes_without_recomputing(tmp_path):
    spec = _spec(
        tmp_path,
        SMALL | {"solver": "sim", "axes": SMALL["axes"] | {"numjobs": [1, 2, 4, 8]}},
    )
    spec_data = yaml.safe_load(spec.read_text())
    spec_data["fixed"].pop("numjobs")
    spec.write_text(yaml.safe_dump(spec_data))
    out = tmp_path / "out"
    command = [sys.executable, "-m", "sanlab", "sweep", str(spec), "--out", str(out), "--serial"]
    run = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **INTERRUPTIBLE
    )
    journal = out / "points.jsonl"
    deadline = time.monotonic() + 120
    while run.poll() is None and time.monotonic() < deadline:
        if journal.exists() and journal.read_text().count("\n") >= 8:
            run.send_signal(signal.SIGINT)
            break
        time.sleep(0.02)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    kept = journal.read_text().count("\n")
    assert 8 <= kept < 48
    resumed = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert f"({48 - kept} computed, {kept} reused)" in resumed.stdout
    assert _sweep(str(spec), "--out", str(tmp_path / "fresh"), "--serial").exit_code == 0
    assert (out / "results.csv").read_text() == (tmp_path / "fresh" / "results.csv").read_text()


@pytest.mark.subprocess  # starts sanlab, a tool or a helper as a process
def test_a_sweep_through_a_real_dask_scheduler_and_worker(tmp_path):
    """A scheduler and a worker as separate processes, as a user's cluster would be."""
    dask = Path(sys.executable).with_name("dask")
    address_file = tmp_path / "scheduler.json"
    scheduler = subprocess.Popen(
        [
            str(dask),
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-dashboard",
            "--scheduler-file",
            str(address_file),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    worker = None
    try:
        deadline = time.monotonic() + 60
        while not address_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        address = json.loads(address_file.read_text())["address"]
        worker = subprocess.Popen(
            [str(dask), "worker", address, "--nworkers", "1", "--nthreads", "1", "--no-dashboard"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        spec = _spec(tmp_path, SMALL)
        remote = _sweep(str(spec), "--out", str(tmp_path / "remote"), "--scheduler", address)
        assert remote.exit_code == 0, remote.output
        assert _sweep(str(spec), "--out", str(tmp_path / "serial"), "--serial").exit_code == 0
        assert (tmp_path / "remote" / "results.csv").read_text() == (
            tmp_path / "serial" / "results.csv"
        ).read_text()
    finally:
        for process in (worker, scheduler):
            if process is not None:
                process.terminate()
                process.wait(timeout=30)


def test_an_unreachable_scheduler_is_one_line(tmp_path, monkeypatch):
    # Dask retries a refused connect until its timeout: the product waits 20 s, the test 2 s.
    monkeypatch.setattr(sweep_run, "HANDSHAKE_S", 2.0)
    result = _sweep(
        str(_spec(tmp_path, SMALL)), "--out", str(tmp_path / "o"), "--scheduler", "tcp://127.0.0.1:9"
    )
    assert result.exit_code == 1 and "cannot reach a Dask scheduler" in result.output


def test_the_shipped_spec_validates():
    grid = expand(load_spec(REPO / "scenarios" / "sweeps" / "two-million.yaml"))
    assert len(grid.points) == 540


def test_a_spec_that_is_not_a_mapping(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("- a\n")
    with pytest.raises(ScenarioError, match="must be a YAML mapping"):
        load_spec(path)


def test_the_console_front_marks_an_extrapolated_point(tmp_path):
    """A front point past every published row says so where people read the front: the console."""
    from click.testing import CliRunner

    from sanlab.main import cli

    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "axes:\n  link_gbps: [100, 200]\nfixed: {transport: nvme-rdma, fabric: roce, profile: modern-400g, "
        "rw: randread, bs: 64k, numjobs: 8, iodepth: 32}\npareto: {iops: max}\nsolver: mva\n"
    )
    result = CliRunner().invoke(cli, ["sweep", str(spec), "--out", str(tmp_path / "out"), "--serial"])
    assert result.exit_code == 0, result.output
    front = [line for line in result.output.splitlines() if line.startswith("  nvme-rdma")]
    assert front and all("200G" in line and "EXTRAPOLATED" in line for line in front)
