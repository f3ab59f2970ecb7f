"""``sanlab lab``: a lab's life and its targets, wiring only.

``up``, ``exec``, ``console``, ``capture``, ``list`` and ``down`` go to the emulator, which
makes and keeps the lab; ``export``, ``unexport``, ``connect``, ``disconnect``, ``fio`` and
``fault`` to the keepers in targets/sessions/lab_targets.py, which run the targets/ recipes
(``lab fio`` runs one point the way ``sanlab run`` does); ``check``'s probes are answered by
the layers that own them (lab_checks.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

import click

from sanlab.emulator import interactive
from sanlab.emulator.agent import AgentClient
from sanlab.emulator.lab_state import (
    capture_file,
    check_lab_name,
    follow_capture,
    lab_name,
    lab_names,
    labs_root,
    live_agent_path,
    read_state,
    stop_lab,
    vm_alive,
)
from sanlab.lab_checks import LabProbes, checked_exercise
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.labs.checking import Checker, next_step
from sanlab.scenarios.schema import READ_WRITE, Workload
from sanlab.scenarios.sizes import EXEC_TIMEOUT, FAULT_LENGTH
from sanlab.targets.sessions import lab_targets
from sanlab.validation import Duration, fail, load_checked


def _say(message: str) -> None:
    click.echo(message, err=True)


@click.group()
def lab() -> None:
    """Interactive labs: bring a scenario's VMs up, poke at them, tear down.

    \b
    Example:
      sanlab lab up scenarios/pair-rxe.yaml
      sanlab lab exec pair-rxe initiator -- rdma link
      sanlab lab console pair-rxe target
      sanlab lab down pair-rxe
    """


@lab.command("up")
@click.argument("scenario", type=click.Path(path_type=Path))
@click.option("--name", help="Lab name: a-z, 0-9 and '-' (default: from the file's name).")
@click.option("--capture", is_flag=True, help="Write a pcap per link into the run directory.")
@click.option("--snaplen", type=click.IntRange(64, 65535), help="Keep only this many bytes of each frame.")
def lab_up(scenario: Path, name: str | None, capture: bool, snaplen: int | None) -> None:
    """Boot the hosts of SCENARIO and configure its links; they stay up."""
    try:
        name = check_lab_name(name) if name is not None else lab_name(scenario.stem)
        loaded = load_checked(scenario)
        signal.signal(signal.SIGTERM, _interrupt)
        run_dir = interactive.bring_up(scenario, loaded, name, capture, snaplen, _say)
    except SanlabError as exc:
        fail(exc)
    except KeyboardInterrupt:
        sys.exit(130)
    click.echo(f"lab {name} is up; run directory {run_dir}")
    click.echo(f"  sanlab lab exec {name} HOST -- CMD...   |   sanlab lab down {name}")
    click.echo(f"  sanlab lab export {name}   |   sanlab lab connect {name} TARGET")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@lab.command("exec", context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.argument("host")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option("--timeout", type=Duration(EXEC_TIMEOUT), default=300.0, show_default=True)
def lab_exec(name: str, host: str, command: tuple[str, ...], timeout: float) -> None:
    """Run COMMAND on HOST of lab NAME; exit with its exit code."""
    agent = _agent(name, host)
    try:
        result = agent.run(list(command) if len(command) > 1 else command[0], timeout=timeout)
    except SanlabError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        agent.close()
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    sys.exit(exit_status(result.rc))


def exit_status(rc: int) -> int:
    """The guest command's exit as this command's: 0-255 as it is, minus a signal as a shell
    says it (128 + the signal), anything else 255 - never 0, which the OS would make of 256."""
    if type(rc) is int and 0 <= rc <= 255:
        return rc
    if type(rc) is int and -64 <= rc < 0:
        return 128 - rc
    return 255


def _agent(name: str, host: str) -> AgentClient:
    try:
        return AgentClient(live_agent_path(name, host), host)
    except SanlabError as exc:
        raise click.ClickException(str(exc)) from None


@lab.command("console")
@click.argument("name")
@click.argument("host")
def lab_console(name: str, host: str) -> None:
    """Attach to HOST's serial console: a root shell (press Enter for a prompt; Ctrl-] leaves)."""
    try:
        sock, path = interactive.console_socket(name, host)
    except SanlabError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"console of {host} ({path}); Ctrl-] to leave", err=True)
    interactive.attach(sock)


@lab.command("capture")
@click.argument("name")
@click.argument("link")
@click.option("--path", "path_only", is_flag=True, help="Print the capture file's path instead.")
def lab_capture(name: str, link: str, path_only: bool) -> None:
    """Stream LINK's packets as pcap on stdout, live, for Wireshark or tshark.

    The lab must have been brought up with --capture.  The stream starts
    with everything captured so far and follows until the lab goes down
    (or Ctrl-C).

    \b
    Example:
      sanlab lab capture pair-rxe fabric | wireshark $(sanlab dissectors args) -k -i -
      sanlab lab capture pair-rxe fabric | tshark $(sanlab dissectors args) -i -
    """
    if path_only:
        try:
            click.echo(capture_file(name, link))
        except SanlabError as exc:
            raise click.ClickException(str(exc)) from None
        return
    if sys.stdout.isatty():
        raise click.ClickException("stdout is a terminal: pipe it into wireshark -k -i - or tshark -i -")
    out = sys.stdout.buffer
    try:
        for chunk in follow_capture(name, link):
            out.write(chunk)
            out.flush()
    except SanlabError as exc:
        raise click.ClickException(str(exc)) from None
    except (BrokenPipeError, KeyboardInterrupt):
        # The reader left (or Ctrl-C): point stdout at /dev/null so the final flush is quiet.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)


@lab.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print each lab (hosts, addresses, captures) as JSON.")
def lab_list(as_json: bool) -> None:
    """Labs that are up, with their hosts and addresses; a VM that died is marked."""
    names = lab_names()
    if as_json:
        click.echo(json.dumps([_lab_document(name) for name in names], indent=2))
        return
    if not names:
        click.echo("no labs are up")
    for name in names:
        try:
            state = read_state(name)
        except SanlabError as exc:
            click.echo(f"{name}: unreadable ({exc})")
            continue
        hosts = ", ".join(
            f"{h} (pid {v['pid']}{'' if vm_alive(name, v) else ', DOWN'})" for h, v in state["hosts"].items()
        )
        click.echo(f"{name}: {state.get('accel', '?')}  {hosts}")
        for where, address in dict(state.get("addresses") or {}).items():
            click.echo(f"    {where}: {address}")
        for link, path in dict(state.get("captures") or {}).items():
            click.echo(f"    capture of {link}: {path}")


def _lab_document(name: str) -> dict[str, object]:
    """One lab as ``lab list --json`` gives it: an unreadable one says why."""
    try:
        state = read_state(name)
    except SanlabError as exc:
        return {"name": name, "error": str(exc)}
    hosts = {
        host: {"pid": entry["pid"], "up": vm_alive(name, entry)} for host, entry in state["hosts"].items()
    }
    return {
        "name": name,
        "accel": state.get("accel"),
        "hosts": hosts,
        "addresses": state.get("addresses") or {},
    }


@lab.command("down")
@click.argument("name")
def lab_down(name: str) -> None:
    """Undo its exported targets, stop every VM of lab NAME (works from any shell); logs stay."""
    try:
        check_lab_name(name)  # before anything is read or signalled: a name, never a path
        for held in lab_targets.stop_all(name):
            click.echo(f"target {held}: undone")
        pids, dead = stop_lab(name)
    except SanlabError as exc:
        raise click.ClickException(str(exc)) from None
    gone = f"; already down: {', '.join(dead)}" if dead else ""
    click.echo(
        f"lab {name} is down (stopped {', '.join(map(str, pids)) or 'no running VMs'}{gone}); "
        f"logs in {labs_root() / name}"
    )


# --- a running lab's targets: each half of a recipe held by a keeper ---------------------


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
