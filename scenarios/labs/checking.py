"""How ``sanlab lab check`` judges a step: one probe per step, each answered by the layer
that can see it.

The checker only dispatches and judges.  What a probe looks at belongs to
the layer that owns it: a host's command and this machine's shell to the
emulator, a target's keeper to the targets, a capture and its analysis to
the dissectors, a projection to ``sanlab model``.  The command line hands
the checker one ``Probes`` that calls them (cli/lab_checks.py), so this
module needs none of those layers and tests can hand it their own.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml

from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.labs.answers import judge
from sanlab.scenarios.labs.exercises import (
    AnswerProbe,
    CaptureProbe,
    Exercise,
    HostProbe,
    LocalProbe,
    Measured,
    Projected,
    Step,
    TargetProbe,
)
from sanlab.scenarios.yamlfile import load_yaml, read_text

Seen = tuple[bool, str]  # done?, and what the probe found, in a few words


class Probes(Protocol):
    """What each kind of step looks at; every method may raise SanlabError (not done)."""

    def target(self, probe: TargetProbe) -> Seen: ...
    def host(self, probe: HostProbe) -> Seen: ...
    def capture(self, probe: CaptureProbe) -> Seen: ...
    def local(self, probe: LocalProbe) -> Seen: ...
    def measured(self, figure: Measured) -> object: ...
    def projected(self, figure: Projected) -> object: ...


@dataclass(frozen=True)
class Verdict:
    step: Step
    done: bool
    seen: str

    def document(self) -> dict[str, object]:
        return {"id": self.step.id, "says": self.step.says, "done": self.done, "seen": self.seen}


class Checker:
    """Judges one exercise's steps on one lab; reads the student's answers file once."""

    def __init__(self, probes: Probes, answers: Path | None, keys: Sequence[str] = ()):
        self.probes = probes
        self.answers_path = answers
        self.keys = list(keys)  # the exercise's answer keys
        self._answers: dict[str, Any] | None = None

    def check(self, step: Step) -> Verdict:
        try:
            done, seen = self._look(step)
        except SanlabError as exc:
            done, seen = False, str(exc).splitlines()[0]
        return Verdict(step, done, seen)

    def _look(self, step: Step) -> Seen:
        if step.target:
            return self.probes.target(step.target)
        if step.host:
            return self.probes.host(step.host)
        if step.capture:
            return self.probes.capture(step.capture)
        if step.local:
            return self.probes.local(step.local)
        assert step.answer is not None  # a Step has exactly one probe
        return self.answer(step.answer)

    def answers(self) -> dict[str, Any]:
        """The answers as written: YAML's checks first, then every value as its text, so a
        reason echoes '0x25' and '2855180', not 37 and 2.85518e+06."""
        if self._answers is None:
            if self.answers_path is None or not self.answers_path.is_file():
                raise SanlabError(f"no answers file {self.answers_path}")
            if not isinstance(load_yaml(self.answers_path), dict):
                raise SanlabError(f"{self.answers_path}: write 'key: value' lines")
            written = yaml.load(read_text(self.answers_path), Loader=yaml.BaseLoader)
            self._answers = {str(k): v for k, v in written.items()}
        return self._answers

    def unknown_keys(self) -> list[str]:
        """'one_jobs_iops is no key of this exercise (closest: one_job_iops)', for each key
        of the answers file the exercise does not ask for."""
        try:
            given = self.answers()
        except SanlabError:
            return []
        lines = []
        for key in given:
            if key not in self.keys:
                near = difflib.get_close_matches(key, self.keys, n=1, cutoff=0.5)
                closest = f" (closest: {near[0]})" if near else f" (keys: {', '.join(self.keys)})"
                lines.append(f"{self.answers_path}: {key!r} is no key of this exercise{closest}")
        return lines

    def answer(self, probe: AnswerProbe) -> Seen:
        given = self.answers().get(probe.key)
        if given is None or given == "":
            unknown = [k for k in self.answers() if k not in self.keys]
            near = difflib.get_close_matches(probe.key, unknown, n=1, cutoff=0.5)
            typo = f" ({near[0]!r} there is no key: meant {probe.key!r}?)" if near else ""
            return False, f"no answer for {probe.key!r} in {self.answers_path}{typo}"
        if not isinstance(given, str):
            return False, f"{probe.key}: write one value, not a list or mapping"
        right, why = judge(given, self.expected(probe), probe.tolerance, probe.unit, probe.words)
        return right, f"{probe.key}: {given}" + ("" if right else f" - {why}")

    def expected(self, probe: AnswerProbe) -> object:
        if probe.analyze is not None:
            return self.probes.measured(probe.analyze)
        if probe.model is not None:
            return self.probes.projected(probe.model)
        return probe.equals


def run_checks(probes: Probes, exercise: Exercise, answers: Path | None) -> list[Verdict]:
    checker = Checker(probes, answers, exercise.answer_keys)
    return [checker.check(step) for step in exercise.steps]


def next_step(verdicts: Sequence[Verdict], exercise: Exercise, lab_up: bool, boot: str) -> str:
    """The one line that follows the ticks: nothing to do when all is ticked; 'lab up' only
    for an exercise that looks at a lab (``boot`` is that command); else the first hint."""
    todo = next((v for v in verdicts if not v.done), None)
    if todo is None:
        return "every step is done"
    if exercise.needs_lab and not lab_up:
        return f"next: {boot}"
    return f"next: {todo.step.hint}"
