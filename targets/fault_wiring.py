"""How a point's faults reach its hosts: a pulled cable, a restarted target service, a reset.

The fault timeline itself (when to apply, how long, what recovery means) is faults.py's;
this wires each fault of a point to the hosts and interfaces of its target's wiring, for a
real run (an injector) and for a dry run (the commands, in order).  A target shared by
several initiators gets one injector that applies each fault and hands its window on.
"""

from __future__ import annotations

import queue
from dataclasses import replace

from sanlab.scenarios.registry import TRANSPORTS
from sanlab.scenarios.schema import Fault
from sanlab.targets import dm_multipath, faults, nvme_host
from sanlab.targets.host import Host, StackError
from sanlab.targets.naming import nqn
from sanlab.targets.points import Point
from sanlab.targets.stacks import Wiring, reset_script, service_scripts


def shared_faults(p: Point, wires: list[Wiring], devices: list[str]) -> list[faults.Inject | None]:
    """One injector per initiator of a shared target: the first applies each fault and
    hands its window to the others, each of which reads it on its own clock."""
    if not p.faults:
        return [None] * len(wires)
    followers = [queue.Queue[faults.Window]() for _ in wires[1:]]
    applied = injector(p, wires[0], devices[0])

    def lead(fault: Fault) -> faults.Window:
        try:
            window = applied(fault)
        except BaseException:
            for q in followers:
                q.put(faults.Window(0.0, 0.0))  # nothing happened: no one waits forever
            raise
        for q in followers:
            q.put(window)
        return window

    def follow(q: queue.Queue[faults.Window], host: Host) -> faults.Inject:
        offset = faults.clock_offset(host, wires[0].initiator_host)

        def wait(fault: Fault) -> faults.Window:
            try:
                window = q.get(timeout=fault.length + faults.FAILBACK_WAIT_S + 300)
            except queue.Empty:
                raise StackError(
                    f"{host.name}: the fault on {fault.link or fault.target} never ended"
                ) from None
            return faults.shifted(window, offset)

        return wait

    return [lead, *(follow(q, w.initiator_host) for q, w in zip(followers, wires[1:], strict=True))]


def link_ends(wire: Wiring, link: str) -> list[faults.LinkEnd]:
    """The cable a fault pulls, the initiator's end first (its clock times the run)."""
    target_end, initiator_end = wire.ends_of(link)
    return [
        faults.LinkEnd(wire.initiator_host, initiator_end.interface, initiator_end.address),
        faults.LinkEnd(wire.target_host, target_end.interface, target_end.address),
    ]


def fault_commands(p: Point, wire: Wiring, fault: Fault, device: str) -> list[tuple[Host, str]]:
    """What each host runs for ``fault`` on point ``p``, in order (for a dry run)."""
    if fault.action == "restart":
        stop, start = service_scripts(p.target, p.name)
        return [(wire.target_host, stop), (wire.target_host, start)]
    if fault.action == "reset":
        return [(wire.initiator_host, reset_script(p.target, p.name, wire))]
    near, far = link_ends(wire, fault.link or "")
    commands = [(end.host, faults.fault_script(end.interface, fault)) for end in (near, far)]
    if fault.action == "down":
        commands.append((near.host, faults.carries_script(near.interface, far.address)))
    if fault.action == "down" and p.target.paths:  # the failback: until every path is in use
        commands.append((near.host, paths_in_use_script(p, device)))
    return commands


def paths_in_use_script(p: Point, device: str) -> str:
    """What prints how many of a multipath target's paths the initiator uses now."""
    if TRANSPORTS[p.target.transport].multipath == "native":
        return nvme_host.live_paths_script(nqn(p.name))
    return dm_multipath.active_paths_script(device)


def injector(p: Point, wire: Wiring, device: str) -> faults.Inject:
    """How point ``p``'s faults are applied: to a cable, the target's service, or the initiator.

    A cable pulled from a multipath target is followed until every path is
    in use again (the failback)."""

    def inject(fault: Fault) -> faults.Window:
        window = apply(fault)
        if fault.action != "down" or not p.target.paths:
            return window
        back = faults.all_paths_back(wire.initiator_host, paths_in_use_script(p, device), len(p.target.paths))
        return replace(window, restored=back)

    def apply(fault: Fault) -> faults.Window:
        if fault.action == "restart":
            stop, start = service_scripts(p.target, p.name)
            return faults.restart(wire.initiator_host, wire.target_host, stop, start, fault.length)
        if fault.action == "reset":
            return faults.reset(wire.initiator_host, reset_script(p.target, p.name, wire))
        ends = link_ends(wire, fault.link or "")
        if fault.action == "down" and wire.cables is not None and fault.pull != "interfaces":
            return faults.pull_carrier(wire.cables, fault.link or "", ends, fault.length)
        return faults.inject(ends, fault)

    return inject
