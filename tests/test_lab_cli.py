"""`sanlab lab`: bad scenarios fail before any VM; a lab can be driven from other shells."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
import yaml

from sanlab.emulator.lab_state import labs_root, left_over, new_run_dir
from sanlab.emulator.processes import pid_alive
from sanlab.scenarios.errors import SanlabError
from support import INTERRUPTIBLE, SCENARIOS, sanlab_here


def sanlab(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sanlab", *args], capture_output=True, text=True, timeout=timeout
    )


def _qemu_pids(lab: str = "") -> set[int]:
    """QEMU processes on this machine; with ``lab``, only those whose command line names its
    folder: CI warms the guests' snapshots in the background, whose QEMUs come and go."""
    out = subprocess.run(["pgrep", "-a", "-f", "qemu-system"], capture_output=True, text=True).stdout
    mine = (line.split(maxsplit=1) for line in out.splitlines() if line.strip())
    return {int(fields[0]) for fields in mine if not lab or f"/{lab}/" in (fields[1:] or [""])[0]}


@pytest.mark.subprocess  # starts sanlab, a tool or a helper as a process
def test_link_to_unknown_host_fails_before_any_vm(tmp_path):
    data = yaml.safe_load((SCENARIOS / "pair-rxe.yaml").read_text())
    data["links"][0]["endpoints"] = ["initiator", "storage"]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    before = _qemu_pids("test-bad")
    result = sanlab("lab", "up", str(path), "--name", "test-bad")
    assert result.returncode == 1
    assert f"{path}: links[0].endpoints[1]: 'storage' is not a host" in result.stderr
    assert _qemu_pids("test-bad") == before == set()
    assert not (labs_root() / "test-bad" / "state.json").exists()


@pytest.mark.subprocess  # starts sanlab, a tool or a helper as a process
def test_exec_on_a_lab_that_is_not_up():
    result = sanlab("lab", "exec", "no-such-lab", "initiator", "--", "true")
    assert result.returncode == 1 and "no lab named 'no-such-lab' is up" in result.stderr


@pytest.mark.vm
def test_lab_up_exec_list_down_from_separate_processes(guest_image):
    up = sanlab("lab", "up", str(SCENARIOS / "pair-rxe.yaml"), "--name", "test-cli")
    try:
        assert up.returncode == 0, up.stderr
        listed = sanlab("lab", "list").stdout
        assert "test-cli" in listed and "initiator" in listed
        pids = [int(p) for p in re.findall(r"pid (\d+)", listed.split("test-cli")[1])][:2]
        assert len(pids) == 2 and all(pid_alive(p) for p in pids)
        ran = sanlab("lab", "exec", "test-cli", "initiator", "--", "hostname")
        assert ran.returncode == 0 and ran.stdout.strip() == "initiator"
        failed = sanlab("lab", "exec", "test-cli", "target", "--", "sh", "-c", "exit 3")
        assert failed.returncode == 3
        _a_dead_clients_reply_reaches_no_one("test-cli")
        _a_guest_whose_kernel_panicked_is_named_with_its_oops("test-cli", listed)
    finally:
        down = sanlab("lab", "down", "test-cli")
    assert down.returncode == 0, down.stderr
    assert not any(pid_alive(p) for p in pids)
    assert not list((labs_root() / "test-cli").glob("*.sock"))
    assert (labs_root() / "test-cli" / "initiator.console.log").exists()
    shutil.rmtree(labs_root() / "test-cli")


# A client that sends a request to the guest agent and dies before the reply comes back.
DYING_CLIENT = """
import json, sys, time
from sanlab.emulator.agent import AgentClient
from sanlab.emulator.lab_state import live_agent_path
client = AgentClient(live_agent_path(sys.argv[1], "initiator"), "initiator")
sock = client._connect(time.monotonic() + 60)
request = {"op": "exec", "shell": "sleep 2; echo OUTPUT-OF-STEP-2", "timeout": 30, "stdin": ""}
sock.sendall((json.dumps({**request, "id": next(client._ids)}) + "\\n").encode())
print("sent", flush=True)
time.sleep(600)
"""


def _a_dead_clients_reply_reaches_no_one(lab: str) -> None:
    """The guest's port outlives its clients: the reply to a killed client's request is queued
    for the next one, which must drop it.  Each of the next ten commands gets its own output."""
    dying = subprocess.Popen([sys.executable, "-c", DYING_CLIENT, lab], stdout=subprocess.PIPE, text=True)
    assert dying.stdout is not None and dying.stdout.readline().strip() == "sent"
    dying.kill()
    dying.wait()
    for step in range(10):
        ran = sanlab("lab", "exec", lab, "initiator", "--", "echo", f"step-{step}")
        assert ran.returncode == 0 and ran.stdout.strip() == f"step-{step}", (ran.stdout, ran.stderr)


def _a_guest_whose_kernel_panicked_is_named_with_its_oops(lab: str, listed: str) -> None:
    """A kernel panic ends the guest's QEMU (panic=-1, -no-reboot); the next command for it
    says so in one line, with what the panic was, from the console log (emulator/panics.py)."""
    pid = int(re.search(r"target \(pid (\d+)\)", listed.split(lab)[1]).group(1))  # type: ignore[union-attr]
    sanlab("lab", "exec", lab, "target", "--", "sh", "-c", "echo c > /proc/sysrq-trigger", timeout=60)
    deadline = time.monotonic() + 60
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not pid_alive(pid), "the panicked guest's QEMU is still running"
    after = sanlab("lab", "exec", lab, "target", "--", "true")
    said = after.stderr.strip()
    assert after.returncode == 1 and "\n" not in said and "Traceback" not in said, said
    assert f"host 'target' is down (its qemu, pid {pid}, is not running)" in said, said
    assert "its kernel panicked: sysrq triggered crash (Linux 6." in said, said
    assert "the whole oops is in target.console.log" in said, said


# The CLI's answer to a bad name or state file, checked in this process (click's runner: the
# same code, no interpreter start); a few cases still go through a real process, for what
# only a process shows (its exit status, a real stderr, a refusal before any QEMU starts).
LAB_NAMES = ["", "/tmp", "../x", "a/b", "-x", "UPPER", "x" * 40, "a b", "$(id)"]
NAMES_AS_PROCESS = ["/tmp", "$(id)"]


def _here_or_process(values: list[str], as_process: list[str]) -> list:
    here = [pytest.param(v, False, id=v) for v in values]
    return here + [pytest.param(v, True, id=f"{v}-process", marks=pytest.mark.subprocess) for v in as_process]


def _lab_cli(as_process: bool):
    """``sanlab ARGS``: a real process, or this one (click's runner) answering alike."""
    if as_process:
        return sanlab
    return lambda *args, timeout=None: sanlab_here(*args)


@pytest.mark.parametrize(("name", "as_process"), _here_or_process(LAB_NAMES, NAMES_AS_PROCESS))
def test_a_lab_name_is_a_name_never_a_path(tmp_path, name, as_process):
    """The path of an existing folder as --name: refused, and its files untouched."""
    keep = tmp_path / "precious"
    keep.mkdir()
    for i in range(5):
        (keep / f"file{i}").write_text("mine")
    given = str(keep) if name == "/tmp" else name
    run = _lab_cli(as_process)
    result = run("lab", "up", str(SCENARIOS / "pair-rxe.yaml"), "--name", given, timeout=60)
    assert result.returncode == 1 and "is not allowed" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in keep.iterdir()) == [f"file{i}" for i in range(5)]


def test_a_lab_name_is_made_from_an_odd_file_name(tmp_path):
    from sanlab.emulator.lab_state import lab_name

    assert lab_name("My Pair.v2") == "my-pair-v2" and lab_name("...") == "lab"
    assert lab_name("x" * 80) == "x" * 31


def _fake_lab(monkeypatch, tmp_path, name: str, state: str) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    run_dir = labs_root() / name
    run_dir.mkdir(parents=True)
    (run_dir / "state.json").write_text(state)
    (run_dir / "initiator.console.log").write_text("boot\nlast words of the guest\n")


CORRUPT_STATES = ["{not json", "", "[]", '{"hosts": 3}', '{"hosts": {"initiator": {"pid": "x"}}}']


@pytest.mark.parametrize(("state", "as_process"), _here_or_process(CORRUPT_STATES, ["{not json"]))
def test_a_corrupt_state_file_is_an_error_not_a_traceback(monkeypatch, tmp_path, state, as_process):
    _fake_lab(monkeypatch, tmp_path, "broken", state)
    run = _lab_cli(as_process)
    for args in (["list"], ["exec", "broken", "initiator", "--", "true"], ["console", "nosuch", "initiator"]):
        result = run("lab", *args, timeout=30)
        assert "Traceback" not in result.stderr, (args, result.stderr)
        assert result.returncode in (0, 1) and (result.returncode == 0) == (args == ["list"])
    down = run("lab", "down", "broken", timeout=30)
    assert down.returncode == 0 and not (labs_root() / "broken" / "state.json").exists()


@pytest.mark.subprocess  # starts sanlab, a tool or a helper as a process
def test_a_dead_vm_is_named_at_once(monkeypatch, tmp_path):
    """A state file whose qemu is gone (PID 1 is never our qemu): exec fails fast and says so."""
    state = {
        "name": "ghost",
        "accel": "tcg",
        "hosts": {
            "initiator": {
                "pid": 1,
                "agent": str(tmp_path / "a.sock"),
                "console": str(tmp_path / "c.sock"),
                "console_log": str(tmp_path / "sanlab-labs" / "ghost" / "initiator.console.log"),
            }
        },
    }
    _fake_lab(monkeypatch, tmp_path, "ghost", __import__("json").dumps(state))
    ran = sanlab("lab", "exec", "ghost", "initiator", "--", "true", timeout=10)
    assert ran.returncode == 1 and "host 'initiator' is down" in ran.stderr
    assert "last words of the guest" in ran.stderr
    assert "DOWN" in sanlab("lab", "list", timeout=10).stdout
    down = sanlab("lab", "down", "ghost", timeout=10)
    assert down.returncode == 0 and "already down: initiator" in down.stdout


def test_a_lab_whose_vms_all_died_is_left_over_and_may_be_started_again(monkeypatch, tmp_path):
    """PID 1 is never our qemu: the state outlived its lab, and a new lab of that name may start."""
    host = {"pid": 1, "agent": str(tmp_path / "a.sock"), "console": str(tmp_path / "c.sock")}
    _fake_lab(monkeypatch, tmp_path, "ghost", json.dumps({"name": "ghost", "hosts": {"initiator": host}}))
    assert left_over("ghost")
    run_dir = new_run_dir("ghost")
    assert run_dir.is_dir() and not (run_dir / "state.json").exists()


@pytest.mark.parametrize("state", CORRUPT_STATES)
def test_a_lab_whose_state_cannot_be_read_is_not_started_over(monkeypatch, tmp_path, state):
    _fake_lab(monkeypatch, tmp_path, "broken", state)
    assert not left_over("broken")
    with pytest.raises(SanlabError, match="already up: 'sanlab lab down broken' first"):
        new_run_dir("broken")


@pytest.mark.vm
@pytest.mark.parametrize("start", ["on", "off"], ids=["restoring", "booting"])
def test_ctrl_c_during_lab_up_stops_at_once(guest_image, start):
    """Whether the guests are being restored from a snapshot or booted cold, Ctrl-C stops
    them at once; a restore that Ctrl-C cut short is not followed by a cold boot."""
    import os
    import signal
    import time

    up = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sanlab",
            "lab",
            "up",
            str(SCENARIOS / "pair-rxe.yaml"),
            "--name",
            "test-sigint",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | {"SANLAB_SNAPSHOTS": start},
        **INTERRUPTIBLE,
    )
    deadline = time.monotonic() + 30
    while not (labs_root() / "test-sigint" / "state.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # a restore takes about a second: this lands inside it
    up.send_signal(signal.SIGINT)
    # A hang guard, not a stopwatch: a busy machine may take seconds to tear down.  What shows
    # that Ctrl-C did not wait for the boot is that the lab never came up.
    out, err = up.communicate(timeout=60)
    assert "is up" not in out, "Ctrl-C waited for the boot"
    assert "interrupted" in err and up.returncode != 0
    left = subprocess.run(["pgrep", "-f", "labs/test-sigint"], capture_output=True, text=True)
    assert left.stdout == ""
    sanlab("lab", "down", "test-sigint", timeout=30)


@pytest.mark.vm
def test_a_killed_vm_is_reported_and_bash_process_substitution_works(guest_image):
    up = sanlab("lab", "up", str(SCENARIOS / "pair-rxe.yaml"), "--name", "test-kill")
    try:
        assert up.returncode == 0, up.stderr
        subst = sanlab(
            "lab",
            "exec",
            "test-kill",
            "initiator",
            "--",
            "bash",
            "-c",
            "diff <(echo a) <(echo a) && echo same",
        )
        assert subst.returncode == 0 and subst.stdout.strip() == "same", subst.stderr
        state = __import__("json").loads((labs_root() / "test-kill" / "state.json").read_text())
        __import__("os").kill(state["hosts"]["target"]["pid"], 9)
        import time

        started = time.monotonic()
        dead = sanlab("lab", "exec", "test-kill", "target", "--", "true", timeout=60)
        assert time.monotonic() - started < 10
        assert dead.returncode == 1 and "host 'target' is down" in dead.stderr
        assert "target (pid" in sanlab("lab", "list").stdout and "DOWN" in sanlab("lab", "list").stdout
    finally:
        down = sanlab("lab", "down", "test-kill")
    assert down.returncode == 0 and "already down: target" in down.stdout
    shutil.rmtree(labs_root() / "test-kill", ignore_errors=True)


@pytest.mark.vm
@pytest.mark.tshark
def test_live_capture_streams_into_tshark(guest_image):
    """`lab capture` piped into tshark: frames of traffic made after the stream started are decoded."""
    import time

    from support import require_tool

    tshark = require_tool("tshark")
    up = sanlab(
        "lab", "up", str(SCENARIOS / "pair-rxe.yaml"), "--name", "test-live", "--capture", "--snaplen", "200"
    )
    try:
        assert up.returncode == 0, up.stderr
        stream = subprocess.Popen(
            [sys.executable, "-m", "sanlab", "lab", "capture", "test-live", "fabric"], stdout=subprocess.PIPE
        )
        reader = subprocess.Popen(
            [tshark, "-i", "-", "-Y", "icmp.type == 8", "-T", "fields", "-e", "frame.cap_len"],
            stdin=stream.stdout,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        stream.stdout.close()  # tshark alone holds the pipe: when the stream stops, it sees the end
        time.sleep(2)
        sanlab("lab", "exec", "test-live", "initiator", "--", "ping", "-c", "3", "-s", "1000", "169.254.10.2")
        time.sleep(2)
        stream.terminate()  # the pipe closes; tshark reads to its end and prints what matched
        stream.wait(timeout=30)
        lines, _ = reader.communicate(timeout=60)
        sizes = [int(n) for n in lines.split()]
        assert len(sizes) == 3 and all(n == 200 for n in sizes), lines  # echo requests, cut at the snaplen
        wrong = sanlab("lab", "capture", "test-live", "nosuch", timeout=30)
        assert wrong.returncode == 1 and "no captured link 'nosuch'" in wrong.stderr
    finally:
        sanlab("lab", "down", "test-live")
    shutil.rmtree(labs_root() / "test-live", ignore_errors=True)


@pytest.mark.subprocess  # starts sanlab, a tool or a helper as a process
def test_lab_up_names_every_missing_system_package_in_one_apt_line(tmp_path):
    """On a machine without qemu (and without an image: mmdebstrap too), one line says what to install."""
    env = {**os.environ, "PATH": str(tmp_path), "SANLAB_CACHE": str(tmp_path / "cache")}
    result = subprocess.run(
        [sys.executable, "-m", "sanlab", "lab", "up", str(SCENARIOS / "labs" / "iscsi-wire.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 1
    assert "apt-get install -y mmdebstrap qemu-system-x86'" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
