"""Who reaches whom: cables, switches, the segments switches make, and a target's initiators.

A link joins two hosts (a cable), a host and a switch (a cable into one
of the switch's ports) or two switches (a link inside the fabric).
Switches joined by links form one layer-2 *segment*; every host port on
a segment is in one IPv4 subnet and reaches every other.  A target's
initiators are the initiator hosts at the far end of its cable, or on its
segment.
"""

from __future__ import annotations

from dataclasses import dataclass

from sanlab.scenarios.parts import Layout, Link, Target

# The VM that runs the switches (Mininet); no host may take its name.
FABRIC_HOST = "fabric"


def link_name(link: Link, index: int) -> str:
    """A link's name, or ``link<index>`` when the file gives none."""
    return link.name or f"link{index}"


def switch_names(scenario: Layout) -> list[str]:
    return [s.name for s in scenario.switches]


def is_switched(scenario: Layout, link: Link) -> bool:
    """Does the link end at a switch (rather than join two hosts)?"""
    switches = set(switch_names(scenario))
    return any(end in switches for end in link.endpoints)


@dataclass(frozen=True)
class Port:
    """A host's cable into a switch: one port of that switch."""

    link: str  # the link's name: the host's interface and the switch port are named after it
    index: int  # the link's position in the scenario
    host: str
    switch: str
    segment: int


def segments(scenario: Layout) -> dict[str, int]:
    """Each switch's segment: switches joined by links, numbered in the order they are declared."""
    switches = switch_names(scenario)
    parent = {s: s for s in switches}

    def root(s: str) -> str:
        while parent[s] != s:
            s = parent[s]
        return s

    for link in scenario.links:
        a, b = link.endpoints
        if a in parent and b in parent:
            parent[root(b)] = root(a)
    numbers: dict[str, int] = {}
    for s in switches:
        numbers.setdefault(root(s), len(numbers))
    return {s: numbers[root(s)] for s in switches}


def ports(scenario: Layout) -> list[Port]:
    """Every host-to-switch link, in the order the scenario declares them."""
    segment = segments(scenario)
    found = []
    for i, link in enumerate(scenario.links):
        a, b = link.endpoints
        if (a in segment) != (b in segment):
            switch, host = (a, b) if a in segment else (b, a)
            found.append(Port(link_name(link, i), i, host, switch, segment[switch]))
    return found


def target_link(scenario: Layout, target: Target) -> tuple[int, Link] | None:
    """The link a target serves on: the named one (a multipath target's first path), or its
    host's only link."""
    links = list(enumerate(scenario.links))
    named = target.paths[0] if target.paths else target.link
    if named is not None:
        return next(((i, lk) for i, lk in links if link_name(lk, i) == named), None)
    touching = [(i, lk) for i, lk in links if target.host in lk.endpoints]
    return touching[0] if len(touching) == 1 else None


def initiators_of(scenario: Layout, target: Target) -> list[tuple[str, str]]:
    """(initiator host, the link it reaches the target by), one per initiator that runs fio.

    On a cable, the host at its other end.  On a switch, every initiator
    host with a port on the target's segment.
    """
    found = target_link(scenario, target)
    if found is None:
        return []
    index, link = found
    name = link_name(link, index)
    if not is_switched(scenario, link):
        return [(h, name) for h in link.endpoints if h != target.host][:1]
    roles = {h.name: h.role for h in scenario.hosts}
    all_ports = ports(scenario)
    mine = next((p for p in all_ports if p.link == name), None)
    if mine is None:
        return []
    return [
        (p.host, p.link)
        for p in all_ports
        if p.segment == mine.segment and p.host != target.host and roles.get(p.host) == "initiator"
    ]
