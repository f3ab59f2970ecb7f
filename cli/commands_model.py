"""``sanlab model`` and ``sanlab calibrate``: wiring from scenarios to the models."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import click

from sanlab.models import calibrate_studies, checks
from sanlab.models.budget import qd1_budget
from sanlab.models.calibrate import CellError
from sanlab.models.calibrate_runs import calibrate_and_write
from sanlab.models.cores import load_cores
from sanlab.models.network import Point
from sanlab.models.profile import load_profile, profile_names
from sanlab.models.project import project
from sanlab.models.published import Measured, calibration_dir, load_table
from sanlab.models.report import match, text_table, write_chart, write_csv
from sanlab.models.simulate import Settings
from sanlab.scenarios.errors import Problem, SanlabError, ScenarioError
from sanlab.scenarios.loader import load_scenario, parse_scenario
from sanlab.scenarios.outdir import OutputFolder
from sanlab.scenarios.records import results_document
from sanlab.scenarios.schema import DEFAULT_PROFILE, FABRICS, STACKS, TRANSPORTS, Scenario
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
    projection = {
        "profile": opts["profile"] or DEFAULT_PROFILE,
        "transport": opts["transport"],
        "fabric": opts["fabric"],
        "link_gbps": opts["link_gbps"],
        "header_digest": opts["header_digest"],
        "data_digest": opts["data_digest"],
    }
    if opts.get("poll"):
        projection["poll"] = True
    for key in ("mtu", "target_stack", "backend", "sessions", "queues", "cores", "core", "initiators"):
        if opts.get(key) is not None:
            projection[key] = opts[key]
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
    """Published rows for the scenario's profiles, when shared/calibration is at hand."""
    rows: list[Measured] = []
    for name in dict.fromkeys(p.profile for p in scenario.projections):
        table = load_profile(name).calibration.get("data")
        if not table:
            continue
        try:
            rows += load_table(calibration_dir() / table, name)
        except SanlabError:
            click.echo(
                "note: published tables not found; showing projections only "
                "(set SANLAB_CALIBRATION to compare)",
                err=True,
            )
            return []
    return rows


@click.command()
@click.argument("scenario", required=False, type=click.Path(path_type=Path))
@click.option(
    "--transport",
    type=click.Choice(TRANSPORTS),
    help="Project one point (needs the options below).",
)
@click.option("--fabric", type=click.Choice(FABRICS))
@click.option("--link-gbps", type=float)
@click.option("--mtu", type=int)
@click.option("--rw", type=click.Choice(["randread", "randwrite", "read", "write"]))
@click.option("--bs", help="Block size: 512, 4k, 64k, 1m.")
@click.option("--iodepth", type=int)
@click.option("--numjobs", type=int)
@click.option("--target-stack", type=click.Choice(STACKS), help="Default: lio (SCSI), nvmet (NVMe).")
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
@click.option("--profile", help=f"Hardware profile: {', '.join(profile_names())}.")
@click.option("--seed", type=click.IntRange(0, 2**32 - 1), default=1, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print {'results': [...]} on stdout, nothing else.")
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
    scenario: Path | None, as_json: bool, budget: bool, report: Path | None, seed: int, **opts: Any
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
        if opts["transport"]:
            if scenario:
                raise click.UsageError("give a SCENARIO or --transport, not both")
            chosen = _one_point(opts)
        else:
            given = [f"--{k.replace('_', '-')}" for k in POINT_OPTIONS if opts.get(k) is not None]
            if given:
                raise click.UsageError(f"{', '.join(given)} need --transport")
            chosen = load_checked(scenario) if scenario else _default_scenario()
            if opts["profile"]:
                chosen = chosen.model_copy(
                    update={
                        "projections": [
                            p.model_copy(update={"profile": opts["profile"]}) for p in chosen.projections
                        ]
                    }
                )
        _check_projectable(chosen)
        paths = _claim_report(report) if report else {}
        progress = _progress_bar() if not as_json else None
        results = project(chosen, Settings(seed=seed), progress)
    except SanlabError as exc:
        fail(exc)
    records = [r for _, r in results]
    if as_json:
        click.echo(json.dumps(results_document(records), indent=2))
        return
    cells = match([(job.label, r) for job, r in results], _published_for(chosen))
    title = f"{chosen.name}: projected by the sanlab model (seed {seed}) - not measured"
    table = text_table(cells, title)
    click.echo(table)
    if budget:
        for job, _ in results:
            _print_budget(job.point)
    if report:
        paths["table.txt"].write_text(table)
        write_csv(cells, paths["cells.csv"])
        write_chart(cells, paths["chart.png"], title)
        paths["results.json"].write_text(json.dumps(results_document(records), indent=2))
        OutputFolder.open(report, "--report").stamp(REPORT_FILES)
        click.echo(f"report written to {report}/ ({', '.join(REPORT_FILES)})")


REPORT_FILES = ("table.txt", "cells.csv", "chart.png", "results.json")


def _claim_report(report: Path) -> dict[str, Path]:
    """Where each report file goes; refused before any work if a user's file holds a name."""
    folder = OutputFolder.open(report, "--report")
    return {name: folder.claim(name) for name in REPORT_FILES}


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
        bar.update(1)
        if done == total:
            bar.__exit__(None, None, None)

    return update


def _progress_lines(done: int, total: int) -> None:
    if total < PROGRESS_LINES_FROM:
        return
    if done == 1 or done == total or done * 10 // total != (done - 1) * 10 // total:
        click.echo(f"projecting: {done:,} of {total:,} points", err=True)


PROGRESS_LINES_FROM = 20  # fewer points take a few seconds: no need to say how far it is


@click.command()
@click.argument("profiles", nargs=-1)
@click.option("--data", type=click.Path(path_type=Path), help="Folder of the published CSV tables.")
@click.option(
    "--write",
    is_flag=True,
    help="Write the fitted values to models/stacks.fit.yaml and models/profiles/NAME.fit.yaml.",
)
@click.option("--cross-validate/--no-cross-validate", default=True, show_default=True)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option(
    "--runs", is_flag=True, help="Fit a profile of your own to the sanlab run folders given as arguments."
)
@click.option("--name", help="With --runs: the new profile's name (for sanlab model --profile NAME).")
@click.option(
    "--base", default=DEFAULT_PROFILE, show_default=True, help="With --runs: the profile to start from."
)
@click.option(
    "--json", "as_json", is_flag=True, help="With --runs: print {'parameters', 'cells', 'profile'}."
)
def calibrate(
    profiles: tuple[str, ...],
    data: Path | None,
    write: bool,
    cross_validate: bool,
    seed: int,
    runs: bool,
    name: str | None,
    base: str,
    as_json: bool,
) -> None:
    """Fit the software stacks' costs and each bench's hardware to the published tables, all at
    once (PROFILES: only those benches), or, with --runs, a profile of your own hardware to
    your sanlab run records.

    \b
    Example:
      sanlab calibrate --data ../shared/calibration --write
      sanlab calibrate --runs runs/mine runs/mine-64k --name my-lab
      sanlab model --profile my-lab --transport nvme-rdma --fabric roce --bs 4k --numjobs 8
    """
    try:
        if runs:
            _calibrate_runs([Path(p) for p in profiles], name, base, seed, as_json)
            return
        _calibrate_studies(list(profiles), data, write, cross_validate, seed)
    except SanlabError as exc:
        fail(exc)


def _calibrate_runs(dirs: list[Path], name: str | None, base: str, seed: int, as_json: bool) -> None:
    if not dirs:
        raise SanlabError("--runs: give one or more run folders (each with a results.json)")
    if not name or not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,40}", name):
        raise SanlabError(f"--name {name!r}: give the new profile a name of a-z, 0-9 and '-'")
    document = calibrate_and_write(dirs, name, base, seed)
    if as_json:
        click.echo(json.dumps(document, indent=2))
        return
    parameters = document["parameters"]
    click.echo(
        f"== {name}: {len(parameters)} parameters fitted to {document['fitted_cells']} cells (base {base})"
    )
    for param, entry in parameters.items():
        low, high = entry["interval_95"]
        pinned = "" if entry["pinned"] else "  (not pinned by these cells)"
        click.echo(f"  {param:<52} {entry['value']:>10.4g}  95% [{low:.4g}, {high:.4g}]{pinned}")
    for c in document["cells"]:
        click.echo(
            f"  {c['cell']:<44} measured {c['measured_iops']:>10,.0f}  model {c['model_iops']:>10,.0f}  "
            f"{c['error_pct']:+6.1f}%"
        )
    click.echo(f"  IOPS MAPE {document['iops_mape_pct']:.1f}%")
    click.echo(f"wrote {document['profile']}; project with: sanlab model --profile {name} ...")


def _calibrate_studies(
    names: list[str], data: Path | None, write: bool, cross_validate: bool, seed: int
) -> None:
    if write:
        calibrate_studies.check_write(names, cross_validate)
    click.echo(f"== fitting the stacks' costs and {', '.join(names or calibrate_studies.study_names())}")
    done = calibrate_studies.calibrate(names or None, data, cross_validate, seed)
    _print_parameters(done)
    for study, cells in done.cells.items():
        click.echo(f"== {study}")
        for c in cells:
            lat, cpu = c.latency_error, c.cpu_error
            click.echo(
                f"  {c.row.label:<44} published {c.row.iops:>10,.0f}  model {c.iops:>10,.0f}  "
                f"{100 * c.iops_error:+6.1f}%"
                + (f"  lat {100 * lat:+6.1f}%" if lat is not None else "")
                + (f"  cpu {100 * cpu:+6.1f}%" if cpu is not None else "")
                + f"  [{c.bottleneck}]"
            )
        summary = done.study_summary(study)
        click.echo(
            f"  network cells: IOPS MAPE {summary['iops_mape_pct']:.1f}%"
            + (f", mean-latency MAPE {summary['lat_mape_pct']:.1f}%" if "lat_mape_pct" in summary else "")
            + (f", CPU MAPE {summary['cpu_mape_pct']:.1f}%" if "cpu_mape_pct" in summary else "")
        )
    for held in done.holdouts:
        note = f" (no training cell moves {', '.join(held.unconstrained)})" if held.unconstrained else ""
        score = f"{held.iops_mape_pct:.1f}%" if held.iops_mape_pct is not None else "-"
        click.echo(f"  cross-validation: {held.label}: IOPS MAPE {score} on {held.cells} cells{note}")
        if held.worst:
            click.echo("    missed most: " + ", ".join(f"{label} {100 * e:+.0f}%" for label, e in held.worst))
        click.echo(f"    inside their 95% interval: {held.inside} of {held.cells} cells")
        if held.outside:
            click.echo(
                "    outside it: " + ", ".join(f"{label} {100 * e:+.0f}%" for label, e in held.outside)
            )
    if write:
        for path in calibrate_studies.write(done):
            click.echo(f"  wrote {path}")
    _print_checks(seed, "the fit just written" if write else "the committed fit")


def _print_checks(seed: int, which: str) -> None:
    """The published rows no fit sees (models/data), projected on ``which``."""
    judged = checks.judge(seed)
    if not judged:
        return
    click.echo(f"== published elsewhere, never fitted (models/data), projected with {which}")
    for j in judged:
        row = j.cell.row
        click.echo(
            f"  {j.table}: {row.label:<46} published {row.bw_mibps:>8,.0f} MiB/s  "
            f"model {j.model_mibps:>8,.0f}  {100 * j.throughput_error:+6.1f}%"
            + _cpu_beside(j.cell)
            + f"  [{j.cell.bottleneck}]"
            + ("  past the tables' reach" if j.extrapolated else "")
            + ("" if j.band.inside else "  outside its 95% interval")
            + (f"  OVER ITS TOLERANCE: {'; '.join(j.misses)}" if j.misses else "")
        )


def _cpu_beside(cell: CellError) -> str:
    """'  cpu 16.3% model 3.7% -78%' where a row publishes a CPU figure and the model projects it."""
    if cell.row.cpu_pct is None or cell.cpu_pct is None or cell.cpu_error is None:
        return ""
    return f"  cpu {cell.row.cpu_pct:g}% model {cell.cpu_pct:.1f}% {100 * cell.cpu_error:+.0f}%"


def _print_parameters(done: calibrate_studies.Calibration) -> None:
    result = done.result
    click.echo(f"  {'parameter':<52} {'fitted':>9}  {'95% interval':<19} {'prior':>7}")
    for param, value in result.params.items():
        low, high = result.intervals[param]
        prior = done.priors.get(param)
        flag = f"  not pinned: {result.unpinned[param]}" if param in result.unpinned else ""
        click.echo(
            f"  {param:<52} {value:>9.4g}  [{low:<7.4g}, {high:>7.4g}] "
            f"{prior.value if prior else '-':>7}{flag}"
        )
