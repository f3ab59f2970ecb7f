"""Scenario in, projected result records out.

A scenario's projections name hardware set-ups; its workloads name fio
matrices.  Every (projection x workload point) becomes a ``Point``, the
network is built from the profile, the simulator runs it, and the answer is
a ``ResultRecord`` with ``mode: projected`` - the same shape an emulated run
produces, so the two can be set side by side.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields

from sanlab.models.core.contention import past_fitted
from sanlab.models.core.machine import point_facts
from sanlab.models.core.network import Network, Point, build
from sanlab.models.core.profile_files import load_profile
from sanlab.models.core.reach import past
from sanlab.models.core.regimes import key_of, kind_of, pinned
from sanlab.models.core.simulate import Settings, simulate
from sanlab.models.core.uncertainty import Z95, Widths, unpinned_sigma, widths
from sanlab.scenarios.errors import Problem, SanlabError, ScenarioError
from sanlab.scenarios.registry import DEFAULT_RDMA_FABRIC, FABRICS, PLAIN_FABRIC, TRANSPORTS
from sanlab.scenarios.results.records import ResultRecord
from sanlab.scenarios.schema import DEFAULT_PROFILE, Projection, Scenario
from sanlab.scenarios.semantics import fabric_problem

# What a projection hands its points as it is: every field the model's Point shares with the
# schema's Projection (their one home), less those ``jobs`` works out (a projection may leave
# them unset and take them from the scenario's topology or the profile).
WORKED_OUT = ("transport", "fabric", "link_gbps", "initiators")
CARRIED = tuple(
    f.name for f in fields(Point) if f.name in Projection.model_fields and f.name not in WORKED_OUT
)
# The most points one ``sanlab model`` projects: a simulated point takes 0.05-0.3 s on one core,
# so this is under a minute for most.  A larger grid is a sweep's: all cores, resumable, MVA where exact.
MAX_MODEL_POINTS = 256


@dataclass(frozen=True)
class Job:
    """One point to project and the projection it came from (for labels)."""

    point: Point
    label: str


def _fabric(transport: str, projection: Projection, scenario: Scenario) -> str:
    if projection.fabric:
        return projection.fabric
    if not TRANSPORTS[transport].rdma:
        return PLAIN_FABRIC.name
    for placed in scenario.plan.targets:
        link = placed.link.link if placed.link else None
        if placed.target.transport == transport and link and FABRICS[link.fabric].rdma:
            return link.fabric
    return DEFAULT_RDMA_FABRIC.name


def _link_gbps(profile_name: str, fabric: str, projection: Projection) -> float:
    if projection.link_gbps:
        return projection.link_gbps
    nics = [n for n in load_profile(profile_name).nics if fabric in n.fabrics]
    return max(max(n.link_gbps) for n in nics) if nics else 100.0


def _setups(scenario: Scenario) -> Iterator[tuple[int, Projection, str]]:
    """Each (projection, transport) a scenario projects: a projection without a transport
    takes every transport its targets declare."""
    projections = scenario.projections or [Projection(profile=DEFAULT_PROFILE)]
    declared = list(dict.fromkeys(t.transport for t in scenario.targets))
    for index, projection in enumerate(projections):
        for transport in [projection.transport] if projection.transport else declared:
            yield index, projection, transport


def point_count(scenario: Scenario) -> int:
    """How many points ``jobs`` yields, from the lists' lengths, without building one."""
    return sum(
        len(w.rw) * len(w.bs) * len(w.iodepth) * len(w.numjobs)
        for _, _, transport in _setups(scenario)
        for w in scenario.workloads
        if not w.transports or transport in w.transports
    )


def check_size(scenario: Scenario, source: str) -> int:
    """The scenario's point count, refused past ``MAX_MODEL_POINTS`` before any is projected."""
    count = point_count(scenario)
    if count > MAX_MODEL_POINTS:
        raise SanlabError(
            f"{source}: {count:,} points to project (projections x transports x workload points); "
            f"at most {MAX_MODEL_POINTS:,} per 'sanlab model': project more with "
            "'sanlab sweep SPEC --out DIR' (every core, resumable)"
        )
    return count


def jobs(scenario: Scenario) -> Iterator[Job]:
    """Every (projection x workload point) of a scenario, in file order."""
    for index, projection, transport in _setups(scenario):
        fabric = _fabric(transport, projection, scenario)
        if TRANSPORTS[transport].rdma and not FABRICS[fabric].rdma:
            fabric = DEFAULT_RDMA_FABRIC.name
        problem = fabric_problem(transport, fabric)
        if problem:
            where = f"projections[{index}].fabric"
            raise ScenarioError([Problem(scenario.name or "scenario", where, problem)])
        gbps = _link_gbps(projection.profile, fabric, projection)
        initiators = projection.initiators or _topology_initiators(scenario, transport)
        incast = f" x{initiators}" if initiators > 1 else ""  # initiators into one
        label = projection.label or f"{transport} {fabric} {gbps:g}G{incast}"
        for workload in scenario.workloads:
            if workload.transports and transport not in workload.transports:
                continue
            for rw, bs, qd, nj in itertools.product(
                workload.rw, workload.bs, workload.iodepth, workload.numjobs
            ):
                carried = {name: getattr(projection, name) for name in CARRIED}
                point = Point(transport, fabric, gbps, rw, bs, qd, nj, initiators=initiators, **carried)
                yield Job(point, label)


def _topology_initiators(scenario: Scenario, transport: str) -> int:
    """How many initiators the scenario's own topology puts on a target of ``transport``."""
    counts = [len(t.initiators) for t in scenario.plan.targets if t.target.transport == transport]
    return max(counts, default=1) or 1


@dataclass(frozen=True)
class Figures:
    """What a solver says of one point, before it is written up as a record."""

    iops: float
    lat_mean_us: float | None
    lat_p99_us: float | None
    cpu_pct: dict[str, float]
    bottleneck: str
    iops_ci95: tuple[float, float] | None = None


def projected_record(
    point: Point, net: Network, figures: Figures, seed: int, sigma: float | Widths | None = None
) -> ResultRecord:
    """The record of a projected point; IOPS (and its interval) never exceed the analytic wire bound.

    The estimate is a batch mean (or an MVA answer), so when the link itself is
    the bottleneck it could land a hair past the bound; it is clipped to the
    bound, which is a hard physical fact, not a fitted value.  ``sigma`` is
    what the calibration leaves open: the range's half-widths
    (``uncertainty.widths``), or a spread of log IOPS (``without_parameters``)
    that, where no fitted row shares the point's regime, also carries the
    error the model showed on such points.  It becomes the record's 95 % range.
    """
    bound = net.bound_iops
    iops = min(figures.iops, bound)
    interval = None
    if figures.iops_ci95:
        low, high = figures.iops_ci95
        interval = (round(min(low, bound), 1), round(min(high, bound), 1))
    regime = kind_of(figures.bottleneck)
    fitted = pinned(key_of(figures.bottleneck, point.transport, point.rw))
    if isinstance(sigma, float):
        half = Z95 * math.hypot(sigma, unpinned_sigma() if fitted is False else 0.0)
        sigma = Widths(half, half)
    spread = sigma.around(iops, bound) if sigma is not None else None
    busiest = max(net.wire.wire_out, net.wire.wire_in) * net.split
    bw_mibps = round(iops * point.bs / 2**20, 2)
    machine, backend = point_facts(point, net.mtu)
    return ResultRecord(
        mode="projected",
        transport=point.transport,
        fabric=point.fabric,
        target_stack=net.target_stack,
        link_gbps=point.link_gbps,
        mtu=net.mtu,
        rw=point.rw,
        bs=point.bs,
        iodepth=point.iodepth,
        numjobs=point.numjobs,
        iops=round(iops, 1),
        bw_mibps=bw_mibps,
        lat_mean_us=_round2(figures.lat_mean_us),
        lat_p99_us=_round2(figures.lat_p99_us),
        cpu_target_pct=round(figures.cpu_pct["target"], 2),
        cpu_initiator_pct=round(figures.cpu_pct["initiator"], 2),
        verify="off",
        profile=point.profile,
        wire_gbps=round(iops * busiest * 8 / 1e9, 3),
        bottleneck=figures.bottleneck,
        bound=round(bound, 1) if bound != float("inf") else None,
        iops_ci95=interval,
        iops_range95=spread,
        regime=regime,
        regime_fitted=fitted,
        seed=seed,
        initiators=point.initiators if point.initiators > 1 else None,
        note=_notes(past(point, bw_mibps), past_fitted(net.busy_cores, net.fitted_busy_cores)),
        machine=machine,
        backend=backend,
    )


def _notes(*notes: str | None) -> str | None:
    """A record's notes in one: each edge of the tables it crossed, the first's 'extrapolated:'
    said once."""
    said = [n for n in notes if n]
    if not said:
        return None
    rest = [n.removeprefix("extrapolated: ") for n in said[1:]]
    return "; ".join([said[0], *rest])


def _round2(value: float | None) -> float | None:
    return round(value, 2) if value is not None else None


def project_point(
    point: Point, settings: Settings | None = None, parameter_range: bool = True
) -> ResultRecord:
    """Simulate one point; its interval carries the model's own error and, with
    ``parameter_range``, what the calibration leaves open of its parameters too."""
    cfg = settings or Settings()
    profile = load_profile(point.profile)
    net = build(point, profile)
    sim = simulate(net, cfg)
    figures = Figures(sim.iops, sim.lat_mean_us, sim.lat_p99_us, sim.cpu_pct, sim.bottleneck, sim.iops_ci95)
    fitted = pinned(key_of(sim.bottleneck, point.transport, point.rw))
    iops = min(sim.iops, net.bound_iops)
    spread = widths(point, profile, iops, fitted, parameter_range)
    return projected_record(point, net, figures, cfg.seed, spread)


def project(
    scenario: Scenario,
    settings: Settings | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[tuple[Job, ResultRecord]]:
    """Project every point of a scenario, reporting progress as (done, total); more than
    ``MAX_MODEL_POINTS`` is refused before the first."""
    check_size(scenario, scenario.name or "scenario")
    todo = list(jobs(scenario))
    if progress:
        progress(0, len(todo))  # before the first point, which may take seconds
    results = []
    for done, job in enumerate(todo, start=1):
        results.append((job, project_point(job.point, settings)))
        if progress:
            progress(done, len(todo))
    return results
