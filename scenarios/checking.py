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

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sanlab.scenarios.answers import judge
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.exercises import (
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
from sanlab.scenarios.yamlfile import load_yaml

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

    def __init__(self, probes: Probes, answers: Path | None):
        self.probes = probes
        self.answers_path = answers
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
        if self._answers is None:
            if self.answers_path is None or not self.answers_path.is_file():
                raise SanlabError(f"no answers file {self.answers_path}")
            data = load_yaml(self.answers_path)
            if not isinstance(data, dict):
                raise SanlabError(f"{self.answers_path}: write 'key: value' lines")
            self._answers = data
        return self._answers

    def answer(self, probe: AnswerProbe) -> Seen:
        given = self.answers().get(probe.key)
        if given is None:
            return False, f"no answer for {probe.key!r} in {self.answers_path}"
        right, why = judge(given, self.expected(probe), probe.tolerance, probe.unit)
        return right, f"{probe.key}: {given!r}" + ("" if right else f" - {why}")

    def expected(self, probe: AnswerProbe) -> object:
        if probe.analyze is not None:
            return self.probes.measured(probe.analyze)
        if probe.model is not None:
            return self.probes.projected(probe.model)
        return probe.equals


def run_checks(probes: Probes, exercise: Exercise, answers: Path | None) -> list[Verdict]:
    checker = Checker(probes, answers)
    return [checker.check(step) for step in exercise.steps]
