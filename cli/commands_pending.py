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
