"""What the calibration leaves open, carried into a projection: an IOPS interval that means 95 %.

A projection's confidence interval from the simulator says how well the
simulation pinned the model's answer; it says nothing of how well the
published tables pinned the model.  This module does the second: the joint
fit's posterior covariance of its (log) parameters (stacks.fit.yaml) and
the projection's sensitivity to each parameter that touches it give, to
first order, the spread of log IOPS:  var = gᵀ Σ g.  Correlations matter:
the application's cost and an initiator's are fitted anti-correlated, and
their sum is far better known than either.

A parameter touches a profile where the profile carries its fitted value:
the stacks' costs (every shipped profile takes them), and a bench's NIC or
drive wherever another profile borrowed that part (``from:``, ``like:``).

Parameters are not all a projection can get wrong: the model's physics is
incomplete, and a bench differs from its profile in ways no parameter
names.  So the interval adds two terms in quadrature: the solver's floor
(the analytic solution against the simulator) and the model's own error,
which ``sanlab calibrate --write`` measures - the fitted cells' log misses
beyond what their parameter spread admits (models/coverage.py) - and
records in stacks.fit.yaml.  No interval is zero wide, and the
cross-validation reports how often unseen published cells fall inside.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from sanlab.models import mva
from sanlab.models.network import Point, build
from sanlab.models.profile import STACKS, STACKS_FILE, Profile, fit_path, profile_path
from sanlab.scenarios.loader import read_yaml

Z95 = 1.96  # a normal's 95 % two-sided quantile: every interval sanlab prints
STEP = 0.05  # log step of the finite differences (5 %)
# How closely the MVA solution the fit runs agrees with the simulator (relative
# IOPS; models/README.md, "Sweeps": MVA only where it is within a few per cent).
SOLVER_FLOOR = 0.03


@dataclass(frozen=True)
class Posterior:
    """The joint fit's parameters: names, fitted values and the covariance of their logs."""

    names: list[str]
    values: dict[str, float]
    covariance: np.ndarray
    # The model's own error: standard deviation of log IOPS that the fitted cells miss
    # by beyond the parameters' spread (0.0 in a fit written before it was measured).
    model_sigma: float = 0.0


_POSTERIOR: dict[str, Posterior | None] = {}


def load_posterior() -> Posterior | None:
    """The committed joint fit's posterior (None if stacks.fit.yaml has none)."""
    if "" not in _POSTERIOR:
        _POSTERIOR[""] = _read_posterior()
    return _POSTERIOR[""]


def clear_posterior() -> None:
    """Forget the loaded posterior (after ``sanlab calibrate --write`` rewrote it)."""
    _POSTERIOR.clear()


def _read_posterior() -> Posterior | None:
    stacks = read_yaml(fit_path(STACKS_FILE)) or {}
    posterior = stacks.get("posterior")
    if not posterior:
        return None
    names = list(posterior["names"])
    values = {f"{STACKS}.{k}": float(v) for k, v in stacks["parameters"].items()}
    for study in {n.split(".", 1)[0] for n in names} - {STACKS}:
        fitted = read_yaml(fit_path(profile_path(study))) or {}
        values |= {f"{study}.{k}": float(v) for k, v in fitted.get("parameters", {}).items()}
    rows = [[math.nan if v is None else float(v) for v in row] for row in posterior["log_covariance"]]
    model_sigma = float((stacks.get("model_error") or {}).get("log_sigma", 0.0))
    return Posterior(names, values, np.array(rows), model_sigma)


def _same(a: Any, b: float) -> bool:
    return isinstance(a, int | float) and abs(float(a) - b) <= 1e-6 * max(1.0, abs(b))


def _scale(node: dict[str, Any], key: str, fitted: float, factor: float) -> bool:
    if key in node and _same(node[key], fitted):
        node[key] = node[key] * factor
        return True
    return False


def touch(data: dict[str, Any], name: str, fitted: float, factor: float) -> bool:
    """Scale parameter ``name`` by ``factor`` where the profile's data carry its fitted value."""
    head, _, path = name.partition(".")
    parts = path.split(".")
    if head == STACKS:
        return _touch_stack(data, parts, fitted, factor)
    if parts[0] == "nics":
        hits = [_scale(nic, parts[-1], fitted, factor) for nic in data.get("nics", [])]
        return any(hits)
    if parts[0] == "backends":
        backend = data.get("backends", {}).get(parts[1])
        return isinstance(backend, dict) and _scale(backend, parts[-1], fitted, factor)
    return False


def _touch_stack(data: dict[str, Any], parts: list[str], fitted: float, factor: float) -> bool:
    """The stacks' costs as a profile holds them: the initiator's application cost, and
    each target stack's cost joined with its transport's initiator (``costs``)."""
    if parts[0] == "application":
        return _scale(data["initiator"], "app_kcycles_per_io", fitted, factor)
    costs = data.get("costs", {})
    if parts[0] == "initiators":
        transport, field = parts[1], f"initiator_{parts[2]}"
        hits = [_scale(c, field, fitted, factor) for k, c in costs.items() if k.split("/")[1] == transport]
        return any(hits)
    if parts[0] == "targets":
        key = ".".join(parts[1:-1])
        return key in costs and _scale(costs[key], f"target_{parts[-1]}", fitted, factor)
    return False


def mva_iops(point: Point, profile: Profile) -> float:
    """The analytic IOPS of ``point`` the fit runs, capped by the wire (whole requests:
    mva.solve already divides a split request's pieces back)."""
    net = build(point, profile)
    return min(mva.solve(net).iops, net.bound_iops)


def spread(slopes: np.ndarray, covariance: np.ndarray) -> float:
    """sqrt(gᵀ Σ g) over the parameters a projection moves with; a direction the fit is
    blind to (NaN: neither a cell nor a prior sees it) adds nothing."""
    used = (slopes != 0) & ~np.isnan(np.diag(covariance))
    if not used.any():
        return 0.0
    cov = covariance[np.ix_(used, used)]
    return float(math.sqrt(max(0.0, slopes[used] @ cov @ slopes[used])))


def total_sigma(parameter_sigma: float, model_sigma: float) -> float:
    """A projection's log-IOPS spread: its parameters', the solver's floor and the model's own
    error, in quadrature (independent sources), so never zero."""
    return math.sqrt(parameter_sigma**2 + SOLVER_FLOOR**2 + model_sigma**2)


def log_iops_sigma(point: Point, profile: Profile) -> float | None:
    """Standard deviation of the point's log IOPS, everything counted (None: no posterior)."""
    posterior = load_posterior()
    if posterior is None:
        return None
    return total_sigma(parameter_sigma(point, profile, posterior), posterior.model_sigma)


def without_parameters() -> float | None:
    """The spread of a projection whose parameter term is not worked out (a sweep's point,
    where it would cost a solve per fitted parameter): the floor and the model's error."""
    posterior = load_posterior()
    return None if posterior is None else total_sigma(0.0, posterior.model_sigma)


def parameter_sigma(point: Point, profile: Profile, posterior: Posterior) -> float:
    """Standard deviation of the point's log IOPS from what the tables leave open (gᵀ Σ g)."""
    base_data = profile.model_dump(mode="json")
    base = math.log(mva_iops(point, profile))
    slopes = np.zeros(len(posterior.names))
    for i, name in enumerate(posterior.names):
        data = copy.deepcopy(base_data)
        if touch(data, name, posterior.values[name], math.exp(STEP)):
            slopes[i] = (math.log(mva_iops(point, Profile.model_validate(data))) - base) / STEP
    return spread(slopes, posterior.covariance)
