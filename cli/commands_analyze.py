"""``sanlab analyze``: per-I/O wire recipes and latencies from a capture."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import click

from sanlab.dissectors.analyze import DEVICE_SCAN, Analysis
from sanlab.dissectors.analyze import analyze as run_analysis
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.results.outdir import OutputFolder
from sanlab.scenarios.sizes import format_size
from sanlab.validation import writable_dir


@click.command()
@click.argument("pcap", type=click.Path(path_type=Path))
@click.option(
    "--json", "as_json", is_flag=True, help="Print {'transport', 'groups', 'others', 'totals'} only."
)
@click.option(
    "--decode-as",
    multiple=True,
    metavar="RULE",
    help="Decode other ports, as tshark -d does: tcp.port==3262,iscsi (repeatable).",
)
@click.option(
    "--ladder",
    type=click.Path(path_type=Path),
    metavar="FILE.svg",
    help="Draw one I/O as a ladder diagram (SVG, and PNG beside it).",
)
@click.option(
    "--io", "io_index", type=click.IntRange(0), default=0, show_default=True, help="Which I/O to draw."
)
@click.option(
    "--latency", type=click.Path(path_type=Path), metavar="FILE.png", help="Draw latency per operation."
)
@click.option(
    "--keylog",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="TLS session keys (NSS key log) to open NVMe/TCP inside TLS [default: PCAP's .keylog beside it].",
)
def analyze(
    pcap: Path,
    as_json: bool,
    decode_as: tuple[str, ...],
    ladder: Path | None,
    io_index: int,
    latency: Path | None,
    keylog: Path | None,
) -> None:
    """Turn a capture into per-I/O wire recipes and latencies.

    Every frame is given to one I/O, by the protocols' own keys (iSCSI task
    tags, SRP tags, NVMe command IDs, R_Keys/STags, PSNs, TCP byte ranges),
    or to a named kind of other traffic, so captures at any queue depth
    work and the totals add up to the capture.  I/Os are grouped by (op,
    bytes); each group shows frames, captured bytes, transport ACKs and
    round trips per I/O, and command-to-response latency on the wire.

    \b
    Example:
      sanlab analyze tests/golden/srp-rxe.pcap
      sanlab analyze runs/smoke/roce.pcap --json
    """
    try:
        result = _analysed(pcap, decode_as, keylog, ladder, io_index, latency)
    except SanlabError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:  # a picture that could not be written (a full disk, say)
        raise click.ClickException(
            f"{exc.filename or 'a picture'}: cannot write it ({exc.strerror})"
        ) from None
    if as_json:
        click.echo(json.dumps(result.document(), indent=2))
        return
    _print_table(pcap, result)


def _analysed(
    pcap: Path,
    decode_as: tuple[str, ...],
    keylog: Path | None,
    ladder: Path | None,
    io_index: int,
    latency: Path | None,
) -> Analysis:
    """The capture analysed, and the pictures asked for drawn from it; each picture's path is
    checked writable before the analysis starts, so a bad path costs no tshark pass."""
    saves = {
        option: _writable_picture(picture, option)
        for picture, option in ((ladder, "--ladder"), (latency, "--latency"))
        if picture is not None
    }
    result = run_analysis(pcap, decode_as, labels=ladder is not None, keylog=keylog)
    if ladder is not None:
        _draw_ladder(result, io_index, ladder, saves["--ladder"])
    if latency is not None:
        from sanlab.dissectors import pictures  # Matplotlib: only when a picture is asked for

        pictures.latency_chart(
            result.ios,
            latency,
            f"{pcap.name}: {result.transport} over {result.fabric}",
            save=saves["--latency"],
        )
    return result


def _print_table(pcap: Path, result: Analysis) -> None:
    """The human-readable answer: what the capture carried, warnings about the capture itself,
    then one row per (transport, op, size) group, the legend, other traffic and TLS's share."""
    several = len(result.transports) > 1
    carried = " and ".join(result.transports) if several else result.transport
    in_flight = (
        "one I/O in flight at a time"
        if result.max_in_flight <= 1
        else f"up to {result.max_in_flight} I/Os in flight"
    )
    click.echo(
        f"{pcap}: {carried} over {result.fabric}, {in_flight}; {result.frames:,} frames, {result.bytes:,} B"
    )
    if result.duplicates:
        click.echo(
            f"warning: {result.duplicates:,} frames are exact copies of earlier ones (a capture merged "
            "with itself, or mirrored twice?) and were left out",
            err=True,
        )
    _warn_of_rewrites(result)
    who = f"{'transport':<10} " if several else ""
    click.echo(
        f"{who}{'op':<6} {'bytes':>6} {'I/Os':>5}  {'frames/I/O':>10}  {'wire B/I/O':>10}  {'acks/I/O':>8}  "
        f"{'RTs/I/O':>7}  {'lat us':>7}  {'p99 us':>7}"
    )
    for g in result.groups:
        who = f"{g.transport:<10} " if several else ""
        click.echo(
            f"{who}{g.op:<6} {format_size(g.bytes):>6} {g.count:>5}  {g.frames_per_io:>10.2f}  "
            f"{g.wire_bytes_per_io:>10.0f}  {g.ack_frames_per_io:>8.2f}  {g.round_trips_per_io:>7.1f}  "
            f"{g.lat_mean_us:>7.0f}  {g.lat_p99_us:>7.0f}"
        )
    for line in _legend(result):
        click.echo(line)
    if result.others:
        click.echo("other traffic: " + ", ".join(f"{t.name} {t.frames} frames" for t in result.others))
    for line in _tls_lines(result):
        click.echo(line)


def _tls_lines(result: Analysis) -> list[str]:
    """What TLS added per I/O when its keys opened it; one line when they did not."""
    lines = [
        f"  TLS {g.op} {format_size(g.bytes)}: {g.tls_bytes_per_io:.0f} B/I/O of record headers, types "
        f"and tags, {g.tls_records_per_io:.2f} records/I/O, {g.tls_splits_per_io:.2f} PDU splits/I/O"
        for g in result.groups
        if g.tls_records_per_io
    ]
    if result.encrypted:
        how = "its key log did not open them" if result.keylog else "no key log (--keylog, or PCAP.keylog)"
        lines.append(
            f"NVMe/TCP inside TLS, {how}: {result.tls_records:,} TLS records counted, their PDUs "
            "(commands, data, responses) not read"
        )
    return lines


def _legend(result: Analysis) -> list[str]:
    """What the columns are, with the samples each p99 rests on: a few I/Os make a p99 that is
    their slowest one, and the reader should know it."""
    if not result.groups:
        return []
    counts = sorted({g.count for g in result.groups})
    samples = f"{counts[0]} samples each" if len(counts) == 1 else f"{', '.join(map(str, counts))} samples"
    few = "; under 100 it is about the slowest" if counts[0] < 100 else ""
    lines = [
        "  per I/O: the frames, captured bytes, transport ACKs and round trips each read or write owns",
        f"  lat us: mean wire time, command to response; p99 us from {samples} (the I/Os column){few}",
    ]
    if any(t.name == DEVICE_SCAN for t in result.others):
        lines.append(
            f"  {DEVICE_SCAN}: the kernel's reads of the disk it just found (its partition table), apart"
        )
    if all(io.latency_us == 0 for io in result.ios):
        lines.append("  every latency is 0: the capture's frames carry no usable timestamps")
    return lines


def _warn_of_rewrites(result: Analysis) -> None:
    if not result.rewrites:
        return
    click.echo(
        f"warning: {len(result.rewrites)} TCP retransmission(s) carried other bytes than the segment "
        "they repeat: the sender re-read a buffer already reused (a ghost write if the receiver "
        "accepts them; see targets/README.md):",
        err=True,
    )
    for rewrite in result.rewrites[:5]:
        click.echo(f"  {rewrite.line()}", err=True)
    if len(result.rewrites) > 5:
        click.echo(f"  ... and {len(result.rewrites) - 5} more (--json lists them all)", err=True)


def _writable_picture(path: Path, option: str) -> Callable[[Path, bytes], None]:
    """How a picture is written: into its folder's manifest (scenarios/results/outdir.py), so that a
    picture replaces only one sanlab drew there; a user's file or a link is refused before work."""
    writable_dir(path.parent, option)
    folder = OutputFolder.open(path.parent, option)
    for each in dict.fromkeys((path, path.with_suffix(".png"))):
        folder.claim(each.name)

    def save(picture: Path, data: bytes) -> None:
        folder.write_bytes(picture.name, data)

    return save


def _draw_ladder(result: Analysis, index: int, svg: Path, save: Callable[[Path, bytes], None]) -> None:
    if not result.ios:
        raise SanlabError("no complete read or write I/O in the capture to draw")
    if index >= len(result.ios):
        raise SanlabError(
            f"--io {index}: the capture has {len(result.ios)} I/Os (0 to {len(result.ios) - 1})"
        )
    from sanlab.dissectors import pictures  # Matplotlib: only when a picture is asked for

    io = result.ios[index]
    png = svg.with_suffix(".png")
    drawn = pictures.ladder(io, svg, png, save=save)
    click.echo(
        f"ladder of I/O {index} ({io.op} {io.nbytes:,} B, {len(io.frames)} frames in {len(drawn)} arrows): "
        f"{svg}, {png}",
        err=True,
    )
