"""``sanlab lab check``: which steps of an exercise a lab shows done, and a hint for the next.

Each step's probe (scenarios/exercises.py) is answered by looking, never by
asking: the lab's keepers (lab_targets.py), a command on a lab host, the
lab's capture through tshark with sanlab's dissectors, the analyser on that
capture, or ``sanlab model``.  Wiring only, like the rest of the CLI.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sanlab import lab_targets
from sanlab.dissectors.analyze import analyze
from sanlab.dissectors.plugins import tshark_args
from sanlab.emulator.agent import AgentClient
from sanlab.emulator.lab import capture_file, live_agent_path
from sanlab.scenarios.answers import judge
from sanlab.scenarios.errors import SanlabError, ToolMissing
from sanlab.scenarios.exercises import (
    AnswerProbe,
    CaptureProbe,
    Exercise,
    HostProbe,
    LocalProbe,
    Step,
    TargetProbe,
)
from sanlab.scenarios.yamlfile import load_yaml

PROBE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Verdict:
    step: Step
    done: bool
    seen: str  # what the probe found, in a few words

    def document(self) -> dict[str, object]:
        return {"id": self.step.id, "says": self.step.says, "done": self.done, "seen": self.seen}


class Checker:
    """Answers one lab's probes; caches what several steps share (captures, answers)."""

    def __init__(self, lab: str, answers: Path | None):
        self.lab = lab
        self.answers_path = answers
        self._answers: dict[str, Any] | None = None
        self._analyses: dict[str, Any] = {}

    def check(self, step: Step) -> Verdict:
        try:
            if step.target:
                done, seen = self.target(step.target)
            elif step.host:
                done, seen = self.host(step.host)
            elif step.capture:
                done, seen = self.capture(step.capture)
            elif step.local:
                done, seen = self.local(step.local)
            else:
                assert step.answer is not None
                done, seen = self.answer(step.answer)
        except SanlabError as exc:
            done, seen = False, str(exc).splitlines()[0]
        return Verdict(step, done, seen)

    def target(self, probe: TargetProbe) -> tuple[bool, str]:
        status = lab_targets.held(self.lab, probe.name, probe.phase)
        if status is None:
            return False, f"{probe.name} is not {probe.phase}ed"
        return True, f"{probe.name} {probe.phase}ed " + " ".join(status.get("devices") or [])

    def host(self, probe: HostProbe) -> tuple[bool, str]:
        agent = AgentClient(live_agent_path(self.lab, probe.host), probe.host)
        try:
            result = agent.run(probe.run, timeout=PROBE_TIMEOUT_S)
        finally:
            agent.close()
        first = (result.stdout or result.stderr).strip().splitlines()[:1]
        return result.rc == 0, (first[0][:120] if first else f"exit {result.rc}")

    def capture_file(self, link: str) -> Path:
        return capture_file(self.lab, link)

    def capture(self, probe: CaptureProbe) -> tuple[bool, str]:
        tshark = shutil.which("tshark")
        if tshark is None:
            raise ToolMissing("tshark", "install it with: apt-get install tshark")
        args = [tshark, *tshark_args(), "-r", str(self.capture_file(probe.link)), "-Y", probe.filter]
        run = subprocess.run(
            args + ["-T", "fields", "-e", "frame.number"], capture_output=True, text=True, timeout=600
        )
        if run.returncode != 0:
            raise SanlabError(f"tshark could not apply {probe.filter!r}: {run.stderr.strip()[-200:]}")
        count = len(run.stdout.split())
        return count >= probe.at_least, f"{count} frames match {probe.filter!r}"

    def local(self, probe: LocalProbe) -> tuple[bool, str]:
        env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
        run = subprocess.run(
            ["bash", "-c", probe.run], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, env=env
        )
        said = run.stdout + run.stderr
        matched = probe.output is None or re.search(probe.output, said) is not None
        first = said.strip().splitlines()[:1]
        return (
            run.returncode == probe.exit and matched,
            f"exit {run.returncode}: {first[0][:100] if first else ''}",
        )

    def answers(self) -> dict[str, Any]:
        if self._answers is None:
            if self.answers_path is None or not self.answers_path.is_file():
                raise SanlabError(f"no answers file {self.answers_path}")
            data = load_yaml(self.answers_path)
            if not isinstance(data, dict):
                raise SanlabError(f"{self.answers_path}: write 'key: value' lines")
            self._answers = data
        return self._answers

    def answer(self, probe: AnswerProbe) -> tuple[bool, str]:
        given = self.answers().get(probe.key)
        if given is None:
            return False, f"no answer for {probe.key!r} in {self.answers_path}"
        right, why = judge(given, self.expected(probe), probe.tolerance, probe.unit)
        return right, f"{probe.key}: {given!r}" + ("" if right else f" - {why}")

    def expected(self, probe: AnswerProbe) -> object:
        if probe.analyze is not None:
            m = probe.analyze
            pcap = self.capture_file(m.link)
            if m.link not in self._analyses:
                self._analyses[m.link] = analyze(pcap)
            groups = {(g.op, g.bytes): g for g in self._analyses[m.link].groups}
            if (m.op, m.bytes) not in groups:
                raise SanlabError(f"the capture of {m.link} holds no {m.op} of {m.bytes} bytes yet")
            return getattr(groups[(m.op, m.bytes)], m.field)
        if probe.model is not None:
            return projected(probe.model.options, probe.model.field)
        return probe.equals


def model_argv(options: Mapping[str, object]) -> list[str]:
    """``model --json --OPTION VALUE...``: an exercise's options as a student types them."""
    argv = ["model", "--json"]
    for key, value in options.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    return argv


def projected(options: Mapping[str, object], field: str) -> object:
    """One field of ``sanlab model --json`` with these options, as a student would run it."""
    argv = [sys.executable, "-m", "sanlab", *model_argv(options)]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        raise SanlabError(f"sanlab model failed: {run.stderr.strip()[-200:]}")
    return json.loads(run.stdout)["results"][0][field]


def run_checks(lab: str, exercise: Exercise, answers: Path | None) -> list[Verdict]:
    checker = Checker(lab, answers)
    return [checker.check(step) for step in exercise.steps]
