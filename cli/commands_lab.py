"""``sanlab lab``: a lab's life (up, exec, console, capture, list, down), wired to the emulator."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path

import click

from sanlab.emulator import interactive
from sanlab.emulator.agent import AgentClient
from sanlab.emulator.lab import (
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
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.sizes import EXEC_TIMEOUT
from sanlab.targets.sessions.lab_targets import stop_all
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
        for held in stop_all(name):
            click.echo(f"target {held}: undone")
        pids, dead = stop_lab(name)
    except SanlabError as exc:
        raise click.ClickException(str(exc)) from None
    gone = f"; already down: {', '.join(dead)}" if dead else ""
    click.echo(
        f"lab {name} is down (stopped {', '.join(map(str, pids)) or 'no running VMs'}{gone}); "
        f"logs in {labs_root() / name}"
    )
