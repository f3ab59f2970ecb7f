"""The run matrix: a scenario's points, target by target, and the fio job of each.

A point is one fio run of one workload shape on one target, with the faults that fall on
its links while it runs.  Counting them (how many a run records, how many an interrupted
run finished whole) is the same walk, so ``--resume`` and the progress line agree with
what runs.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, replace

from sanlab.scenarios.plan import PlannedTarget
from sanlab.scenarios.schema import Fault, Scenario, Target, Workload
from sanlab.scenarios.sizes import format_size
from sanlab.targets.fio import DEFAULT_VERIFY_SIZE, FioJob


@dataclass(frozen=True)
class Point:
    target: Target
    name: str
    workload: Workload
    rw: str
    bs: int
    iodepth: int
    numjobs: int
    faults: tuple[Fault, ...] = ()  # what goes wrong on the target's link while fio runs

    @property
    def label(self) -> str:
        return f"{self.name} {self.rw} {format_size(self.bs)} qd{self.iodepth} j{self.numjobs}"


def points(scenario: Scenario, placed: PlannedTarget) -> Iterator[Point]:
    """A target's points: each workload that applies to its transport, with the faults that
    fall on its links or on it while fio runs (the plan's, worked out once)."""
    target, name, on_link = placed.target, placed.name, placed.faults
    for workload in scenario.workloads:
        if workload.transports and target.transport not in workload.transports:
            continue
        for rw, bs, qd, nj in itertools.product(workload.rw, workload.bs, workload.iodepth, workload.numjobs):
            yield Point(target, name, workload, rw, bs, qd, nj, on_link)


@dataclass(frozen=True)
class TargetPoints:
    """One target of the plan and its points, in run order."""

    planned: PlannedTarget
    points: tuple[Point, ...]


def matrix(scenario: Scenario) -> list[TargetPoints]:
    """The whole run's points, target by target, worked out from the scenario in one pass: what
    runs, rehearses and counts a run reads this rather than asking the scenario again per step."""
    return [TargetPoints(p, tuple(points(scenario, p))) for p in scenario.plan.targets]


def chosen(scenario: Scenario, skip: int = 0, only: frozenset[int] | None = None) -> list[TargetPoints]:
    """The run's targets with the points still to run: less the first ``skip`` of the run's
    (a resumed run has them) and, with ``only``, just those run-order numbers (one worker's
    share of a cluster run); a target with none left is left out (it is not exported again)."""
    picked, first = [], 0
    for work in matrix(scenario):
        numbered = enumerate(work.points, first)
        first += len(work.points)
        points = tuple(p for i, p in numbered if i >= skip and (only is None or i in only))
        if points:
            picked.append(TargetPoints(work.planned, points))
    return picked


def planned_points(scenario: Scenario) -> int:
    """How many points a run of ``scenario`` will record."""
    return sum(len(work.points) for work in matrix(scenario))


def records_per_point(scenario: Scenario) -> list[int]:
    """How many records each planned point writes, in run order: one, or one per initiator of a
    shared target and then their aggregate."""
    counts = []
    for work in matrix(scenario):
        sharing = len(work.planned.initiators)
        counts += [1 if sharing <= 1 else sharing + 1] * len(work.points)
    return counts


def finished_points(scenario: Scenario, records: int) -> tuple[int, int]:
    """(points, records) that a run cut short after writing ``records`` records finished whole."""
    done = kept = 0
    for count in records_per_point(scenario):
        if kept + count > records:
            break
        done, kept = done + 1, kept + count
    return done, kept


def verify_size(p: Point) -> int:
    """Bytes each fio job writes and checks: the workload's ``verify_size``, else 16 MiB or
    the job's share of the LUN, in whole blocks."""
    size = p.workload.verify_size or min(DEFAULT_VERIFY_SIZE, p.target.size // p.numjobs)
    return size - size % p.bs


def fio_job(p: Point, device: str) -> FioJob:
    """The fio job of point ``p`` on ``device``."""
    verify = p.workload.verify != "off"
    return FioJob(device, p.rw, p.bs, p.iodepth, p.numjobs, p.workload.runtime, verify, verify_size(p))


# How long a faulted, verified job's I/O goes on past its last fault's start, at the least.
PACE_PAST_S = 1.0


def job_for(p: Point, device: str, share: int = 0) -> FioJob:
    """Point ``p``'s job for the ``share``-th initiator of its target: its own stretch of the LUN.
    Under faults a verified job is paced to run until a second past its last fault's start (an
    I/O in flight then completes only once the fault is over), however fast the host."""
    job = fio_job(p, device)
    paced = max(f.at for f in p.faults) + PACE_PAST_S if p.faults and job.verify else 0.0
    return replace(
        job, tolerant=bool(p.faults), first_offset=share * p.numjobs * job.verify_size, paced_s=paced
    )
