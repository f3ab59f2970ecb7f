"""``sanlab lab export|unexport|connect|disconnect|fio|check``: a running lab's targets.

Wiring only: the keepers in targets/lab_targets.py run the targets/ recipes,
``lab fio`` runs one point the way ``sanlab run`` does, and the checks'
probes are answered by the layers that own them (lab_checks.py).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from sanlab.commands_lab import lab
from sanlab.emulator.lab import check_lab_name, lab_names, read_state
from sanlab.lab_checks import LabProbes, checked_exercise
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.labs.checking import Checker, next_step
from sanlab.scenarios.schema import READ_WRITE, Workload
from sanlab.scenarios.sizes import FAULT_LENGTH
from sanlab.targets.sessions import lab_targets
from sanlab.validation import Duration, fail


def _say(message: str) -> None:
    click.echo(message, err=True)


def _names(name: str, targets: tuple[str, ...]) -> list[str]:
    return list(targets) or lab_targets.target_names(name)


def _up(name: str) -> str:
    """``name`` if it names a lab that is up; else one line (exit 1) before anything is done:
    undoing on a lab that is not there is an error, not a quiet success."""
    read_state(check_lab_name(name))  # "no lab named 'x' is up (labs up: ...)"
    return name


@lab.command("export")
@click.argument("name")
@click.argument("targets", nargs=-1)
def lab_export(name: str, targets: tuple[str, ...]) -> None:
    """Configure the scenario's TARGETS (default: all) on lab NAME; they stay exported."""
    try:
        for target in _names(_up(name), targets):
            status = lab_targets.start(name, target, "export", _say)
            made = ", ".join(f"{k} {v}" for k, v in dict(status.get("made") or {}).items())
            click.echo(f"{target}: exported ({made})")
    except SanlabError as exc:
        fail(exc)


@lab.command("unexport")
@click.argument("name")
@click.argument("targets", nargs=-1)
def lab_unexport(name: str, targets: tuple[str, ...]) -> None:
    """Remove what 'lab export' made (disconnecting first), and nothing else."""
    try:
        for target in _names(_up(name), targets):
            if lab_targets.stop(name, target, "connect"):
                click.echo(f"{target}: disconnected")
            done = lab_targets.stop(name, target, "export")
            click.echo(f"{target}: {'unexported' if done else 'was not exported'}")
    except SanlabError as exc:
        fail(exc)


@lab.command("connect")
@click.argument("name")
@click.argument("target")
def lab_connect(name: str, target: str) -> None:
    """Log the initiator in to an exported TARGET; print its block devices."""
    try:
        status = lab_targets.start(_up(name), target, "connect", _say)
    except SanlabError as exc:
        fail(exc)
    click.echo(" ".join(status.get("devices") or []))


@lab.command("disconnect")
@click.argument("name")
@click.argument("target")
def lab_disconnect(name: str, target: str) -> None:
    """Log the initiator out of TARGET (it stays exported)."""
    try:
        done = lab_targets.stop(_up(name), target, "connect")
    except SanlabError as exc:
        fail(exc)
    click.echo(f"{target}: {'disconnected' if done else 'was not connected'}")


def _workload(**spec: object) -> Workload:
    """The fio options as a one-point, verified workload, checked like a scenario's."""
    try:
        return Workload.model_validate({**spec, "verify": "crc32c"})
    except ValueError as exc:
        reasons = [ln.strip() for ln in str(exc).splitlines()[1:] if ln.strip()]
        raise SanlabError("lab fio: " + "; ".join(reasons[:4])) from None


@lab.command("fio")
@click.argument("name")
@click.argument("target")
@click.option("--rw", type=click.Choice(READ_WRITE), default="randwrite", show_default=True)
@click.option("--bs", default="4k", show_default=True)
@click.option("--iodepth", type=int, default=1, show_default=True)
@click.option("--numjobs", type=int, default=1, show_default=True)
@click.option("--verify-size", default="4m", show_default=True, help="Bytes each job writes and reads back.")
def lab_fio(name: str, target: str, rw: str, bs: str, iodepth: int, numjobs: int, verify_size: str) -> None:
    """Run one verified fio job on a connected TARGET and print its record (JSON).

    The figures are emulated (TCG): they show that the path works, not how
    fast hardware would be.
    """
    try:
        workload = _workload(rw=rw, bs=bs, iodepth=iodepth, numjobs=numjobs, verify_size=verify_size)
        record = lab_targets.fio(_up(name), target, workload)
    except SanlabError as exc:
        fail(exc)
    click.echo(json.dumps(record.model_dump(mode="json"), indent=2))
    if record.error:
        raise SystemExit(1)


@lab.command("fault")
@click.argument("name")
@click.argument("link")
@click.option(
    "--down",
    "seconds",
    type=Duration(FAULT_LENGTH),
    required=True,
    help="Take both ends of LINK down for this long (e.g. 2s).",
)
def lab_fault(name: str, link: str, seconds: float) -> None:
    """Pull LINK's cable on lab NAME for a while and plug it back, by hand, whatever runs over it.

    Carrier drops at both ends (QEMU's set_link), as on hardware; afterwards
    the link must carry a ping again.

    \b
    Example (while 'sanlab lab fio' runs in another shell):
      sanlab lab fault pair-rxe fabric --down 2s
    """
    try:
        _up(name)
        _say(f"{time.strftime('%H:%M:%S')} link {link} down for {seconds:g}s")
        window = lab_targets.pull(name, link, seconds)
        _say(f"{time.strftime('%H:%M:%S')} link {link} up (out for {window.up - window.down:.2f} s)")
    except SanlabError as exc:
        fail(exc)


@lab.command("check")
@click.argument("name")
@click.argument("exercise", required=False)
@click.option(
    "--answers",
    type=click.Path(path_type=Path),
    help="The student's answers (YAML, key: value). Default: EXERCISE.answers.yaml here.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the steps as JSON.")
def lab_check(name: str, exercise: str | None, answers: Path | None, as_json: bool) -> None:
    """Say which steps of EXERCISE lab NAME shows done, with a hint for the next one.

    An exercise that boots nothing (lab 6: answers from the model) needs no
    lab: give the exercise alone.  Exit 0 when every step is done, 1
    otherwise.  Exercises are in the labs' handouts (docs/labs/).

    \b
    Examples:
      sanlab lab check iscsi-wire iscsi-wire
      sanlab lab check project-100g
    """
    try:
        labs_file, found, name = checked_exercise(name, exercise)
        checker = Checker(
            LabProbes(name), answers or Path(f"{exercise or name}.answers.yaml"), found.answer_keys
        )
        verdicts = [checker.check(step) for step in found.steps]
    except SanlabError as exc:
        fail(exc)
    exercise = exercise or name
    if as_json:
        click.echo(json.dumps({"exercise": exercise, "steps": [v.document() for v in verdicts]}, indent=2))
    else:
        click.echo(f"{exercise}: {found.title}")
        for v in verdicts:
            click.echo(f"  [{'x' if v.done else ' '}] {v.step.id}: {v.step.says}  ({v.seen})")
        for line in checker.unknown_keys():
            click.echo(line)
        named = "" if name == labs_file.lab else f" --name {name}"
        boot = f"sanlab lab up scenarios/labs/{labs_file.lab}.yaml{named}"
        click.echo(next_step(verdicts, found, name in lab_names(), boot))
    sys.exit(0 if all(v.done for v in verdicts) else 1)
