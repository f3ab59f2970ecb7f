"""``--dry-run``'s walk: every command a run would send, in the order it would, to hosts that
only write them down (dryrun.py).

The run's matrix (points.py) is worked out once; each target is then exported, connected,
given its points' fio commands and faults and taken down again, as a real run would.  This is
a recipe: it needs hosts that answer (``Host``) and the link ends, never how they were made.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import ExitStack

from sanlab.scenarios.endpoints import Endpoints
from sanlab.scenarios.schema import Scenario
from sanlab.targets.dryrun import DryRunHost
from sanlab.targets.fault_wiring import fault_commands
from sanlab.targets.host import Host
from sanlab.targets.placement import admitting_all, placements
from sanlab.targets.points import TargetPoints, chosen, job_for
from sanlab.targets.stacks import connect_only, export_only


def dry_run(scenario: Scenario, ends: Endpoints) -> list[DryRunHost]:
    """A host per scenario host that only writes down what it is sent, walked through the run."""
    imagined = {h.name: DryRunHost(h.name) for h in scenario.hosts}
    rehearse(scenario, imagined, ends)
    return list(imagined.values())


def rehearse(
    scenario: Scenario, hosts: Mapping[str, Host], ends: Endpoints, only: frozenset[int] | None = None
) -> list[TargetPoints]:
    """Send every command of a run to ``hosts`` (dry-run hosts that only write them down); with
    ``only``, of the points those run-order numbers name (one worker's share of a run).

    Each target is exported, connected, given its points' fio commands and
    taken down again, in the order a real run would.  Returns what was walked.
    """
    walked = chosen(scenario, only=only)
    for work in walked:
        _rehearse_target(work, hosts, ends)
    return walked


def _rehearse_target(work: TargetPoints, hosts: Mapping[str, Host], ends: Endpoints) -> None:
    """One target's commands: exported, each initiator connected, every point, taken down."""
    target, name = work.planned.target, work.planned.name
    wires = [placed.wiring for placed in placements(work.planned, hosts, ends)]
    with export_only(target, name, admitting_all(wires)) as made, ExitStack() as connections:
        devices = [connections.enter_context(connect_only(target, name, w, made))[0] for w in wires]
        for p in work.points:
            for share, (wire, device) in enumerate(zip(wires, devices, strict=True)):
                job = job_for(p, device, share)
                if job.verify and "read" in p.rw:
                    wire.initiator_host.run(job.fill_argv())
                wire.initiator_host.run(job.argv())
                for fault in p.faults if share == 0 else ():  # one initiator's side applies them
                    for host, command in fault_commands(p, wire, fault, device):
                        host.run(command)
