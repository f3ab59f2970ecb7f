"""What sanlab prints stays what it printed: the model's records, the analyser's readings and
every command a run sends its hosts.

A refactor (the registry, the tiers) must not move a figure.  These files were
written by the code before the registry (commit ca73ef4) and compared byte
for byte with the code after it; this test holds every later change to them.
A change that means to move a figure rewrites the file it moves, in the same
commit, and says why:

    sanlab model --json > tests/golden/snapshots/model-zeta.json
    sanlab analyze --json tests/golden/X.pcap > tests/golden/snapshots/analyze-X.json
    sanlab run scenarios/X.yaml --dry-run > tests/golden/snapshots/dry-run-X.txt

The dry-run transcripts were written by the code before the scenario plan
and the move of the run's orchestration out of the CLI (commit f313e26): a
run on VMs sends each host the same commands, in the same order, after it.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from sanlab.main import cli
from support import REPO, SCENARIOS, require_tool

SNAPSHOTS = REPO / "tests" / "golden" / "snapshots"
MODEL = {
    "model-zeta.json": [],
    "model-starwind.json": [str(SCENARIOS / "starwind-2024.yaml")],
    "model-lab6.json": [str(SCENARIOS / "labs" / "project-100g.yaml")],
}
CAPTURES = sorted((REPO / "tests" / "golden").glob("*.pcap"))
DRY_RUNS = ("smoke", "incast", "multipath", "multipath-scsi", "restart", "flap", "burst")


def _run(*argv: str) -> object:
    result = CliRunner().invoke(cli, list(argv))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.slow  # a second or two of projecting each
@pytest.mark.parametrize("name", MODEL)
def test_the_models_records_are_unchanged(name):
    expected = json.loads((SNAPSHOTS / name).read_text())
    assert _run("model", *MODEL[name], "--json") == expected


@pytest.mark.tshark
@pytest.mark.parametrize("capture", CAPTURES, ids=[c.stem for c in CAPTURES])
def test_the_analysers_reading_is_unchanged(capture):
    require_tool("tshark")
    expected = json.loads((SNAPSHOTS / f"analyze-{capture.stem}.json").read_text())
    assert _run("analyze", "--json", str(capture)) == expected


@pytest.mark.parametrize("scenario", DRY_RUNS)
def test_the_commands_a_run_sends_are_unchanged(scenario):
    result = CliRunner().invoke(cli, ["run", str(SCENARIOS / f"{scenario}.yaml"), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert result.stdout == (SNAPSHOTS / f"dry-run-{scenario}.txt").read_text()


def test_every_golden_capture_has_a_snapshot():
    assert {f"analyze-{c.stem}.json" for c in CAPTURES} | set(MODEL) == {
        p.name for p in SNAPSHOTS.glob("*.json")
    }
    assert {f"dry-run-{s}.txt" for s in DRY_RUNS} == {p.name for p in SNAPSHOTS.glob("*.txt")}
