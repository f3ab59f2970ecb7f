"""``sanlab sweep``: a grid of projections, on this machine's cores or a Dask cluster."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from sanlab.emulator.processes import process_start
from sanlab.models.sweeps.sweep import EXPAND_STEP, MAX_POINTS, SweepSpec, expand, grid_size, load_spec
from sanlab.models.sweeps.sweep_run import (
    OVERSUBSCRIBE_ENV,
    WORKERS_PER_CORE,
    Outcome,
    Progress,
    check_scheduler,
    check_workers,
    connected,
    describe_skips,
    run_sweep,
)
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.reading import load_json
from sanlab.validation import fail


@click.command()
@click.argument("spec", type=click.Path(path_type=Path))
@click.option(
    "--out", type=click.Path(path_type=Path), required=True, help="Folder for the tables and chart."
)
@click.option("--workers", type=int, help="Local Dask workers (default and most: one per core).")
@click.option(
    "--oversubscribe",
    is_flag=True,
    envvar=OVERSUBSCRIBE_ENV,
    help=f"Allow --workers past the cores (up to {WORKERS_PER_CORE} a core); or {OVERSUBSCRIBE_ENV}=1.",
)
@click.option("--scheduler", metavar="ADDRESS", help="A running Dask scheduler, e.g. tcp://10.0.0.5:8786.")
@click.option("--serial", is_flag=True, help="No Dask: one point after another in this process.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary, goals and front as JSON only.")
def sweep(
    spec: Path,
    out: Path,
    workers: int | None,
    oversubscribe: bool,
    scheduler: str | None,
    serial: bool,
    as_json: bool,
) -> None:
    """Project every point of the grid in SPEC; write tables, goals, Pareto front and a chart.

    SPEC has axes: (options of 'sanlab model', each with a list of values),
    fixed: (single values), goals: ('iops >= 2e6', 'lat_p99_us <= 100'),
    and optionally pareto: ({iops: max, link_gbps: min}), solver: (auto, sim
    or mva) and seed:.  Each point is seeded from its own coordinates, so
    serial and parallel runs give identical tables.  Interrupted?  Run the
    same command again: finished points are kept in OUT and not recomputed.

    \b
    Example:
      sanlab sweep scenarios/sweeps/two-million.yaml --out runs/sweep
      sanlab sweep spec.yaml --out runs/sweep --scheduler tcp://127.0.0.1:8786
    """
    chosen = [
        name
        for name, on in (("--workers", workers is not None), ("--scheduler", scheduler), ("--serial", serial))
        if on
    ]
    if len(chosen) > 1:
        raise click.UsageError(f"give one of --workers, --scheduler, --serial (got {', '.join(chosen)})")
    try:  # every bound is checked before any work: the workers, the grid's size, the scheduler
        if scheduler:
            check_scheduler(scheduler)
        local = 0 if serial or scheduler else check_workers(workers, oversubscribe)
        loaded = load_spec(spec)
        _check_size(loaded, spec)
        with connected(scheduler, since=_started()) as client, _ctrl_c_for_this_process(local) as held:
            grid = expand(loaded, _expanding)
            if not grid.points:
                raise SanlabError(f"{spec}: no valid point in the grid ({describe_skips(grid.skipped)})")
            skips = f"; skipped {describe_skips(grid.skipped)}" if grid.skipped else ""
            where = "serially" if serial else f"on {local} local Dask workers" if local else f"on {scheduler}"
            _say(f"{len(grid.points):,} points{skips}; solving {where}")
            outcome = run_sweep(grid, out, client, local, held(_progress()))
    except SanlabError as exc:
        fail(exc)
    except KeyboardInterrupt:
        _say(f"interrupted: finished points are kept in {out}; run the same command to resume")
        sys.exit(130)
    if as_json:
        try:
            document: dict[str, Any] = load_json(out / "summary.json", "sweep summary")
        except SanlabError as exc:
            fail(exc)
        document["pareto"] = outcome.pareto
        click.echo(json.dumps(document, indent=2))
        return
    if len(outcome.skipped) > len(grid.skipped):
        _say(f"skipped while projecting: {describe_skips(outcome.skipped)}")
    _print_outcome(outcome, out)


def _print_outcome(outcome: Outcome, out: Path) -> None:
    """The human summary: how many points and by which solver, how many met the goals, the
    first ten of their Pareto front (the rest are in pareto.csv), and which files hold it all."""
    click.echo(
        f"{len(outcome.rows):,} points ({outcome.computed:,} computed, {outcome.reused:,} reused) "
        f"in {outcome.seconds:.1f} s; solvers: "
        + ", ".join(f"{s} {sum(1 for r in outcome.rows if r['solver'] == s):,}" for s in ("mva", "sim"))
    )
    click.echo(
        f"goals met by {outcome.goals_met:,} points; Pareto front of those: {len(outcome.pareto)} points"
    )
    for row in outcome.pareto[:10]:
        click.echo("  " + _describe(row))
    if len(outcome.pareto) > 10:
        click.echo(f"  … and {len(outcome.pareto) - 10} more: all {len(outcome.pareto)} in {out}/pareto.csv")
    click.echo(f"written to {out}/ ({', '.join(outcome.files)}) - projections of the model, not measurements")


@contextmanager
def _ctrl_c_for_this_process(local_workers: int) -> Iterator[Callable[[Progress], Progress]]:
    """Ctrl-C for this process alone, so an interrupted sweep prints its own one line.

    A terminal's Ctrl-C reaches every process of its foreground group, Dask's
    local workers too, which died printing CancelledError and KeyboardInterrupt
    tracebacks full of Dask's paths.  SIGINT is held blocked while the workers
    start: a signal mask survives fork and exec, so they (and Dask's threads)
    never see it, and the cluster's close ends them.  This thread takes it back
    at the first finished point, or on leaving; a Ctrl-C meanwhile waits, then
    lands as KeyboardInterrupt like any other.
    """
    if not local_workers or threading.current_thread() is not threading.main_thread():
        yield lambda progress: progress
        return
    import dask.config
    import distributed  # noqa: F401 - its defaults in dask's config first: else set() records
    # 'distributed' as a key it inserted, and its exit deletes all of Dask's distributed settings

    preload = [*dask.config.get("distributed.worker.preload", []), __name__]
    quiet_workers = dask.config.set({"distributed.worker.preload": preload})
    before = signal.signal(signal.SIGINT, _interrupted)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    held = [True]

    def release() -> None:
        if held[0]:
            held[0] = False
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    def wrap(progress: Progress) -> Progress:
        def update(done: int, total: int) -> None:
            progress(done, total)
            if done > 0:
                release()

        return update

    try:
        yield wrap
    finally:
        release()
        signal.signal(signal.SIGINT, before)
        quiet_workers.__exit__(None, None, None)


def dask_setup(worker: object) -> None:
    """Each local worker's preload (Dask calls it at start): a task cancelled because the
    sweep was interrupted is no news, so that one warning is dropped; every other stays."""
    logging.getLogger("distributed.worker.state_machine").addFilter(_not_a_cancel)


def _not_a_cancel(record: logging.LogRecord) -> bool:
    return "CancelledError" not in record.getMessage()


def _interrupted(signum: int, frame: object) -> None:
    """Ctrl-C: the cluster's close that follows is no news (its nanny warns that a busy worker
    is killed), so Dask's loggers keep to errors; then the usual KeyboardInterrupt."""
    logging.getLogger("distributed").setLevel(logging.ERROR)
    raise KeyboardInterrupt


def _describe(row: dict[str, Any]) -> str:
    setup = f"{row['transport']} {row['fabric']} {row['link_gbps']:g}G"
    shape = f"{row['rw']} {row['bs']} qd{row['iodepth']} j{row['numjobs']}"
    extra = " ".join(f"{k}={row[k]}" for k in ("cores", "sessions", "profile") if row.get(k) is not None)
    p99 = f", p99 {row['lat_p99_us']:.0f} us" if row.get("lat_p99_us") else ""
    past = " EXTRAPOLATED: past every published row" if "extrapolated" in str(row.get("note") or "") else ""
    figures = f"{row['iops']:,.0f} IOPS{p99} [{row['bottleneck']}, {row['solver']}]"
    return f"{setup} {shape} {extra}: {figures}{past}"


def _started() -> float:
    """When the user started this command, on the monotonic clock: the scheduler's deadline
    counts from there, not from after Python's imports.  Read from the kernel's start time of
    this process; a process older than ``FRESH_S`` (a test runner calling in) counts from now."""
    now = time.monotonic()
    started = process_start(os.getpid())  # the one home of a process's start time
    if started is None:
        return now
    age = time.clock_gettime(time.CLOCK_BOOTTIME) - started / os.sysconf("SC_CLK_TCK")
    return now - age if 0 <= age <= FRESH_S else now


FRESH_S = 10.0


def _check_size(spec: SweepSpec, path: Path) -> None:
    """The grid's size, from its axes alone: refused before a point is built."""
    total = grid_size(spec)
    if total > MAX_POINTS:
        raise SanlabError(
            f"{path}: axes: the grid has {total:,} points; at most {MAX_POINTS:,} per sweep "
            "(split it into several sweeps, each with its own --out)"
        )


def _expanding(done: int, total: int) -> None:
    """A word while a large grid is checked point by point, before any is solved."""
    if total > EXPAND_STEP:
        _say(f"checking the grid: {done:,} of {total:,} points")


def _say(message: str) -> None:
    click.echo(message, err=True)


def _progress() -> Progress:
    """A bar on a terminal; otherwise a line at every tenth, and at least every EVERY_S seconds,
    so logs (and --json runs, on stderr) show progress too."""
    shown = {"tenth": -1, "seen": 0, "at": 0.0}
    bars: list[Any] = []

    def update(done: int, total: int) -> None:
        if sys.stderr.isatty():
            if not bars:
                bars.append(click.progressbar(length=total, label="projecting", file=sys.stderr))
                bars[0].__enter__()
            bars[0].update(done - shown["seen"])
            shown["seen"] = done
            if done == total:
                bars[0].__exit__(None, None, None)
            return
        tenth = done * 10 // max(total, 1)
        if tenth != shown["tenth"] or time.monotonic() - shown["at"] >= EVERY_S:
            shown["tenth"], shown["at"] = tenth, time.monotonic()
            _say(f"  {done:,}/{total:,} points")

    return update


EVERY_S = 5.0  # the longest a log goes without a progress line while points are solved
