"""``sanlab dissectors``: install sanlab's Wireshark plugins or show where they are."""

from __future__ import annotations

from pathlib import Path

import click

from sanlab.dissectors import plugins
from sanlab.scenarios.errors import SanlabError
from sanlab.validation import writable_dir


@click.group()
def dissectors() -> None:
    """Install sanlab's Wireshark Lua dissectors, or print where they are.

    SRP over InfiniBand/RoCE, and MPA/DDP/RDMAP with iSER and NVMe-oF over
    iWARP (revision 2 MPA included, which Wireshark 4.0 lacks).

    \b
    Example:
      sanlab dissectors install
      tshark $(for f in $(sanlab dissectors path)/*.lua; do echo -X lua_script:$f; done) -r x.pcap
    """


@dissectors.command("install")
@click.option(
    "--to",
    "destination",
    type=click.Path(path_type=Path),
    help="Plugin folder (default: ~/.local/lib/wireshark/plugins).",
)
def install(destination: Path | None) -> None:
    """Copy the plugins into Wireshark's personal plugin folder."""
    try:
        folder = writable_dir(destination or plugins.personal_plugin_dir(), "--to")
        installed = plugins.install(folder)
    except SanlabError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(
            f"--to {destination}: cannot copy the plugins there ({exc.strerror})"
        ) from None
    for path in installed:
        click.echo(f"installed {path}")
    click.echo("restart Wireshark (or reload Lua plugins: Analyze > Reload Lua Plugins) to use them")


@dissectors.command("args")
def args() -> None:
    """Print the -X arguments that make tshark or wireshark load the plugins for one run.

    \b
    Example:
      tshark $(sanlab dissectors args) -r capture.pcap
    """
    click.echo(" ".join(plugins.tshark_args()))


@dissectors.command("path")
def path() -> None:
    """Print the folder that holds the plugins."""
    click.echo(plugins.plugin_dir())
