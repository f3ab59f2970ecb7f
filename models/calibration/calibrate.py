"""Fit physical parameters to measured cells: maximum a posteriori least squares.

The parameters to fit are named in a document's ``calibration.fit`` (a
profile's hardware, or the software stacks' costs) and each has a prior:
a value and the range a real machine could have (models/priors.yaml).
Each is shared by every cell it touches - all block sizes, reads and
writes - so there are far fewer knobs than cells.  The fit minimises log
errors of IOPS (and of mean latency where published) using the analytic
MVA solution of the same network the simulator runs, plus one term per
prior; cell errors are then reported from the simulator itself.  A fit of
one profile (``fit``, used for the user's own runs) and the joint fit of
the published benches (``calibrate_studies``) share ``solve``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from sanlab.models.core import mva
from sanlab.models.core.network import Network, build
from sanlab.models.core.params import get_param, set_param
from sanlab.models.core.priors import PRIOR_WEIGHT, Prior, load_priors
from sanlab.models.core.profile import Profile
from sanlab.models.core.profile_files import inherit, load_stacks, profile_path, sets_own_app, with_stacks
from sanlab.models.core.published import Measured, calibration_dir, load_table
from sanlab.models.core.simulate import Settings, simulate
from sanlab.models.core.uncertainty import SOLVER_FLOOR, Z95
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.loader import read_yaml

LATENCY_WEIGHT = 0.5
# A published CPU figure weighs as a latency does.  Tables give whole per
# cents, so figures under CPU_MIN_PCT (rounding alone is 17 % there) are not fitted.
CPU_WEIGHT = 0.5
CPU_MIN_PCT = 3.0
# Profiles whose residuals a fit keeps (Task._residuals_of): a Jacobian's worth for each bench.
SEEN_PROFILES = 256
# A posterior interval at least this share of the prior's 95 % width says
# the cells taught the fit little about that parameter.
PRIOR_WIDTH_SHARE = 0.8


@dataclass(frozen=True)
class Fit:
    profiles: dict[str, Profile]  # by name, as fitted
    params: dict[str, float]
    unconstrained: list[str]
    at_bound: list[str]
    used: list[Measured]
    # 95 % intervals (posterior: the cells and the priors together).
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    # Parameters the data do not pin, and why: no cell moves it, it sits at
    # a bound, or its interval is about as wide as its prior's.
    unpinned: dict[str, str] = field(default_factory=dict)
    # Posterior covariance of the log parameters, in ``params`` order; a
    # direction nothing sees (no cell, no prior) is left out (NaN on its rows).
    covariance: np.ndarray | None = None

    @property
    def profile(self) -> Profile:
        """The fitted profile, when one profile was fitted."""
        (only,) = self.profiles.values()
        return only


@dataclass(frozen=True)
class Parameters:
    """The parameters one fit moves: paths into the fitted document, physical bounds, priors."""

    names: list[str]
    lower: list[float]
    upper: list[float]
    priors: dict[str, Prior]

    def __add__(self, other: Parameters) -> Parameters:
        return Parameters(
            self.names + other.names,
            self.lower + other.lower,
            self.upper + other.upper,
            self.priors | other.priors,
        )

    def prior_residuals(self, x: np.ndarray) -> list[float]:
        """The priors' terms of the residual vector at log values ``x`` (MAP, not plain least squares)."""
        return [
            self.priors[n].residual(float(v)) for n, v in zip(self.names, x, strict=True) if n in self.priors
        ]


def fit_parameters(
    raw: dict[str, Any], priors: dict[str, Prior] | None = None, prefix: str = "", prior_prefix: str = ""
) -> Parameters:
    """Names, physical bounds and priors of the parameters ``raw`` lists under ``calibration.fit``.

    A shipped document lists parameter paths, each of which must have a
    prior (models/priors.yaml, under ``prior_prefix + path``: value, range,
    unit, source).  A profile fitted to the user's own runs may instead map
    a path to ``[low, high]``: a flat prior over the range a real machine
    could have, so the fit cannot explain a cell with an impossible value
    (a 100 ns NVMe read, a 1 Tb/s PCIe slot).  ``prefix`` places the
    document inside a larger one (a joint fit).
    """
    entries = raw.get("calibration", {}).get("fit") or {}
    where = f"{raw.get('name', 'stacks')}: calibration.fit"
    if raw.get("calibration", {}).get("fit") == []:
        return Parameters([], [], [], {})  # a table that pins only what other documents fit
    if not isinstance(entries, dict | list) or not entries:
        raise SanlabError(f"{where} must list parameters (or map them to [low, high])")
    known = load_priors() if priors is None else priors
    out = Parameters([], [], [], {})
    for path in entries:
        bounds = entries[path] if isinstance(entries, dict) else None
        if bounds is None:
            prior = known.get(prior_prefix + path)
            if prior is None:
                raise SanlabError(
                    f"{where}: {path!r} has no prior in models/priors.yaml (add one with its source)"
                )
            out.priors[prefix + path] = prior
            bounds = list(prior.range)
        if not (isinstance(bounds, list) and len(bounds) == 2 and 0 < bounds[0] < bounds[1]):
            raise SanlabError(f"{where}.{path}: {bounds!r} is not [low, high] with 0 < low < high")
        get_param(raw, path)  # fails early, naming the path, if the document lacks it
        out.names.append(prefix + path)
        out.lower.append(float(bounds[0]))
        out.upper.append(float(bounds[1]))
    return out


@dataclass(frozen=True)
class Correction:
    """The simulator's figures over the analytic solution's at one cell (models/calibration/calibrate_sim.py):
    multiplied into the MVA's, they make the fit answer to the simulator that projects."""

    iops: float = 1.0
    latency: float = 1.0
    cpu: float = 1.0


NO_CORRECTION = Correction()


def residuals(
    profile: Profile, rows: Sequence[Measured], corrections: Mapping[int, Correction] | None = None
) -> np.ndarray:
    """Each cell's log misses (IOPS, and latency and CPU where published), from the MVA
    solution - times the cell's correction towards the simulator, where one is given (by
    ``id`` of the row)."""
    out = []
    side = cpu_side(profile)
    for row in rows:
        net = build(row.point, profile)
        sol = mva.solve(net)
        c = (corrections or {}).get(id(row), NO_CORRECTION)
        out.append(math.log(c.iops * sol.iops / row.iops))
        if row.lat_mean_us:
            out.append(LATENCY_WEIGHT * math.log(c.latency * sol.latency_us / row.lat_mean_us))
        if side and uses_cpu(row):
            busy = c.cpu * max(busy_pct(net, sol, side), 1e-6)
            out.append(CPU_WEIGHT * math.log(busy / float(row.cpu_pct or 1)))
    return np.array(out)


def cpu_side(profile: Profile) -> str:
    """Whose CPU a table's ``cpu_pct`` column measures (the profile's ``calibration.cpu``), or ''."""
    side = str(profile.calibration.get("cpu", ""))
    if side not in ("", "initiator", "target"):
        raise SanlabError(f"profile {profile.name}: calibration.cpu is {side!r} (use initiator or target)")
    return side


def uses_cpu(row: Measured) -> bool:
    """Whether a cell's published CPU figure says anything: whole per cents, so only from a few up."""
    return row.cpu_pct is not None and row.cpu_pct >= CPU_MIN_PCT and row.point.networked


def busy_pct(net: Network, sol: mva.Solution, side: str) -> float:
    """Per cent of ``side``'s cores busy in the MVA solution (as the simulator counts CPU %)."""
    per_us = sol.iops * net.split / 1e6
    return net.cpu_pct((s, per_us * s.demand_us) for s in net.stations if s.kind == "queue")[side]


Realise = Callable[[dict[str, Any]], dict[str, Profile]]


@dataclass(frozen=True)
class Task:
    """What one fit needs: the document the parameters live in, how it becomes profiles, the cells.

    ``rows`` maps a profile's name (a key of what ``realise`` returns) to
    the cells that profile must reproduce; ``like`` names, for a parameter
    no cell moves, the sibling whose fitted value it then takes.
    """

    document: dict[str, Any]
    params: Parameters
    realise: Realise
    rows: dict[str, list[Measured]]
    like: dict[str, str] = field(default_factory=dict)
    # Per cell (by ``id`` of the row): the simulator's figures over the MVA's (calibrate_sim).
    corrections: dict[int, Correction] = field(default_factory=dict)
    # A profile's residuals by its name and every value it holds (``_residuals_of``).
    _seen: dict[tuple[str, str], np.ndarray] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def profiles(self, x: np.ndarray) -> dict[str, Profile]:
        data = copy.deepcopy(self.document)
        for name, value in zip(self.params.names, np.exp(x), strict=True):
            set_param(data, name, value)
        return self.realise(data)

    def data_residuals(self, x: np.ndarray) -> np.ndarray:
        built = self.profiles(x)
        parts = [self._residuals_of(name, built[name], rows) for name, rows in self.rows.items() if rows]
        return np.concatenate(parts) if parts else np.array([])

    def _residuals_of(self, name: str, profile: Profile, rows: list[Measured]) -> np.ndarray:
        """``residuals``, computed once per profile as built: a step of one bench's parameter
        (a column of the fit's Jacobian) leaves the other benches' profiles as they were, and
        their cells' residuals with them.  The key is every value the profile holds."""
        key = (name, profile.model_dump_json())
        if key not in self._seen:
            if len(self._seen) >= SEEN_PROFILES:
                del self._seen[next(iter(self._seen))]  # the oldest
            self._seen[key] = residuals(profile, rows, self.corrections)
        return self._seen[key]


def solve(task: Task) -> Fit:
    """The maximum a posteriori fit of ``task``: cells and priors together."""
    params = task.params
    names, lower, upper = params.names, params.lower, params.upper
    used = [r for rows in task.rows.values() for r in rows]
    if not used:
        raise SanlabError("no rows to fit")
    start = [
        min(max(get_param(task.document, n), lo * 1.0001), hi * 0.9999)
        for n, lo, hi in zip(names, lower, upper, strict=True)
    ]
    result = least_squares(
        lambda x: np.concatenate([task.data_residuals(x), params.prior_residuals(x)]),
        np.log(start),
        bounds=(np.log(lower), np.log(upper)),
        diff_step=1e-3,
    )
    fitted = {n: round(float(v), 4) for n, v in zip(names, np.exp(result.x), strict=True)}
    unconstrained = _unmoved(result.x, names, task.data_residuals)
    at_bound = [
        n
        for n, v, lo, hi in zip(names, fitted.values(), lower, upper, strict=True)
        if v <= lo * 1.001 or v >= hi * 0.999
    ]
    # A parameter no training cell constrains takes the value of the sibling
    # it is declared to behave like (calibration.like), if that one was fitted.
    x = result.x.copy()
    for name, sibling in task.like.items():
        if name in unconstrained and sibling in names and sibling not in unconstrained:
            x[names.index(name)] = x[names.index(sibling)]
            fitted[name] = fitted[sibling]
    covariance = _covariance(result, len(result.fun) - len(params.prior_residuals(result.x)))
    spread = _intervals(result, params, unconstrained, covariance)
    unpinned = _unpinned(params, spread, unconstrained, at_bound)
    return Fit(task.profiles(x), fitted, unconstrained, at_bound, used, spread, unpinned, covariance)


def fit(raw: dict[str, Any], rows: list[Measured], use: Callable[[Measured], bool] = lambda r: True) -> Fit:
    """Fit one profile's ``calibration.fit`` on the rows ``use`` accepts, the stacks' costs held."""
    return solve(profile_task(raw, rows, use))


def profile_task(
    raw: dict[str, Any], rows: list[Measured], use: Callable[[Measured], bool] = lambda r: True
) -> Task:
    """The fit of one profile's ``calibration.fit`` on the rows ``use`` accepts, stacks held."""
    name = str(raw.get("name"))

    def realise(data: dict[str, Any]) -> dict[str, Profile]:
        resolved = with_stacks(inherit(data, name), load_stacks(), sets_own_app(data))
        return {name: Profile.model_validate(resolved)}

    like = raw.get("calibration", {}).get("like") or {}
    return Task(raw, fit_parameters(raw), realise, {name: [r for r in rows if use(r)]}, like)


def _unmoved(
    x: np.ndarray, names: list[str], data_residuals: Callable[[np.ndarray], np.ndarray]
) -> list[str]:
    """Parameters that no cell responds to: a 10 % change moves no residual at all."""
    base = data_residuals(x)
    unmoved = []
    for i, name in enumerate(names):
        nudged = x.copy()
        nudged[i] += 0.1
        if np.max(np.abs(data_residuals(nudged) - base)) < 1e-9:
            unmoved.append(name)
    return unmoved


def _unpinned(
    params: Parameters, spread: dict[str, tuple[float, float]], unconstrained: list[str], at_bound: list[str]
) -> dict[str, str]:
    """Why each parameter the data do not pin is not pinned (absent: it is pinned)."""
    reasons = {}
    for name, low, high in zip(params.names, params.lower, params.upper, strict=True):
        width = math.log(spread[name][1] / spread[name][0])
        prior = params.priors.get(name)
        if name in unconstrained:
            reasons[name] = "no cell moves it"
        elif name in at_bound:
            reasons[name] = "at a bound of its range"
        elif prior is not None and width >= PRIOR_WIDTH_SHARE * 2 * Z95 * prior.sigma:
            reasons[name] = "its interval is as wide as its prior's"
        elif prior is None and width >= PRIOR_WIDTH_SHARE * math.log(high / low):
            reasons[name] = "its interval spans its range"
    return reasons


def _covariance(result: Any, data_rows: int) -> np.ndarray:
    """Posterior covariance of the log parameters: the inverse of the cells' and priors' information.

    The cells' information is their Jacobian over the residual variance (at
    least SOLVER_FLOOR² a cell: the fit runs the analytic MVA solution,
    which agrees with the simulator only that closely); the priors' is
    theirs over PRIOR_WEIGHT².  A direction neither sees (a parameter
    without a prior that only matters summed with another, say) has no
    finite variance: its parameters' rows and columns are NaN.
    """
    jac, residual = np.asarray(result.jac), np.asarray(result.fun)
    dof = max(1, data_rows - jac.shape[1])
    variance = max(float(residual[:data_rows] @ residual[:data_rows]) / dof, SOLVER_FLOOR**2)
    data_jac, prior_jac = jac[:data_rows], jac[data_rows:]
    information = data_jac.T @ data_jac / variance + prior_jac.T @ prior_jac / PRIOR_WEIGHT**2
    values, vectors = np.linalg.eigh(information)
    seen = values > max(float(values.max()), 1e-300) * 1e-9
    covariance = (vectors[:, seen] / values[seen]) @ vectors[:, seen].T
    blind = np.sum(vectors[:, ~seen] ** 2, axis=1) > 1e-6
    covariance[blind, :] = np.nan
    covariance[:, blind] = np.nan
    return covariance


def _intervals(
    result: Any, params: Parameters, unconstrained: list[str], covariance: np.ndarray
) -> dict[str, tuple[float, float]]:
    """95 % posterior intervals, clipped to the bounds; a blind parameter spans its whole range."""
    spread = {}
    for i, name in enumerate(params.names):
        sigma = float(np.sqrt(covariance[i, i]))
        if math.isnan(sigma) or (name in unconstrained and name not in params.priors):
            spread[name] = (params.lower[i], params.upper[i])
            continue
        low = max(math.log(params.lower[i]), result.x[i] - Z95 * sigma)
        high = min(math.log(params.upper[i]), result.x[i] + Z95 * sigma)
        spread[name] = (math.exp(low), math.exp(high))
    return spread


@dataclass(frozen=True)
class CellError:
    row: Measured
    iops: float
    lat_mean_us: float
    bottleneck: str
    # The simulator's CPU % of the side the table measured, where its figure is fitted.
    cpu_pct: float | None = None
    # Cores each host keeps busy before contention (Network.busy_cores): what the fit reached.
    busy_cores: Mapping[str, float] = field(default_factory=dict)

    @property
    def iops_error(self) -> float:
        return self.iops / self.row.iops - 1

    @property
    def latency_error(self) -> float | None:
        return self.lat_mean_us / self.row.lat_mean_us - 1 if self.row.lat_mean_us else None

    @property
    def cpu_error(self) -> float | None:
        return self.cpu_pct / self.row.cpu_pct - 1 if self.cpu_pct is not None and self.row.cpu_pct else None


def evaluate(profile: Profile, rows: Sequence[Measured], seed: int = 1) -> list[CellError]:
    """Errors of every cell, from the simulator (not the MVA used to fit)."""
    cells = []
    side = cpu_side(profile)
    for row in rows:
        net = build(row.point, profile)
        sim = simulate(net, Settings(seed=seed))
        iops = min(sim.iops, net.bound_iops)
        cpu = float(sim.cpu_pct[side]) if side and uses_cpu(row) else None
        cells.append(CellError(row, iops, sim.lat_mean_us, sim.bottleneck, cpu, net.busy_cores))
    return cells


def load_raw(name: str) -> dict[str, Any]:
    path = Path(name) if Path(name).suffix else profile_path(name)
    if not path.is_file():
        raise SanlabError(f"{path}: no such profile")
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise SanlabError(f"{path}: a profile must be a YAML mapping")
    return raw


def table_for(raw: dict[str, Any], data_dir: str | Path | None) -> list[Measured]:
    calibration = raw.get("calibration") or {}
    table = calibration.get("data") if isinstance(calibration, dict) else None
    if not isinstance(table, str) or not table or "/" in table or table.startswith("."):
        raise SanlabError(
            f"profile {raw.get('name')}: calibration.data: {table!r} names no table (give a file name)"
        )
    name = raw.get("name")
    if not isinstance(name, str):
        raise SanlabError(f"profile {name!r}: name: give the profile's name as text")
    return load_table(calibration_dir(data_dir) / table, name, calibration.get("select"))
