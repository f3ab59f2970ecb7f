"""Run a scenario's matrix on hosts that are already up: one target at a time.

For each target: export it, connect the initiator, run every workload point
that applies to its transport with fio, and take it all down again.  Each
point becomes a ``ResultRecord`` (``mode: emulated``) with the raw fio JSON
kept beside it; a point or a whole target that fails is recorded with its
error and the run goes on, after the link doctor (link_doctor.py) has had a
look at the target's link.  A dry run walks the same matrix (targets/rehearsal.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path

from sanlab.scenarios.endpoints import Endpoints
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.hosts import Say
from sanlab.scenarios.plan import PlannedTarget
from sanlab.scenarios.results.records import ResultRecord
from sanlab.scenarios.schema import Scenario, Target
from sanlab.targets import faults
from sanlab.targets.host import Host
from sanlab.targets.kernel_stacks import stuck_tasks
from sanlab.targets.placement import Machines, placements
from sanlab.targets.point_run import outcome, point_record, prefixed, run_point
from sanlab.targets.points import Point, chosen
from sanlab.targets.sessions.link_doctor import LinkDoctor, consult, still_stuck
from sanlab.targets.sessions.shared_target import SharedTarget, Sink
from sanlab.targets.stacks import Wiring, exported


class _Discard:
    def add(self, record: ResultRecord) -> None:
        pass

    def drop_last(self, count: int) -> None:
        pass


def run(
    scenario: Scenario,
    hosts: Mapping[str, Host],
    ends: Endpoints,
    out: Path,
    say: Say = lambda m: None,
    doctor: LinkDoctor | None = None,
    sink: Sink | None = None,
    machines: Machines | None = None,
    cables: faults.Cables | None = None,
    skip: int = 0,
    only: frozenset[int] | None = None,
) -> list[ResultRecord]:
    """Every target's points, in order, less the first ``skip`` (a resumed run has them);
    with ``only``, just the points of those run-order numbers (one worker's share of a run).

    When a target fails, ``doctor`` checks its link.

    A link that no longer answers pings is the emulator's fault, not the
    stack's: the doctor restarts it and, if it answers again, the target is
    run once more and its records say so in ``note``.  A target that fails
    on a healthy link is not retried.  Each point goes to ``sink`` as soon
    as it is done; a rerun withdraws the first attempt's points from it.
    A fault that pulls a cable goes through ``cables`` when there are any.
    """
    sink = sink or _Discard()
    raw_dir = out / "fio"
    raw_dir.mkdir(parents=True, exist_ok=True)
    records: list[ResultRecord] = []
    todo = _todo(scenario, skip, only)
    total = sum(len(cells) for _, cells in todo)
    done = 0
    for planned, cells in todo:
        target, name = planned.target, planned.name
        group = placements(planned, hosts, ends)
        if cables is not None:
            group = [replace(placed, wiring=replace(placed.wiring, cables=cables)) for placed in group]
        if machines is not None:
            group = [machines.apply(placed) for placed in group]
        if len(group) > 1:
            shared = SharedTarget(target, name, group, raw_dir, say, sink)
            records.extend(shared.run(cells, done, total))
            done += len(cells)
            continue
        placement = group[0]
        wire, base = placement.wiring, placement.record_base(target)
        run_target = partial(_run_target, target, name, cells, wire, raw_dir, base, say, done, total, sink)
        attempt = run_target()
        if doctor is not None and any(r.error for r in attempt):
            attempt = _consulted(doctor, wire, name, attempt, run_target, say, sink)
        records.extend(attempt)
        done += len(cells)
    return records


def _todo(
    scenario: Scenario, skip: int, only: frozenset[int] | None = None
) -> list[tuple[PlannedTarget, list[Point]]]:
    """Each target with the points still to run (points.chosen)."""
    return [(work.planned, list(work.points)) for work in chosen(scenario, skip, only)]


def _consulted(
    doctor: LinkDoctor,
    wire: Wiring,
    name: str,
    attempt: list[ResultRecord],
    run_target: Callable[[], list[ResultRecord]],
    say: Say,
    sink: Sink,
) -> list[ResultRecord]:
    """A failed target's records once the doctor has seen its link (and maybe run it again),
    in ``sink`` in place of the first attempt's."""
    withdraw = partial(sink.drop_last, len(attempt))
    stuck = partial(still_stuck, wire.initiator_host, wire.target_host)
    attempt = consult(doctor, wire.link, name, attempt, run_target, say, withdraw, stuck)
    sink.drop_last(len(attempt))  # the same points again, now with the link's findings
    for record in attempt:
        sink.add(record)
    return attempt


def _run_target(
    target: Target,
    name: str,
    cells: list[Point],
    wire: Wiring,
    raw_dir: Path,
    base: dict[str, object],
    say: Say,
    done: int,
    total: int,
    sink: Sink,
) -> list[ResultRecord]:
    """Export, run every point, take down; a failure becomes the error of the points it hit."""
    records: list[ResultRecord] = []
    try:
        where = " and ".join(wire.target_addresses)
        say(f"{name}: exporting {target.stack} {target.transport} on {where}")
        with exported(target, name, wire, prefixed(say, name)) as devices:
            for p in cells:
                rec = run_point(p, devices[0], wire, raw_dir, base, say)
                records.append(rec)
                sink.add(rec)
                say(f"[{done + len(records)}/{total}] {p.label}: {outcome(rec)}")
    except SanlabError as exc:
        error = str(exc) + stuck_tasks(wire.initiator_host, wire.target_host)
        for p in cells[len(records) :]:
            verify = "fail" if p.workload.verify != "off" else "off"
            records.append(point_record(base, p, error=error, verify=verify))
            sink.add(records[-1])
        say(f"{name}: FAILED: {error}")
    return records
