"""``sanlab validate``, and the scenario loading every command shares.

A scenario is checked by its own layer (schema, consistency) and then for
the names it gives other layers (profiles), all before anything runs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from sanlab.models.core.profile_files import check_projection_profiles
from sanlab.scenarios.errors import Problem, SanlabError, ScenarioError
from sanlab.scenarios.loader import load_scenario
from sanlab.scenarios.schema import Scenario
from sanlab.scenarios.sizes import DurationRange
from sanlab.scenarios.writing import probe_writable


class Duration(click.ParamType):
    """A command-line duration (2s, 500ms, 30) checked against its range: NaN, negative or
    out-of-range values get click's one-line usage error, never a traceback."""

    name = "duration"

    def __init__(self, span: DurationRange):
        self.span = span

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        try:
            return self.span.check(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def fail(exc: SanlabError) -> NoReturn:
    """Report an error the way every command does: a scenario's problems one
    per line (exit 1), anything else as one 'Error:' line (exit 1)."""
    if isinstance(exc, ScenarioError):
        for problem in exc.problems:
            click.echo(str(problem), err=True)
        sys.exit(1)
    raise click.ClickException(str(exc)) from None


def load_checked(path: Path, inventory: Path | None = None, kernel: bool = True) -> Scenario:
    """Load a scenario (its hosts from ``inventory`` if given) and check the names it gives
    to other layers.  ``kernel=False``: the kernel it brings is not read (a run folder's copy,
    whose relative path meant another directory, and which the model never boots)."""
    return check_loaded(load_scenario(path, inventory), str(path), kernel)


def check_loaded(scenario: Scenario, source: str, kernel: bool = True) -> Scenario:
    """``scenario`` (read from ``source``) if the names it gives other layers are good: its
    profiles, its guest and the kernel it brings (found, and with every option it needs)."""
    problems = [Problem(source, p, m) for p, m in check_projection_profiles(scenario)]
    if scenario.hosts and not scenario.plan.real_machines:
        # The emulator's modules only for a scenario that boots guests: ``sanlab model`` of a
        # file, or ``validate``, of a projection alone never reads images or kernels.
        from sanlab.emulator.images import guest_of
        from sanlab.emulator.kernels import check_kernel, kernel_source

        try:  # $SANLAB_GUEST overrides the guest: a bogus one is refused here, not at boot
            guest_of(scenario.guest)
        except SanlabError as exc:
            problems.append(Problem(source, "guest", str(exc)))
        if kernel and scenario.kernel is not None:
            try:  # a kernel the scenario brings: found, readable, and with every option it needs
                check_kernel(scenario, kernel_source(scenario.kernel))
            except SanlabError as exc:
                problems.append(Problem(source, "guest.kernel", str(exc)))
    if problems:
        raise ScenarioError(problems)
    return scenario


def writable_dir(path: Path, option: str) -> Path:
    """Make sure ``path`` is (or can become) a directory we may write, before any work is done."""
    probe_writable(path, option)  # a new file of an unpredictable name, made exclusively and removed
    if not path.is_dir():
        raise SanlabError(f"{option} {path}: exists and is not a directory")
    return path


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print [{file, ok, problems}] only.")
def validate(files: tuple[Path, ...], as_json: bool) -> None:
    """Check scenario FILES; print one line per problem and exit 1 if any.

    \b
    Example:
      sanlab validate scenarios/*.yaml
      scenarios/x.yaml: workloads[0].bs[1]: '5q' is not a size (use 512, 4k, 64k, 1m)
    """
    found: dict[str, list[Problem]] = {}
    for path in files:
        try:
            load_checked(path)
            found[str(path)] = []
        except ScenarioError as exc:
            found[str(path)] = list(exc.problems)
    if as_json:
        document = [
            {"file": name, "ok": not problems, "problems": [p.__dict__ for p in problems]}
            for name, problems in found.items()
        ]
        click.echo(json.dumps(document, indent=2))
    else:
        for name, problems in found.items():
            for problem in problems:
                click.echo(str(problem), err=True)
            if not problems:
                click.echo(f"{name}: ok")
    sys.exit(1 if any(found.values()) else 0)
