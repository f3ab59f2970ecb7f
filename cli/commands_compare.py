"""``sanlab compare``: two run folders (two kernels, say) as one markdown page of what differs."""

from __future__ import annotations

from pathlib import Path

import click

from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.results.compare import Ladder, RunRead, captures, page, read_run
from sanlab.scenarios.results.records import ResultRecord
from sanlab.validation import fail, load_checked

SCENARIO_COPY = "scenario.yaml"  # what every run folder keeps (targets/sessions/run_session.py)


@click.command()
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option("--no-captures", is_flag=True, help="Leave out the wire ladders (no tshark pass).")
@click.option("--no-model", is_flag=True, help="Leave out the model's projections.")
def compare(run_a: Path, run_b: Path, no_captures: bool, no_model: bool) -> None:
    """Compare two 'sanlab run' folders of one scenario, e.g. on two kernels.

    Prints one markdown page: pass or fail and recovery times per point; per
    I/O on the wire, messages, bytes and round trips (from each run's
    captures, as 'sanlab analyze' reads them); and the model's projection of
    each run's scenario.  Emulated speeds are never compared as speeds.

    \b
    Example:
      sanlab run scenarios/smoke.yaml --out runs/k1      # guest: debian-12
      sanlab run smoke-613.yaml --out runs/k2            # guest: {kernel: ./linux}
      sanlab compare runs/k1 runs/k2 > cover-letter.md
    """
    try:
        text = compared(run_a, run_b, no_captures, no_model)
    except SanlabError as exc:
        fail(exc)
    click.echo(text, nl=False)


def compared(run_a: Path, run_b: Path, no_captures: bool = False, no_model: bool = False) -> str:
    """The page of two run folders (also what 'sanlab run --kernel A --kernel B' prints)."""
    a, b = read_run(run_a, "RUN_A"), read_run(run_b, "RUN_B")
    ladders = "Left out (--no-captures)." if no_captures else _ladders(a, b)
    projections = "Left out (--no-model)." if no_model else _projections(a, b)
    return page(a, b, ladders, projections)


def _ladders(a: RunRead, b: RunRead) -> tuple[list[Ladder], list[Ladder]] | str:
    """Each run's per-I/O wire recipes, from every capture it kept; a sentence if either has none."""
    found = captures(a.folder), captures(b.folder)
    if not all(found):
        lacking = " and ".join(run.folder.name for run, pcaps in zip((a, b), found, strict=True) if not pcaps)
        return f"No wire ladders: {lacking} kept no capture (run with capture: true)."
    from sanlab.dissectors.analyze import analyze  # tshark's machinery, only when captures are read

    rows: tuple[list[Ladder], list[Ladder]] = ([], [])
    for side, pcaps in zip(rows, found, strict=True):
        for pcap in pcaps:
            try:
                groups = analyze(pcap).groups
            except SanlabError as exc:  # the rest of the page still stands: say why there are none
                return f"No wire ladders: {str(exc).splitlines()[0]}"
            for g in groups:
                side.append(
                    Ladder(
                        pcap.stem, g.transport, g.op, g.bytes, g.count,
                        g.frames_per_io, g.wire_bytes_per_io, g.round_trips_per_io,
                    )
                )  # fmt: skip
    return rows


def _projections(a: RunRead, b: RunRead) -> tuple[list[ResultRecord], list[ResultRecord]]:
    """The model's records of each run's own scenario (the copy its folder keeps)."""
    from sanlab.models.core.project import project  # the model's import, only when asked

    out: tuple[list[ResultRecord], list[ResultRecord]] = ([], [])
    for side, run in zip(out, (a, b), strict=True):
        scenario = run.folder / SCENARIO_COPY
        if not scenario.is_file():
            raise SanlabError(f"{run.folder}: holds no {SCENARIO_COPY}; give --no-model, or a run's folder")
        side.extend(record for _, record in project(load_checked(scenario, kernel=False)))
    return out
