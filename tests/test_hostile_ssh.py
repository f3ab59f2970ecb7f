"""No command from a file: every hostile ssh option, destination and key is refused, in one
line, before ssh starts; and nothing builds an ssh command line but scenarios/ssh_options.py.

The corpus (hostile_ssh_cases.py) is what a careless or malicious scenario or inventory would carry: every
option form (``-o K=V``, ``-oK=V``, the flags), each shell metacharacter, the user and port
parts of a ProxyJump hop, ``%`` tokens and ``$``, options that run, load or read something
(ProxyCommand, Include, KnownHostsCommand, ControlPath, LocalCommand, XAuthLocation, ...),
forwards, and key files that are folders, FIFOs, devices or start with '-'.  Each case
goes through ``validate`` and ``run --dry-run`` (in this process, with every process start
refused and recorded: a case that reached ssh fails) and must end with exit 1 or 2 and a
line that names the file, the field, the value and what is allowed.  The issue's forms then
go through the whole command line -- ``validate``, ``run --dry-run``, ``run --resume`` of a
planted run folder, an inventory -- every form in this process (click's runner, every process
start recorded), and a chosen few as a real ``sanlab`` process with a tracer ``ssh`` first on
PATH (what only a process shows: its exit status, its real stderr, the PATH lookup): no ssh
started and no canary file appeared.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hostile_ssh_cases import (
    ALLOWED_EXAMPLES,
    FILES,
    FORMS,
    HOSTILE_ARGS,
    HOSTILE_DESTINATIONS,
    HOSTILE_KEYS,
    HOSTILE_OPTIONS,
    INVENTORY_FORMS,
    MACHINES,
)
from test_bad_inputs import deadline, error_lines

from sanlab.main import cli
from sanlab.scenarios import ssh_options
from sanlab.scenarios.results.outdir import claim_fresh
from sanlab.scenarios.results.records import RunJournal
from support import REPO, require_tool

ALLOWED_WORDS = re.compile(r"allows|allowed|takes|give a|at most|\[USER@\]HOST")


@dataclass(frozen=True)
class Case:
    name: str
    where: str  # "option", "ssh", "identity" or an inventory variable
    value: Any
    shows: str | None  # a piece of the value the error line must show (None: its start)
    field: str  # the field the error line must name


def _start(value: Any) -> str:
    """The first characters of a value as an error line shows it (repr, as the readers do)."""
    text = repr(value)
    return text[1 : min(13, len(text) - 1)] if isinstance(value, str) else text


def _cases() -> list[Case]:
    cases = [
        Case(f"option-{i}", "option", v, None, "hosts[0].ssh_options[0]")
        for i, v in enumerate(HOSTILE_OPTIONS)
    ]
    cases += [Case(f"ssh-{i}", "ssh", v, None, "hosts[0].ssh") for i, v in enumerate(HOSTILE_DESTINATIONS)]
    cases += [
        Case(f"identity-{i}", "identity", v, None, "hosts[0].identity") for i, v in enumerate(HOSTILE_KEYS)
    ]
    for variable in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        for i, (args, shows) in enumerate(HOSTILE_ARGS):
            cases.append(Case(f"{variable[12:]}-{i}", variable, args, shows, f"initiator.{variable}"))
    return cases


CASES = _cases()


def _fill(value: Any, folder: Path) -> Any:
    if not isinstance(value, str):
        return value
    return value.replace("{pwned}", str(folder / "pwned")).replace("{d}", str(folder))


def _plant(folder: Path) -> None:
    for name, content in FILES.items():
        if content == "<fifo>":
            os.mkfifo(folder / name)
        elif content == "<dir>":
            (folder / name).mkdir()
        elif content.startswith("<link:"):
            (folder / name).symlink_to(content[6:-1])
        else:
            (folder / name).write_text(_fill(content, folder))


def _scenario(folder: Path, **initiator: Any) -> dict[str, Any]:
    data = json.loads(json.dumps(MACHINES))
    filled = {
        k: [_fill(o, folder) for o in v] if isinstance(v, list) else _fill(v, folder)
        for k, v in initiator.items()
    }
    data["hosts"][0] |= filled
    return data


def _files(case: Case, folder: Path) -> list[str]:
    """Plant the case; return the command line's file arguments (scenario, maybe inventory)."""
    _plant(folder)
    scenario = folder / "s.yaml"
    if case.where == "option":
        scenario.write_text(yaml.safe_dump(_scenario(folder, ssh_options=[case.value])))
        return [str(scenario)]
    if case.where in ("ssh", "identity"):
        scenario.write_text(yaml.safe_dump(_scenario(folder, **{case.where: case.value})))
        return [str(scenario)]
    plain = json.loads(json.dumps(MACHINES))
    for host in plain["hosts"]:
        del host["ssh"]
    scenario.write_text(yaml.safe_dump(plain))
    hosts = {"initiator": {"ansible_host": "192.0.2.11", case.where: _fill(case.value, folder)}}
    hosts["target"] = {"ansible_host": "192.0.2.12"}
    (folder / "inv.yaml").write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    return [str(scenario), "--inventory", str(folder / "inv.yaml")]


@pytest.fixture
def no_process(monkeypatch) -> list[list[str]]:
    """Every process a case would start (ssh above all), refused and recorded."""
    started: list[list[str]] = []

    def refuse(self, args, *rest, **kwargs):
        started.append(list(args))
        raise OSError("a hostile case started a process")

    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)
    return started


def _check_refused(result, case: Case, folder: Path, files: list[str], started: list) -> None:
    assert not started, f"a process started: {started}"
    assert not (folder / "pwned").exists(), "a command ran on this machine"
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), (
        f"raised {result.exception!r}"
    )
    assert result.exit_code in (1, 2), result.output
    assert "Traceback" not in result.output
    lines = error_lines(result.output)
    assert lines and all(len(line) < 600 for line in lines), result.output
    where = files[-1] if case.where.startswith("ansible") else files[0]
    value = _fill(case.value, folder)
    shows = case.shows if case.shows is not None else _start(value)
    named = [
        line for line in lines if line.startswith(where) and case.field in line and ALLOWED_WORDS.search(line)
    ]
    assert named, f"no line names {where}, {case.field} and what is allowed:\n{result.output}"
    assert any(shows in line for line in named), f"the value ({shows}) is not shown:\n{result.output}"


# validate takes no inventory: inventory cases go through run --dry-run only.
PARAMS = [
    pytest.param(case, command, id=f"{command}-{case.name}")
    for case in CASES
    for command in ("validate", "run")
    if command == "run" or not case.where.startswith("ansible")
]


@pytest.mark.parametrize(("case", "command"), PARAMS)
def test_a_hostile_ssh_value_is_refused_in_one_line_before_ssh(
    tmp_path, monkeypatch, no_process, case, command
):
    monkeypatch.chdir(tmp_path)
    files = _files(case, tmp_path)
    argv = ["validate", files[0]] if command == "validate" else ["run", *files, "--dry-run"]
    with deadline(30):
        result = CliRunner().invoke(cli, argv)
    _check_refused(result, case, tmp_path, files, no_process)


def test_the_corpus_holds_over_120_distinct_cases():
    assert len({(c.where, str(c.value)) for c in CASES}) == len(CASES) >= 120


@pytest.mark.parametrize(("option", "canonical"), ALLOWED_EXAMPLES)
def test_an_allowed_option_passes_spelled_as_ssh_config_spells_it(option, canonical):
    assert ssh_options.check_option(option) == canonical


def test_every_allowed_option_has_an_example_and_a_key_file_is_taken(tmp_path):
    assert {o.split("=")[0].lower() for o, _ in ALLOWED_EXAMPLES} | {"identityfile"} == set(
        ssh_options.ALLOWED
    )
    (tmp_path / "key").write_text("k\n")
    assert ssh_options.check_option(f"identityfile={tmp_path}/key") == f"IdentityFile={tmp_path}/key"


# -- Nothing but ssh_options.py builds an ssh command line ---------------------------------
PRODUCT = ["cli", "scenarios", "emulator", "targets", "dissectors", "models", "vm-images"]
HOME = REPO / "scenarios" / "ssh_options.py"
SSH_PROGRAMS = {"ssh", "scp", "sftp"}
SSH_FLAGS = {"-o", "-J", "-F"}
SHELL_SSH = re.compile(r"(^|[\s;|&(`/])(ssh|scp|sftp)\s+(\S+\s+)*-[oJF]")


WIRESHARK_PREFERENCE = re.compile(r"[a-z0-9_]+\.[a-z0-9_.]+:")  # proto.pref:value, never ssh's Keyword=value


def _wireshark_preference(node: ast.List | ast.Tuple) -> bool:
    """``["-o", "tls.keylog_file:..."]``: tshark's preference flag, whose value (a lowercase
    ``protocol.preference:``) no ssh option can take (ssh's are ``Keyword=value``)."""
    if len(node.elts) != 2 or not (isinstance(node.elts[0], ast.Constant) and node.elts[0].value == "-o"):
        return False
    value = node.elts[1]
    if isinstance(value, ast.JoinedStr) and value.values:
        value = value.values[0]
    return (
        isinstance(value, ast.Constant)
        and isinstance(value.value, str)
        and bool(WIRESHARK_PREFERENCE.match(value.value))
    )


def _argv_problems(path: Path, root: Path = REPO) -> list[str]:
    """Where ``path`` builds an ssh/scp/sftp argv, or passes ssh's option flags, itself."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, (ast.List, ast.Tuple)):
            words = [
                e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else None
                for e in node.elts
            ]
            first = words[0] if words else None
            if _wireshark_preference(node):
                continue
            flags = {w for w in words if w is not None and (w in SSH_FLAGS or re.match(r"-o[A-Z]", w))}
            if first in SSH_PROGRAMS or (flags and (first is None or first.startswith("-"))):
                found.append(f"{where}: {words[:4]}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and SHELL_SSH.search(node.value):
            found.append(f"{where}: {node.value[:60]!r}")
    return found


def test_no_ssh_argv_is_built_outside_the_allowlist_module():
    problems = []
    for folder in PRODUCT:
        for path in sorted((REPO / folder).rglob("*.py")):
            if path != HOME:
                problems += _argv_problems(path)
    assert not problems, "ssh argv built outside scenarios/ssh_options.py:\n" + "\n".join(problems)


def test_the_argv_scan_finds_what_it_is_for(tmp_path):
    """The scan would see each way an ssh command line could be built by hand."""
    (tmp_path / "x.py").write_text(
        'a = ["ssh", "--", "h"]\nb = ["-o", opt]\nc = [prog, "-J", hop]\nd = ["scp", f]\n'
        'e = "ssh -o ProxyJump=x h"\nf = ["ip", "-o", "link"]\ng = "sshd -o A=b"\nh = [x, "-oProxyJump=y"]\n'
        'i = ["-o", f"tls.keylog_file:{k}"]\nj = ["-o", f"ProxyJump={k}"]\n'
        'k = ["-o", "ProxyCommand=tls.x:y"]\n'
    )
    lines = [p.split(":")[1] for p in _argv_problems(tmp_path / "x.py", tmp_path)]
    assert sorted(lines, key=int) == ["1", "2", "3", "4", "5", "8", "10", "11"]


# -- The forms through the real command line ---------------------------------------
TRACER = '#!/bin/sh\nprintf "%s\\n" "$*" >> "$SSH_TRACE"\nexec {ssh} "$@"\n'


def _sanlab(folder: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """sanlab as a process, with a tracer ssh first on PATH that logs every start."""
    tracer = folder / "bin"
    tracer.mkdir(exist_ok=True)
    (tracer / "ssh").write_text(TRACER.format(ssh=require_tool("ssh")))
    (tracer / "ssh").chmod(0o755)
    env = dict(os.environ, PATH=f"{tracer}:{os.environ['PATH']}", SSH_TRACE=str(folder / "ssh.log"))
    return subprocess.run(
        [sys.executable, "-m", "sanlab", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=folder,
    )


def _sanlab_here(folder: Path, started: list[list[str]], *argv: str) -> subprocess.CompletedProcess[str]:
    """The same command in this process (click's runner, from ``folder``), answered as a
    process would be; ``started`` (the no_process fixture) records any process it tried."""
    with contextlib.chdir(folder), deadline(30):
        result = CliRunner().invoke(cli, list(argv))
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), (
        f"raised {result.exception!r}"
    )
    assert not started, f"a process started: {started}"
    return subprocess.CompletedProcess(["sanlab", *argv], result.exit_code, result.stdout, result.stderr)


# The forms that also go through a real sanlab process (the rest: in this process only).
PROCESS_FORMS = ("proxycommand", "localcommand")
PROCESS_INVENTORY_FORMS = ("proxycommand-spaced",)


def _through(forms: dict[str, Any], as_process: tuple[str, ...]) -> list[Any]:
    here = [pytest.param(form, False, id=form) for form in forms]
    return here + [
        pytest.param(form, True, id=f"{form}-process", marks=pytest.mark.subprocess) for form in as_process
    ]


def _runner(request, folder: Path, as_process: bool):
    """``sanlab ARGV`` from ``folder``: a real process, or this one with process starts recorded."""
    if as_process:
        return lambda *argv: _sanlab(folder, *argv)
    started = request.getfixturevalue("no_process")
    return lambda *argv: _sanlab_here(folder, started, *argv)


def _assert_nothing_ran(done: subprocess.CompletedProcess[str], folder: Path, names: str) -> None:
    assert done.returncode in (1, 2), done.stderr
    assert "Traceback" not in done.stderr
    lines = error_lines(done.stderr)
    assert lines and names in lines[0] and ALLOWED_WORDS.search(lines[0]), done.stderr
    assert not (folder / "ssh.log").exists(), f"ssh started: {(folder / 'ssh.log').read_text()}"
    assert not (folder / "pwned").exists(), "a command ran on this machine"


def _planted_run(folder: Path, scenario: dict[str, Any]) -> Path:
    """A run folder as sanlab leaves an interrupted run: its manifest, scenario and journal."""
    run = claim_fresh(folder / "run", "--out", False)
    run.write_text("scenario.yaml", yaml.safe_dump(scenario))
    RunJournal(run, "planted", 2).finish("interrupted", "0 of 2 points finished")
    return run.root


@pytest.mark.parametrize(("form", "as_process"), _through(FORMS, PROCESS_FORMS))
def test_a_scenario_form_runs_nothing_through_validate_dry_run_or_resume(request, tmp_path, form, as_process):
    sanlab = _runner(request, tmp_path, as_process)
    _plant(tmp_path)
    scenario = _scenario(tmp_path, ssh_options=[_fill(o, tmp_path) for o in FORMS[form]])
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scenario))
    run = _planted_run(tmp_path, scenario)
    for argv, names in (
        (["validate", "s.yaml"], "s.yaml: hosts[0].ssh_options[0]"),
        (["run", "s.yaml", "--dry-run"], "s.yaml: hosts[0].ssh_options[0]"),
        (["run", "--resume", str(run)], f"{run}/scenario.yaml: hosts[0].ssh_options[0]"),
    ):
        _assert_nothing_ran(sanlab(*argv), tmp_path, names)


@pytest.mark.parametrize(("form", "as_process"), _through(INVENTORY_FORMS, PROCESS_INVENTORY_FORMS))
def test_an_inventory_form_runs_nothing_through_dry_run_or_resume(request, tmp_path, form, as_process):
    sanlab = _runner(request, tmp_path, as_process)
    _plant(tmp_path)
    plain = json.loads(json.dumps(MACHINES))
    for host in plain["hosts"]:
        del host["ssh"]
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(plain))
    hosts = {"initiator": {"ansible_host": "192.0.2.11"}, "target": {"ansible_host": "192.0.2.12"}}
    hosts["initiator"]["ansible_ssh_common_args"] = _fill(INVENTORY_FORMS[form], tmp_path)
    (tmp_path / "inv.yaml").write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    run = _planted_run(tmp_path, plain)
    names = "inv.yaml: initiator.ansible_ssh_common_args"
    for argv in (
        ["run", "s.yaml", "--inventory", "inv.yaml", "--dry-run"],
        ["run", "--resume", str(run), "--inventory", "inv.yaml"],
    ):
        _assert_nothing_ran(sanlab(*argv), tmp_path, names)


@pytest.mark.subprocess  # starts sanlab, a tool or a helper as a process
def test_the_harness_sees_ssh_start_and_a_command_run(tmp_path):
    """Controls: an allowed option does reach ssh (the tracer logs it), and two of the forms
    (ProxyCommand, -F of a config holding one) handed straight to this machine's ssh do run
    their command (the canary appears).  This machine's ssh refuses the ProxyJump forms
    itself (OpenSSH 9.6, or a distribution's backport, checks hop names); older ones run
    them, which is why sanlab refuses them before any ssh starts."""
    _plant(tmp_path)
    scenario = _scenario(tmp_path, ssh="root@127.0.0.1", port=1, ssh_options=["ConnectTimeout=2"])
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scenario))
    done = _sanlab(tmp_path, "run", "s.yaml", "--dry-run")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "ConnectTimeout=2" in (tmp_path / "ssh.log").read_text()
    assert "Connection refused" in done.stderr  # ssh took sanlab's argv whole; only the port failed
    for given in (["-o", "ProxyCommand=touch {pwned}"], ["-F", "{d}/evil.conf"]):
        flags = [_fill(word, tmp_path) for word in given]
        argv = [require_tool("ssh"), "-o", "BatchMode=yes", *flags, "--", "root@192.0.2.11", "true"]
        subprocess.run(argv, capture_output=True, timeout=30)
        assert (tmp_path / "pwned").exists(), given
        (tmp_path / "pwned").unlink()


@pytest.mark.parametrize("form", FORMS)
def test_dry_run_and_resume_say_exactly_what_validate_says(tmp_path, monkeypatch, no_process, form):
    """The scenario a dry run or a resume reads is checked as validate checks it: the same
    lines, word for word, for the scenario file and for a run folder's copy of it."""
    monkeypatch.chdir(tmp_path)
    _plant(tmp_path)
    scenario = _scenario(tmp_path, ssh_options=[_fill(o, tmp_path) for o in FORMS[form]])
    scenario["hosts"][1]["identity"] = str(tmp_path / "missing-key")  # a second problem
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scenario))
    run = _planted_run(tmp_path, scenario)

    def lines(*argv: str) -> list[str]:
        with deadline(30):
            result = CliRunner().invoke(cli, list(argv))
        assert result.exit_code == 1, result.output
        return error_lines(result.output)

    said = lines("validate", "s.yaml")
    assert len(said) == len(FORMS[form]) + 1, said
    assert lines("run", "s.yaml", "--dry-run") == said
    copy = str(run / "scenario.yaml")
    assert lines("run", "--resume", str(run)) == lines("validate", copy)
    assert [line.removeprefix(copy) for line in lines("validate", copy)] == [
        line.removeprefix("s.yaml") for line in said
    ]
    assert not no_process


def test_a_mistyped_resume_path_is_refused_and_not_made(tmp_path, no_process):
    with deadline(30):
        result = CliRunner().invoke(cli, ["run", "--resume", str(tmp_path / "runs" / "typo")])
    assert result.exit_code == 1 and "does not exist: nothing to resume" in result.output
    assert not (tmp_path / "runs").exists() and not no_process
