"""``sanlab calibrate``: fit the stacks' costs to the published tables, or a profile to your runs.

Kept apart from ``sanlab model`` because fitting needs SciPy's optimiser,
which takes half a second to import and which a projection never uses.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import click

from sanlab.models.calibration import calibrate_studies, checks
from sanlab.models.calibration.calibrate import CellError
from sanlab.models.calibration.calibrate_runs import calibrate_runs, summary, write_profile
from sanlab.models.calibration.coverage import inside_count
from sanlab.models.core.profile_files import given_profile
from sanlab.models.core.uncertainty import Z95
from sanlab.progress import ticking
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.schema import DEFAULT_PROFILE
from sanlab.validation import fail


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
    "--base",
    callback=given_profile,
    help=f"With --runs: the profile lending the costs no record pins (default {DEFAULT_PROFILE}); "
    "the machine itself comes from the records.",
)
@click.option(
    "--accept-poor-fit",
    is_flag=True,
    help="With --runs: write the profile even when the fit misses a cell by over 10% (it says so).",
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
    base: str | None,
    accept_poor_fit: bool,
    as_json: bool,
) -> None:
    """Fit the software stacks' costs and each bench's hardware to the published tables, all at
    once (PROFILES: only those benches), or, with --runs, a profile of your own hardware to
    your sanlab run records.

    \b
    Example:
      sanlab calibrate --write
      sanlab calibrate --runs runs/mine runs/mine-64k --name my-lab
      sanlab model --profile my-lab --transport nvme-rdma --fabric roce --bs 4k --numjobs 8
    """
    try:
        if runs:
            for flag, given in (("--write", write), ("--data", data is not None)):
                if given:
                    raise SanlabError(
                        f"{flag} is for the published tables; --runs writes its profile to your "
                        "profile folder (refused, so that nothing is silently ignored)"
                    )
            _calibrate_runs([Path(p) for p in profiles], name, base, seed, as_json, accept_poor_fit)
            return
        if base or accept_poor_fit or name:
            raise SanlabError("--name, --base and --accept-poor-fit go with --runs")
        _calibrate_studies(list(profiles), data, write, cross_validate, seed)
    except SanlabError as exc:
        fail(exc)


def _calibrate_runs(
    dirs: list[Path], name: str | None, base: str | None, seed: int, as_json: bool, accept: bool
) -> None:
    """Fit, print the fit (every parameter's interval, every cell's error), then write or refuse."""
    if not dirs:
        raise SanlabError("--runs: give one or more run folders (each with a results.json)")
    if not name or not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,40}", name):
        raise SanlabError(f"--name {name!r}: give the new profile a name of a-z, 0-9 and '-'")
    done = calibrate_runs(dirs, name, base, seed, say=lambda m: click.echo(m, err=True))
    path = None
    try:
        path = write_profile(done, dirs, accept)
    finally:
        document = summary(done, path)
        if as_json:
            click.echo(json.dumps(document, indent=2))
        else:
            _print_fit(name, document)
    if path:
        click.echo(f"wrote {path}; project with: sanlab model --profile {name} ...", err=as_json)


def _print_fit(name: str, document: dict) -> None:
    parameters = document["parameters"]
    click.echo(
        f"== {name}: {len(parameters)} parameters fitted to {document['fitted_cells']} cells "
        f"(costs no record pins: {document['base']})"
    )
    click.echo(f"  {'parameter':<52} {'fitted':>10}  95% interval")
    for param, entry in parameters.items():
        low, high = entry["interval_95"]
        pinned = "" if entry["pinned"] else "  (not pinned by these cells)"
        click.echo(f"  {param:<52} {entry['value']:>10.4g}  95% [{low:.4g}, {high:.4g}]{pinned}")
    click.echo(f"  {'cell':<44} {'measured':>10}  {'model':>10}  fit error")
    for c in document["cells"]:
        flag = "  MISSED" if c["cell"] in document["poor_fit"] else ""
        click.echo(
            f"  {c['cell']:<44} {c['measured_iops']:>10,.0f}  {c['model_iops']:>10,.0f}  "
            f"{c['error_pct']:+6.1f}%  [{c['bottleneck']}]{flag}"
        )
    click.echo(f"  IOPS MAPE {document['iops_mape_pct']:.1f}%")


def _calibrate_studies(
    names: list[str], data: Path | None, write: bool, cross_validate: bool, seed: int
) -> None:
    if write:
        calibrate_studies.check_write(names, cross_validate)
    click.echo(f"== fitting the stacks' costs and {', '.join(names or calibrate_studies.study_names())}")
    with ticking("fitting (a minute or two)"):
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
        click.echo(
            f"    inside their 95% interval: {held.inside} of {held.cells} cells"
            f" (the model's own error from this split's training cells: sigma {held.model_sigma:.3f})"
        )
        if held.outside:
            click.echo(
                "    outside it: " + ", ".join(f"{label} {100 * e:+.0f}%" for label, e in held.outside)
            )
    _print_coverage(done)
    if write:
        for path in calibrate_studies.write(done):
            click.echo(f"  wrote {path}")
    _print_checks(seed, "the fit just written" if write else "the committed fit")
    _print_refusals()


def _print_coverage(done: calibrate_studies.Calibration) -> None:
    """The model's own error (which every interval carries) and how often the fitted cells
    fall inside their 95 % interval."""
    if not done.holdouts:
        return
    sigma = done.model_sigma
    inside, cells = inside_count(done.fitted)
    click.echo(
        f"  the model's own error: sigma {sigma:.3f} of log IOPS (x/{math.exp(Z95 * sigma):.2f} at 95%),"
        f" from the {len(done.fitted)} fitted cells"
    )
    click.echo(f"  fitted cells inside their 95% interval: {inside} of {cells}")
    regimes = done.summary()["coverage_by_regime"]
    every = regimes.pop("all")
    click.echo(
        f"  each study left out, inside their 95% interval: {every['inside']} of {every['cells']} cells;"
        " by regime: "
        + ", ".join(f"{kind} {r['inside']} of {r['cells']}" for kind, r in regimes.items())
        + f" (error where no training row shares the regime: sigma {done.unpinned_sigma:.3f})"
    )


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
    for group in checks.scored(judged):
        click.echo(
            f"  {group.name}: throughput MAPE {100 * group.mape:.1f}% on {group.rows} rows, "
            f"{group.inside} inside their 95% interval"
        )


def _print_refusals() -> None:
    """The published rows the model cannot express, with why: dropped by name, never silently."""
    for r in checks.refusals():
        click.echo(f"  {r.table}: not expressed, rows {r.rows}: {r.reason}")


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
