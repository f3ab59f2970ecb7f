"""Design-space sweeps: a grid of projection points, each solved on its own.

A sweep spec names ``axes`` (each an option of ``sanlab model`` with a list
of values), ``fixed`` options, and ``goals`` such as ``iops >= 2e6``.  The
grid is the cross product of the axes.  Every point is checked exactly as
``sanlab model`` checks its options; a combination the model does not cover
(iSCSI over RoCE, say) is skipped and counted with its reason, while a value
that is wrong on its own (``bs: 5q``) is an error before anything runs.

Each point carries a key (its coordinates as canonical JSON) and a seed
derived from that key, so a point's answer does not depend on which worker
solved it or in what order: serial, local-cluster and remote-cluster runs
give identical tables, and a resumed sweep recomputes nothing it has.

Solvers.  ``sim`` runs the SimPy model.  ``mva`` solves the same network by
mean value analysis in a fraction of a millisecond, but gives no p99.
``auto`` uses MVA where it agrees with simulation - one I/O in flight, or
one station clearly saturated - and simulates elsewhere (queues that form
near a change of bottleneck, where MVA's approximations drift), and
everywhere when a goal needs p99.  Every row says which solver made it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from sanlab.models.core.cores import load_cores
from sanlab.models.core.mva import Solution, solve
from sanlab.models.core.network import Network, Point, build
from sanlab.models.core.profile_files import profile_names
from sanlab.models.core.project import Figures, jobs, project_point, projected_record
from sanlab.models.core.simulate import Settings
from sanlab.models.core.uncertainty import without_parameters
from sanlab.models.sweeps.sweep_goals import Goal, parse_goal
from sanlab.scenarios.errors import Problem, SanlabError, ScenarioError
from sanlab.scenarios.invalid import problems_from, what_is_wrong
from sanlab.scenarios.loader import parse_scenario
from sanlab.scenarios.results.records import ResultRecord
from sanlab.scenarios.schema import Projection, Workload
from sanlab.scenarios.yamlfile import load_yaml

Solver = Literal["auto", "sim", "mva"]
# The options of `sanlab model` a sweep may vary: the schema's projection fields (their one
# home), less the label (a sweep names its own rows) and incast's initiators (not swept yet).
PROJECTION_KEYS = tuple(k for k in Projection.model_fields if k not in ("label", "initiators"))
WORKLOAD_KEYS = ("rw", "bs", "iodepth", "numjobs")
KEYS = PROJECTION_KEYS + WORKLOAD_KEYS
REQUIRED = ("transport", "rw", "bs", "iodepth", "numjobs")
# A sweep's grid: expanding a point checks it as 'sanlab model' would (about 50 µs), and each
# row is kept in memory; 200,000 points take about 10 s and a few hundred MB to expand.
MAX_POINTS = 200_000
EXPAND_STEP = 5_000  # points between two progress reports while expanding
REASON_CHARS = 160  # a skip reason, as counted and printed
# What a goal or a Pareto objective may name: the numeric fields of a row.
NUMERIC_METRICS = tuple(
    name
    for name, info in ResultRecord.model_fields.items()
    if {int, float} & set(get_args(info.annotation) or (info.annotation,)) and name != "seed"
) + ("sessions", "cores", "queues")
# auto trusts MVA with one I/O in flight (nothing ever queues, so its answer
# is exact), or when one station saturates while the next stays below this.
# Anywhere between, queues form and MVA's exponential assumption drifts from
# the simulated service times by a few per cent (measured: 4 % at 4 in flight).
CLEAR_SECOND = 0.8
SATURATED = 0.98


class SweepSpec(BaseModel):
    """A sweep file: axes, fixed options, goals, and which metrics make the Pareto front."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    axes: dict[str, list[Any]] = Field(min_length=1)
    fixed: dict[str, Any] = {}
    goals: list[str] = []
    pareto: dict[str, Literal["max", "min"]] = {"iops": "max", "link_gbps": "min", "cores": "min"}
    solver: Solver = "auto"
    seed: int = Field(1, ge=0, lt=2**32)

    @field_validator("axes", "fixed", mode="before")
    @classmethod
    def _option_names(cls, value: Any) -> Any:
        """`link-gbps` (as typed on the command line) and `link_gbps` are the same key; a
        section that gives both is refused naming both, never merged with one value lost."""
        if isinstance(value, dict):
            named: dict[str, Any] = {}
            spelled: dict[str, str] = {}
            for key, item in value.items():
                canonical = str(key).replace("-", "_")
                if canonical in spelled:
                    raise ValueError(f"{spelled[canonical]!r} and {key!r} are one option; give it once")
                spelled[canonical], named[canonical] = str(key), item
            return named
        return value


@dataclass(frozen=True)
class SweepPoint:
    key: str  # canonical JSON of the coordinates
    coords: dict[str, Any]
    seed: int


@dataclass(frozen=True)
class Grid:
    points: list[SweepPoint]
    skipped: dict[str, int]  # reason -> how many combinations
    goals: list[Goal]
    spec: SweepSpec

    @property
    def needs_p99(self) -> bool:
        return any(g.metric == "lat_p99_us" for g in self.goals)


def load_spec(path: Path) -> SweepSpec:
    source = str(path)
    data = load_yaml(path)
    if not isinstance(data, dict):
        raise ScenarioError(
            [Problem(source, "", "a sweep spec must be a YAML mapping (axes:, fixed:, goals:)")]
        )
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(problems_from(exc, source, SweepSpec)) from None
    _check_keys(spec, source)
    return spec


def _check_keys(spec: SweepSpec, source: str) -> None:
    problems = []
    for section, options in (("axes", spec.axes), ("fixed", spec.fixed)):
        for key, values in options.items():
            if key not in KEYS:
                problems.append(Problem(source, f"{section}.{key}", f"not an option (use {', '.join(KEYS)})"))
                continue
            for i, value in enumerate(values if section == "axes" else [values]):
                where = f"{section}.{key}[{i}]" if section == "axes" else f"{section}.{key}"
                problem = _value_problem(key, value)
                if problem:
                    problems.append(Problem(source, where, problem))
    both = set(spec.axes) & set(spec.fixed)
    problems += [Problem(source, f"fixed.{k}", "is also an axis; give it once") for k in sorted(both)]
    given = set(spec.axes) | set(spec.fixed)
    problems += [
        Problem(source, "axes", f"{k!r} is required (an axis or fixed)") for k in REQUIRED if k not in given
    ]
    numeric = f"is not a field of the results with a number (use one of {', '.join(NUMERIC_METRICS)})"
    for metric in spec.pareto:
        if metric not in NUMERIC_METRICS:
            problems.append(Problem(source, f"pareto.{metric}", numeric))
    for i, goal in enumerate(spec.goals):
        try:
            metric = parse_goal(goal).metric
        except ValueError as exc:
            problems.append(Problem(source, f"goals[{i}]", str(exc)))
            continue
        if metric not in NUMERIC_METRICS:
            problems.append(Problem(source, f"goals[{i}]", f"{metric!r} {numeric}"))
    if problems:
        raise ScenarioError(problems)


def _value_problem(key: str, value: Any) -> str | None:
    """Check one option value against the schema type ``sanlab model`` would use."""
    if key == "core" and value not in load_cores():
        return f"{value!r} is not a core design (use {', '.join(sorted(load_cores()))})"
    named = isinstance(value, str) and not value.endswith((".yaml", ".yml"))
    if key == "profile" and named and value not in profile_names():
        return f"{value!r} is not a profile (use {', '.join(profile_names())})"
    owner = Workload if key in WORKLOAD_KEYS else Projection
    field = owner.model_fields[key]
    checked: Any = Annotated[field.annotation, field]  # with its bounds (gt=0, le=800), not the bare type
    try:
        TypeAdapter(checked).validate_python([value] if key in WORKLOAD_KEYS else value)
    except ValidationError as exc:
        return what_is_wrong(exc)
    return None


def _key(coords: dict[str, Any]) -> str:
    return json.dumps(coords, sort_keys=True, separators=(",", ":"))


def point_seed(key: str, base: int) -> int:
    """A seed from the point's own coordinates: the same wherever and whenever it is solved."""
    digest = hashlib.sha256(f"{base}:{key}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def grid_size(spec: SweepSpec) -> int:
    return math.prod(len(values) for values in spec.axes.values())


def expand(spec: SweepSpec, progress: Callable[[int, int], None] = lambda done, total: None) -> Grid:
    """Every valid point of the grid, and what was skipped and why (``progress`` hears as it goes)."""
    names = list(spec.axes)
    total = grid_size(spec)
    if total > MAX_POINTS:
        raise ScenarioError([Problem("sweep", "axes", f"{total:,} points; at most {MAX_POINTS:,} per sweep")])
    points: list[SweepPoint] = []
    skipped: dict[str, int] = {}
    for done, combo in enumerate(itertools.product(*spec.axes.values())):
        if done % EXPAND_STEP == 0:
            progress(done, total)
        coords = dict(spec.fixed) | dict(zip(names, combo, strict=True))
        reason = _invalid(coords)
        if reason:
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        key = _key(coords)
        points.append(SweepPoint(key, coords, point_seed(key, spec.seed)))
    return Grid(points, skipped, [parse_goal(g) for g in spec.goals], spec)


def _invalid(coords: dict[str, Any]) -> str | None:
    """Why the model cannot take these coordinates (one short reason, to count), or None."""
    try:
        to_point(coords)
    except ScenarioError as exc:
        return _short_reason(exc.problems[0].message)
    return None


def _short_reason(message: str) -> str:
    """A reason to count points by: one line, the value-independent part first, bounded."""
    return message.splitlines()[0][:REASON_CHARS]


def to_point(coords: dict[str, Any]) -> Point:
    """The model's point for these coordinates, validated as `sanlab model` validates options."""
    projection = {k: coords[k] for k in PROJECTION_KEYS if k in coords}
    workload = {k: coords[k] for k in WORKLOAD_KEYS if k in coords}
    data = {"name": "sweep", "workloads": [workload], "projections": [projection]}
    scenario = parse_scenario(data, "sweep point")
    return next(iter(jobs(scenario))).point


def solve_point(point: SweepPoint, solver: Solver, needs_p99: bool) -> dict[str, Any]:
    """One row: the coordinates, the model's record, the solver used and the point's seed.

    A point the profile cannot build (a link speed no NIC of it carries) is
    a row with ``skipped`` and the reason: the sweep counts it, and goes on.
    """
    model_point = to_point(point.coords)
    try:
        net = build(model_point)
    except SanlabError as exc:
        return {"key": point.key, "skipped": _short_reason(str(exc))}
    solution = solve(net)
    if solver == "mva" or (solver == "auto" and not needs_p99 and _mva_trusted(net, solution)):
        record, used = _by_mva(model_point, net, solution, point.seed), "mva"
    else:
        record, used = project_point(model_point, Settings(seed=point.seed), parameter_range=False), "sim"
    row = {k: point.coords.get(k) for k in KEYS}
    row.update(record.model_dump(mode="json", exclude={"iops_ci95", "iops_range95"}))
    low, high = record.iops_ci95 or (None, None)
    row.update(key=point.key, solver=used, iops_ci95_low=low, iops_ci95_high=high)
    low, high = record.iops_range95 or (None, None)
    row.update(iops_range95_low=low, iops_range95_high=high)
    return row


def solve_many(points: list[SweepPoint], solver: Solver, needs_p99: bool) -> list[dict[str, Any]]:
    """A batch of points: one task for a worker, so scheduling costs less than the work."""
    return [solve_point(p, solver, needs_p99) for p in points]


def _mva_trusted(net: Network, solution: Solution) -> bool:
    if net.point.outstanding * net.split == 1:
        return True
    use = sorted(solution.utilisation.values(), reverse=True) + [0.0, 0.0]
    return use[0] >= SATURATED and use[1] <= CLEAR_SECOND


def _by_mva(point: Point, net: Network, solution: Solution, seed: int) -> ResultRecord:
    """The model's record from MVA: mean figures only (no p99, no interval)."""
    queues = (s for s in net.stations if s.kind == "queue")
    cpu = net.cpu_pct((s, solution.utilisation[s.name] * s.servers) for s in queues)
    iops = min(solution.iops, net.bound_iops)
    mean = point.outstanding / iops * 1e6 if iops else None
    figures = Figures(solution.iops, mean, None, cpu, solution.bottleneck)
    return projected_record(point, net, figures, seed, without_parameters())


def chunks(points: list[SweepPoint], size: int) -> Iterator[list[SweepPoint]]:
    for start in range(0, len(points), size):
        yield points[start : start + size]
