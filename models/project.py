"""Scenario in, projected result records out.

A scenario's projections name hardware set-ups; its workloads name fio
matrices.  Every (projection x workload point) becomes a ``Point``, the
network is built from the profile, the simulator runs it, and the answer is
a ``ResultRecord`` with ``mode: projected`` - the same shape an emulated run
produces, so the two can be set side by side.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sanlab.models.network import Point, build
from sanlab.models.profile import DEFAULT_PROFILE, load_profile
from sanlab.models.simulate import Settings, simulate
from sanlab.scenarios.errors import Problem, ScenarioError
from sanlab.scenarios.records import ResultRecord
from sanlab.scenarios.schema import Projection, Scenario
from sanlab.scenarios.semantics import RDMA_TRANSPORTS, TCP_FABRICS, TCP_TRANSPORTS, target_link


@dataclass(frozen=True)
class Job:
    """One point to project and the projection it came from (for labels)."""

    point: Point
    label: str


def _fabric(transport: str, projection: Projection, scenario: Scenario) -> str:
    if projection.fabric:
        return projection.fabric
    if transport in TCP_TRANSPORTS:
        return "eth"
    for target in scenario.targets:
        found = target_link(scenario, target)
        if target.transport == transport and found and found[1].fabric != "eth":
            return found[1].fabric
    return "roce"


def _link_gbps(profile_name: str, fabric: str, projection: Projection) -> float:
    if projection.link_gbps:
        return projection.link_gbps
    nics = [n for n in load_profile(profile_name).nics if fabric in n.fabrics]
    return max(max(n.link_gbps) for n in nics) if nics else 100.0


def jobs(scenario: Scenario) -> Iterator[Job]:
    """Every (projection x workload point) of a scenario, in file order."""
    projections = scenario.projections or [Projection(profile=DEFAULT_PROFILE)]
    declared = list(dict.fromkeys(t.transport for t in scenario.targets))
    for index, projection in enumerate(projections):
        transports = [projection.transport] if projection.transport else declared
        for transport in transports:
            fabric = _fabric(transport, projection, scenario)
            if transport in TCP_TRANSPORTS and fabric not in TCP_FABRICS:
                raise ScenarioError(
                    [
                        Problem(
                            scenario.name or "scenario",
                            f"projections[{index}].fabric",
                            f"{transport} runs over TCP; {fabric!r} is not modelled for it (use eth)",
                        )
                    ]
                )
            if transport in RDMA_TRANSPORTS and fabric == "eth":
                fabric = "roce"
            gbps = _link_gbps(projection.profile, fabric, projection)
            label = projection.label or f"{transport} {fabric} {gbps:g}G"
            for workload in scenario.workloads:
                if workload.transports and transport not in workload.transports:
                    continue
                for rw, bs, qd, nj in itertools.product(
                    workload.rw, workload.bs, workload.iodepth, workload.numjobs
                ):
                    yield Job(
                        Point(
                            transport=transport,
                            fabric=fabric,
                            link_gbps=gbps,
                            rw=rw,
                            bs=bs,
                            iodepth=qd,
                            numjobs=nj,
                            profile=projection.profile,
                            mtu=projection.mtu,
                            target_stack=projection.target_stack,
                            backend=projection.backend,
                            sessions=projection.sessions,
                            cores=projection.cores,
                            header_digest=projection.header_digest,
                            data_digest=projection.data_digest,
                        ),
                        label,
                    )


def project_point(point: Point, settings: Settings | None = None) -> ResultRecord:
    """Simulate one point; the answer never exceeds the analytic wire bound.

    The estimate is a batch mean, so when the link itself is the bottleneck
    sampling noise could nudge it past the bound; it is clipped to the
    bound, which is a hard physical fact, not a fitted value.
    """
    cfg = settings or Settings()
    net = build(point)
    sim = simulate(net, cfg)
    bound = net.bound_iops
    iops = min(sim.iops, bound)
    low, high = (min(v, bound) for v in sim.iops_ci95)
    busiest = max(net.wire.wire_out, net.wire.wire_in) * net.split
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
        bw_mibps=round(iops * point.bs / 2**20, 2),
        lat_mean_us=round(sim.lat_mean_us, 2),
        lat_p99_us=round(sim.lat_p99_us, 2),
        cpu_target_pct=round(sim.cpu_pct["target"], 2),
        cpu_initiator_pct=round(sim.cpu_pct["initiator"], 2),
        verify="off",
        profile=point.profile,
        wire_gbps=round(iops * busiest * 8 / 1e9, 3),
        bottleneck=sim.bottleneck,
        bound=round(bound, 1) if bound != float("inf") else None,
        iops_ci95=(round(low, 1), round(high, 1)),
        seed=cfg.seed,
    )


def project(
    scenario: Scenario,
    settings: Settings | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[tuple[Job, ResultRecord]]:
    """Project every point of a scenario, reporting progress as (done, total)."""
    todo = list(jobs(scenario))
    results = []
    for done, job in enumerate(todo, start=1):
        results.append((job, project_point(job.point, settings)))
        if progress:
            progress(done, len(todo))
    return results
