"""A scenario resolved once: every default name, every link's kind, every target's place.

A scenario file may leave names out (``link0``, ``lio-iscsi-0``) and says
where a target is only by its host or a link name.  Each layer used to work
those out again from the raw file; now ``resolve`` does it once and every
layer reads the result (``scenario.plan``): the emulator builds the links it
lists, the runner places targets where it says, the model counts the
initiators it names, and the lab commands find targets by its names.

The plan holds only what follows from the file.  What follows from a
machine (addresses, interfaces, RDMA devices) is the emulator's to add, as
``Endpoint``s keyed by the names given here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from sanlab.scenarios.parts import Fault, Layout, Link, Target
from sanlab.scenarios.registry import FABRICS
from sanlab.scenarios.topology import Port, initiators_of, link_name, ports, segments, target_link

LinkKind = Literal["cable", "port", "trunk"]


def rdma_driver(link: Link) -> str | None:
    """The soft-RDMA driver a link uses: explicit, or implied by its fabric."""
    fabric = FABRICS[link.fabric]
    return (link.rdma_driver or fabric.soft_driver) if fabric.rdma else None


def default_target_name(target: Target, index: int) -> str:
    """A target's name, or ``<stack>-<transport>-<index>`` when the file gives none."""
    return target.name or f"{target.stack}-{target.transport}-{index}"


@dataclass(frozen=True)
class PlannedLink:
    """One link with its name settled and what it joins worked out."""

    index: int  # its position in the scenario file
    name: str
    link: Link
    kind: LinkKind  # two hosts; a host and a switch; two switches
    rdma_driver: str | None  # the soft-RDMA driver on it, if its fabric carries RDMA
    endpoints: tuple[str, str]  # the link's two ends, as the file gives them


@dataclass(frozen=True)
class PlannedTarget:
    """One target with its name settled and the links and initiators that reach it."""

    index: int  # its position in the scenario file
    name: str
    target: Target
    link: PlannedLink | None  # the link it serves on (a multipath target's first path)
    paths: tuple[str, ...]  # every link it is reached by
    initiators: tuple[tuple[str, str], ...]  # (initiator host, the link it comes in by)
    faults: tuple[Fault, ...]  # what goes wrong on its links or on it while fio runs, in time order

    @property
    def shared(self) -> bool:
        """Do several initiators run fio on it at once (behind a switch)?"""
        return len(self.initiators) > 1


@dataclass(frozen=True)
class Plan:
    """Names, link kinds, switch ports and target placements of one scenario."""

    links: tuple[PlannedLink, ...]
    targets: tuple[PlannedTarget, ...]
    ports: tuple[Port, ...]
    real_machines: bool  # its hosts are real machines reached over SSH (real_machines), not VMs
    unreached: tuple[str, ...]  # real machines nothing says how to reach yet (unreached)
    segments: Mapping[str, int] = field(default_factory=dict)  # switch -> segment number

    def link(self, name: str) -> PlannedLink:
        found = next((lk for lk in self.links if lk.name == name), None)
        if found is None:
            raise KeyError(f"no link {name!r} (links: {', '.join(lk.name for lk in self.links)})")
        return found

    def target(self, name: str) -> PlannedTarget:
        found = next((t for t in self.targets if t.name == name), None)
        if found is None:
            raise KeyError(f"no target {name!r} (targets: {', '.join(self.target_names)})")
        return found

    def placed(self, target: Target) -> PlannedTarget:
        """The plan of a target object of this scenario (by identity, then by equality)."""
        found = next((t for t in self.targets if t.target is target), None)
        found = found or next((t for t in self.targets if t.target == target), None)
        if found is None:
            raise KeyError(f"target on {target.host!r} is not in this scenario")
        return found

    @property
    def target_names(self) -> list[str]:
        return [t.name for t in self.targets]

    @property
    def link_names(self) -> list[str]:
        return [lk.name for lk in self.links]


def real_machines(scenario: Layout) -> bool:
    """Is the scenario for real machines (reached over SSH) rather than VMs?

    It is when a host says how to reach it or a link names a real
    interface; hosts that do not say it yet get it from ``--inventory``.
    """
    return any(h.ssh for h in scenario.hosts) or any(lk.interfaces for lk in scenario.links)


def unreached(scenario: Layout) -> list[str]:
    """Real-machine hosts that no ``ssh`` reaches (yet): what ``--inventory`` must supply."""
    return [h.name for h in scenario.hosts if not h.ssh] if real_machines(scenario) else []


def faults_on(scenario: Layout, link: str) -> list[Fault]:
    """The faults that hit every point of a target on ``link``, in time order."""
    return sorted((f for f in scenario.faults if f.link == link), key=lambda f: f.at)


def faults_of(scenario: Layout, target: str) -> list[Fault]:
    """The faults that act on the target named ``target`` itself (restart, reset)."""
    return [f for f in scenario.faults if f.target == target]


def _target_faults(scenario: Layout, name: str, paths: tuple[str, ...]) -> tuple[Fault, ...]:
    """What goes wrong on a target's links or on it while fio runs, in time order: worked out
    here once, so a run's matrix reads it rather than asking the scenario again per target."""
    hits = [f for path in paths for f in faults_on(scenario, path)] + faults_of(scenario, name)
    return tuple(sorted(hits, key=lambda f: f.at))


def _ends(link: Link) -> tuple[str, str]:
    a, b = link.endpoints  # two, as the schema requires
    return a, b


def _kind(link: Link, switches: set[str]) -> LinkKind:
    at_switch = sum(end in switches for end in link.endpoints)
    return "cable" if at_switch == 0 else "port" if at_switch == 1 else "trunk"


def resolve(scenario: Layout) -> Plan:
    """Work out the plan of a scenario; it tolerates a scenario that does not validate
    (a target with no link gets ``link=None``), so validation can read it too."""
    switches = {s.name for s in scenario.switches}
    links = tuple(
        PlannedLink(i, link_name(lk, i), lk, _kind(lk, switches), rdma_driver(lk), _ends(lk))
        for i, lk in enumerate(scenario.links)
    )
    targets = []
    for i, target in enumerate(scenario.targets):
        found = target_link(scenario, target)
        link = links[found[0]] if found else None
        paths = tuple(target.paths) if target.paths else ((link.name,) if link else ())
        initiators = tuple(initiators_of(scenario, target))
        name = default_target_name(target, i)
        faults = _target_faults(scenario, name, paths)
        targets.append(PlannedTarget(i, name, target, link, paths, initiators, faults))
    real, missing = real_machines(scenario), tuple(unreached(scenario))
    return Plan(links, tuple(targets), tuple(ports(scenario)), real, missing, segments(scenario))
