"""What a lab handout quotes is what the commands it shows print.

Lab 6 (docs/labs/project-100g.md) runs on the model alone, so every one of
its commands is run here: each bottleneck they print must be one the
handout's list explains, and the 'extrapolated' note its background
describes must appear under one of its steps.
"""

from __future__ import annotations

import re
import shlex

import pytest
from click.testing import CliRunner

from sanlab.main import cli
from support import REPO

HANDOUT = REPO / "docs" / "labs" / "project-100g.md"


def _commands() -> list[list[str]]:
    text = HANDOUT.read_text()
    return [shlex.split(line)[1:] for line in re.findall(r"^\$ (sanlab model .*)$", text, re.M)]


@pytest.fixture(scope="module")
def outputs() -> list[str]:
    printed = []
    for argv in _commands():
        result = CliRunner().invoke(cli, argv)
        printed.append(result.output)
    return printed


def test_the_handout_shows_commands(outputs):
    assert len(outputs) >= 7


def test_every_bottleneck_printed_is_one_the_handout_explains(outputs):
    listed = set(re.findall(r"^- (`[a-z-]+`(?: / `[a-z-]+`)*)", HANDOUT.read_text(), re.M))
    explained = {name for entry in listed for name in re.findall(r"`([a-z-]+)`", entry)}
    printed = set()
    for output in outputs:
        head = next((line for line in output.splitlines() if line.startswith("set-up")), None)
        if head is None:
            continue  # the step the model refuses (question 6)
        at = head.index("bottleneck")
        for line in output.splitlines():
            if re.match(r"^(nvme|iser|iscsi|srp)", line):
                printed.add(line[at:].split()[0])
    assert printed and printed <= explained, f"printed {printed - explained}, not in the handout's list"


def test_the_extrapolated_note_the_handout_explains_appears_under_a_step(outputs):
    assert "extrapolated" in HANDOUT.read_text()
    assert any("note, " in output and "extrapolated" in output for output in outputs)


def test_the_step_question_six_calls_refused_is_refused(outputs):
    refused = [o for o in outputs if "no NIC of this profile carries" in o]
    assert len(refused) == 1
