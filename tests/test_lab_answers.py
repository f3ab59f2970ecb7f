"""Every lab's answers, as a student would spell them, are marked right; near misses are marked wrong.

test_answers.py holds the reader to a fixed matrix.  This one walks every
answer step of every lab's checks file and derives the matrix from the value
the checker will expect there: the key's fixed value (``equals``), the model's
figure (``model``, projected in-process as ``sanlab model`` would), or the
analyser's reading of the golden capture of that transport (``analyze``).
Each expected value must pass in every equivalent spelling within the step's
own tolerance and unit, and each near miss must fail with a reason that says
what was read, never the answer.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from sanlab.lab_checks import model_argv
from sanlab.main import cli
from sanlab.scenarios.labs.answers import judge
from sanlab.scenarios.labs.exercises import LABS_DIR, AnswerProbe, load_exercises
from support import REPO

GOLDEN = REPO / "tests" / "golden"
# The golden capture that stands for each lab link's transport (the labs' captures are made live).
CAPTURE_OF = {
    ("iscsi-wire", "wire"): "iscsi-tcp.pcap",
    ("nvme-tcp-rdma", "tcp"): "nvme-tcp.pcap",
    ("nvme-tcp-rdma", "rdma"): "nvme-rdma-rxe.pcap",
    ("srp-immediate", "fabric"): "srp-rxe.pcap",
}


def _answer_steps() -> list[tuple[str, str, AnswerProbe]]:
    steps = []
    for path in sorted(LABS_DIR.glob("*.checks.yaml")):
        lab = load_exercises(path).lab
        for exercise in load_exercises(path).exercises.values():
            steps += [(lab, step.id, step.answer) for step in exercise.steps if step.answer]
    return steps


STEPS = _answer_steps()
# An answer read from a capture needs tshark, which the fast tier does not run.
PARAMS = [
    pytest.param(lab, step, probe, id=f"{lab}-{step}", marks=[pytest.mark.tshark] if probe.analyze else [])
    for lab, step, probe in STEPS
]


def _expected(lab: str, probe: AnswerProbe) -> object:
    if probe.model is not None:
        result = CliRunner().invoke(cli, model_argv(probe.model.options))
        assert result.exit_code == 0, result.output
        return json.loads(result.output)["results"][0][probe.model.field]
    if probe.analyze is not None:
        from sanlab.dissectors.analyze import analyze
        from support import require_tool

        require_tool("tshark")
        m = probe.analyze
        groups = {(g.op, g.bytes): g for g in analyze(GOLDEN / CAPTURE_OF[(lab, m.link)]).groups}
        return getattr(groups[(m.op, m.bytes)], m.field)
    return probe.equals


def _hex(text: object) -> int | None:
    if isinstance(text, str) and text.strip().lower().startswith("0x"):
        return int(text.strip(), 16)
    return None


def spellings(expected: object, tolerance: float) -> list[object]:
    """Ways a person writes ``expected`` that all mean it (within ``tolerance``)."""
    as_hex = _hex(expected)
    if as_hex is not None:
        return [expected, str(expected).upper().replace("0X", "0x"), as_hex, str(as_hex), f" {as_hex} "]
    if isinstance(expected, str):
        return [expected, expected.upper(), f"  {expected} "]
    value = float(expected)  # type: ignore[arg-type]
    forms: list[object] = [expected, f"{value:g}", f"{value:.6g}"]
    if value == int(value):
        forms += [int(value), f"{int(value)}.0"]
        if abs(value) >= 1000:
            forms += [f"{int(value):,}", f"{int(value):_}", f"{int(value):,}".replace(",", " ")]
    if abs(value) >= 1000 and tolerance >= 0.001:
        forms += [f"{value / 1e3:.3f}k", f"{value / 1e3:,.1f}K"]
    if abs(value) >= 1e6 and tolerance >= 0.005:
        forms += [f"{value / 1e6:.3f}M"]
    return forms


def near_misses(expected: object, tolerance: float) -> list[object]:
    """Values a careless reading gives: one off, or just past the step's tolerance."""
    as_hex = _hex(expected)
    if as_hex is not None:
        return [hex(as_hex + 1), hex(as_hex - 1), as_hex + 1, str(expected)[2:], "x" + str(expected)[2:]]
    if isinstance(expected, str):
        return ["cpu" if expected != "cpu" else "link-in", expected + "s", "", "yes"]
    value = float(expected)  # type: ignore[arg-type]
    step = max(1.0, abs(value) * tolerance * 2.5)
    misses: list[object] = [value + step, value - step, True, "lots"]
    if abs(value) >= 1000:
        misses.append(f"{(value + step) / 1e3:.3f}k")
    return misses


def _mentions(why: str, expected: object) -> bool:
    """Whether a reason gives the answer away (its value in any usual spelling)."""
    if isinstance(expected, str) and _hex(expected) is None:
        return f"'{expected.lower()}'" in why.lower().replace(" is not it", "")
    value = float(_hex(expected) if _hex(expected) is not None else expected)  # type: ignore[arg-type]
    return any(s in why for s in {f"{value:,.6g}", f"{value:g}"} if len(s) > 1)


@pytest.mark.parametrize("lab,step,probe", PARAMS)
def test_each_spelling_of_the_keys_answer_passes(lab, step, probe):
    expected = _expected(lab, probe)
    for given in spellings(expected, probe.tolerance):
        right, why = judge(given, expected, probe.tolerance, probe.unit)
        assert right, f"{lab} {step}: {given!r} should mean {expected!r}: {why}"


@pytest.mark.parametrize("lab,step,probe", PARAMS)
def test_each_near_miss_fails_with_a_reason_that_keeps_the_answer(lab, step, probe):
    expected = _expected(lab, probe)
    for given in near_misses(expected, probe.tolerance):
        right, why = judge(given, expected, probe.tolerance, probe.unit)
        assert not right, f"{lab} {step}: {given!r} passed for {expected!r}"
        assert why and not _mentions(why, expected), f"{lab} {step}: {why!r} gives {expected!r} away"


def test_every_lab_with_answers_is_walked():
    """The walk reaches all six labs' answer steps (an empty walk would pass everything)."""
    labs = {lab for lab, _, _ in STEPS}
    assert labs == {p.name.removesuffix(".checks.yaml") for p in Path(LABS_DIR).glob("*.checks.yaml")}
    assert len(STEPS) >= 15 and not any(math.isnan(p.tolerance) for _, _, p in STEPS)


class _Answers:
    """Probes for an exercise of answers alone: the model's figure is given, not projected."""

    def __init__(self, projected: object = 2_855_180.0):
        self.value = projected

    def projected(self, figure: object) -> object:
        return self.value

    def measured(self, figure: object) -> object:
        raise AssertionError("lab 6 reads no capture")


def _lab6(tmp_path: Path, text: str):
    from sanlab.scenarios.labs.checking import Checker
    from sanlab.scenarios.labs.exercises import find_exercise

    _, exercise = find_exercise("project-100g")
    answers = tmp_path / "project-100g.answers.yaml"
    answers.write_text(text)
    checker = Checker(_Answers(), answers, exercise.answer_keys)  # type: ignore[arg-type]
    return exercise, checker


def test_values_are_echoed_as_the_student_wrote_them(tmp_path):
    """'0x25' was echoed as 37 and 2855180 as 2.85518e+06."""
    exercise, checker = _lab6(
        tmp_path, "one_job_iops: 0x25\neight_jobs_iops: 2855180\nfour_cores_iops: 1.2M\n"
    )
    seen = {step.id: checker.check(step).seen for step in exercise.steps}
    assert seen["one-job-iops"].startswith("one_job_iops: 0x25 - '0x25' is not it")
    assert seen["eight-jobs-iops"] == "eight_jobs_iops: 2855180"  # right, and as written
    assert seen["four-cores-iops"].startswith("four_cores_iops: 1.2M - '1.2M' is not it")


def test_an_unknown_key_is_named_with_the_closest_expected_one(tmp_path):
    exercise, checker = _lab6(tmp_path, "one_jobs_iops: 2855180\nzzz: 1\n")
    seen = {step.id: checker.check(step).seen for step in exercise.steps}
    assert "no answer for 'one_job_iops'" in seen["one-job-iops"]
    assert "'one_jobs_iops' there is no key: meant 'one_job_iops'?" in seen["one-job-iops"]
    lines = checker.unknown_keys()
    assert lines[0].endswith("'one_jobs_iops' is no key of this exercise (closest: one_job_iops)")
    assert "'zzz' is no key of this exercise (keys: one_job_iops, one_job_bottleneck" in lines[1]


def test_next_is_said_only_while_a_step_is_unticked_and_lab_6_never_says_lab_up(tmp_path):
    from sanlab.scenarios.labs.checking import Verdict, next_step
    from sanlab.scenarios.labs.exercises import find_exercise

    _, lab6 = find_exercise("project-100g")
    _, lab1 = find_exercise("iscsi-wire")
    boot = "sanlab lab up scenarios/labs/x.yaml"
    done = [Verdict(step, True, "") for step in lab6.steps]
    assert next_step(done, lab6, False, boot) == "every step is done"
    todo = [Verdict(step, i != 2, "") for i, step in enumerate(lab6.steps)]
    assert next_step(todo, lab6, False, boot) == f"next: {lab6.steps[2].hint}"  # no lab up: it boots nothing
    first = [Verdict(step, False, "") for step in lab1.steps]
    assert next_step(first, lab1, False, boot) == f"next: {boot}"
    assert next_step(first, lab1, True, boot) == f"next: {lab1.steps[0].hint}"
    assert next_step([Verdict(s, True, "") for s in lab1.steps], lab1, False, boot) == "every step is done"


@pytest.mark.subprocess  # starts sanlab (and the model) as a process
def test_lab_6_is_checked_by_its_exercise_name_alone(tmp_path):
    """No lab name for a lab that boots nothing, and no 'lab up' advice; a lab that boots
    something asks for its name in one line."""
    import subprocess
    import sys

    (tmp_path / "project-100g.answers.yaml").write_text("one_job_bottleneck: initiator CPU\n")
    run = subprocess.run(
        [sys.executable, "-m", "sanlab", "lab", "check", "project-100g"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 1, run.stderr
    assert "[x] one-job-bottleneck" in run.stdout and "lab up" not in run.stdout
    assert "next: sanlab model --transport nvme-rdma" in run.stdout
    other = subprocess.run(
        [sys.executable, "-m", "sanlab", "lab", "check", "iscsi-wire"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert other.returncode == 1 and other.stderr.strip().endswith(
        "looks at a running lab: give the lab too (sanlab lab check iscsi-wire iscsi-wire)"
    )
