"""``sanlab images``: the cached guest images and their booted snapshots, wiring to the emulator."""

from __future__ import annotations

import json
import signal
import sys

import click

from sanlab.emulator import images as guest_images
from sanlab.emulator import siw_clean, snapshots
from sanlab.emulator.qemu import qemu_binary, version_line
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.registry import DEFAULT_GUEST, GUESTS


def _say(message: str) -> None:
    click.echo(message, err=True)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@click.group()
def images() -> None:
    """Build, list or clean the cached guest images.

    Each guest is built from Debian packages (vm-images/recipe.yaml for
    debian-12, recipe-debian-13.yaml for debian-13) with mmdebstrap, once
    per recipe, and cached under ~/.cache/sanlab/images.

    \b
    Example:
      sanlab images build      # a few minutes the first time, instant after
      sanlab images build --guest debian-13
      sanlab images list
    """


@images.command("build")
@click.option("--force", is_flag=True, help="Rebuild even if the recipe's image exists.")
@click.option(
    "--guest",
    type=click.Choice(list(GUESTS)),
    default=DEFAULT_GUEST,
    show_default=True,
    help="Which guest (a scenario's guest:).",
)
def images_build(force: bool, guest: str) -> None:
    """Build a guest's image for its current recipe (if not cached), and save its booted
    snapshot for the most common guest (one NIC), so the first lab up starts in seconds."""
    # SIGTERM (tests/bootstrap stopping its background build) unwinds like Ctrl-C, so the
    # half-built directory is removed and mmdebstrap is stopped with it.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        image = guest_images.build_image(_say, force=force, guest=guest)
        snapshots.prepare(image, _say)
    except SanlabError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        _say("image build interrupted; nothing of it is left in the cache")
        sys.exit(130)
    click.echo(image.path)


@images.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print [{key, current, path, manifest}] only.")
def images_list(as_json: bool) -> None:
    """List cached images; '*' marks those a guest's current recipe uses."""
    found = guest_images.list_images()
    if as_json:
        listed = [
            {"key": image.key, "current": current, "path": str(image.path), "manifest": _manifest(image)}
            for image, current in found
        ]
        click.echo(json.dumps(listed, indent=2, default=str))
        return
    if not found:
        click.echo(f"no images in {guest_images.images_dir()} (run 'sanlab images build')")
    for image, current in found:
        m = _manifest(image)
        if "error" in m:
            click.echo(f"  {image.key}  unreadable: {m['error']}")
            continue
        size = int(str(m.get("initrd_bytes", 0))) >> 20
        click.echo(
            f"{'*' if current else ' '} {image.key}  {m.get('guest', DEFAULT_GUEST)}  "
            f"kernel {m.get('kernel')}  {size} MiB  built {m.get('built')} in {m.get('build_seconds')} s"
        )


def _manifest(image: guest_images.Image) -> dict[str, object]:
    """An image's manifest, or what is wrong with it (a planted or torn one is listed, not fatal)."""
    try:
        return image.manifest
    except SanlabError as exc:
        return {"error": str(exc)}


@images.command("clean")
@click.option("--all", "everything", is_flag=True, help="Also remove the current image.")
def images_clean(everything: bool) -> None:
    """Remove images no recipe uses any more (and dead half-builds), and the siw modules and
    packages compiled for images that are gone."""
    for path in guest_images.clean_images(everything, note=_note):
        click.echo(f"removed {path}")
    for path in siw_clean.clean_siw([image for image, _ in guest_images.list_images()], note=_note):
        click.echo(f"removed {path}")
    for path in snapshots.clean_snapshots(guest_images.current_keys(), _qemu_line(), everything):
        click.echo(f"removed snapshot {path}")


def _note(line: str) -> None:
    click.echo(line, err=True)


def _qemu_line() -> str | None:
    """The installed QEMU's version line (what a snapshot is keyed on), or None without one."""
    try:
        return version_line(qemu_binary())
    except SanlabError:
        return None
