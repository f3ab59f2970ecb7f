"""How often a run's call path climbs back up a layer: `sanlab run <scenario> --dry-run`, traced.

Why: a module below that hands control back to one above it, again and again, is a sign that
the layers above keep asking the vocabulary for facts one at a time instead of resolving a
scenario once and then acting on what was resolved.  Issue #49 asked for this count halved.

The metric.  Every Python frame of code in one of sanlab's source files (``sys.setprofile``
'call' events: functions, comprehensions, lambdas, generator resumes; not code generated at run
time, such as a dataclass's ``__init__``, whose file is ``<string>``) is attributed to its
module.  Imports are done before tracing starts, so only the run is seen.  Consecutive entries
into one module are collapsed into one visit; the visits, in call
order, are the path.  A *climb* is a step of the path from a module to one of a higher layer
(ranks below).  Two counts are given:

- ``climbs``: distinct climbing steps, each (module.function -> module.function) pair once;
  at bb138cb this gives the issue's "climbs back up 15 times" and, counted the same way,
  its "enters runner.py 12 times" (12 distinct steps into runner.py; 29 modules visited);
- ``climb steps``: every climbing step of the path, repeats included.

Layer ranks: scenarios 0 < emulator 1 < targets' recipes, dissectors, models 2 < orchestration
3 (targets/sessions/, and before it existed targets/run_session.py, on_machines.py,
lab_targets.py, lab_keeper.py) < the command line 4.

    python benchmarks/climbs.py [scenarios/smoke.yaml] [--at COMMIT] [--show N]

``--at`` lays the package of an older commit out in a temporary folder (``git archive``, as
pyproject's package-dir installs it) and traces that instead, so both counts come from one tool.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import os
import pkgutil
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RANKS = {"scenarios": 0, "emulator": 1, "targets": 2, "dissectors": 2, "models": 2}
OLD_ORCHESTRATION = {"run_session", "on_machines", "lab_targets", "lab_keeper"}
ORCHESTRATION_RANK = 3
CLI_RANK = 4


def rank(module: str) -> int:
    """A module's layer: the folder it installs from; orchestration above the recipes."""
    parts = module.split(".")
    if len(parts) < 2 or parts[1] not in RANKS:
        return CLI_RANK
    if parts[1] == "targets" and len(parts) > 2 and (parts[2] == "sessions" or parts[2] in OLD_ORCHESTRATION):
        return ORCHESTRATION_RANK
    return RANKS[parts[1]]


def _import_all(package: str = "sanlab") -> None:
    """Every sanlab module imported up front, so that import-time calls stay out of the trace."""
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        name = f"{package}.{info.name}"
        if name.endswith("__main__") or name.startswith("sanlab.vm_images"):
            continue
        try:
            importlib.import_module(name)
        except ImportError:  # an optional dependency (mininet) that is not installed
            continue
        if info.ispkg:
            _import_all(name)


def trace(scenario: str) -> list[tuple[str, str]]:
    """(module, function) of every sanlab frame entered while the dry run runs, in order."""
    _import_all()
    from sanlab.main import cli

    entered: list[tuple[str, str]] = []

    def profile(frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            if module.startswith("sanlab") and not frame.f_code.co_filename.startswith("<"):
                entered.append((module, frame.f_code.co_name))

    devnull = open(os.devnull, "w")  # noqa: SIM115 - the dry run's printout is not wanted
    stdout, sys.stdout = sys.stdout, devnull
    sys.setprofile(profile)
    try:
        cli.main(["run", scenario, "--dry-run"], standalone_mode=False)
    finally:
        sys.setprofile(None)
        sys.stdout = stdout
        devnull.close()
    return entered


def visits(entered: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The path: consecutive entries into one module collapsed into one visit."""
    return [e for i, e in enumerate(entered) if i == 0 or entered[i - 1][0] != e[0]]


def climbs(path: list[tuple[str, str]]) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """Every step of the path into a module of a higher layer than the one before it."""
    return [(a, b) for a, b in zip(path, path[1:], strict=False) if rank(b[0]) > rank(a[0])]


def report(entered: list[tuple[str, str]], show: int) -> Iterator[str]:
    path = visits(entered)
    up = climbs(path)
    modules = collections.Counter(module for module, _ in path)
    yield f"modules visited: {len(modules)}"
    yield f"climbs (distinct climbing steps): {len(set(up))}"
    yield f"climb steps (all, repeats included): {len(up)}"
    yield f"visits in the path: {len(path)}"
    into = {(a, b) for a, b in zip(path, path[1:], strict=False) if b[0] == "sanlab.targets.runner"}
    yield f"distinct entries into targets/runner.py: {len(into)}"
    yield "most visited: " + ", ".join(f"{m.removeprefix('sanlab.')} {n}" for m, n in modules.most_common(6))
    for (a, b), n in collections.Counter(up).most_common(show):
        yield f"  {n:3d} x {a[0].removeprefix('sanlab.')}.{a[1]} -> {b[0].removeprefix('sanlab.')}.{b[1]}"


def _lay_out(commit: str, folder: Path) -> Path:
    """The package of ``commit`` as it installs (pyproject's package-dir), in ``folder``."""
    source = folder / "source"
    source.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
    package_dir = tomllib.loads((source / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for package, where in package_dir.items():
        target = folder / "lib" / Path(*package.split("."))
        target.mkdir(parents=True, exist_ok=True)
        for path in (source / where).iterdir():
            if path.is_file():
                shutil.copyfile(path, target / path.name)
    return source


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("scenario", nargs="?", default="scenarios/smoke.yaml")
    parser.add_argument("--at", help="trace the package of this commit instead of the installed one")
    parser.add_argument("--show", type=int, default=12, help="how many of the commonest climbs to list")
    args = parser.parse_args()
    if args.at:
        with tempfile.TemporaryDirectory(prefix="sanlab-climbs-") as tmp:
            source = _lay_out(args.at, Path(tmp))
            env = os.environ | {"PYTHONPATH": str(Path(tmp) / "lib")}
            scenario = source / args.scenario
            argv = [sys.executable, __file__, str(scenario), "--show", str(args.show)]
            sys.exit(subprocess.run(argv, env=env, cwd=tmp).returncode)
    import sanlab

    print(f"sanlab from {Path(sanlab.__file__).parent}; {args.scenario}")
    for line in report(trace(args.scenario), args.show):
        print(line)


if __name__ == "__main__":
    main()
