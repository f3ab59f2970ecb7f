"""Fit a profile's physical parameters to a published table by least squares.

The parameters to fit are named in the profile (``calibration.fit``) with
the range a real machine could have: CPU cycles per I/O and per byte of each
stack, per-frame host cost and PCIe rate of each NIC, fixed latencies,
device rates.  Each is shared by every cell it touches - all block sizes,
reads and writes - so there are far fewer knobs than cells.  The fit
minimises log errors of IOPS (and of mean latency where published) using the
analytic MVA solution of the same network the simulator runs; cell errors
are then reported from the simulator itself.
"""

from __future__ import annotations

import copy
import datetime
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from scipy.optimize import least_squares

from sanlab.models import mva
from sanlab.models.metrics import mape
from sanlab.models.network import build
from sanlab.models.params import get_param, set_param
from sanlab.models.profile import Profile, clear_cache, fit_path, inherit, profile_path
from sanlab.models.published import Measured, calibration_dir, load_table
from sanlab.models.simulate import Settings, simulate
from sanlab.scenarios.errors import SanlabError

LATENCY_WEIGHT = 0.5
# How closely the MVA solution the fit runs agrees with the simulator (relative
# IOPS; models/README.md, "Sweeps": MVA only where it is within a few per cent).
SOLVER_FLOOR = 0.03


@dataclass(frozen=True)
class Fit:
    profile: Profile
    params: dict[str, float]
    unconstrained: list[str]
    at_bound: list[str]
    used: list[Measured]
    # 95 % intervals from the Jacobian; a parameter the cells do not pin spans its bounds.
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)


def fit_parameters(raw: dict[str, Any]) -> tuple[list[str], list[float], list[float]]:
    """Names and physical bounds of the parameters to fit.

    Each entry of ``calibration.fit`` is ``path: [low, high]``: the range a
    real machine could have, so the fit cannot explain a cell with an
    impossible value (a 100 ns NVMe read, a 1 Tb/s PCIe slot).
    """
    entries = raw.get("calibration", {}).get("fit") or {}
    if not isinstance(entries, dict) or not entries:
        raise SanlabError(f"profile {raw.get('name')}: calibration.fit must map parameters to [low, high]")
    names, lower, upper = [], [], []
    for name, bounds in entries.items():
        if not (isinstance(bounds, list) and len(bounds) == 2 and 0 < bounds[0] < bounds[1]):
            raise SanlabError(
                f"profile {raw.get('name')}: calibration.fit.{name}: {bounds!r} "
                "is not [low, high] with 0 < low < high"
            )
        get_param(raw, name)  # fails early, naming the path, if the profile lacks it
        names.append(name)
        lower.append(float(bounds[0]))
        upper.append(float(bounds[1]))
    return names, lower, upper


def residuals(profile: Profile, rows: Sequence[Measured]) -> np.ndarray:
    out = []
    for row in rows:
        sol = mva.solve(build(row.point, profile))
        out.append(math.log(sol.iops / row.iops))
        if row.lat_mean_us:
            out.append(LATENCY_WEIGHT * math.log(sol.latency_us / row.lat_mean_us))
    return np.array(out)


def fit(raw: dict[str, Any], rows: list[Measured], use: Callable[[Measured], bool] = lambda r: True) -> Fit:
    """Fit ``raw['calibration']['fit']`` on the rows ``use`` accepts."""
    names, lower, upper = fit_parameters(raw)
    used = [r for r in rows if use(r)]
    if not used:
        raise SanlabError(f"profile {raw.get('name')}: no rows to fit")
    start = [
        min(max(get_param(raw, n), lo * 1.0001), hi * 0.9999)
        for n, lo, hi in zip(names, lower, upper, strict=True)
    ]

    def model(x: np.ndarray) -> Profile:
        data = copy.deepcopy(raw)
        for name, value in zip(names, np.exp(x), strict=True):
            set_param(data, name, value)
        return Profile.model_validate(inherit(data, str(raw.get("name"))))

    result = least_squares(
        lambda x: residuals(model(x), used),
        np.log(start),
        bounds=(np.log(lower), np.log(upper)),
        diff_step=1e-3,
    )
    fitted = {n: round(float(v), 4) for n, v in zip(names, np.exp(result.x), strict=True)}
    base = residuals(model(result.x), used)
    unconstrained = []
    for i, name in enumerate(names):
        nudged = result.x.copy()
        nudged[i] += 0.1  # +10 %
        if np.max(np.abs(residuals(model(nudged), used) - base)) < 1e-9:
            unconstrained.append(name)
    at_bound = [
        n
        for n, v, lo, hi in zip(names, fitted.values(), lower, upper, strict=True)
        if v <= lo * 1.001 or v >= hi * 0.999
    ]
    # A parameter no training cell constrains takes the value of the sibling
    # the profile says it behaves like (calibration.like), if that one was fitted.
    x = result.x.copy()
    for name, sibling in (raw.get("calibration", {}).get("like") or {}).items():
        if name in unconstrained and sibling in names and sibling not in unconstrained:
            x[names.index(name)] = x[names.index(sibling)]
            fitted[name] = fitted[sibling]
    spread = _intervals(result, names, lower, upper, unconstrained)
    return Fit(model(x), fitted, unconstrained, at_bound, used, spread)


def _intervals(
    result: Any, names: list[str], lower: list[float], upper: list[float], unconstrained: list[str]
) -> dict[str, tuple[float, float]]:
    """95 % intervals in log space: residual variance times (JᵀJ)⁻¹, clipped to the bounds.

    The variance is at least SOLVER_FLOOR² a residual, because the fit runs
    the analytic MVA solution, which agrees with the simulator only that
    closely; a direction of parameter space the cells do not see (two
    costs only whose sum matters, say) leaves its parameters their whole
    physical range.
    """
    jac, residual = np.asarray(result.jac), np.asarray(result.fun)
    dof = max(1, len(residual) - len(names))
    variance = max(float(residual @ residual) / dof, SOLVER_FLOOR**2)
    _, singular, vt = np.linalg.svd(jac, full_matrices=False)
    seen = singular > singular.max() * 1e-6 if singular.size else singular > 0
    sigma = np.sqrt(variance * np.sum((vt[seen] ** 2) / (singular[seen, None] ** 2), axis=0))
    blind = np.sum(vt[~seen] ** 2, axis=0) > 1e-6  # has a part the cells cannot see
    spread = {}
    for i, name in enumerate(names):
        if name in unconstrained or blind[i]:
            spread[name] = (lower[i], upper[i])
            continue
        low = max(math.log(lower[i]), result.x[i] - 1.96 * sigma[i])
        high = min(math.log(upper[i]), result.x[i] + 1.96 * sigma[i])
        spread[name] = (math.exp(low), math.exp(high))
    return spread


@dataclass(frozen=True)
class CellError:
    row: Measured
    iops: float
    lat_mean_us: float
    bottleneck: str

    @property
    def iops_error(self) -> float:
        return self.iops / self.row.iops - 1

    @property
    def latency_error(self) -> float | None:
        return self.lat_mean_us / self.row.lat_mean_us - 1 if self.row.lat_mean_us else None


def evaluate(profile: Profile, rows: Sequence[Measured], seed: int = 1) -> list[CellError]:
    """Errors of every cell, from the simulator (not the MVA used to fit)."""
    cells = []
    for row in rows:
        net = build(row.point, profile)
        sim = simulate(net, Settings(seed=seed))
        iops = min(sim.iops, net.bound_iops)
        cells.append(CellError(row, iops, sim.lat_mean_us, sim.bottleneck))
    return cells


def holdouts(rows: Sequence[Measured]) -> list[tuple[str, Callable[[Measured], bool]]]:
    """Cross-validation splits: reads predict writes; lower link speeds predict the highest."""
    splits: list[tuple[str, Callable[[Measured], bool]]] = [
        ("fit on reads, predict writes", lambda r: "read" in r.point.rw)
    ]
    speeds = sorted({r.point.link_gbps for r in rows if r.point.transport != "local"})
    if len(speeds) > 1:
        top = speeds[-1]
        splits.append((f"fit without the {top:g} Gb/s cells, predict them", _not_at(top)))
    return splits


def _not_at(gbps: float) -> Callable[[Measured], bool]:
    return lambda row: row.point.link_gbps != gbps


def load_raw(name: str) -> dict[str, Any]:
    path = Path(name) if Path(name).suffix else profile_path(name)
    if not path.is_file():
        raise SanlabError(f"{path}: no such profile")
    raw = yaml.safe_load(path.read_text())
    if not isinstance(raw, dict):
        raise SanlabError(f"{path}: a profile must be a YAML mapping")
    return raw


def table_for(raw: dict[str, Any], data_dir: str | Path | None) -> list[Measured]:
    table = raw.get("calibration", {}).get("data")
    if not table:
        raise SanlabError(f"profile {raw.get('name')}: calibration.data names no table")
    return load_table(calibration_dir(data_dir) / table, raw["name"])


def write_fit(name: str, result: Fit, summary: dict[str, Any]) -> Path:
    """Write NAME.fit.yaml beside the hand-written profile, atomically."""
    path = fit_path(profile_path(name))
    document = {
        "profile": name,
        "written": datetime.date.today().isoformat(),
        "note": "written by 'sanlab calibrate --write'; do not edit by hand",
        "parameters": result.params,
        "result": summary,
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(document, sort_keys=False, width=100))
    tmp.replace(path)
    clear_cache()
    return path


@dataclass(frozen=True)
class Holdout:
    """One cross-validation split: fitted without some cells, scored on them."""

    label: str
    iops_mape_pct: float | None
    cells: int
    unconstrained: tuple[str, ...]  # parameters no training cell constrained


@dataclass(frozen=True)
class Calibration:
    """A profile fitted to its published table, every cell's error, and the cross-validation."""

    name: str
    result: Fit
    cells: list[CellError]
    holdouts: list[Holdout]

    @property
    def network(self) -> list[CellError]:
        """The cells that cross a network (not the device measured alone)."""
        return [c for c in self.cells if c.row.point.transport != "local"]

    def summary(self) -> dict[str, Any]:
        """What NAME.fit.yaml records of the fit and the README quotes."""
        iops = mape([c.iops_error for c in self.network])
        lat = mape([c.latency_error for c in self.network])
        summary: dict[str, Any] = {
            "fitted_parameters": len(self.result.params),
            "cells": len(self.cells),
            "network_cells": len(self.network),
            "iops_mape_pct": round(iops, 2) if iops is not None else None,
        }
        if lat is not None:
            summary["lat_mape_pct"] = round(lat, 2)
        if self.holdouts:
            summary["cross_validation"] = {
                h.label: round(h.iops_mape_pct, 2) if h.iops_mape_pct is not None else None
                for h in self.holdouts
            }
        return summary


def calibrate_profile(
    name: str, data: Path | None, cross_validate: bool = True, seed: int = 1
) -> Calibration:
    """Fit profile ``name`` to its table (in ``data`` or the default folder) and score it."""
    raw = load_raw(name)
    rows = table_for(raw, data)
    result = fit(raw, rows)
    cells = evaluate(result.profile, rows, seed)
    splits = []
    for label, use in holdouts(rows) if cross_validate else []:
        held = fit(raw, rows, use)
        unseen = [r for r in rows if not use(r) and r.point.transport != "local"]
        score = mape([c.iops_error for c in evaluate(held.profile, unseen, seed)])
        splits.append(Holdout(label, score, len(unseen), tuple(held.unconstrained)))
    return Calibration(name, result, cells, splits)
