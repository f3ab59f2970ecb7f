"""A target that several initiators behind a switch share, each point run on all at once (incast)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.hosts import Say
from sanlab.scenarios.results.records import ResultRecord, aggregate
from sanlab.scenarios.schema import Target
from sanlab.targets.fault_wiring import shared_faults
from sanlab.targets.kernel_stacks import stuck_tasks
from sanlab.targets.placement import Placement, admitting_all
from sanlab.targets.point_run import outcome, point_record, prefixed, run_point
from sanlab.targets.points import Point
from sanlab.targets.stacks import connect_only, export_only


class Sink(Protocol):
    """Where finished points go as they finish (a run's journal), so an interrupted run loses none."""

    def add(self, record: ResultRecord) -> None: ...

    def drop_last(self, count: int) -> None: ...


@dataclass(frozen=True)
class SharedTarget:
    """One target and the initiators behind a switch that all run each point at once (incast).

    The target is exported once and every initiator connects; each point's
    fio runs on all of them together, each on its own stretch of the LUN,
    and gives one record per initiator and then their aggregate.
    """

    target: Target
    name: str
    group: list[Placement]
    raw_dir: Path
    say: Say
    sink: Sink

    def run(self, cells: list[Point], done: int, total: int) -> list[ResultRecord]:
        records: list[ResultRecord] = []
        wires = [placed.wiring for placed in self.group]
        who = ", ".join(w.initiator_host.name for w in wires)
        say = prefixed(self.say, self.name)
        finished = 0
        try:
            self.say(
                f"{self.name}: exporting {self.target.stack} {self.target.transport} on "
                f"{wires[0].target_address} for {len(wires)} initiators ({who})"
            )
            with (
                export_only(self.target, self.name, admitting_all(wires), say) as made,
                ExitStack() as connections,
            ):
                devices = [
                    connections.enter_context(connect_only(self.target, self.name, w, made, say))[0]
                    for w in wires
                ]
                for p in cells:
                    point = self._point(p, devices)
                    records += point
                    finished += 1
                    each = " + ".join(f"{r.initiator} {r.iops or 0:.0f}" for r in point[:-1])
                    self.say(f"[{done + finished}/{total}] {p.label}: {outcome(point[-1])} ({each})")
        except SanlabError as exc:
            error = str(exc) + stuck_tasks(wires[0].target_host, *(w.initiator_host for w in wires))
            for p in cells[finished:]:
                verify = "fail" if p.workload.verify != "off" else "off"
                failed = [
                    point_record(pl.record_base(self.target), p, error=error, verify=verify)
                    for pl in self.group
                ]
                for record in [*failed, aggregate(failed)]:
                    records.append(record)
                    self.sink.add(record)
            self.say(f"{self.name}: FAILED: {error}")
        return records

    def _point(self, p: Point, devices: list[str]) -> list[ResultRecord]:
        """Every initiator's fio at once; their records, then the aggregate."""

        injects = shared_faults(p, [pl.wiring for pl in self.group], devices)

        def one(share: int) -> ResultRecord:
            placed = self.group[share]
            base = placed.record_base(self.target)
            say = self.say if share == 0 else lambda m: None  # the fault is told once, by who applies it
            return run_point(p, devices[share], placed.wiring, self.raw_dir, base, say, share, injects[share])

        with ThreadPoolExecutor(len(self.group)) as pool:
            each = list(pool.map(one, range(len(self.group))))
        records = [*each, aggregate(each)]
        for record in records:
            self.sink.add(record)
        return records
