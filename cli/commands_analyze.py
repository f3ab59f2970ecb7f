"""``sanlab analyze``: per-I/O wire recipes and latencies from a capture."""

from __future__ import annotations

import json
from pathlib import Path

import click

from sanlab.dissectors.analyze import analyze as run_analysis
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.sizes import format_size


@click.command()
@click.argument("pcap", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print {'transport': ..., 'groups': [...]} only.")
@click.option(
    "--decode-as",
    multiple=True,
    metavar="RULE",
    help="Decode other ports, as tshark -d does: tcp.port==3262,iscsi (repeatable).",
)
def analyze(pcap: Path, as_json: bool, decode_as: tuple[str, ...]) -> None:
    """Turn a capture into per-I/O wire recipes and latencies.

    I/Os are grouped by (op, bytes); each group shows frames, captured bytes,
    transport ACKs and round trips per I/O, and command-to-response latency
    as seen on the wire.  Best on queue-depth-1 captures, where I/Os do not
    overlap (overlaps are counted).

    \b
    Example:
      sanlab analyze tests/golden/srp-rxe.pcap
      sanlab analyze runs/smoke/roce.pcap --json
    """
    try:
        result = run_analysis(pcap, decode_as)
    except SanlabError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(result.document(), indent=2))
        return
    click.echo(
        f"{pcap}: {result.transport} over {result.fabric}"
        + (f" ({result.overlapping_ios} overlapping I/Os)" if result.overlapping_ios else "")
    )
    click.echo(
        f"{'op':<6} {'bytes':>6} {'count':>6} {'frames':>7} {'wire B':>8} {'acks':>5} "
        f"{'RTs':>4} {'lat us':>8} {'p99 us':>8}"
    )
    for g in result.groups:
        click.echo(
            f"{g.op:<6} {format_size(g.bytes):>6} {g.count:>6} {g.frames_per_io:>7.2f} "
            f"{g.wire_bytes_per_io:>8.0f} {g.ack_frames_per_io:>5.2f} {g.round_trips_per_io:>4.1f} "
            f"{g.lat_mean_us:>8.0f} {g.lat_p99_us:>8.0f}"
        )
