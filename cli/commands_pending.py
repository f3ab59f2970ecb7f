"""Verbs whose layers are still being built.

Each one exists so that ``sanlab --help`` shows the whole tool, and each fails
with a plain statement of what is missing instead of pretending to work.
"""

from __future__ import annotations

import click


def _not_yet(verb: str, layer: str, issue: int) -> None:
    raise click.ClickException(
        f"'sanlab {verb}' needs the {layer} layer, which is not built yet (issue {issue}). "
        "Today sanlab can validate scenarios and project them with 'sanlab model'."
    )


@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("scenario", type=click.Path())
@click.option("--out", type=click.Path(), help="Directory for results.json, pcaps and logs.")
@click.option("--json", "as_json", is_flag=True, help="Print {'results': [...]} on stdout.")
def run(scenario: str, out: str | None, as_json: bool) -> None:
    """Boot the hosts of SCENARIO, run its fio matrix, capture and tear down.

    \b
    Example:
      sanlab run scenarios/smoke.yaml --out runs/smoke
    """
    _not_yet("run", "emulator and targets", 4)


@click.command()
@click.argument("pcap", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print the groups as JSON.")
def analyze(pcap: str, as_json: bool) -> None:
    """Turn a capture into per-I/O wire recipes and latencies.

    \b
    Example:
      sanlab analyze runs/smoke/iser-rxe.pcap --json
    """
    _not_yet("analyze", "dissectors", 6)


@click.command()
@click.argument("action", type=click.Choice(["install", "path"]))
def dissectors(action: str) -> None:
    """Install sanlab's Wireshark Lua dissectors, or print where they are.

    \b
    Example:
      sanlab dissectors install
    """
    _not_yet("dissectors", "dissectors", 6)
