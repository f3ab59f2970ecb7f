"""Teaching labs: every handout's solution, run end to end; the checker fails before it and passes after.

The solution is the ``<!-- solution -->`` block of the lab's answer key
(docs/labs/keys/LAB.md), run line by line with bash in a scratch folder,
exactly as a teacher would paste it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sanlab.scenarios.labs.exercises import LABS_DIR, load_exercises
from sanlab.validation import load_checked
from support import REPO

DOCS = REPO / "docs" / "labs"
LABS = sorted(p.name.removesuffix(".checks.yaml") for p in LABS_DIR.glob("*.checks.yaml"))
VM_LABS = {"iscsi-wire", "rdma-verbs", "nvme-tcp-rdma", "srp-immediate", "iwarp-siw"}
SOLUTION = re.compile(r"<!-- solution -->\s*```bash\n(.*?)```", re.S)


def solution(lab: str) -> list[str]:
    """The key's solution as commands, a heredoc kept whole with its command."""
    found = SOLUTION.search((DOCS / "keys" / f"{lab}.md").read_text())
    assert found, f"docs/labs/keys/{lab}.md has no solution block"
    commands, lines = [], iter(found.group(1).splitlines())
    for line in lines:
        heredoc = re.search(r"<<'?(\w+)'?\s*$", line)
        if heredoc:
            body = [line]
            for more in lines:
                body.append(more)
                if more.strip() == heredoc.group(1):
                    break
            line = "\n".join(body)
        if line.strip():
            commands.append(line)
    return commands


def bash(command: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Run as from a checkout (handouts name scenarios/labs/...), but write in ``cwd``."""
    if not (cwd / "scenarios").exists():
        (cwd / "scenarios").symlink_to(REPO / "scenarios")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def check(lab: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return bash(f"sanlab lab check {lab} {lab}", cwd)


@pytest.mark.parametrize("lab", LABS)
@pytest.mark.subprocess  # starts sanlab, a tool or a helper as a process
def test_each_lab_has_its_handout_scenario_key_and_consistent_checks(lab):
    exercises = load_exercises(LABS_DIR / f"{lab}.checks.yaml")
    scenario = load_checked(LABS_DIR / f"{exercises.lab}.yaml")
    handout = (DOCS / f"{lab}.md").read_text()
    setup = f"](../generated/setup-{exercises.lab}.svg)"  # the set-up, drawn from the scenario
    for part in ("**Goals.**", "## Background", "## Steps", "## Questions", "**Time:**", setup):
        assert part in handout, part
    assert re.search(rf"sanlab lab check {lab}\b", handout)  # lab 6 boots nothing: no lab name
    targets = {t.name for t in scenario.targets}
    links = {link.name for link in scenario.links}
    hosts = {h.name for h in scenario.hosts}
    for exercise in exercises.exercises.values():
        for step in exercise.steps:
            assert step.target is None or step.target.name in targets
            assert step.capture is None or step.capture.link in links
            assert step.host is None or step.host.host in hosts
            if step.answer and step.answer.analyze:
                assert step.answer.analyze.link in links
            assert step.answer is None or step.answer.key in handout, step.answer.key
    assert f"labs/{lab}.md" in (REPO / "mkdocs.yml").read_text()


def test_a_bad_exercise_file_is_refused_with_its_field(tmp_path):
    from sanlab.scenarios.errors import ScenarioError

    path = tmp_path / "x.checks.yaml"
    path.write_text(
        "lab: x\nexercises:\n  e:\n    title: t\n    steps:\n"
        "      - {id: a, says: s, hint: h, host: {host: i, run: 'true'}, answer: {key: k, equals: 1}}\n"
    )
    with pytest.raises(ScenarioError, match="exactly one of target, host, capture, local, answer"):
        load_exercises(path)


@pytest.mark.subprocess  # starts sanlab, a tool or a helper as a process
def test_an_unknown_exercise_lists_the_known_ones(tmp_path):
    result = bash("sanlab lab check no-lab no-such-exercise", tmp_path)
    assert result.returncode == 1 and "no such exercise (known:" in result.stderr
    assert "iscsi-wire" in result.stderr


@pytest.mark.subprocess  # starts sanlab, a tool or a helper as a process
def test_projection_lab_checker_fails_before_the_solution_and_passes_after(tmp_path):
    before = check("project-100g", tmp_path)
    assert before.returncode == 1 and "next:" in before.stdout and "no answers file" in before.stdout
    for command in solution("project-100g"):
        ran = bash(command, tmp_path)
        assert ran.returncode == 0, (command, ran.stdout, ran.stderr)
    wrong = (tmp_path / "project-100g.answers.yaml").read_text().replace("target-port-tx", "link-in")
    (tmp_path / "project-100g.answers.yaml").write_text(wrong)
    assert check("project-100g", tmp_path).returncode == 1  # one wrong answer is caught


@pytest.mark.vm
@pytest.mark.parametrize("lab", sorted(VM_LABS))
def test_vm_lab_solution_runs_end_to_end(lab, tmp_path, guest_image):
    commands = solution(lab)
    up = next(i for i, c in enumerate(commands) if c.startswith("sanlab lab up"))
    started = time.monotonic()
    try:
        for command in commands[: up + 1]:
            assert bash(command, tmp_path).returncode == 0, command
        before = check(lab, tmp_path)
        assert before.returncode == 1 and "[ ]" in before.stdout, before.stdout
        for command in commands[up + 1 :]:
            ran = bash(command, tmp_path)
            assert ran.returncode == 0, (command, ran.stdout[-2000:], ran.stderr[-2000:])
        print(f"\nlab {lab}: boot and every step in {time.monotonic() - started:.0f} s")
    finally:
        bash(f"sanlab lab down {lab}", tmp_path)


@pytest.mark.vm
def test_a_labs_targets_from_separate_shells_and_a_root_console(tmp_path, guest_image):
    """export, connect, fio, disconnect, unexport and down, each its own process; the console is a shell."""
    import json
    import socket

    from sanlab.emulator.lab_state import read_state

    lab = "test-targets"
    assert bash(f"sanlab lab up scenarios/pair-rxe.yaml --name {lab}", tmp_path).returncode == 0
    try:
        exported = bash(f"sanlab lab export {lab}", tmp_path)
        assert exported.returncode == 0 and "nvme-rdma: exported" in exported.stdout, exported.stderr
        subsystems = bash(f"sanlab lab exec {lab} target -- ls /sys/kernel/config/nvmet/subsystems", tmp_path)
        assert "nqn." in subsystems.stdout
        again = bash(f"sanlab lab export {lab} nvme-rdma", tmp_path)
        assert again.returncode == 1 and "already exported" in again.stderr
        connected = bash(f"sanlab lab connect {lab} nvme-rdma", tmp_path)
        assert connected.returncode == 0 and connected.stdout.startswith("/dev/nvme"), connected.stderr
        fio = bash(f"sanlab lab fio {lab} nvme-rdma --rw randwrite --bs 4k --verify-size 1m", tmp_path)
        record = json.loads(fio.stdout)
        assert fio.returncode == 0 and record["verify"] == "pass" and record["verified_bytes"] == 1 << 20
        console = read_state(lab)["hosts"]["initiator"]["console"]
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(console)
            sock.settimeout(1.0)
            sock.sendall(b"\necho shell-$((6 * 7)) $(id -u)\n")
            seen, deadline = b"", time.monotonic() + 30
            while b"shell-42 0" not in seen and time.monotonic() < deadline:
                try:
                    seen += sock.recv(4096)
                except TimeoutError:
                    continue
        assert b"shell-42 0" in seen  # a root shell evaluated it
        assert "disconnected" in bash(f"sanlab lab disconnect {lab} nvme-rdma", tmp_path).stdout
        gone = bash(f"sanlab lab unexport {lab}", tmp_path)
        assert "nvme-rdma: unexported" in gone.stdout
        left = bash(f"sanlab lab exec {lab} target -- ls /sys/kernel/config/nvmet/subsystems", tmp_path)
        assert left.stdout.strip() == ""
        assert bash(f"sanlab lab export {lab}", tmp_path).returncode == 0  # down undoes it too
    finally:
        down = bash(f"sanlab lab down {lab}", tmp_path)
    assert "target nvme-rdma (export): undone" in down.stdout


@pytest.mark.parametrize("lab", LABS)
def test_the_setup_picture_shows_the_setup_and_no_answer(lab):
    """Drawn from the scenario: its hosts, stacks and cables are there; no fixed answer is."""
    import re
    import sys

    if str(REPO / "docs") not in sys.path:
        sys.path.insert(0, str(REPO / "docs"))
    import setup_diagram

    exercises = load_exercises(LABS_DIR / f"{lab}.checks.yaml")
    scenario = load_checked(LABS_DIR / f"{exercises.lab}.yaml")
    svg = setup_diagram.setup_svg(scenario)
    words = set(re.findall(r"[\w./()-]+", re.sub(r"<[^>]+>", " ", svg)))
    assert {h.name for h in scenario.hosts} <= words
    assert all(f"{link.name}:" in svg for link in scenario.links)
    answers = [s.answer.equals for e in exercises.exercises.values() for s in e.steps if s.answer]
    for answer in (a for a in answers if a is not None):
        assert str(answer) not in words, f"the set-up picture gives away {answer!r}"
