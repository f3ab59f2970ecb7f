"""The published tables fitted together: the software stacks' costs shared, each bench's hardware its own.

The Zeta 2016 and StarWind 2024 benches both run Linux initiators, so an
iSCSI initiator's cycles per I/O are one parameter fitted to both tables,
not two parameters that each absorb what their own table leaves over.  What
differs between the benches - NICs, the drive, the RAM disk - stays with
each bench's profile.  Cross-validation then includes what a new user's
hardware looks like to the model: every study left out in turn and
predicted from the others (its own hardware at its priors).
"""

from __future__ import annotations

import contextlib
import datetime
import math
import multiprocessing
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from sanlab.models.calibration.calibrate import (
    CellError,
    Fit,
    Task,
    evaluate,
    fit_parameters,
    load_raw,
    solve,
    table_for,
)
from sanlab.models.calibration.checks import confirming_rows
from sanlab.models.calibration.coverage import (
    Band,
    bands,
    by_regime,
    cross_fit,
    inside_count,
    model_error,
    regimes_of,
    unpinned_error,
)
from sanlab.models.core.metrics import mape
from sanlab.models.core.paths import SIDES
from sanlab.models.core.priors import Prior
from sanlab.models.core.profile import Profile
from sanlab.models.core.profile_files import (
    STACKS,
    STACKS_FILE,
    clear_cache,
    fit_path,
    inherit,
    lenders,
    load_profile,
    parse_stacks,
    profile_names,
    profile_path,
    with_stacks,
)
from sanlab.models.core.published import Measured
from sanlab.models.core.reach import clear as clear_reach
from sanlab.models.core.reach import measure as measure_reach
from sanlab.models.core.regimes import clear as clear_regimes
from sanlab.models.core.regimes import count as regime_count
from sanlab.models.core.regimes import key_of
from sanlab.models.core.uncertainty import clear_posterior
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.loader import read_yaml
from sanlab.scenarios.writing import write_file

Use = Callable[[Measured], bool]
# How many of a cross-validation split's worst cells ``sanlab calibrate`` names.
WORST_SHOWN = 3


@dataclass(frozen=True)
class Study:
    """One published bench: its profile (as written by hand) and its table."""

    name: str
    raw: dict[str, Any]
    rows: list[Measured]


def study_names() -> list[str]:
    """The shipped profiles that describe a published bench (they name a calibration table)."""
    return [n for n in profile_names(shipped_only=True) if load_raw(n).get("calibration", {}).get("data")]


def load_studies(names: list[str] | None, data_dir: Path | None) -> list[Study]:
    known = study_names()
    chosen = names or known
    unknown = sorted(set(chosen) - set(known))
    if unknown:
        raise SanlabError(f"{', '.join(unknown)}: not a calibrated study (use {', '.join(known)})")
    studies = []
    for name in chosen:
        raw = load_raw(name)
        studies.append(Study(name, raw, table_for(raw, data_dir)))
    return studies


def stacks_raw() -> dict[str, Any]:
    """models/stacks.yaml as written: the starting values of a fit."""
    data = read_yaml(STACKS_FILE)
    if not isinstance(data, dict):
        raise SanlabError(f"{STACKS_FILE}: must be a mapping")
    return data


def joint_task(studies: list[Study], use: Use = lambda r: True) -> Task:
    """One fit of the stacks' costs and every study's hardware, on the rows ``use`` accepts."""
    stacks = stacks_raw()
    params = fit_parameters(stacks, prefix=f"{STACKS}.", prior_prefix=f"{STACKS}.")
    for study in studies:
        params = params + fit_parameters(study.raw, prefix=f"{study.name}.")
    document = {STACKS: stacks} | {s.name: s.raw for s in studies}
    like = {
        f"{STACKS}.{name}": f"{STACKS}.{sibling}"
        for name, sibling in (stacks.get("calibration", {}).get("like") or {}).items()
    }

    names = {s.name for s in studies}
    # A study that borrows a part from another study of this fit is built after it, from it.
    order = sorted(studies, key=lambda s: bool(lenders(s.raw) & names))

    def realise(data: dict[str, Any]) -> dict[str, Profile]:
        costs = parse_stacks(data[STACKS], str(STACKS_FILE))
        built: dict[str, Profile] = {}

        def lookup(name: str) -> Profile:
            return built[name] if name in built else load_profile(name)

        for s in order:
            resolved = inherit(data[s.name], s.name, lookup)
            built[s.name] = Profile.model_validate(with_stacks(resolved, costs))
        return built

    rows = {s.name: [r for r in s.rows if use(r)] for s in studies}
    return Task(document, params, realise, rows, like)


def holdouts(studies: list[Study]) -> list[tuple[str, Use]]:
    """Cross-validation splits: reads predict writes; a bench's fastest link from its slower
    ones; and, with several studies, each study from the others alone."""
    splits: list[tuple[str, Use]] = [("fit on reads, predict writes", lambda r: "read" in r.point.rw)]
    for study in studies:
        speeds = sorted({r.point.link_gbps for r in study.rows if r.point.networked})
        if len(speeds) > 1:
            label = f"{study.name}: fit without its {speeds[-1]:g} Gb/s cells, predict them"
            splits.append((label, _not_at(study.rows, speeds[-1])))
    if len(studies) > 1:
        for study in studies:
            splits.append((study_out(study.name), _not_in(study.rows)))
    return splits


def study_out(name: str) -> str:
    """The label of the split that leaves study ``name`` out (what a new machine looks like)."""
    return f"leave {name} out, predict it"


def _not_at(rows: list[Measured], gbps: float) -> Use:
    return _not_in([r for r in rows if r.point.link_gbps == gbps])


def _not_in(rows: list[Measured]) -> Use:
    held = {id(r) for r in rows}
    return lambda row: id(row) not in held


@dataclass(frozen=True)
class Holdout:
    """One cross-validation split: fitted without some cells, scored on them."""

    label: str
    iops_mape_pct: float | None
    cells: int
    unconstrained: tuple[str, ...]  # parameters no training cell moved
    # The unseen cells missed most, worst first, as (label, IOPS error): whether a
    # split's figure is a broad drift or a few cells nothing else in the data explains.
    worst: tuple[tuple[str, float], ...] = ()
    # Each unseen cell against its projection's 95 % interval (models/calibration/coverage.py), which
    # carries the model's own error as measured on this split's training cells alone.
    bands: tuple[Band, ...] = ()
    model_sigma: float = 0.0
    whole_study: bool = False  # a study left out: its bands are cross-fitted (coverage.cross_fit)

    @property
    def inside(self) -> int:
        return inside_count(self.bands)[0]

    @property
    def outside(self) -> tuple[tuple[str, float], ...]:
        """The cells outside their interval as (label, IOPS error), worst first: misses the
        model did not admit to."""
        missed = sorted((b for b in self.bands if not b.inside), key=lambda b: -abs(b.iops_error))
        return tuple((b.label, b.iops_error) for b in missed)


@dataclass(frozen=True)
class Calibration:
    """The joint fit, every study's cells, the cross-validation and the priors it leaned on."""

    result: Fit
    cells: dict[str, list[CellError]]
    holdouts: list[Holdout]
    priors: dict[str, Prior] = field(default_factory=dict)
    # The fitted network cells against their projections' 95 % intervals, the model's own
    # error (measured on these same cells: ``model_sigma``) included.
    fitted: tuple[Band, ...] = ()
    model_sigma: float = 0.0

    @property
    def left_out(self) -> list[Band]:
        """Every network cell as a fit without its study predicted it: the per-regime coverage."""
        return [b for h in self.holdouts if h.whole_study for b in h.bands]

    @property
    def unpinned_sigma(self) -> float:
        """The error on cells whose regime no training row shared, over every study left out."""
        return unpinned_error(self.left_out)

    def study_summary(self, name: str) -> dict[str, Any]:
        """What NAME.fit.yaml records of the fit and the README quotes."""
        cells = self.cells[name]
        network = [c for c in cells if c.row.point.networked]
        iops = mape([c.iops_error for c in network])
        lat = mape([c.latency_error for c in network])
        own = [p for p in self.result.params if p.startswith(f"{name}.")]
        summary: dict[str, Any] = {
            "fitted_parameters": len(own),
            "cells": len(cells),
            "network_cells": len(network),
            "iops_mape_pct": round(iops, 2) if iops is not None else None,
        }
        if lat is not None:
            summary["lat_mape_pct"] = round(lat, 2)
        cpu = mape([c.cpu_error for c in network])
        if cpu is not None:
            summary["cpu_mape_pct"] = round(cpu, 2)
        return summary

    def reach(self) -> dict[str, dict[str, float]]:
        """How far the published rows the model was fitted to or meets reach, per transport
        (models/core/reach.py), as stacks.fit.yaml records it."""
        fitted: list[tuple[Measured, float | None]] = [
            (cell.row, cell.iops) for cells in self.cells.values() for cell in cells
        ]
        met: list[tuple[Measured, float | None]] = [(row, None) for row in confirming_rows()]
        return {name: r.as_dict() for name, r in measure_reach(fitted + met).items()}

    def summary(self) -> dict[str, Any]:
        """What stacks.fit.yaml records: the fit as a whole and its cross-validation."""
        shared = [p for p in self.result.params if p.startswith(f"{STACKS}.")]
        return {
            "fitted_parameters": len(self.result.params),
            "shared_stack_parameters": len(shared),
            "studies": {name: self.study_summary(name) for name in self.cells},
            "cross_validation": {
                h.label: round(h.iops_mape_pct, 2) if h.iops_mape_pct is not None else None
                for h in self.holdouts
            },
            "cross_validation_inside_95": {
                h.label: {"inside": h.inside, "cells": h.cells} for h in self.holdouts
            },
            "fitted_inside_95": dict(zip(("inside", "cells"), inside_count(self.fitted), strict=True)),
            "coverage_by_regime": by_regime(self.left_out),
        }

    def model_error(self) -> dict[str, Any]:
        """What stacks.fit.yaml records of the model's own error, which every projection's
        interval carries (models/core/uncertainty.py)."""
        return {
            "log_sigma": round(self.model_sigma, 4),
            "unpinned_log_sigma": round(self.unpinned_sigma, 4),
            "cells": len(self.fitted),
            "note": "the fitted cells' log IOPS misses beyond their parameters' spread;"
            " cross_validation_inside_95 checks it on cells no fit saw",
        }


def calibrate(
    names: list[str] | None,
    data: Path | None,
    cross_validate: bool = True,
    seed: int = 1,
    workers: int | None = None,
) -> Calibration:
    """Fit the stacks and the named studies (default: all) together, and score every cell.

    The cross-validation's splits are fits of their own, each as long as the
    joint one: they run in ``workers`` processes (default: one per core this
    process may use) while this one fits the joint model.  Each split's
    figures are what it gives alone, to the last bit: the same code on the same inputs.
    """
    studies = load_studies(names, data)
    task = joint_task(studies)
    count = len(holdouts(studies)) if cross_validate else 0
    with _pool(count, workers) as pool:
        pending = [pool.submit(_holdout_at, names, data, i, seed) for i in range(count)] if pool else []
        result = solve(task)
        cells = {s.name: evaluate(result.profiles[s.name], s.rows, seed) for s in studies}
        if pool:
            splits = [future.result() for future in pending]
        else:
            splits = [_holdout(studies, label, use, seed) for label, use in holdouts(studies)[:count]]
    splits = _cross_fitted(splits, {study_out(s.name) for s in studies})
    network = {name: [c for c in scored if c.row.point.networked] for name, scored in cells.items()}
    judged = bands(task, result, network)
    sigma = model_error(judged)
    fitted = tuple(replace(b, model_sigma=sigma) for b in judged)
    return Calibration(result, cells, splits, task.params.priors, fitted, sigma)


@contextlib.contextmanager
def _pool(tasks: int, workers: int | None) -> Iterator[ProcessPoolExecutor | None]:
    """Processes for ``tasks`` splits, one per core this process may use (or ``workers``); none
    where only one would run (one core, one split, or ``workers`` 1)."""
    wanted = min(tasks, workers if workers is not None else len(os.sched_getaffinity(0)))
    if wanted < 2:
        yield None
        return
    # spawn: fresh processes, without a copy of this one's threads (sanlab calibrate's progress
    # ticker), that are this one's children, so their CPU time is counted as its own.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=wanted, mp_context=context) as pool:
        yield pool


def _holdout_at(names: list[str] | None, data: Path | None, index: int, seed: int) -> Holdout:
    """Split ``index`` of ``holdouts``, in a worker: its studies loaded again (a split's rule,
    a closure, does not cross processes; its index does)."""
    studies = load_studies(names, data)
    label, use = holdouts(studies)[index]
    return _holdout(studies, label, use, seed)


def _cross_fitted(splits: list[Holdout], whole: set[str]) -> list[Holdout]:
    """The whole-study splits with their unpinned cells widened by what the other studies'
    unpinned cells showed (coverage.cross_fit); the other splits as they are."""
    chosen = [h for h in splits if h.label in whole]
    widened = dict(zip((h.label for h in chosen), cross_fit([h.bands for h in chosen]), strict=True))
    return [
        replace(h, bands=tuple(widened[h.label]), whole_study=True) if h.label in widened else h
        for h in splits
    ]


def _holdout(studies: list[Study], label: str, use: Use, seed: int) -> Holdout:
    task = joint_task(studies, use)
    held = solve(task)
    # The model's own error as this split's training cells alone show it: no unseen cell
    # widens its own interval.
    training = {s.name: [r for r in s.rows if use(r) and r.point.networked] for s in studies}
    trained = {name: evaluate(held.profiles[name], rows, seed) for name, rows in training.items()}
    sigma = model_error(bands(task, held, trained))
    # An unseen cell's hosts busier than any training cell's pay contention, as a projection past
    # the committed fit's busiest hosts does.
    held = reaching(held, busiest_hosts([c for group in trained.values() for c in group]))
    scored: dict[str, list[CellError]] = {}
    for study in studies:
        unseen = [r for r in study.rows if not use(r) and r.point.networked]
        scored[study.name] = evaluate(held.profiles[study.name], unseen, seed)
    cells = [c for group in scored.values() for c in group]
    errors = [c.iops_error for c in cells]
    worst = sorted(cells, key=lambda c: abs(c.iops_error), reverse=True)[:WORST_SHOWN]
    judged = bands(task, held, scored, pinned=regimes_of(trained))
    return Holdout(
        label,
        mape(errors),
        len(errors),
        tuple(held.unconstrained),
        tuple((c.row.label, c.iops_error) for c in worst),
        tuple(replace(b, model_sigma=sigma) for b in judged),
        sigma,
    )


def check_write(names: list[str] | None, cross_validate: bool = True) -> None:
    """Refuse to write a fit of only some studies (the stacks' costs belong to all of them), or
    one without its cross-validation (stacks.fit.yaml records it, and the READMEs quote it)."""
    if not cross_validate:
        raise SanlabError(
            "--write records the cross-validation figures that the READMEs quote: drop --no-cross-validate"
        )
    known = study_names()
    missing = sorted(set(known) - set(names or known))
    if missing:
        raise SanlabError(
            f"--write refits the stacks' costs, which every study shares: include {', '.join(missing)}"
        )


def write(done: Calibration) -> list[Path]:
    """Write stacks.fit.yaml and every study's NAME.fit.yaml, atomically; refuse a partial fit."""
    check_write(list(done.cells), cross_validate=bool(done.holdouts))
    stacks = {
        "reach": done.reach(),
        "model_error": done.model_error(),
        "regimes": regime_count(
            key_of(c.bottleneck, c.row.point.transport, c.row.point.rw) for c in network_cells(done)
        ),
        "posterior": _posterior(done.result),
        "busy_cores": busiest_hosts(network_cells(done)),
    }
    paths = [_write(fit_path(STACKS_FILE), STACKS, done, f"{STACKS}.", done.summary(), stacks)]
    for name in done.cells:
        paths.append(_write(fit_path(profile_path(name)), name, done, f"{name}.", done.study_summary(name)))
    clear_cache()
    clear_posterior()
    clear_reach()
    clear_regimes()
    return paths


def reaching(fit: Fit, busy: dict[str, float]) -> Fit:
    """``fit`` with its profiles' contention starting past ``busy`` cores on each side (what its
    training cells reached), where a fit being made has it start nowhere."""
    start = {"initiator_from": busy["initiator"], "target_from": busy["target"]}
    profiles = {
        name: p.model_copy(update={"contention": p.contention.model_copy(update=start)})
        for name, p in fit.profiles.items()
    }
    return replace(fit, profiles=profiles)


def busiest_hosts(cells: list[CellError]) -> dict[str, float]:
    """The most cores any fitted row's initiator and target kept busy: past them, each I/O pays for
    contention the fitted costs do not carry (costs.Contention, models/core/contention.py).
    Rounded up, to the hundredth stacks.fit.yaml keeps, so the busiest row is never past it."""
    return {
        side: math.ceil(100 * max(1.0, *(c.busy_cores.get(side, 0.0) for c in cells))) / 100 for side in SIDES
    }


def network_cells(done: Calibration) -> list[CellError]:
    """The joint fit's cells that crossed a network (the regimes it pins)."""
    return [c for cells in done.cells.values() for c in cells if c.row.point.networked]


class _Row(list[Any]):
    """A short list written on one line (an interval, a row of the covariance)."""


class _FitDumper(yaml.SafeDumper):
    """Block style, except that a _Row goes on one line."""


_FitDumper.add_representer(
    _Row, lambda dumper, row: dumper.represent_sequence("tag:yaml.org,2002:seq", row, flow_style=True)
)


def _posterior(result: Fit) -> dict[str, Any]:
    """Every fitted parameter's name and the posterior covariance of their logs (null: unseen),
    which projections use to say what the tables leave open (models/core/uncertainty.py)."""
    names = list(result.params)
    cov = result.covariance if result.covariance is not None else np.full((len(names), len(names)), np.nan)
    rows = [_Row(None if np.isnan(v) else float(f"{v:.4g}") for v in row) for row in cov]
    return {"names": names, "log_covariance": rows}


def _write(
    path: Path,
    label: str,
    done: Calibration,
    prefix: str,
    summary: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> Path:
    result = done.result

    def own(values: dict[str, Any]) -> dict[str, Any]:
        return {n[len(prefix) :]: v for n, v in values.items() if n.startswith(prefix)}

    document = {
        "profile": label,
        "written": datetime.date.today().isoformat(),
        "note": "written by 'sanlab calibrate --write' (one joint fit); do not edit by hand",
        "parameters": own(result.params),
        "intervals_95": own(
            {n: _Row([round(lo, 4), round(hi, 4)]) for n, (lo, hi) in result.intervals.items()}
        ),
        "not_pinned": own(result.unpinned),
        "result": summary,
    }
    document.update(extra or {})
    write_file(path, yaml.dump(document, Dumper=_FitDumper, sort_keys=False, width=100), what="fit")
    return path
