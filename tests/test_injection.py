"""Nothing user-supplied reaches a shell unquoted.

Every string a scenario can carry is either refused by validation (names are
names: no shell character passes their pattern) or reaches the hosts' shells
quoted.  The second half is checked on the real recipes of every stack and
transport, run against a host that records the scripts it is given instead
of running them: each hostile CHAP value must come out as one whole shell
word.  (The smoke scenario's CHAP secrets carry shell characters too, so the
VM test logs in with them for real.)
"""

from __future__ import annotations

import re
import shlex
import typing
from dataclasses import dataclass, field

import pytest
from pydantic import BaseModel

from sanlab.scenarios import ssh_options
from sanlab.scenarios.endpoints import Endpoint
from sanlab.scenarios.errors import ScenarioError
from sanlab.scenarios.loader import parse_scenario
from sanlab.scenarios.schema import Chap, Host, Link, Projection, Scenario, Switch, Target, Workload
from sanlab.targets.stacks import Wiring, exported
from support import Reply

PAYLOADS = [
    "u; reboot",
    "$(touch /tmp/pwned)",
    "`id`",
    "x' ; id ; '",
    'a"b',
    "a\nb",
    "a|b",
    "a&&b",
    "../../etc/passwd",
    "a b",
    "--help",
    "-oProxyCommand=touch /tmp/pwned",
    "/dev/../etc/passwd",
]
# Shell characters a CHAP value may legitimately hold (the stacks accept them).
HOSTILE_CHAP = ["s3cr3t'$(x)|id", "`id`$HOME|&<>!", "a*b?c[d]{e}~f(g)"]

# Where each string field of a scenario goes: to a host's shell, or nowhere near one.
REACHES_HOSTS = {
    (Host, "name"),
    (Link, "name"),
    (Link, "endpoints"),
    (Target, "name"),
    (Target, "host"),
    (Target, "link"),
    (Chap, "username"),
    (Chap, "password"),
    (Host, "ssh"),  # an ssh argument; never read as an option
    (Link, "interfaces"),
    (Link, "rdma_devices"),
    (Target, "device"),
    (Target, "paths"),  # link names: the interfaces a multipath target is reached by
    (Switch, "name"),  # a bridge in the fabric VM
}
STAYS_HOME = {
    (Scenario, "name"),  # printed, and a lab name is derived from the file name instead
    (Scenario, "description"),
    (Workload, "name"),
    (Projection, "profile"),  # a file name or profile name, read locally
    (Projection, "label"),
    (Projection, "core"),  # a core design, looked up in models/cores.yaml
    (Host, "identity"),  # a local key file for ssh -i, in ssh_options.py's path grammar
    (Host, "ssh_options"),  # ssh -o options: only ssh_options.py's allowlist (test_hostile_ssh.py)
}


def _holds_str(annotation: object) -> bool:
    """Whether a field's type can hold free text (a Literal or a number cannot)."""
    if annotation is str:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return False
    if origin is typing.Annotated:
        return _holds_str(typing.get_args(annotation)[0])
    return any(_holds_str(arg) for arg in typing.get_args(annotation))


def _string_fields() -> set[tuple[type[BaseModel], str]]:
    return {
        (model, name)
        for model in (Scenario, Host, Link, Target, Chap, Workload, Projection, Switch)
        for name, info in model.model_fields.items()
        if _holds_str(info.annotation)
    }


def test_every_string_field_is_accounted_for():
    """A new string field must be placed in one of the two sets (and so tested)."""
    assert _string_fields() == REACHES_HOSTS | STAYS_HOME


BASE = {
    "hosts": [{"name": "initiator", "role": "initiator"}, {"name": "target", "role": "target"}],
    "links": [{"name": "fabric", "endpoints": ["initiator", "target"], "fabric": "roce"}],
    "targets": [{"name": "t1", "host": "target", "stack": "lio", "transport": "iscsi", "link": "fabric"}],
}


def _set(path: tuple, value: str) -> dict:
    import copy

    data = copy.deepcopy(BASE)
    node = data
    for key in path[:-1]:
        node = node.setdefault(key, {}) if isinstance(node, dict) else node[key]
    node[path[-1]] = value
    return data


NAME_PATHS = [
    ("hosts", 0, "name"),
    ("links", 0, "name"),
    ("targets", 0, "name"),
    ("targets", 0, "host"),
    ("targets", 0, "link"),
    ("hosts", 0, "ssh"),
    ("links", 0, "interfaces", "initiator"),
    ("links", 0, "rdma_devices", "initiator"),
    ("targets", 0, "device"),
]


@pytest.mark.parametrize("path", NAME_PATHS, ids=[".".join(map(str, p)) for p in NAME_PATHS])
@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_name_with_shell_characters_is_refused(path, payload):
    with pytest.raises(ScenarioError):
        parse_scenario(_set(path, payload), "inject.yaml")


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_link_endpoint_with_shell_characters_is_refused(payload):
    data = _set(("links", 0, "endpoints"), ["initiator", payload])  # type: ignore[arg-type]
    with pytest.raises(ScenarioError):
        parse_scenario(data, "inject.yaml")


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_switch_or_path_with_shell_characters_is_refused(payload):
    switched = dict(BASE, switches=[{"name": payload}])
    with pytest.raises(ScenarioError):
        parse_scenario(switched, "inject.yaml")
    target = dict(BASE["targets"][0], paths=["fabric", payload])
    with pytest.raises(ScenarioError):
        parse_scenario(dict(BASE, targets=[target]), "inject.yaml")


@pytest.mark.parametrize("option", sorted(ssh_options.ALLOWED))
@pytest.mark.parametrize("payload", PAYLOADS)
def test_no_allowed_ssh_option_takes_a_shell_payload(option, payload):
    """Every option of the allowlist, with every payload as its value (or a hop's user or port),
    is refused: no value that reaches ssh (and through it, on old OpenSSH, /bin/sh) holds a
    shell character.  A plain path ('../../etc/passwd') is a key file's value like any other:
    ssh reads it as a key, and runs nothing."""
    if option == "identityfile" and re.fullmatch(ssh_options.SAFE_VALUE, payload):
        return
    values = [payload] + ([f"{payload}@a", f"a:{payload}", f"a,{payload}"] if option == "proxyjump" else [])
    for value in values:
        with pytest.raises(ValueError, match="takes"):
            ssh_options.check_option(f"{option}={value}")


@pytest.mark.parametrize("payload", [p for p in PAYLOADS if not re.fullmatch(ssh_options.SAFE_VALUE, p)])
def test_an_identity_with_a_shell_payload_is_refused(payload):
    host = dict(BASE["hosts"][0], ssh="root@10.0.0.1", identity=payload)
    with pytest.raises(ScenarioError, match=r"hosts\[0\]\.identity: .* is not a key file path"):
        parse_scenario(dict(BASE, hosts=[host, BASE["hosts"][1]]), "k.yaml")


@pytest.mark.parametrize("payload", ["u; reboot", "ab'c d$(id)ef", "a\nb", 'x"y', "p#q", "k=v"])
def test_chap_values_the_stacks_cannot_take_are_refused(payload):
    target = dict(BASE["targets"][0], chap={"username": payload, "password": "abcdefghijklm"})
    with pytest.raises(ScenarioError):
        parse_scenario(dict(BASE, targets=[target]), "inject.yaml")


# --- the recipes, against a host that records its scripts -------------------------


@dataclass
class RecordingHost:
    """A Host that keeps every script it is asked to run and answers like a quiet, healthy one."""

    name: str
    scripts: list[str] = field(default_factory=list)

    def run(self, command: str | list[str], timeout: float = 60.0, stdin: str = "") -> Reply:
        text = command if isinstance(command, str) else shlex.join(command)
        self.scripts.append(text)
        if "gids/0" in text:
            return Reply(stdout="fe80:0000:0000:0000:5054:00ff:fe12:3456\n")
        if "srpt_service_guid" in text:
            return Reply(stdout="0002:c903:0000:1234\n")
        if "/block/" in text or "nvme*n*" in text:
            return Reply(stdout="/dev/sdb\n")
        if text.startswith("pidof"):  # nothing of anyone else's is running here
            return Reply(rc=1)
        return Reply()

    def spawn(self, command: str, log: str = "/dev/null") -> int:
        self.scripts.append(command)
        return 4242

    def put(self, path: str, data: bytes, mode: int = 0o644) -> None:
        pass

    def get(self, path: str) -> bytes:
        return b""


@pytest.mark.parametrize("stack", ["lio", "tgt"])
@pytest.mark.parametrize("transport", ["iscsi", "iser"])
@pytest.mark.parametrize("secret", HOSTILE_CHAP)
def test_chap_values_reach_the_shell_as_one_word(stack, transport, secret):
    chap = {"username": secret[:10] + "user", "password": (";" + secret)[:16].ljust(12, "x")}
    data = dict(BASE, targets=[dict(BASE["targets"][0], stack=stack, transport=transport, chap=chap)])
    scenario = parse_scenario(data, "inject.yaml")
    target, initiator = RecordingHost("target"), RecordingHost("initiator")
    wiring = Wiring(
        target,
        initiator,
        Endpoint("target", "fabric", "169.254.10.2", "fabric", "rxe_fabric"),
        Endpoint("initiator", "fabric", "169.254.10.1", "fabric", "rxe_fabric"),
    )
    with exported(scenario.targets[0], "t1", wiring) as devices:
        assert devices == ["/dev/sdb"]
    for host in (target, initiator):
        lines = [line for script in host.scripts for line in script.splitlines()]
        for value in chap.values():
            for line in lines:  # written out verbatim, it must still be one word
                if value in line:
                    assert value in _shell_words(line), f"{value!r} is split in {line!r}"
    target_words = [w for s in target.scripts for line in s.splitlines() for w in _shell_words(line)]
    initiator_words = [w for s in initiator.scripts for line in s.splitlines() for w in _shell_words(line)]
    assert chap["password"] in initiator_words and chap["username"] in initiator_words
    assert chap["password"] in target_words and chap["username"] in target_words  # tgt's too


def _shell_words(line: str) -> list[str]:
    """Words as a shell splits them: operators such as ; | & ( ) < > end a word."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    return list(lexer)
