"""``sanlab lab check``'s probes, wired to the layers that answer them.

Wiring only: scenarios/labs/checking.py judges the steps; the emulator runs a
host's or this machine's command (emulator/probes.py), the targets say what
a keeper holds (targets/sessions/lab_targets.py), the dissectors read the lab's
capture (dissectors/probes.py), and a projection is ``sanlab model`` itself,
run as a student would run it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping

from sanlab.dissectors.probes import Figures, frames_matching
from sanlab.emulator import probes as host_probes
from sanlab.emulator.lab_state import capture_file
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.labs.checking import Seen
from sanlab.scenarios.labs.exercises import (
    CaptureProbe,
    Exercise,
    ExerciseFile,
    HostProbe,
    LocalProbe,
    Measured,
    Projected,
    TargetProbe,
    find_exercise,
)
from sanlab.scenarios.reading import parse_json
from sanlab.targets.sessions import lab_targets

MODEL_TIMEOUT_S = 600.0


class LabProbes:
    """The ``Probes`` of one running lab."""

    def __init__(self, lab: str):
        self.lab = lab
        self.figures = Figures()

    def target(self, probe: TargetProbe) -> Seen:
        return lab_targets.probe(self.lab, probe.name, probe.phase)

    def host(self, probe: HostProbe) -> Seen:
        return host_probes.on_host(self.lab, probe.host, probe.run)

    def capture(self, probe: CaptureProbe) -> Seen:
        count = frames_matching(capture_file(self.lab, probe.link), probe.filter)
        return count >= probe.at_least, f"{count} frames match {probe.filter!r}"

    def local(self, probe: LocalProbe) -> Seen:
        return host_probes.on_this_machine(probe.run, probe.exit, probe.output)

    def measured(self, figure: Measured) -> object:
        pcap = capture_file(self.lab, figure.link)
        return self.figures.of(pcap, figure.link, figure.op, figure.bytes, figure.field)

    def projected(self, figure: Projected) -> object:
        return projected(figure.options, figure.field)


def model_argv(options: Mapping[str, object]) -> list[str]:
    """``model --json --OPTION VALUE...``: an exercise's options as a student types them."""
    argv = ["model", "--json"]
    for key, value in options.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    return argv


def projected(options: Mapping[str, object], field: str) -> object:
    """One field of ``sanlab model --json`` with these options, as a student would run it."""
    argv = [sys.executable, "-m", "sanlab", *model_argv(options)]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=MODEL_TIMEOUT_S)
    if run.returncode != 0:
        raise SanlabError(f"sanlab model failed: {run.stderr.strip()[-200:]}")
    document = parse_json(run.stdout, "sanlab model --json")
    try:
        return document["results"][0][field]
    except (KeyError, IndexError, TypeError):
        raise SanlabError(f"sanlab model --json: no {field!r} in its first result") from None


def checked_exercise(name: str, exercise: str | None) -> tuple[ExerciseFile, Exercise, str]:
    """``lab check NAME EXERCISE``, or ``lab check EXERCISE`` for an exercise that boots
    nothing (lab 6): its file, the exercise, and the lab name its probes use."""
    labs_file, found = find_exercise(exercise or name)
    if exercise is None and found.needs_lab:
        raise SanlabError(
            f"exercise {name!r} looks at a running lab: give the lab too "
            f"(sanlab lab check {labs_file.lab} {name})"
        )
    return labs_file, found, name if exercise else labs_file.lab
