"""blktests' NVME_TARGET_CONTROL across a wire (targets/blktests_guest.py, blktests_relay.py):
the calls blktests makes are taken, anything else is refused in one line before a request is
spooled or a command reaches the target, and what is accepted reaches the target's shell only
as checked, quoted values."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from sanlab.scenarios.errors import SanlabError
from sanlab.targets import blktests_guest as guest
from sanlab.targets.blktests_relay import Relay, read_request, wait_script
from sanlab.targets.dryrun import DryRunHost

NQN = "blktests-subsystem-1"
HOSTNQN = "nqn.2014-08.org.nvmexpress:uuid:0f01fb42-9f7f-4856-b0b3-51e60b8de349"
UUID = "91fdba0d-f87b-4c25-b80f-db7be1418b9e"
KEY = "DHHC-1:00:Oc9X6zUrIS6WtdcSIk8oSWIZrQe2TZ6O5hbP7VMVM4QfE8Ev:"
SETUP = ["setup", "--subsysnqn", NQN, "--subsys-uuid", UUID, "--hostnqn", HOSTNQN]


def test_the_calls_blktests_makes_are_taken():
    # common/nvme's _setup_nvmet, _nvmet_target_setup (with keys: --hostkey, --ctrkey) and cleanup
    for option, key in guest.SHOW.items():
        assert guest.parse(["config", option]) == ("config", {"show": key})
    assert guest.parse(SETUP) == (
        "setup",
        {"subsysnqn": NQN, "subsys_uuid": UUID, "hostnqn": HOSTNQN},
    )
    verb, values = guest.parse([*SETUP, "--hostkey", KEY, "--ctrkey", KEY])
    assert values["hostkey"] == KEY and values["ctrlkey"] == KEY
    assert guest.parse(["cleanup", "--subsysnqn", "blktests-subsystem-13"]) == (
        "cleanup",
        {"subsysnqn": "blktests-subsystem-13"},
    )


HOSTILE = ["$(reboot)", "a;rm -rf /", "../../etc", "/sys/kernel/config", "x\ny", "`id`", "a b", "-", ".."]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([], "no verb"),
        (["reboot"], "verb 'reboot' is none of config, setup, cleanup"),
        (["config"], "config takes one of"),
        (["config", "--show-hostnqn", "--show-traddr"], "config takes one of"),
        (["config", "--show-secret"], "config takes one of"),
        (["cleanup"], "--subsysnqn must be given"),
        (["cleanup", "--subsysnqn"], "option '--subsysnqn' has no value"),
        (["cleanup", "--subsysnqn", NQN, "--subsysnqn", NQN], "--subsysnqn is given twice"),
        (["cleanup", "--hostnqn", HOSTNQN], "option '--hostnqn' is none of --subsysnqn"),
        (SETUP[:5], "--hostnqn must be given"),
        ([*SETUP[:4], "not-a-uuid", *SETUP[5:]], "--subsys-uuid 'not-a-uuid' is not a valid subsys_uuid"),
        ([*SETUP, "--hostkey", "secret"], "--hostkey 'secret' is not a valid hostkey"),
        (["cleanup", "--subsysnqn", "n" * 224], "is not a valid subsysnqn"),
        (["setup"] + ["--x", "y"] * 8, "over 16 arguments"),
    ],
)
def test_anything_else_is_one_line_naming_it(argv, says):
    with pytest.raises(guest.UsageError) as caught:
        guest.parse(argv)
    assert says in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("value", HOSTILE)
def test_no_value_is_a_path_an_option_or_shell(value):
    for argv in (
        ["cleanup", "--subsysnqn", value],
        [*SETUP[:2], value, *SETUP[3:]],
        [*SETUP[:6], value],
        [*SETUP, "--hostkey", value],
    ):
        with pytest.raises(guest.UsageError):
            guest.parse(argv)


def _spool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("requests", "replies"):
        (tmp_path / name).mkdir()
    (tmp_path / "config.json").write_text(json.dumps({"traddr": "169.254.10.2"}))
    monkeypatch.setattr(guest, "SPOOL", str(tmp_path))
    return tmp_path


def test_a_refused_call_spools_nothing_and_exits_2(tmp_path, monkeypatch, capsys):
    spool = _spool(tmp_path, monkeypatch)
    assert guest.main(["setup", "--subsysnqn", "$(reboot)", "--subsys-uuid", UUID, "--hostnqn", NQN]) == 2
    assert list((spool / "requests").iterdir()) == []
    assert capsys.readouterr().err.startswith("sanlab-blktests: setup: --subsysnqn '$(reboot)'")
    assert guest.main(["config", "--show-traddr"]) == 0
    assert capsys.readouterr().out == "169.254.10.2\n"


def test_a_call_crosses_as_a_request_and_its_reply_comes_back(tmp_path, monkeypatch):
    """The guest program's side and the relay's, on one spool: the request the program writes is
    one read_request accepts, and the program exits with the reply's code."""
    spool = _spool(tmp_path, monkeypatch)
    ended: list[int] = []
    caller = threading.Thread(target=lambda: ended.append(guest.main([*SETUP, "--hostkey", KEY])))
    caller.start()
    deadline = time.monotonic() + 10
    while not (found := [p for p in (spool / "requests").iterdir() if not p.name.startswith(".")]):
        assert time.monotonic() < deadline, "no request was spooled"
        time.sleep(0.01)
    (path,) = found
    request = read_request(path.name, path.read_text())
    assert (request.verb, request.values["hostkey"]) == ("setup", KEY)
    (spool / "replies" / f"{request.seq}.json").write_text(json.dumps({"rc": 3, "said": "no"}))
    caller.join(10)
    assert ended == [3] and list((spool / "replies").iterdir()) == []


@pytest.mark.parametrize(
    ("name", "body", "says"),
    [
        ("../x.json", "{}", "not a name the control program writes"),
        ("12.json", "{}", "not a name the control program writes"),
        ("1" * 20 + ".json", "[", "not valid JSON"),
        ("1" * 20 + ".json", json.dumps({"seq": "2" * 20, "argv": SETUP}), "its seq does not match"),
        ("1" * 20 + ".json", json.dumps({"seq": "1" * 20, "argv": "setup"}), "argv is not a list"),
        ("1" * 20 + ".json", json.dumps({"seq": "1" * 20, "argv": ["config", "--show-traddr"]}), "config is"),
        (
            "1" * 20 + ".json",
            json.dumps({"seq": "1" * 20, "argv": ["cleanup", "--subsysnqn", "`id`"]}),
            "valid",
        ),
        ("1" * 20 + ".json", json.dumps({"seq": "1" * 20, "argv": ["x" * 9000]}), "over 8192 bytes"),
    ],
)
def test_the_relay_checks_each_request_again(name, body, says):
    with pytest.raises(SanlabError) as caught:
        read_request(name, body)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def _request(argv: list[str]):
    seq = "1" * 20
    return read_request(f"{seq}.json", json.dumps({"seq": seq, "argv": argv}))


def test_an_export_is_made_with_what_blktests_asked_and_removed_whole():
    target = DryRunHost("target")
    relay = Relay(target, "nvme-rdma", "169.254.10.2", 64 << 20)
    assert relay.handle(_request([*SETUP, "--hostkey", KEY, "--ctrkey", KEY])) == (0, "")
    made = "\n".join(target.commands)
    assert f"/sys/kernel/config/nvmet/subsystems/{NQN}" in made
    assert f"printf %s {UUID} > /sys/kernel/config/nvmet/subsystems/{NQN}/namespaces/1/device_uuid" in made
    assert f"printf %s {KEY} > /sys/kernel/config/nvmet/hosts/{HOSTNQN}/dhchap_ctrl_key" in made
    assert "echo rdma > /sys/kernel/config/nvmet/ports/1/addr_trtype" in made
    assert relay.handle(_request([*SETUP])) == (1, f"setup {NQN}: already set up and not cleaned up")
    target.commands.clear()
    assert relay.handle(_request(["cleanup", "--subsysnqn", NQN])) == (0, "")
    removed = "\n".join(target.commands)
    assert (
        f"rmdir /sys/kernel/config/nvmet/subsystems/{NQN}" in removed
        and "rm -f /dev/shm/sanlab-blktests-" in removed
    )
    assert relay.live == {} and relay.close() == []
    assert relay.handle(_request(["cleanup", "--subsysnqn", NQN]))[1].endswith(
        "nothing of that name was made"
    )


def test_what_blktests_left_is_removed_when_the_run_ends():
    target = DryRunHost("target")
    relay = Relay(target, "nvme-tcp", "169.254.10.2", 64 << 20)
    for n in (1, 2):
        relay.handle(
            _request(["setup", "--subsysnqn", f"{NQN}{n}", "--subsys-uuid", UUID, "--hostnqn", HOSTNQN])
        )
    target.commands.clear()
    assert relay.close() == [f"{NQN}1", f"{NQN}2"]
    assert sum("rmdir /sys/kernel/config/nvmet/subsystems/" in c for c in target.commands) == 2


def test_the_wait_script_holds_no_value_of_a_request():
    script = wait_script(5)
    assert "$f" in script and "request" in script and "/run/sanlab-blktests/requests" in script
    assert "eval" not in script and "$(cat" not in script  # a request is printed, never run


@pytest.mark.subprocess
def test_the_wait_script_sees_a_request_and_the_end_of_check_under_dash(tmp_path):
    """The agent's shell is /bin/sh (dash on Debian): a loop on bash's $SECONDS ended at once
    there and never saw check end, so every test waited out its timeout in the first guest run."""
    import subprocess

    (tmp_path / "requests").mkdir()
    script = wait_script(1, str(tmp_path))

    def wait() -> str:
        return subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30).stdout

    started = time.monotonic()
    assert wait() == "idle\n" and 0.9 < time.monotonic() - started < 10
    (tmp_path / "requests" / ("1" * 20 + ".json")).write_text('{"seq": 1}')
    assert wait() == "request " + "1" * 20 + '.json\n{"seq": 1}'
    (tmp_path / "requests" / ("1" * 20 + ".json")).unlink()
    (tmp_path / "check.rc").write_text("124\n")
    assert wait() == "done 124\n"
