"""``sanlab images`` and ``sanlab lab``: wiring to the emulator layer."""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from pathlib import Path

import click

from sanlab.emulator import images as guest_images
from sanlab.emulator.agent import AgentClient
from sanlab.emulator.lab import Lab, lab_names, labs_root, read_state, stop_lab
from sanlab.scenarios.errors import SanlabError
from sanlab.validation import fail, load_checked


def _say(message: str) -> None:
    click.echo(message, err=True)


@click.group()
def images() -> None:
    """Build, list or clean the cached guest images.

    The guest is built from Debian packages (vm-images/recipe.yaml) with
    mmdebstrap, once per recipe, and cached under ~/.cache/sanlab/images.

    \b
    Example:
      sanlab images build      # a few minutes the first time, instant after
      sanlab images list
    """


@images.command("build")
@click.option("--force", is_flag=True, help="Rebuild even if the recipe's image exists.")
def images_build(force: bool) -> None:
    """Build the guest image for the current recipe (if not cached)."""
    try:
        image = guest_images.build_image(_say, force=force)
    except SanlabError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(image.path)


@images.command("list")
def images_list() -> None:
    """List cached images; '*' marks the one the current recipe uses."""
    found = guest_images.list_images()
    if not found:
        click.echo(f"no images in {guest_images.images_dir()} (run 'sanlab images build')")
    for image, current in found:
        m = image.manifest
        size = int(str(m.get("initrd_bytes", 0))) >> 20
        click.echo(
            f"{'*' if current else ' '} {image.key}  kernel {m.get('kernel')}  "
            f"{size} MiB  built {m.get('built')} in {m.get('build_seconds')} s"
        )


@images.command("clean")
@click.option("--all", "everything", is_flag=True, help="Also remove the current image.")
def images_clean(everything: bool) -> None:
    """Remove images no recipe uses any more (and dead half-builds)."""
    for path in guest_images.clean_images(everything):
        click.echo(f"removed {path}")


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
@click.option("--name", help="Lab name (default: the file's stem).")
@click.option("--capture", is_flag=True, help="Write a pcap per link into the run directory.")
def lab_up(scenario: Path, name: str | None, capture: bool) -> None:
    """Boot the hosts of SCENARIO and configure its links; they stay up."""
    try:
        loaded = load_checked(scenario)
        name = name or scenario.stem
        run_dir = labs_root() / name
        if (run_dir / "state.json").exists():
            raise SanlabError(f"a lab named {name!r} is already up: 'sanlab lab down {name}' first")
        run_dir.mkdir(parents=True, exist_ok=True)
        for stale in run_dir.iterdir():
            stale.unlink()
        handle = Lab(loaded, name, run_dir, run_dir if capture or loaded.capture else None)
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            handle.up(_say)
        except BaseException:
            _say(f"lab {name}: bringing up failed; tearing down")
            handle.down()
            raise
    except SanlabError as exc:
        fail(exc)
    click.echo(f"lab {name} is up; run directory {run_dir}")
    click.echo(f"  sanlab lab exec {name} HOST -- CMD...   |   sanlab lab down {name}")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@lab.command("exec", context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.argument("host")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option("--timeout", type=float, default=300.0, show_default=True)
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
    sys.exit(result.rc)


def _agent(name: str, host: str) -> AgentClient:
    try:
        hosts = read_state(name)["hosts"]
    except SanlabError as exc:
        raise click.ClickException(str(exc)) from None
    if host not in hosts:
        raise click.ClickException(f"lab {name!r} has no host {host!r} (hosts: {', '.join(hosts)})")
    return AgentClient(Path(hosts[host]["agent"]), host)


@lab.command("console")
@click.argument("name")
@click.argument("host")
def lab_console(name: str, host: str) -> None:
    """Attach to HOST's serial console (a root shell is not started; Ctrl-] leaves)."""
    hosts = read_state(name)["hosts"]
    if host not in hosts:
        raise click.ClickException(f"lab {name!r} has no host {host!r} (hosts: {', '.join(hosts)})")
    path = hosts[host]["console"]
    click.echo(f"console of {host} ({path}); Ctrl-] to leave", err=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)

    def pump() -> None:
        while data := sock.recv(4096):
            os.write(1, data)

    threading.Thread(target=pump, daemon=True).start()
    while data := os.read(0, 1024):
        if b"\x1d" in data:
            break
        sock.sendall(data)
    sock.close()


@lab.command("list")
def lab_list() -> None:
    """Labs that are up, with their hosts and addresses."""
    names = lab_names()
    if not names:
        click.echo("no labs are up")
    for name in names:
        state = read_state(name)
        hosts = ", ".join(f"{h} (pid {v['pid']})" for h, v in state["hosts"].items())
        click.echo(f"{name}: {state['accel']}  {hosts}")
        for where, address in state.get("addresses", {}).items():
            click.echo(f"    {where}: {address}")


@lab.command("down")
@click.argument("name")
def lab_down(name: str) -> None:
    """Stop every VM of lab NAME (works from any shell); console logs stay."""
    try:
        pids = stop_lab(name)
    except SanlabError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(
        f"lab {name} is down (stopped {', '.join(map(str, pids)) or 'no running VMs'}); "
        f"logs in {labs_root() / name}"
    )
