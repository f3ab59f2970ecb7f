"""The rules of faults: what each acts on, and when (one at a time on a place, inside the run
that should see it)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from sanlab.scenarios.plan import real_machines
from sanlab.scenarios.registry import TRANSPORTS
from sanlab.scenarios.schema import Fault, Link, Scenario
from sanlab.scenarios.semantics.common import either, listed
from sanlab.scenarios.sizes import format_duration


def check_faults(scenario: Scenario) -> Iterator[tuple[str, str]]:
    """A fault names a link of the scenario, and only emulated cables are pulled."""
    names = scenario.plan.link_names
    for i, fault in enumerate(scenario.faults):
        if fault.action in TARGET_FAULTS:
            yield from _target_fault(i, fault, scenario)
        elif fault.target is not None:
            yield f"faults[{i}].target", f"goes with action restart or reset, not {fault.action} (give link)"
        elif fault.link is None:
            yield f"faults[{i}].link", f"action {fault.action} needs the link it acts on"
        elif fault.link not in names:
            yield f"faults[{i}].link", f"{fault.link!r} is not a link (links: {listed(names)})"
        elif scenario.plan.link(fault.link).kind != "cable":
            yield from _switch_port(i, fault, scenario)
        else:
            yield from _burst(i, fault, scenario.plan.link(fault.link).link)
        if fault.pull is not None and (fault.action != "down" or fault.target is not None):
            yield (
                f"faults[{i}].pull",
                f"says how a cable is pulled: it goes with action down, not {fault.action}",
            )
        if real_machines(scenario):
            yield (
                f"faults[{i}]",
                "faults are injected on emulated links only: taking a real machine's NIC down could cut "
                "sanlab's own SSH connection",
            )


# Faults that act on a target's service or its initiator's sessions, not on a cable.
TARGET_FAULTS = ("restart", "reset")


def _target_fault(i: int, fault: Fault, scenario: Scenario) -> Iterator[tuple[str, str]]:
    named = {t.name: t for t in scenario.targets if t.name}
    if fault.link is not None:
        yield f"faults[{i}].link", f"action {fault.action} acts on a target: give target, not link"
    if fault.target not in named:
        yield (
            f"faults[{i}].target",
            f"{fault.target!r} is not a named target (targets: {listed(list(named))})",
        )
        return
    target = named[fault.target]
    if fault.action == "restart" and target.stack not in TRANSPORTS[target.transport].restartable:
        allowed = ", ".join(sorted(f"{s} {t.name}" for t in TRANSPORTS.values() for s in t.restartable))
        yield f"faults[{i}].action", f"restart is built for {allowed}; not {target.stack} {target.transport}"
    if fault.action == "reset" and not TRANSPORTS[target.transport].resettable:
        built = ", ".join(t.name for t in TRANSPORTS.values() if t.resettable)
        yield f"faults[{i}].action", f"reset is built for {built}; not {target.transport}"
    for burst in ("loss", "delay"):
        if getattr(fault, burst) is not None:
            yield f"faults[{i}].{burst}", f"goes with action {burst}, not {fault.action}"
    if fault.action == "reset" and "length" in fault.model_fields_set:
        yield (
            f"faults[{i}].for",
            f"a reset is one event with no duration: drop 'for: {fault.length:g}s' (restart takes one)",
        )


def _switch_port(i: int, fault: Fault, scenario: Scenario) -> Iterator[tuple[str, str]]:
    """On a switch, a fault takes a target's port down (its link to the switch), and only that:
    a burst needs netem at both ends of a cable."""
    if fault.action != "down":
        yield (
            f"faults[{i}].action",
            f"{fault.link!r} ends at a switch: it can be taken down (a switch port down), "
            f"not given {fault.action} bursts, which go on host-to-host cables",
        )
        return
    if fault.pull == "interfaces":
        yield f"faults[{i}].pull", "interfaces go down on host-to-host cables; a switch port drops carrier"
    ports = sorted({t.link.name for t in scenario.plan.targets if t.link and t.link.kind != "cable"})
    if fault.link not in ports:
        where = either(ports) if ports else "a target's link to its switch"
        yield (
            f"faults[{i}].link",
            f"{fault.link!r} is no target's port on a switch; a switch port fault goes on {where}",
        )


def _burst(i: int, fault: Fault, link: Link) -> Iterator[tuple[str, str]]:
    """A burst says how much, the other actions do not; bursts go on unshaped cables."""
    for action in ("loss", "delay"):
        given = getattr(fault, action) is not None
        if fault.action == action and not given:
            yield f"faults[{i}].{action}", f"action {action} needs {action}: how much (e.g. 5% or 20ms)"
        if fault.action != action and given:
            yield f"faults[{i}].{action}", f"goes with action {action}, not {fault.action}"
    shaped = link.rate or link.delay or link.loss or link.queue
    if fault.action != "down" and shaped:
        yield (
            f"faults[{i}].action",
            f"a {fault.action} burst replaces a link's own shaping; {fault.link!r} is shaped "
            "(rate, delay, loss or queue), so bursts go on unshaped links only",
        )


def check_fault_timeline(scenario: Scenario, links_ok: bool) -> Iterator[tuple[str, str]]:
    """Faults on one link or target do not overlap, and each falls inside every timed point it hits."""
    by_place: dict[str, list[tuple[int, Fault]]] = {}
    for i, fault in enumerate(scenario.faults):
        by_place.setdefault(fault.link or f"target {fault.target}", []).append((i, fault))
    for place, hits in by_place.items():
        hits.sort(key=lambda hit: hit[1].at)
        for (i, first), (j, second) in itertools.pairwise(hits):
            if second.at < first.at + first.length:
                yield (
                    f"faults[{j}].at",
                    f"starts at {format_duration(second.at)}, while faults[{i}] on {place} lasts until "
                    f"{format_duration(first.at + first.length)}: faults on one link or target take turns",
                )
    if links_ok:
        yield from _faults_past_the_run(scenario)


def _faults_past_the_run(scenario: Scenario) -> Iterator[tuple[str, str]]:
    """A timed (unverified) point ends at its runtime: a fault after that would never be seen."""
    for placed in scenario.plan.targets:
        t = placed.target
        places = set(placed.paths) | ({f"target {t.name}"} if t.name else set())
        for i, fault in enumerate(scenario.faults):
            if (fault.link or f"target {fault.target}") not in places:
                continue
            end = fault.at + fault.length
            for k, workload in enumerate(scenario.workloads):
                applies = not workload.transports or t.transport in workload.transports
                if applies and workload.verify == "off" and end > workload.runtime:
                    yield (
                        f"faults[{i}].at",
                        f"lasts until {format_duration(end)}, past the end of workloads[{k}]'s "
                        f"{format_duration(workload.runtime)} run: give that workload a longer runtime",
                    )
