"""Work bounded before it starts (issue #45, deliverable 6), as a careless or hostile user tries it.

Every refusal here is held to: exit 1 or 2, no traceback, one line naming the
option or file, the value and the bound, an answer in bounded time, and no
work begun (no output folder made, no image built, no worker started).  The
few cases that must start something real do so: a Dask LocalCluster, a
silent TCP listener, a second process holding a run's lock.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from test_bad_inputs import deadline, error_lines

from sanlab.commands_lab import exit_status
from sanlab.main import cli
from sanlab.models.core.project import MAX_MODEL_POINTS, check_size, jobs, point_count
from sanlab.models.sweeps import sweep_run
from sanlab.models.sweeps.sweep import MAX_POINTS
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.loader import load_scenario, parse_scenario
from support import REPO

CORES = len(os.sched_getaffinity(0))
FIXED = {
    "transport": "nvme-tcp",
    "fabric": "eth",
    "link_gbps": 100,
    "rw": "randread",
    "bs": "4k",
    "numjobs": 1,
}
TINY = {"axes": {"iodepth": [1, 2]}, "fixed": FIXED, "solver": "mva"}


def _invoke(argv: list[str], env: dict[str, str] | None = None, seconds: float = 30):
    started = time.monotonic()
    with deadline(seconds):
        result = CliRunner().invoke(cli, argv, env=env)
    result.seconds = time.monotonic() - started
    return result


def _refused(result, *pieces: str, longest: int = 400) -> list[str]:
    """Held to the bar: exit 1 or 2, no traceback, one line, every piece in it."""
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), (
        f"raised {result.exception!r}"
    )
    assert result.exit_code in (1, 2), result.output
    assert "Traceback" not in result.output
    lines = error_lines(result.output)
    assert len(lines) == 1, result.output
    assert all(piece in lines[0] for piece in pieces), result.output
    assert len(lines[0]) < longest
    return lines


# --- sanlab model: points per scenario ---------------------------------------------------------


def _scenario(tmp_path: Path, projections: int, bs: int, iodepth: int = 1, numjobs: int = 1) -> Path:
    """A scenario of ``projections`` x ``bs`` x ``iodepth`` x ``numjobs`` points (x 2 rw)."""
    sizes = ["512", "1k", "2k", "4k", "8k", "16k", "32k", "64k", "128k", "256k", "512k", "1m"]
    sizes += [f"{n}k" for n in range(3, 64) if f"{n}k" not in sizes]
    data = {
        "name": "big",
        "workloads": [
            {
                "rw": ["randread", "randwrite"],
                "bs": sizes[:bs],
                "iodepth": list(range(1, iodepth + 1)),
                "numjobs": list(range(1, numjobs + 1)),
            }
        ],
        "projections": [
            {"profile": "zeta-2016", "transport": "iscsi", "fabric": "eth", "link_gbps": 10 + i % 30}
            for i in range(projections)
        ],
    }
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("projections", "bs", "iodepth", "numjobs", "points"),
    [
        (1, 1, 1, 1, 2),
        (129, 1, 1, 1, 258),  # just past the cap: 129 projections x 2 rw
        (16, 8, 1, 1, 256),  # exactly the cap: counted, not refused
        (256, 8, 1, 1, 4096),  # the hostile pass's 4,096
        (1, 32, 32, 32, 65536),  # one projection, one workload at every axis's most
        (256, 32, 2, 8, 262144),
    ],
)
def test_point_count_is_what_jobs_yields_and_the_cap_is_named(
    tmp_path, projections, bs, iodepth, numjobs, points
):
    scenario = load_scenario(_scenario(tmp_path, projections, bs, iodepth, numjobs))
    assert point_count(scenario) == points
    if points <= 5000:  # building them is cheap up to here; the count must not drift from jobs()
        assert len(list(jobs(scenario))) == points
    if points <= MAX_MODEL_POINTS:
        assert check_size(scenario, "big.yaml") == points
    else:
        with pytest.raises(SanlabError, match=f"{points:,} points .* at most {MAX_MODEL_POINTS}"):
            check_size(scenario, "big.yaml")


def test_every_shipped_scenario_is_within_the_cap():
    for path in sorted((REPO / "scenarios").rglob("*.yaml")):
        not_a_scenario = path.parent.name == "sweeps" or ".checks." in path.name or "inventory" in path.name
        if not_a_scenario:
            continue
        scenario = load_scenario(path)
        assert point_count(scenario) <= MAX_MODEL_POINTS, path


@pytest.mark.parametrize(
    ("projections", "bs", "iodepth", "numjobs", "extra"),
    [
        (129, 1, 1, 1, []),
        (256, 8, 1, 1, []),
        (1, 32, 32, 32, []),
        (256, 32, 32, 32, []),  # 16,777,216 points: counted, never built
        (200, 2, 1, 1, ["--json"]),
        (200, 2, 1, 1, ["--profile", "zeta-2016"]),
    ],
    ids=["258", "4096", "65536", "16M", "json", "profile"],
)
def test_model_past_the_cap_is_one_line_before_any_point(tmp_path, projections, bs, iodepth, numjobs, extra):
    path = _scenario(tmp_path, projections, bs, iodepth, numjobs)
    result = _invoke(["model", str(path), *extra], seconds=20)
    _refused(result, str(path), "points to project", f"at most {MAX_MODEL_POINTS}", "sanlab sweep")
    assert "projecting" not in result.output
    assert result.seconds < 10


def test_model_report_past_the_cap_makes_no_folder(tmp_path):
    path = _scenario(tmp_path, 200, 2)
    result = _invoke(["model", str(path), "--report", str(tmp_path / "report")])
    _refused(result, "800 points to project")
    assert not (tmp_path / "report").exists()


@pytest.mark.subprocess  # starts sanlab as a process, to time its first line on stderr
def test_model_says_how_far_it_is_within_two_seconds_even_with_json(tmp_path):
    path = _scenario(tmp_path, 5, 2)  # 20 points: several seconds of simulation
    process = subprocess.Popen(
        [sys.executable, "-m", "sanlab", "model", str(path), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        first = process.stderr.readline()
        # The clock starts when the command has loaded (Python's imports are not the model's work).
        assert first.startswith("projecting: 0 of 20 points"), first
        started = time.monotonic()
        second = process.stderr.readline()
        assert second.startswith("projecting: 1 of 20"), second
        assert time.monotonic() - started < 2.0
        out, _ = process.communicate(timeout=120)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 0 and out.lstrip().startswith("{")


# --- sanlab sweep: points and workers -------------------------------------------------------------


def _spec(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _wide(values: int, axes: int) -> dict:
    """A spec whose grid is ``values ** axes`` points (link speeds, cores, ...), before any check."""
    names = ["link_gbps", "cores", "iodepth", "numjobs", "sessions"][:axes]
    return {
        "axes": {name: list(range(1, values + 1)) for name in names},
        "fixed": {"transport": "nvme-tcp", "rw": "randread", "bs": "4k"}
        | {k: 1 for k in ("iodepth", "numjobs") if k not in names},
        "solver": "mva",
    }


@pytest.mark.parametrize(
    ("values", "axes", "points"),
    [(448, 2, 200_704), (59, 3, 205_379), (64, 4, 16_777_216), (64, 5, 1_073_741_824)],
)
def test_sweep_past_the_points_cap_is_one_line_before_the_folder(tmp_path, values, axes, points):
    spec = _spec(tmp_path, _wide(values, axes))
    result = _invoke(["sweep", str(spec), "--out", str(tmp_path / "out"), "--serial"])
    _refused(result, str(spec), f"{points:,} points", f"at most {MAX_POINTS:,}")
    assert not (tmp_path / "out").exists() and result.seconds < 10


def test_sweep_at_the_points_cap_is_not_refused_by_it(tmp_path):
    from sanlab.models.sweeps.sweep import grid_size, load_spec

    assert grid_size(load_spec(_spec(tmp_path, _wide(447, 2)))) == 199_809 <= MAX_POINTS


@pytest.mark.parametrize(
    ("given", "env", "expect"),
    [
        ("0", {}, "--workers 0: give 1 to"),
        ("-1", {}, "--workers -1: give 1 to"),
        (str(CORES + 1), {}, f"at most one per core: {CORES} here"),
        ("512", {}, "--workers 512: at most one per core"),
        (str(10**12), {}, "at most one per core"),
        ("abc", {}, "is not a valid integer"),
        ("1.5", {}, "is not a valid integer"),
        ("", {}, "is not a valid integer"),
        (str(CORES * 4 + 1), {"SANLAB_SWEEP_OVERSUBSCRIBE": "1"}, "at most 4 per core even with"),
        ("512", {"SANLAB_SWEEP_OVERSUBSCRIBE": "1"}, "at most 4 per core even with"),
        ("2", {"SANLAB_SWEEP_OVERSUBSCRIBE": "maybe"}, "--oversubscribe': 'maybe' is not a valid boolean"),
    ],
    ids=[
        "0",
        "-1",
        "cores+1",
        "512",
        "1e12",
        "abc",
        "1.5",
        "empty",
        "told-past-4x",
        "told-512",
        "env-garbage",
    ],
)
def test_sweep_workers_are_bounded_before_anything_starts(tmp_path, given, env, expect):
    result = _invoke(
        ["sweep", str(_spec(tmp_path, TINY)), "--out", str(tmp_path / "out"), "--workers", given], env
    )
    _refused(result, expect)
    assert not (tmp_path / "out").exists() and result.seconds < 10


def test_workers_with_serial_or_a_scheduler_is_a_usage_error(tmp_path):
    spec = str(_spec(tmp_path, TINY))
    result = _invoke(["sweep", spec, "--out", str(tmp_path / "o"), "--workers", "1", "--serial"])
    _refused(result, "give one of --workers, --scheduler, --serial")
    result = _invoke(
        ["sweep", spec, "--out", str(tmp_path / "o"), "--workers", "0", "--scheduler", "tcp://a:1"]
    )
    _refused(result, "give one of")


@pytest.mark.subprocess  # a real Dask LocalCluster of worker processes
@pytest.mark.parametrize("flag", [[], ["--oversubscribe"]], ids=["cores", "told"])
def test_the_allowed_worker_counts_run_on_a_real_local_cluster(tmp_path, flag):
    workers = CORES if not flag else CORES + 1
    spec = str(_spec(tmp_path, TINY))
    result = _invoke(
        ["sweep", spec, "--out", str(tmp_path / "o"), "--workers", str(workers), *flag], seconds=240
    )
    assert result.exit_code == 0, result.output
    assert f"on {workers} local Dask workers" in result.output
    assert (tmp_path / "o" / "results.csv").is_file()


# --- sweep --scheduler: refused, silent and garbage addresses -------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Listener:
    """A TCP listener on 127.0.0.1 that accepts and then does ``behaviour``: never answers,
    closes at once, or says something that is not Dask's handshake."""

    def __init__(self, behaviour: str):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.behaviour, self.held = behaviour, []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.behaviour == "close":
                conn.close()
                continue
            if self.behaviour == "garbage":
                conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
            self.held.append(conn)

    def close(self) -> None:
        for conn in self.held:
            conn.close()
        self.sock.close()


@pytest.fixture
def short_deadline(monkeypatch):
    """The product waits 20 s for a silent scheduler (timed for real below); here 2 s."""
    monkeypatch.setattr(sweep_run, "HANDSHAKE_S", 2.0)
    monkeypatch.setattr(sweep_run, "EXIT_S", 0.0)
    return 2.0


def _sweep_at(tmp_path: Path, address: str, seconds: float = 30):
    return _invoke(
        ["sweep", str(_spec(tmp_path, TINY)), "--out", str(tmp_path / "out"), "--scheduler", address],
        seconds=seconds,
    )


def test_a_refused_scheduler_port_fails_at_once(tmp_path):
    result = _sweep_at(tmp_path, f"tcp://127.0.0.1:{_free_port()}")
    _refused(result, "cannot reach a Dask scheduler", "connection refused")
    assert result.seconds < 5 and not (tmp_path / "out").exists()


@pytest.mark.parametrize("behaviour", ["silent", "close", "garbage"])
def test_a_listener_that_is_no_scheduler_ends_by_the_deadline(tmp_path, short_deadline, behaviour):
    listener = _Listener(behaviour)
    try:
        result = _sweep_at(tmp_path, f"tcp://127.0.0.1:{listener.port}")
    finally:
        listener.close()
    _refused(result, f"--scheduler tcp://127.0.0.1:{listener.port}: cannot reach a Dask scheduler")
    assert result.seconds < short_deadline + 1.5, result.seconds
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "address",
    [
        "tcp://",
        "tcp://127.0.0.1",
        "tcp://127.0.0.1:0",
        "tcp://127.0.0.1:65536",
        "tcp://127.0.0.1:99999999999",
        "http://127.0.0.1:8786",
        "inproc://x",
        "127.0.0.1:8786",
        "tcp://a b:1",
        "tcp://-x:1",
        "tcp://127.0.0.1:8786/x",
        "tcp://$(id):1",
        "tcp://" + "a" * 300 + ":1",
        "tcp://127.0.0.1:8786\n",
    ],
)
def test_a_garbage_scheduler_address_is_one_line_at_once(tmp_path, address):
    result = _sweep_at(tmp_path, address, seconds=10)
    _refused(result, "not a scheduler address")
    assert not (tmp_path / "out").exists()


def test_an_unknown_scheduler_host_is_one_line_within_the_deadline(tmp_path, short_deadline):
    result = _sweep_at(tmp_path, "tcp://no-such-host.invalid:8786")
    _refused(result, "cannot reach a Dask scheduler")
    assert result.seconds < short_deadline + 1.5


@pytest.mark.subprocess  # sanlab as the user runs it, timed from its start to its exit
@pytest.mark.slow  # 20 s: the real deadline
@pytest.mark.parametrize("behaviour", ["refused", "silent"])
def test_the_real_deadline_is_twenty_seconds_from_enter_to_answer(tmp_path, behaviour):
    listener = _Listener("silent") if behaviour == "silent" else None
    port = listener.port if listener else _free_port()
    spec = _spec(tmp_path, TINY)
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "sanlab", "sweep", str(spec), "--out", str(tmp_path / "o")]
            + ["--scheduler", f"tcp://127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
        )
    finally:
        if listener:
            listener.close()
    took = time.monotonic() - started
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert took <= 20.0, took
    if behaviour == "refused":
        assert took < 8, took  # a refusal is an answer: no waiting for the deadline


# --- lab verbs on a lab that is not up; the guest's exit status ---------------------------------


@pytest.mark.parametrize(
    "verb",
    [
        ["export", "nolab"],
        ["export", "nolab", "t1"],
        ["unexport", "nolab"],
        ["unexport", "nolab", "t1"],
        ["connect", "nolab", "t1"],
        ["disconnect", "nolab", "t1"],
        ["fio", "nolab", "t1"],
        ["fault", "nolab", "fabric", "--down", "1s"],
        ["exec", "nolab", "initiator", "--", "true"],
        ["console", "nolab", "initiator"],
        ["capture", "nolab", "fabric", "--path"],
        ["down", "nolab"],
    ],
    ids=lambda verb: verb[0] + ("-" + verb[2] if len(verb) > 2 and verb[0] in ("export", "unexport") else ""),
)
def test_a_lab_verb_on_a_lab_that_is_not_up_fails_in_one_line(tmp_path, verb):
    runtime = tmp_path / "run"
    (runtime / "sanlab-labs" / "other").mkdir(parents=True)  # a lab's folder without a state: not up
    result = _invoke(["lab", *verb], env={"XDG_RUNTIME_DIR": str(runtime)})
    _refused(result, "no lab named 'nolab' is up")


@pytest.mark.parametrize(
    ("name", "expect"),
    [
        ("../x", "is not allowed"),
        ("-x", "No such option"),
        ("a/b", "is not allowed"),
        ("UPPER", "is not allowed"),
    ]
    + [("x" * 40, "is not allowed")],
)
def test_a_lab_verb_with_a_name_that_is_no_name_fails_in_one_line(tmp_path, name, expect):
    for verb in (["unexport", name, "t1"], ["disconnect", name, "t1"], ["export", name]):
        result = _invoke(["lab", *verb], env={"XDG_RUNTIME_DIR": str(tmp_path / "run")})
        _refused(result, expect)


@pytest.mark.parametrize(
    ("rc", "status"),
    [(0, 0), (1, 1), (255, 255), (256, 255), (512, 255), (-9, 137), (-64, 192), (-65, 255), (10**9, 255)],
)
def test_the_guest_exit_status_is_never_zero_unless_it_was(rc, status):
    assert exit_status(rc) == status


def test_true_as_an_exit_status_is_a_failure():
    assert exit_status(True) == 255  # type: ignore[arg-type]


@pytest.mark.parametrize("rc", [256, -65, "abc", None, 1.5, [0]])
def test_an_agent_answering_an_rc_out_of_range_is_a_failure(tmp_path, rc):
    """A real unix socket as the guest's agent port, answering with ``rc``: never exit 0."""
    from sanlab.emulator.agent import AgentClient

    path = tmp_path / "a.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def answer() -> None:
        conn, _ = server.accept()
        request = json.loads(conn.makefile().readline())
        conn.sendall(
            (json.dumps({"id": request["id"], "rc": rc, "stdout": "", "stderr": ""}) + "\n").encode()
        )
        conn.close()

    threading.Thread(target=answer, daemon=True).start()
    client = AgentClient(path, "initiator")
    try:
        completed = client.run(["true"], timeout=5)
    except SanlabError as exc:
        assert "\n" not in str(exc) and "rc" in str(exc)
    else:
        assert exit_status(completed.rc) != 0
    finally:
        client.close()
        server.close()


# --- lab up / run with a runtime folder too long for QEMU's sockets ------------------------------


@pytest.mark.parametrize("length", [120, 200, 1000])
def test_a_long_runtime_dir_is_refused_before_any_image_build(tmp_path, length):
    runtime = tmp_path
    while len(str(runtime)) < length:
        runtime = runtime / ("r" * min(200, length - len(str(runtime)) + 1))
    runtime.mkdir(parents=True)
    cache = tmp_path / "cache"
    cache.mkdir()
    env = {"XDG_RUNTIME_DIR": str(runtime), "SANLAB_CACHE": str(cache), "XDG_CACHE_HOME": str(cache)}
    result = _invoke(["lab", "up", str(REPO / "scenarios" / "pair-rxe.yaml")], env=env)
    _refused(result, "socket path", "over 107 bytes", "XDG_RUNTIME_DIR", longest=length + 300)
    assert list(cache.iterdir()) == [], "an image build began"
    assert not (runtime / "sanlab-labs" / "pair-rxe").exists()


def test_a_run_with_a_long_runtime_dir_is_refused_before_any_image_build(tmp_path):
    runtime = tmp_path / ("r" * 150)
    runtime.mkdir()
    cache = tmp_path / "cache"
    cache.mkdir()
    env = {"XDG_RUNTIME_DIR": str(runtime), "SANLAB_CACHE": str(cache), "XDG_CACHE_HOME": str(cache)}
    argv = ["run", str(REPO / "scenarios" / "smoke.yaml"), "--out", str(tmp_path / "out")]
    result = _invoke(argv, env=env)
    assert "socket path" in result.output and "over 107 bytes" in result.output, result.output
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert list(cache.iterdir()) == [], "an image build began"


# --- two resumes of one run ------------------------------------------------------------------------


def _interrupted_run(tmp_path: Path) -> Path:
    """A run folder as an interrupted ``sanlab run`` leaves it: its scenario and its journal."""
    from sanlab.targets.sessions import run_session

    source = REPO / "scenarios" / "smoke.yaml"
    out = tmp_path / "run"
    journal = run_session.fresh(source, load_scenario(source), out, force=False)
    journal.finish("interrupted", "0 points finished")
    del journal
    return out


HOLD = """
import sys, time
from pathlib import Path
from sanlab.targets.sessions import run_session
folder = run_session.check_resumable(Path(sys.argv[1]))
print("held", flush=True)
time.sleep(60)
"""


@pytest.mark.subprocess  # a second sanlab process holds the run, as a first --resume would
def test_a_second_resume_of_a_run_being_resumed_is_one_line(tmp_path):
    out = _interrupted_run(tmp_path)
    first = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        assert first.stdout.readline().strip() == "held"
        result = _invoke(["run", "--resume", str(out)])
        _refused(result, f"--resume {out}", "lock")
    finally:
        first.kill()
        first.wait()
    # The first gone (even by kill -9), the lock goes with it: the run can be resumed again.
    from sanlab.targets.sessions import run_session

    assert run_session.check_resumable(out).root == out


def test_a_resume_while_the_run_itself_still_writes_is_one_line(tmp_path):
    from sanlab.targets.sessions import run_session

    source = REPO / "scenarios" / "smoke.yaml"
    out = tmp_path / "run"
    journal = run_session.fresh(source, load_scenario(source), out, force=False)  # holds the lock
    journal.finish("interrupted", "0 points finished")
    result = _invoke(["run", "--resume", str(out)])
    _refused(result, "another sanlab holds this run folder's lock")
    del journal


def test_parse_scenario_is_the_one_the_cap_counts():
    """The command-line point of 'sanlab model --transport' is one point: never near the cap."""
    data = {
        "name": "one",
        "workloads": [{"rw": "randread", "bs": "4k", "iodepth": 1, "numjobs": 1}],
        "projections": [{"profile": "zeta-2016", "transport": "iscsi", "fabric": "eth", "link_gbps": 10}],
    }
    assert point_count(parse_scenario(data, "x")) == 1


# --- a long call with no count of its own (calibrate's fit) says it is alive ---------------------


def test_ticking_says_how_long_within_two_seconds_and_nothing_when_quick(capsys):
    from sanlab.progress import ticking

    with ticking("fitting", first=0.2, every=0.3):
        time.sleep(0.65)
    said = capsys.readouterr().err.splitlines()
    assert said[0].startswith("  fitting: ") and said[0].endswith(" s so far") and len(said) >= 2
    with ticking("quick"):
        pass
    assert capsys.readouterr().err == ""


@pytest.mark.subprocess  # sanlab calibrate as a process, stopped once it has spoken
@pytest.mark.slow  # the fit it starts is a minute of SciPy
def test_calibrate_says_it_is_fitting_within_two_seconds():
    process = subprocess.Popen(
        [sys.executable, "-m", "sanlab", "calibrate", "--no-cross-validate"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
    )
    try:
        assert process.stdout.readline().startswith("== fitting")
        started = time.monotonic()
        line = process.stdout.readline()
        assert time.monotonic() - started < 2.0 and "fitting" in line and "s so far" in line, line
    finally:
        process.kill()
        process.wait()


def test_one_point_is_projected_inside_the_ticker_that_says_it_is_alive(monkeypatch):
    """A few points get no progress bar, yet one deep point may simulate for seconds on a slow
    machine: ``sanlab model`` projects them inside ``ticking`` (tested above for its 1.5 s).
    How long a point takes is a benchmark's matter (benchmarks/model_point_speed.py), so the
    ticker here speaks at once, and the test holds for a fast machine as for a slow one."""
    import functools

    from sanlab import commands_model
    from sanlab.progress import ticking

    monkeypatch.setattr(commands_model, "ticking", functools.partial(ticking, first=0.0, every=60.0))
    argv = ["model", "--transport", "nvme-tcp", "--fabric", "eth", "--link-gbps", "100"]
    argv += ["--rw", "randread", "--bs", "4k", "--iodepth", "64", "--numjobs", "64"]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 0 and "projected by the sanlab model" in result.stdout, result.output
    said = result.stderr.splitlines()
    assert said and said[0].startswith("  projecting: ") and said[0].endswith(" s so far"), said
