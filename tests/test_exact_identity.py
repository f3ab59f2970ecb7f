"""A process is ours only if its start time is the one recorded and its command line names our
exact socket or run folder (emulator/processes.py): lab ``pl``'s folder is a prefix of lab
``pl-b``'s, and ``lab down pl`` must never touch ``pl-b``.

The unit tests spawn real processes whose command lines are a QEMU's as sanlab writes it
(emulator/qemu.py), under a labs folder of their own; the VM test brings two real labs up.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sanlab.emulator import lab_state as labs
from sanlab.emulator.processes import (
    Recorded,
    is_ours,
    names_path,
    option_values,
    pid_alive,
    process_start,
    recorded,
    signal_ours,
    stop_ours,
)

ROOT = Path(__file__).resolve().parent.parent
SLEEPER = "import time; time.sleep(120)"


def _fake_qemu(run_dir: Path, host: str) -> subprocess.Popen[bytes]:
    """A process whose command line is a lab host's qemu's (its sockets in ``run_dir``)."""
    agent, qmp = run_dir / f"{host}.agent.sock", run_dir / f"{host}.qmp.sock"
    argv = [
        sys.executable, "-c", SLEEPER,
        "-qmp", f"unix:{qmp},server=on,wait=off",
        "-chardev", f"socket,id=agent,path={agent},server=on,wait=off",
    ]  # fmt: skip
    proc = subprocess.Popen(argv)
    # Until the child has exec'd, /proc shows the parent's command line: wait for its own
    # (on a loaded machine the fork's start time is readable well before that).
    _wait_execd(proc.pid, "-qmp")
    return proc


def _wait_execd(pid: int, word: str) -> None:
    """Until ``word`` is one of the process's arguments (it has exec'd), for at most 10 s."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if word.encode() in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                return
        except OSError:
            pass
        time.sleep(0.01)


def _state(run_dir: Path, hosts: dict[str, subprocess.Popen[bytes]]) -> None:
    """A lab's state file as Lab._write_state writes it, for these processes."""
    run_dir.mkdir(parents=True, exist_ok=True)
    entries = {
        host: {
            "pid": proc.pid,
            "started": process_start(proc.pid),
            "agent": str(run_dir / f"{host}.agent.sock"),
            "qmp": str(run_dir / f"{host}.qmp.sock"),
        }
        for host, proc in hosts.items()
    }
    (run_dir / "state.json").write_text(json.dumps({"name": run_dir.name, "hosts": entries}))


@pytest.fixture
def two_labs(tmp_path, monkeypatch):
    """Labs ``pl`` and ``pl-b``, one host each, whose 'qemu' is a sleeping process."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    root = labs.labs_root()
    procs = {name: _fake_qemu(root / name, "solo") for name in ("pl", "pl-b")}
    try:
        yield root, procs
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()


def _entry(root: Path, name: str) -> dict:
    return json.loads((root / name / "state.json").read_text())["hosts"]["solo"]


@pytest.mark.subprocess  # real processes, as a lab's qemus
def test_lab_down_of_a_prefix_lab_leaves_the_other_lab_running(two_labs):
    root, procs = two_labs
    _state(root / "pl", {"solo": procs["pl"]})
    _state(root / "pl-b", {"solo": procs["pl-b"]})
    assert labs.vm_alive("pl", _entry(root, "pl"), "solo")
    stopped, dead = labs.stop_lab("pl")
    assert stopped == [procs["pl"].pid] and dead == []
    assert procs["pl"].wait(timeout=10) is not None
    assert pid_alive(procs["pl-b"].pid) and labs.vm_alive("pl-b", _entry(root, "pl-b"), "solo")


@pytest.mark.subprocess  # real processes, as a lab's qemus
@pytest.mark.parametrize("host_in_state", ["solo", "ghost", "../pl-b/solo", "solo/../../pl-b/solo"])
def test_a_state_naming_another_labs_qemu_gets_it_no_signal(two_labs, host_in_state):
    """``pl``'s state names ``pl-b``'s qemu (a reused PID, or a planted file; its start time
    copied too): ``lab down pl`` clears the state and signals nothing."""
    root, procs = two_labs
    _state(root / "pl", {host_in_state: procs["pl-b"]})
    entry = json.loads((root / "pl" / "state.json").read_text())["hosts"][host_in_state]
    assert not labs.vm_alive("pl", entry, host_in_state) and not labs.vm_alive("pl", entry)
    stopped, dead = labs.stop_lab("pl")
    assert stopped == [] and dead == [host_in_state]
    assert not (root / "pl" / "state.json").exists()
    time.sleep(0.2)
    assert procs["pl-b"].poll() is None and procs["pl"].poll() is None


@pytest.mark.subprocess  # real processes, as a lab's qemus
def test_a_reused_pid_is_not_ours_its_start_time_differs(two_labs):
    root, procs = two_labs
    _state(root / "pl", {"solo": procs["pl"]})
    state = json.loads((root / "pl" / "state.json").read_text())
    state["hosts"]["solo"]["started"] -= 1  # the process at this PID started at another time
    (root / "pl" / "state.json").write_text(json.dumps(state))
    assert labs.stop_lab("pl") == ([], ["solo"])
    assert procs["pl"].poll() is None


@pytest.mark.subprocess  # real processes, as a lab's qemus
@pytest.mark.parametrize(
    "started", [None, "153397", True, 1.5, -1, [1]], ids=["none", "text", "bool", "float", "neg", "list"]
)
def test_a_state_without_a_proper_start_time_proves_nothing(two_labs, started):
    root, procs = two_labs
    _state(root / "pl", {"solo": procs["pl"]})
    state = json.loads((root / "pl" / "state.json").read_text())
    state["hosts"]["solo"]["started"] = started
    (root / "pl" / "state.json").write_text(json.dumps(state))
    assert not labs.vm_alive("pl", state["hosts"]["solo"], "solo")
    labs.stop_lab("pl")
    assert procs["pl"].poll() is None


@pytest.mark.subprocess  # real processes
def test_signal_and_stop_only_what_is_named_exactly(tmp_path):
    proc = _fake_qemu(tmp_path / "pl-b", "solo")
    try:
        who = recorded(proc.pid, process_start(proc.pid))
        assert who is not None
        wrong = [tmp_path / "pl", tmp_path / "pl" / "solo.agent.sock", f"{tmp_path}/pl-b/solo.agent.soc"]
        assert not is_ours(who, paths=wrong)
        assert not signal_ours(who, 0, paths=wrong) and not stop_ours(who, paths=wrong, grace=0.1)
        assert not is_ours(Recorded(who.pid, who.started + 1), paths=[tmp_path / "pl-b" / "solo.qmp.sock"])
        assert is_ours(who, paths=[tmp_path / "pl-b" / "solo.qmp.sock"])
        assert signal_ours(who, 0, paths=[tmp_path / "pl-b" / "solo.agent.sock"])
        assert proc.poll() is None
        assert stop_ours(who, paths=[tmp_path / "pl-b" / "solo.agent.sock"], grace=5)
        assert proc.wait(timeout=10) == -15  # SIGTERM was enough
        assert not is_ours(who, paths=[tmp_path / "pl-b" / "solo.agent.sock"])  # gone
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.subprocess  # a real process
def test_a_keeper_is_matched_on_its_whole_argument_list(tmp_path):
    tail = ["-c", SLEEPER, "pl", "t1", "export"]
    proc = subprocess.Popen([sys.executable, *tail])
    try:
        _wait_execd(proc.pid, "export")
        who = recorded(proc.pid, process_start(proc.pid))
        assert is_ours(who, argv_tail=tail)
        assert not is_ours(who, argv_tail=[*tail[:2], "p", "t1", "export"])  # 'p' is a prefix of 'pl'
        assert not is_ours(who, argv_tail=tail[:-1])
    finally:
        proc.kill()
        proc.wait()


def test_option_strings_are_parsed_as_qemu_parses_them():
    assert option_values("socket,id=agent,path=/r/pl/a.sock,server=on") == ["agent", "/r/pl/a.sock", "on"]
    assert option_values("unix:/r/pl/q.sock,server=on,wait=off") == ["on", "off", "/r/pl/q.sock"]
    assert option_values("file=/r/a,,b.img,format=raw") == ["/r/a,b.img", "raw"]  # ',,' is a comma
    argv = ["qemu", "-chardev", "socket,id=agent,path=/r/pl-b/a.sock", "/r/pl-b"]
    assert names_path(argv, "/r/pl-b") and names_path(argv, "/r/pl-b/a.sock")
    for near in ("/r/pl", "/r/pl-", "/r/pl/a.sock", "/r/pl-b/a.soc", "/r/pl-b/", "r/pl-b"):
        assert not names_path(argv, near), near
    assert not names_path(["/r/pl-b"], "/r/pl-b")  # the program itself is not an argument
    assert not names_path(["qemu", "-qmp", "tcp:/r/pl-b/q.sock"], "/r/pl-b/q.sock")  # not unix:


def test_no_code_signals_or_reads_proc_but_the_one_home():
    """Every signal to a process sanlab did not just start, and every look at another process's
    /proc entries, goes through emulator/processes.py; a liveness probe (signal 0) sends nothing
    and is allowed."""
    allowed = {"emulator/processes.py"}
    # another process's /proc entries (its start time, its command line), or a signal to it;
    # /proc/self and /proc/cpuinfo tell nothing of who a process is
    risky = re.compile(r"os\.kill\(|os\.killpg\(|pidfd_send_signal|/proc/\{|/cmdline|/proc/\d")
    probe = re.compile(r"os\.kill\([^,]+,\s*0\)")
    found = []
    for folder in ("cli", "emulator", "targets", "models", "scenarios", "dissectors"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            where = str(path.relative_to(ROOT))
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                if where in allowed or not risky.search(line) or probe.search(line):
                    continue
                if "host.run" in line or line.strip().startswith(("f'", 'f"', "'", '"')):
                    continue  # a command run in a guest, not here
                found.append(f"{where}:{number}: {line.strip()}")
    assert not found, "signal or /proc outside emulator/processes.py:\n" + "\n".join(found)


# --- the VM test: two real labs, one name a prefix of the other -----------------------------

ONE_HOST = "description: one host, the smallest lab\nhosts:\n  - {name: solo, role: initiator}\n"


def _sanlab(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sanlab", *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.vm
def test_lab_down_of_a_lab_whose_name_is_a_prefix_leaves_the_other_up(guest_image, tmp_path):
    """Two one-host labs, ``pl`` and ``pl-b``; ``pl``'s state also names ``pl-b``'s qemu (as a
    reused PID would, start time and all).  ``lab down pl`` stops only ``pl``'s qemu."""
    spec = tmp_path / "one.yaml"
    spec.write_text(ONE_HOST)
    theirs: dict = {}
    try:
        for name in ("pl-b", "pl"):
            up = _sanlab("lab", "up", str(spec), "--name", name)
            assert up.returncode == 0, up.stderr
        pl, plb = (json.loads((labs.lab_dir(n) / "state.json").read_text()) for n in ("pl", "pl-b"))
        ours, theirs = pl["hosts"]["solo"], plb["hosts"]["solo"]
        assert isinstance(theirs["started"], int) and theirs["started"] == process_start(theirs["pid"])
        pl["hosts"]["stale"] = dict(theirs)  # pl-b's qemu, its PID and start time, in pl's state
        (labs.lab_dir("pl") / "state.json").write_text(json.dumps(pl))
        down = _sanlab("lab", "down", "pl")
        assert down.returncode == 0, down.stderr
        deadline = time.monotonic() + 10
        while pid_alive(ours["pid"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not pid_alive(ours["pid"]), "pl's own qemu outlived 'lab down pl'"
        assert pid_alive(theirs["pid"]) and process_start(theirs["pid"]) == theirs["started"]
        ran = _sanlab("lab", "exec", "pl-b", "solo", "--", "hostname")
        assert ran.returncode == 0 and ran.stdout.strip() == "solo", ran.stderr
    finally:
        for name in ("pl", "pl-b"):
            _sanlab("lab", "down", name)
    assert theirs and not pid_alive(theirs["pid"]), "'lab down pl-b' left its qemu running"
