"""Teaching exercises: the steps a student does on a lab, and how each is seen to be done.

An exercise file (``scenarios/labs/LAB.checks.yaml``) goes with the lab's
scenario (``scenarios/labs/LAB.yaml``) and its handout (``docs/labs/LAB.md``).
Each step names one observation that proves it done - never the student's
word for it:

- ``target``: a target of the lab is exported (or connected) by sanlab;
- ``host``: a command on a lab host exits 0 (a configfs object, a session…);
- ``capture``: the lab's capture of a link holds frames a Wireshark display
  filter matches (with sanlab's dissectors loaded);
- ``local``: a command run where the student works (``sanlab validate`` of a
  file they wrote, say) exits as expected and prints what it should;
- ``answer``: the student's answers file gives a value that agrees with a
  fact (``equals``), with what the analyser measures in the lab's own
  capture (``analyze``), or with what ``sanlab model`` projects (``model``).

Like scenarios, these files refuse unknown fields.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError, model_validator

from sanlab.scenarios.errors import Problem, ScenarioError
from sanlab.scenarios.invalid import problems_from
from sanlab.scenarios.schema import Label, Strict
from sanlab.scenarios.yamlfile import load_yaml

Text = Annotated[str, Field(min_length=1, max_length=400)]
Key = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,40}$")]


class TargetProbe(Strict):
    name: Label
    phase: Literal["export", "connect"] = "export"


class HostProbe(Strict):
    host: Label
    run: Annotated[str, Field(min_length=1, max_length=1000)]  # the exercise's own shell text


class CaptureProbe(Strict):
    link: Label
    filter: Annotated[str, Field(min_length=1, max_length=400)]  # a Wireshark display filter
    at_least: Annotated[int, Field(ge=1, le=1_000_000)] = 1


class Measured(Strict):
    """A figure of ``sanlab analyze`` on the lab's capture of ``link``."""

    link: Label
    op: Literal["read", "write"]
    bytes: Annotated[int, Field(ge=512, le=1 << 26)]
    field: Literal["frames_per_io", "wire_bytes_per_io", "ack_frames_per_io", "round_trips_per_io"]


class Projected(Strict):
    """A field of ``sanlab model`` with these options (each a --option and its value)."""

    options: dict[Key, str | int | float]
    field: Literal[
        "iops", "bw_mibps", "lat_mean_us", "lat_p99_us", "bottleneck", "cpu_initiator_pct", "cpu_target_pct"
    ]


class LocalProbe(Strict):
    """A command run where the student works: validating a file they wrote, say."""

    run: Annotated[str, Field(min_length=1, max_length=1000)]  # the exercise's own shell text
    exit: Annotated[int, Field(ge=0, le=255)] = 0
    output: Annotated[str, Field(min_length=1, max_length=400)] | None = None  # a regex


class AnswerProbe(Strict):
    key: Key
    equals: str | int | float | None = None
    analyze: Measured | None = None
    model: Projected | None = None
    tolerance: Annotated[float, Field(ge=0, le=1)] = 0.0  # relative, for numbers
    # The unit the expected number is in (us, MiB/s, GB/s, Gb/s, %): an answer with another
    # unit of the same kind is converted; one with no unit is taken to be in this one.
    unit: Annotated[str, Field(max_length=8)] | None = None
    # For a word: the names the handout lists (compared loosely: case, spaces, _ and -).
    words: Annotated[list[Label], Field(max_length=40)] = []

    @model_validator(mode="after")
    def one_source(self) -> AnswerProbe:
        sources = [s for s in (self.equals, self.analyze, self.model) if s is not None]
        if len(sources) != 1:
            raise ValueError("give exactly one of equals, analyze, model")
        return self


class Step(Strict):
    id: Label
    says: Text
    hint: Text
    target: TargetProbe | None = None
    host: HostProbe | None = None
    capture: CaptureProbe | None = None
    local: LocalProbe | None = None
    answer: AnswerProbe | None = None

    @model_validator(mode="after")
    def one_probe(self) -> Step:
        probes = (self.target, self.host, self.capture, self.local, self.answer)
        if sum(p is not None for p in probes) != 1:
            raise ValueError("a step has exactly one of target, host, capture, local, answer")
        return self


class Exercise(Strict):
    title: Text
    steps: Annotated[list[Step], Field(min_length=1, max_length=40)]

    @property
    def needs_lab(self) -> bool:
        """Whether any step looks at a running lab (a target, a host, a capture); an exercise
        of answers from the model and fixed facts (lab 6) is checked with no lab up."""
        return any(
            s.target or s.host or s.capture or (s.answer is not None and s.answer.analyze is not None)
            for s in self.steps
        )

    @property
    def answer_keys(self) -> list[str]:
        return [s.answer.key for s in self.steps if s.answer is not None]


class ExerciseFile(Strict):
    lab: Label  # the scenario: scenarios/labs/<lab>.yaml
    exercises: Annotated[dict[Label, Exercise], Field(min_length=1, max_length=10)]


LABS_DIR = Path(__file__).resolve().parent


def load_exercises(path: Path) -> ExerciseFile:
    try:
        return ExerciseFile.model_validate(load_yaml(path))
    except ValidationError as exc:
        raise ScenarioError(problems_from(exc, str(path), ExerciseFile)) from None


def find_exercise(name: str, labs_dir: Path = LABS_DIR) -> tuple[ExerciseFile, Exercise]:
    """The exercise called ``name`` in any lab's exercise file."""
    files = sorted(labs_dir.glob("*.checks.yaml"))
    for path in files:
        found = load_exercises(path)
        if name in found.exercises:
            return found, found.exercises[name]
    known = sorted(e for p in files for e in load_exercises(p).exercises)
    raise ScenarioError([Problem("exercise", name, f"no such exercise (known: {', '.join(known)})")])
