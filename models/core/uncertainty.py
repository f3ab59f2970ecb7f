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
beyond what their parameter spread admits (models/calibration/coverage.py) - and
records in stacks.fit.yaml.  No interval is zero wide, and the
cross-validation reports how often unseen published cells fall inside.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from sanlab.models.core import mva
from sanlab.models.core.contention import busier
from sanlab.models.core.network import Point, build
from sanlab.models.core.priors import load_priors
from sanlab.models.core.profile import Profile
from sanlab.models.core.profile_files import STACKS, STACKS_FILE, fit_path, profile_path, read_fit

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
    # The model's error where no fitted row shares a point's regime, as cross-validation measured
    # it on cells whose regime their split's training rows did not hold (0.0: not measured).
    unpinned_sigma: float = 0.0


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
    stacks = read_fit(fit_path(STACKS_FILE)) or {}
    posterior = stacks.get("posterior")
    if not posterior:
        return None
    names = list(posterior["names"])
    values = {f"{STACKS}.{k}": float(v) for k, v in stacks["parameters"].items()}
    for study in {n.split(".", 1)[0] for n in names} - {STACKS}:
        fitted = read_fit(fit_path(profile_path(study))) or {}
        values |= {f"{study}.{k}": float(v) for k, v in fitted.get("parameters", {}).items()}
    rows = [[math.nan if v is None else float(v) for v in row] for row in posterior["log_covariance"]]
    error = stacks.get("model_error") or {}
    model_sigma, unpinned = float(error.get("log_sigma", 0.0)), float(error.get("unpinned_log_sigma", 0.0))
    return Posterior(names, values, np.array(rows), model_sigma, unpinned)


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
    each target stack's cost joined with its transport's initiator (``costs``); a CPI
    (``paths.cpi.FAMILY``) reaches every side it prices (``StackCost.*_family``)."""
    if parts[0] == "application":
        return _scale(data["initiator"], "app_kcycles_per_io", fitted, factor)
    costs = data.get("costs", {})
    if parts[:2] == ["paths", "cpi"]:  # every side its family prices: path × CPI scales with it
        hits = [
            _scale(cost, f"{side}_kcycles_per_io", cost[f"{side}_kcycles_per_io"], factor)
            for cost in costs.values()
            for side in ("initiator", "target")
            if cost.get(f"{side}_family") == parts[2]
        ]
        return any(hits)
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


def unpinned_sigma() -> float:
    """The error cross-validation showed on points whose regime no training row shared (0.0:
    no posterior, or a fit written before it was measured)."""
    posterior = load_posterior()
    return 0.0 if posterior is None else posterior.unpinned_sigma


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


# --- The range: limits that could bind inside it, and physics the data leave open --------------


@dataclass(frozen=True)
class Solved:
    """One point's analytic answer as a range reads it: log IOPS (capped by the wire), and the
    log of the IOPS each limit allows it (the wire, the slot, the NIC's messages, each host's
    cores, the drive)."""

    log_iops: float
    limits: dict[str, float]  # desk (or "wire") -> log of the IOPS it allows


def solved(point: Point, profile: Profile) -> Solved:
    """The point's analytic IOPS and the cap each desk puts on it: its servers over its demand
    (the desks ``limits.caps`` groups by kind), and the wire's bound.  Desk by desk, not the
    lowest of each kind: a target's CPU above the initiator's, at a cost no row pins, can fall
    below it within what the data allow."""
    net = build(point, profile)
    iops = min(mva.solve(net).iops, net.bound_iops)
    limits = {
        s.name: math.log(s.servers / s.demand_us * 1e6 / net.split)
        for s in net.stations
        if s.kind == "queue" and s.demand_us > 0
    }
    if 0 < net.bound_iops < math.inf:
        limits["wire"] = math.log(net.bound_iops)
    return Solved(math.log(iops), limits)


@dataclass(frozen=True)
class Spread:
    """What a point's 95 % range is made of, in log IOPS, before the model's own error.

    ``sigma``: the parameters' spread at the point (gᵀ Σ g) with the solver's
    floor.  First order is blind at a kink: a point the wire bounds has no
    slope to a CPU cost, though a CPU cost the data allow could bind below
    the wire.  So each desk is a limit of its own (``limits``: its headroom,
    log capacity over the point's log IOPS, and its capacity's spread); where
    a limit's low end falls inside the range, the range reaches down to it.
    ``ceiling``: the wire's bound over the point, which no IOPS passes.
    ``shift_low``/``shift_high``: how far the physics candidates the data
    leave open move the point (``candidate_shifts``); where a fitted row
    shares the point's regime the fit chose among them, and only contention
    past the fitted rows' busiest hosts is left open.
    """

    sigma: float
    limits: tuple[tuple[float, float], ...] = ()
    ceiling: float = math.inf
    shift_low: float = 0.0
    shift_high: float = 0.0

    def half_widths(self, model_sigma: float) -> tuple[float, float]:
        """The range's log half-widths below and above the point, the model's own error counted
        in quadrature at the point and at each limit."""
        centre = Z95 * math.hypot(self.sigma, model_sigma)
        low = centre
        for headroom, sigma in self.limits:
            low = max(low, Z95 * math.hypot(sigma, model_sigma) - headroom)
        high = min(math.hypot(centre, self.shift_high), self.ceiling)
        return math.hypot(low, self.shift_low), max(0.0, high)


def spread_from(
    base: Solved,
    moved: Sequence[Solved | None],
    covariance: np.ndarray,
    log_iops: float | None = None,
    ceiling: float = math.inf,
) -> Spread:
    """A point's spread from its solution at the fit (``base``) and with each parameter stepped
    by ``STEP`` (``moved``, in the posterior's order; None where the parameter does not touch
    the point).  ``log_iops`` is the point's projected IOPS (the simulator's): the limits'
    headroom is over it."""
    centre = base.log_iops if log_iops is None else log_iops

    def sigma_of(read: Callable[[Solved], float]) -> float:
        start = read(base)
        slopes = np.array([0.0 if m is None else (read(m) - start) / STEP for m in moved])
        return math.hypot(spread(slopes, covariance), SOLVER_FLOOR)

    limits = tuple((cap - centre, sigma_of(_limit_reader(name, cap))) for name, cap in base.limits.items())
    return Spread(sigma_of(lambda s: s.log_iops), limits, ceiling)


def _limit_reader(name: str, cap: float) -> Callable[[Solved], float]:
    return lambda s: s.limits.get(name, cap)


def point_spread(point: Point, profile: Profile, posterior: Posterior, log_iops: float) -> Spread:
    """The spread of a projected point (``log_iops``: the simulator's) under the committed fit:
    one analytic solution per fitted parameter that touches its profile."""
    base_data = profile.model_dump(mode="json")
    moved: list[Solved | None] = []
    for name in posterior.names:
        data = copy.deepcopy(base_data)
        hit = touch(data, name, posterior.values[name], math.exp(STEP))
        moved.append(solved(point, Profile.model_validate(data)) if hit else None)
    return spread_from(solved(point, profile), moved, posterior.covariance, log_iops)


# Physics the published rows leave open, as alternatives to the profile's own figures: each
# field's values are set wherever the field sits in the profile's data (a profile without it is
# not moved), and every combination is tried.  Where no fitted row shares a point's regime the
# fit cannot have chosen among them, so the range spans them.
VARIANTS: dict[str, tuple[float, ...]] = {
    # Interrupt moderation off, or at mlx5e's default rx-usecs, 16 µs
    # (MLX5E_PARAMS_DEFAULT_RX_CQ_MODERATION_USEC, drivers/net/ethernet/mellanox/mlx5/core/en.h).
    "irq_coalesce_us": (0.0, 16.0),
    # A sleeping core woken from C1E rather than C1: 10 µs to exit it against 2 (intel_idle's
    # skx_cstates, drivers/idle/intel_idle.c; C1E's 20 µs target residency is shorter than the
    # wait of a QD 1 I/O, so the governor may take it between two).
    "wakeup_us": (10.0,),
}


def _set_everywhere(node: Any, field: str, value: float) -> bool:
    """Set ``field`` to ``value`` wherever it sits in ``node``; whether anything changed."""
    changed = False
    if isinstance(node, dict):
        for key, item in node.items():
            if key == field and isinstance(item, int | float) and not _same(item, value):
                node[key] = value
                changed = True
            else:
                changed = _set_everywhere(item, field, value) or changed
    elif isinstance(node, list):
        for item in node:
            changed = _set_everywhere(item, field, value) or changed
    return changed


def _set_prior(data: dict[str, Any], name: str, value: float) -> bool:
    """Set the field a prior names (``stacks.KEY.FIELD``, ``nics.NAME.FIELD``,
    ``backends.NAME.FIELD``) where the profile's data carry it; whether anything changed."""
    head, _, path = name.partition(".")
    key, _, field = path.rpartition(".")
    if head == STACKS and isinstance(data.get(key), dict) and field in data[key]:
        nodes = [data[key]]
    elif head == "nics":
        nodes = [n for n in data.get("nics", []) if n.get("name") == key]
    elif head == "backends":
        nodes = [data.get("backends", {}).get(key) or {}]
    else:
        return False
    changed = False
    for node in nodes:
        if isinstance(node.get(field), int | float) and not _same(node[field], value):
            node[field] = value
            changed = True
    return changed


def unfitted_priors(posterior: Posterior) -> dict[str, tuple[float, float]]:
    """The priors no fit takes (models/priors.yaml): the range a real machine could have, which no
    row narrowed - the data leave all of it open."""
    fitted = posterior.names
    return {
        name: prior.range
        for name, prior in load_priors().items()
        if not any(n == name or n.endswith(f".{name}") for n in fitted)
    }


# Physics no fitted row pins in any regime: contention past the busiest host a fitted row had
# (models/core/contention.py).  Every point whose hosts are busier than that spans its prior.
CONTENTION = "stacks.contention.cycles_per_busy_core"


def _alternatives(posterior: Posterior | None, pinned: bool) -> list[list[tuple[str, float]]]:
    """Each alternative to try: every combination of ``VARIANTS``, then each prior no fit takes at
    either end of its range (alone: its range is already a 95 % one); where a fitted row shares
    the point's regime (``pinned``), only contention's prior."""
    priors = unfitted_priors(posterior) if posterior is not None else {}
    if pinned:
        return [[(f"prior:{CONTENTION}", end)] for end in priors.get(CONTENTION, ())]
    choices = [[(field, v) for v in (None, *values)] for field, values in VARIANTS.items()]
    out = [[(f, v) for f, v in combo if v is not None] for combo in itertools.product(*choices)]
    out += [[(f"prior:{name}", end)] for name, ends in priors.items() for end in ends]
    return [alternative for alternative in out if alternative]


def past_fitted_busy_cores(point: Point, profile: Profile) -> bool:
    """Whether a host of the point keeps more cores busy than the fitted rows' busiest did."""
    net = build(point, profile)
    return bool(busier(net.busy_cores, net.fitted_busy_cores))


def candidate_shifts(point: Point, profile: Profile, pinned: bool = False) -> tuple[float, float]:
    """How far below and above the fitted model the physics candidates (every combination of
    ``VARIANTS``, and each prior no fit takes at its range's ends) put the point's analytic log
    IOPS: the spread of what the data leave open.  ``pinned``: a fitted row shares the point's
    regime, and only contention, which no row pins past its hosts' busy cores, is open."""
    if pinned and not past_fitted_busy_cores(point, profile):
        return 0.0, 0.0
    base = math.log(mva_iops(point, profile))
    data = profile.model_dump(mode="json")
    low = high = 0.0
    for alternative in _alternatives(load_posterior(), pinned):
        changed = copy.deepcopy(data)
        moved = [
            _set_prior(changed, field.removeprefix("prior:"), v)
            if field.startswith("prior:")
            else _set_everywhere(changed, field, v)
            for field, v in alternative
        ]
        if any(moved):
            shift = math.log(mva_iops(point, Profile.model_validate(changed))) - base
            low, high = max(low, -shift), max(high, shift)
    return low, high


@dataclass(frozen=True)
class Widths:
    """A range's log half-widths below and above the projected IOPS."""

    low: float
    high: float

    def around(self, iops: float, bound: float) -> tuple[float, float]:
        """The range about ``iops``, never past the wire's ``bound``."""
        return round(iops * math.exp(-self.low), 1), round(min(iops * math.exp(self.high), bound), 1)


def own_error(posterior: Posterior, fitted: bool | None) -> float:
    """The model's own error at a point: as the fitted rows measure it, and where none of them
    shares the point's regime, with the error cross-validation showed on such points too."""
    if fitted is False:
        return math.hypot(posterior.model_sigma, posterior.unpinned_sigma)
    return posterior.model_sigma


def widths(
    point: Point, profile: Profile, iops: float, fitted: bool | None, parameters: bool = True
) -> Widths | None:
    """The 95 % range's half-widths at a projected point (None: no posterior).  ``fitted``:
    whether a fitted row shares its regime (models/core/regimes.py); ``parameters``: whether to
    work out the parameters' term and the limits (a solve per parameter; sweeps do not)."""
    posterior = load_posterior()
    if posterior is None:
        return None
    error = own_error(posterior, fitted)
    if not parameters:
        half = Z95 * total_sigma(0.0, error)
        return Widths(half, half)
    spread = point_spread(point, profile, posterior, math.log(iops))
    low, high = candidate_shifts(point, profile, pinned=fitted is not False)
    spread = replace(spread, shift_low=low, shift_high=high)
    return Widths(*spread.half_widths(error))
