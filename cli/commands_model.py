"""``sanlab model`` and ``sanlab calibrate``: wiring from scenarios to the models."""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import click

from sanlab.models.core.budget import qd1_budget
from sanlab.models.core.cores import load_cores
from sanlab.models.core.network import Point
from sanlab.models.core.profile_files import given_profile, load_profile, profile_names
from sanlab.models.core.project import check_size, project
from sanlab.models.core.published import Measured, calibration_dir, load_table
from sanlab.models.core.report import Cell, chart_png, csv_text, match, text_table
from sanlab.models.core.simulate import Settings
from sanlab.progress import ticking
from sanlab.scenarios.errors import Problem, SanlabError, ScenarioError
from sanlab.scenarios.loader import load_scenario, parse_scenario
from sanlab.scenarios.registry import FABRIC_NAMES, STACK_NAMES, TRANSPORT_NAMES
from sanlab.scenarios.results.outdir import OutputFolder
from sanlab.scenarios.results.records import ResultRecord, results_document
from sanlab.scenarios.schema import DEFAULT_PROFILE, READ_WRITE, Projection, Scenario
from sanlab.validation import fail, load_checked

DEFAULT_SCENARIO = "zeta-2016.yaml"
POINT_OPTIONS = ("fabric", "link_gbps", "rw", "bs", "iodepth", "numjobs")


def _default_scenario() -> Scenario:
    path = Path(str(resources.files("sanlab.scenarios") / DEFAULT_SCENARIO))
    return load_scenario(path)


def _one_point(opts: dict[str, Any]) -> Scenario:
    """A scenario of one projection and one workload point, validated like a file."""
    missing = [f"--{o.replace('_', '-')}" for o in POINT_OPTIONS if opts.get(o) is None]
    if missing:
        raise click.UsageError(f"--transport needs {', '.join(missing)} too")
    projection = {"profile": opts["profile"] or DEFAULT_PROFILE}
    for key in Projection.model_fields:  # the options are the schema's projection fields
        given = opts.get(key)
        if key != "profile" and given is not None and given is not False:  # 0 is a value: checked
            projection[key] = given
    workload = {k: opts[k] for k in ("rw", "bs", "iodepth", "numjobs")}
    data = {"name": "command-line", "workloads": [workload], "projections": [projection]}
    try:
        return parse_scenario(data, "command line")
    except ScenarioError as exc:
        raise ScenarioError([_as_option(p) for p in exc.problems]) from None


def _as_option(problem: Problem) -> Problem:
    """'workloads[0].bs[0]' -> '--bs': name the option the user typed, not the scenario field."""
    field = re.sub(r"\[\d+\]", "", problem.path).split(".")[-1] if problem.path else ""
    return Problem("sanlab model", f"--{field.replace('_', '-')}" if field else "", problem.message)


def _published_for(scenario: Scenario) -> list[Measured]:
    """Published rows for the scenario's profiles, from the tables the package ships."""
    rows: list[Measured] = []
    for name in dict.fromkeys(p.profile for p in scenario.projections):
        table = load_profile(name).calibration.get("data")
        if not table:
            continue
        rows += load_table(calibration_dir() / table, name)
    return rows


@click.command()
@click.argument("scenario", required=False, type=click.Path(path_type=Path))
@click.option(
    "--transport",
    type=click.Choice(TRANSPORT_NAMES),
    help="Project one point (needs the options below).",
)
@click.option("--fabric", type=click.Choice(FABRIC_NAMES))
@click.option("--link-gbps", type=float)
@click.option("--mtu", type=int)
@click.option("--rw", type=click.Choice(READ_WRITE))
@click.option("--bs", help="Block size: 512, 4k, 64k, 1m.")
@click.option("--iodepth", type=int)
@click.option("--numjobs", type=int)
@click.option("--target-stack", type=click.Choice(STACK_NAMES), help="Default: lio (SCSI), nvmet (NVMe).")
@click.option("--backend", type=click.Choice(["null", "ramdisk", "nvme"]), help="Default: ramdisk.")
@click.option("--sessions", type=int, help="Connections (iSCSI sessions, SRP channels, NVMe queues).")
@click.option(
    "--queues", type=int, help="NVMe: I/O queues per controller (nr_io_queues); default one per CPU."
)
@click.option("--poll", is_flag=True, help="NVMe: the initiator polls for completions (fio --hipri).")
@click.option("--cores", type=int, help="Cores per host, in place of the profile's.")
@click.option(
    "--core",
    type=click.Choice(sorted(load_cores())),
    help="Core design of both hosts' CPUs (models/cores.yaml), in place of the profile's.",
)
@click.option(
    "--initiators",
    type=int,
    help="Initiators sharing the target's port through a switch (incast); IOPS are their sum.",
)
@click.option("--header-digest", is_flag=True)
@click.option("--data-digest", is_flag=True)
@click.option(
    "--tls", is_flag=True, help="NVMe/TCP inside TLS 1.3: AES-GCM on every byte, records on the wire."
)
@click.option("--profile", callback=given_profile, help=f"Hardware profile: {', '.join(profile_names())}.")
@click.option("--seed", type=click.IntRange(0, 2**32 - 1), default=1, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print {'results': [...]} on stdout, nothing else.")
@click.option("--wide", is_flag=True, help="Every column of the table (default: what fits 120 columns).")
@click.option(
    "--budget",
    is_flag=True,
    help="With --transport: also print the QD 1 latency budget of the point, hop by hop.",
)
@click.option(
    "--report",
    type=click.Path(path_type=Path),
    help="Also write table.txt, cells.csv, chart.png here.",
)
def model(
    scenario: Path | None,
    as_json: bool,
    wide: bool,
    budget: bool,
    report: Path | None,
    seed: int,
    **opts: Any,
) -> None:
    """Project a scenario (default: Zeta 2016) or one point onto real hardware.

    The figures are projections of a calibrated discrete-event model, not
    measurements; tables show the published value and error where one exists.

    \b
    Examples:
      sanlab model                                   # Zeta 2016, beside the published table
      sanlab model scenarios/starwind-2024.yaml --report out/
      sanlab model --transport nvme-tcp --fabric eth --link-gbps 100 \\
                   --rw randread --bs 4k --iodepth 32 --numjobs 8 --json
    """
    try:
        if budget and not opts["transport"]:
            raise click.UsageError("--budget needs --transport (one point)")
        chosen = _chosen(scenario, opts)
        _check_projectable(chosen)
        count = check_size(chosen, str(scenario or chosen.name or "scenario"))  # before any point or file
        folder = _claim_report(report) if report else None
        progress = _progress_bar() if not as_json else _progress_lines  # stderr: stdout stays JSON
        # Too few points to count aloud, yet one deep point simulates for seconds: say it is alive
        # (not under --json: scripts read it, and some read stderr with stdout).
        alive = count < PROGRESS_LINES_FROM and not as_json
        with ticking("projecting") if alive else contextlib.nullcontext():
            results = project(chosen, Settings(seed=seed), progress)
    except SanlabError as exc:
        fail(exc)
    records = [r for _, r in results]
    if as_json:
        click.echo(json.dumps(results_document(records), indent=2))
        return
    cells = match([(job.label, r) for job, r in results], _published_for(chosen))
    title = f"{chosen.name}: projected by the sanlab model (seed {seed}) - not measured"
    table = text_table(cells, title, wide)
    click.echo(table)
    if budget:
        for job, _ in results:
            _print_budget(job.point)
    if folder is not None:
        _write_report(folder, cells, title, records)
        click.echo(f"report written to {report}/ ({', '.join(REPORT_FILES)})")


def _chosen(scenario: Path | None, opts: dict[str, Any]) -> Scenario:
    """What to project: one point from --transport and its options, or a scenario (the file
    given, else Zeta 2016) with --profile in place of each projection's own; options that only
    make sense together are refused as a usage error before anything is read."""
    if opts["transport"]:
        if scenario:
            raise click.UsageError("give a SCENARIO or --transport, not both")
        return _one_point(opts)
    given = [f"--{k.replace('_', '-')}" for k in POINT_OPTIONS if opts.get(k) is not None]
    if given:
        raise click.UsageError(f"{', '.join(given)} need --transport")
    chosen = load_checked(scenario) if scenario else _default_scenario()
    if not opts["profile"]:
        return chosen
    projections = [p.model_copy(update={"profile": opts["profile"]}) for p in chosen.projections]
    return chosen.model_copy(update={"projections": projections})


REPORT_FILES = ("table.txt", "cells.csv", "chart.png", "results.json")


def _write_report(folder: OutputFolder, cells: list[Cell], title: str, records: list[ResultRecord]) -> None:
    """The report's four files, each whole and stamped as it lands, so a Ctrl-C leaves only
    sanlab's files (the folder was claimed before any point was projected)."""
    try:
        folder.write_text("table.txt", text_table(cells, title, wide=True))
        folder.write_text("cells.csv", csv_text(cells))
        folder.write_bytes("chart.png", chart_png(cells, title))
        folder.write_text("results.json", json.dumps(results_document(records), indent=2))
    except SanlabError as exc:
        fail(exc)


def _claim_report(report: Path) -> OutputFolder:
    """The report's folder; refused before any work if a user's file holds a name."""
    folder = OutputFolder.open(report, "--report")
    for name in REPORT_FILES:
        folder.claim(name)
    return folder


def _print_budget(point: Point) -> None:
    hops = qd1_budget(point)
    click.echo("QD 1 latency budget (one request alone in flight; the profile's and stacks' figures):")
    for hop in hops:
        click.echo(f"  {hop.name:<19} {hop.us:>7.2f} us  {hop.side:<9}  {hop.meaning}")
    click.echo(f"  {'total':<19} {sum(h.us for h in hops):>7.2f} us")


def _check_projectable(scenario: Scenario) -> None:
    """A scenario with nothing to project is a mistake, not an empty table."""
    if not scenario.projections:
        raise SanlabError(f"{scenario.name}: declares no projections: nothing to project (add projections:)")
    if not scenario.workloads:
        raise SanlabError(f"{scenario.name}: declares no workloads: nothing to project (add workloads:)")


def _progress_bar() -> Callable[[int, int], None] | None:
    """A bar on a terminal; elsewhere (a log, CI) a line at each tenth of a long projection."""
    if not sys.stderr.isatty():
        return _progress_lines
    state: dict[str, Any] = {}

    def update(done: int, total: int) -> None:
        bar = state.get("bar")
        if bar is None:
            bar = click.progressbar(length=total, label="projecting", file=sys.stderr)
            bar.__enter__()
            state["bar"] = bar
        bar.update(done - state.get("seen", 0))
        state["seen"] = done
        if done == total:
            bar.__exit__(None, None, None)

    return update


def _progress_lines(done: int, total: int) -> None:
    if total < PROGRESS_LINES_FROM:
        return
    if done <= 1 or done == total or done * 10 // total != (done - 1) * 10 // total:
        click.echo(f"projecting: {done:,} of {total:,} points", err=True)


PROGRESS_LINES_FROM = 8  # fewer points take a second or two: no need to say how far it is
