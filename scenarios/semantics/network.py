"""The rules of the network a scenario draws: unique names, links that join what exists,
real machines apart from VMs, switches, their segments and loops, and several initiators
sharing one target behind a switch."""

from __future__ import annotations

from collections.abc import Iterator

from sanlab.scenarios.plan import PlannedLink, faults_of, real_machines
from sanlab.scenarios.registry import FABRICS, STACKS, driver_fabric
from sanlab.scenarios.schema import Link, Scenario
from sanlab.scenarios.semantics.common import RDMA_FABRICS, either, listed
from sanlab.scenarios.sizes import format_size
from sanlab.scenarios.topology import FABRIC_HOST, switch_names


def check_hosts(scenario: Scenario) -> Iterator[tuple[str, str]]:
    seen: set[str] = set()
    for i, host in enumerate(scenario.hosts):
        if host.name in seen:
            yield f"hosts[{i}].name", f"{host.name!r} is declared twice (host names are unique)"
        seen.add(host.name)
    named: set[str] = set()
    for i, target in enumerate(scenario.targets):
        if target.name and target.name in named:
            yield f"targets[{i}].name", f"{target.name!r} is declared twice (target names are unique)"
        named.add(target.name or "")


def check_links(scenario: Scenario) -> Iterator[tuple[str, str]]:
    hosts = [h.name for h in scenario.hosts]
    ends = hosts + switch_names(scenario)
    seen: set[str] = set()
    for i, planned in enumerate(scenario.plan.links):
        name, link = planned.name, planned.link
        if name in seen:
            yield f"links[{i}].name", f"{name!r} is declared twice (link names are unique)"
        seen.add(name)
        for j, end in enumerate(link.endpoints):
            if end not in ends:
                switches = f"; switches: {listed(switch_names(scenario))}" if scenario.switches else ""
                yield (
                    f"links[{i}].endpoints[{j}]",
                    f"{end!r} is not a host (hosts: {listed(hosts)}{switches})",
                )
        if link.endpoints[0] == link.endpoints[1]:
            yield f"links[{i}].endpoints", "a link joins two different hosts or switches"
        yield from _driver(i, link)


def _driver(i: int, link: Link) -> Iterator[tuple[str, str]]:
    """A soft-RDMA driver named on a link is the one that stands in for its fabric."""
    fabric, driver = FABRICS[link.fabric], link.rdma_driver
    if driver is None:
        return
    if not fabric.rdma:
        yield (
            f"links[{i}].rdma_driver",
            f"{driver!r} needs an RDMA fabric (set fabric: {either(RDMA_FABRICS)})",
        )
    elif driver != fabric.soft_driver:
        emulated = driver_fabric(driver)
        yield (
            f"links[{i}].rdma_driver",
            f"{driver!r} is {emulated.title}, not {link.fabric} "
            f"(use {fabric.soft_driver}, or set fabric: {emulated.name})",
        )


# Link fields that shape an emulated cable; a real one is what it is.
SHAPING_FIELDS = ("rate", "delay", "loss", "rdma_driver")


def check_machines(scenario: Scenario) -> Iterator[tuple[str, str]]:
    """Real machines and VMs do not mix (VMs reach no one), and each kind has its own fields."""
    real = real_machines(scenario)
    for i, host in enumerate(scenario.hosts):
        if real and {"cpus", "memory"} & host.model_fields_set:
            yield f"hosts[{i}].cpus", f"{host.name!r} is a real machine: cpus and memory size VMs only"
        if not host.ssh and {"port", "identity", "ssh_options"} & host.model_fields_set:
            yield f"hosts[{i}].port", f"{host.name!r} has no ssh: port, identity and ssh_options go with it"
    for i, link in enumerate(scenario.links):
        yield from _link_kind(i, link, real)


def _link_kind(i: int, link: Link, real: bool) -> Iterator[tuple[str, str]]:
    if not real:
        for field in ("interfaces", "rdma_devices"):
            if getattr(link, field):
                yield (
                    f"links[{i}].{field}",
                    "names a real machine's devices; VM links are named after the link",
                )
        return
    shaped = sorted(set(SHAPING_FIELDS) & link.model_fields_set)
    if shaped:
        yield (
            f"links[{i}].{shaped[0]}",
            "shapes an emulated cable; between real machines the NICs and cable are what they are "
            "(an RDMA device goes in rdma_devices)",
        )
    for field in ("interfaces", "rdma_devices"):
        named = getattr(link, field) or {}
        for host in named:
            if host not in link.endpoints:
                yield f"links[{i}].{field}.{host}", f"{host!r} is not an end of this link ({link.endpoints})"
    missing = [h for h in link.endpoints if h not in (link.interfaces or {})]
    if missing:
        yield (
            f"links[{i}].interfaces",
            f"name the interface at each end between real machines (missing: {', '.join(missing)})",
        )


def check_switches(scenario: Scenario) -> Iterator[tuple[str, str]]:
    """Switch names are their own, every switch is cabled, and a segment is one kind of fabric."""
    if not scenario.switches:
        for i, _ in enumerate(scenario.background):
            yield f"background[{i}]", "background flows start at a switch; this scenario declares none"
        return
    hosts = {h.name for h in scenario.hosts}
    seen: set[str] = set()
    for i, switch in enumerate(scenario.switches):
        where = f"switches[{i}].name"
        if switch.name in seen or switch.name in hosts:
            yield where, f"{switch.name!r} is declared twice (host and switch names are unique)"
        if switch.name == FABRIC_HOST:
            yield where, f"{FABRIC_HOST!r} is the name of the VM that runs the switches; choose another"
        seen.add(switch.name)
        if not any(switch.name in lk.endpoints for lk in scenario.links):
            yield where, f"{switch.name!r} has no links: cable a host to it, or remove it"
    if FABRIC_HOST in hosts:
        yield "hosts", f"a host named {FABRIC_HOST!r} clashes with the VM that runs the switches"
    if real_machines(scenario):
        yield (
            "switches",
            "switches are emulated (Mininet in a fabric VM); between real machines the switch is "
            "already there: join the hosts by a link naming their interfaces",
        )
    yield from _segment_consistency(scenario)
    yield from _background(scenario)


def _background(scenario: Scenario) -> Iterator[tuple[str, str]]:
    """A flow starts at a switch and ends at a host on that switch's segment."""
    segment = scenario.plan.segments
    for i, flow in enumerate(scenario.background):
        if flow.switch not in segment:
            yield f"background[{i}].switch", f"{flow.switch!r} is not a switch ({listed(list(segment))})"
            continue
        reached = sorted({p.host for p in scenario.plan.ports if p.segment == segment[flow.switch]})
        if flow.to not in reached:
            yield (
                f"background[{i}].to",
                f"{flow.to!r} has no port on {flow.switch!r}'s segment (hosts there: {listed(reached)})",
            )


def _segment_consistency(scenario: Scenario) -> Iterator[tuple[str, str]]:
    """One segment, one fabric: RoCE over a bridge needs rxe at every port, and one MTU."""
    segment = scenario.plan.segments
    first: dict[int, tuple[int, PlannedLink]] = {}
    for i, planned in enumerate(scenario.plan.links):
        switch = next((end for end in planned.endpoints if end in segment), None)
        if switch is None:
            continue
        k = segment[switch]
        j, model = first.setdefault(k, (i, planned))
        for field, mine, theirs in (
            ("fabric", planned.link.fabric, model.link.fabric),
            ("rdma_driver", planned.rdma_driver, model.rdma_driver),
            ("mtu", planned.link.mtu, model.link.mtu),
        ):
            if mine != theirs:
                yield (
                    f"links[{i}].{field}",
                    f"{mine!r} differs from links[{j}] ({theirs!r}) on the same switched segment "
                    "(every port of a segment carries one fabric at one MTU)",
                )


def check_switch_loops(scenario: Scenario) -> Iterator[tuple[str, str]]:
    """Switches cabled in a loop flood the segment unless spanning tree runs on each of them."""
    switches = {s.name: s for s in scenario.switches}
    parent = {name: name for name in switches}

    def root(name: str) -> str:
        while parent[name] != name:
            name = parent[name]
        return name

    for i, link in enumerate(scenario.links):
        a, b = link.endpoints[0], link.endpoints[-1]
        if a not in switches or b not in switches:
            continue
        if root(a) != root(b):
            parent[root(a)] = root(b)
            continue
        loop = sorted(n for n in switches if root(n) == root(a))
        if not all(switches[n].stp for n in loop):
            yield (
                f"links[{i}]",
                f"closes a loop of switches ({', '.join(loop)}) without spanning tree: "
                "set stp: true on each of them, or remove a link",
            )


def check_incast(scenario: Scenario, links_ok: bool) -> Iterator[tuple[str, str]]:
    """Every target has an initiator; several share one only where sanlab can keep them apart."""
    if not links_ok:
        return
    for i, placed in enumerate(scenario.plan.targets):
        target, initiators = placed.target, placed.initiators
        if placed.link is None or placed.link.kind == "cable":
            continue
        if not initiators:
            yield (
                f"targets[{i}].host",
                f"no initiator host reaches {target.host!r} through link {placed.link.name!r}'s "
                "switch: cable an initiator to the same switches",
            )
        elif len(initiators) > 1 and any(f.action == "reset" for f in faults_of(scenario, target.name or "")):
            yield (
                f"targets[{i}].name",
                f"{len(initiators)} initiators share this target, and a reset acts on one initiator's "
                "connections: reset a target with one initiator, or restart this one (every "
                "initiator rides out a restart of the service)",
            )
        if len(initiators) > 1 and target.transport not in STACKS[target.stack].shared:
            sharing = "; ".join(f"{s.name}: {', '.join(s.shared)}" for s in STACKS.values() if s.shared)
            yield (
                f"targets[{i}].stack",
                f"{len(initiators)} initiators share this target; {target.stack} serves several "
                f"initiators over {', '.join(STACKS[target.stack].shared) or 'nothing'} so far "
                f"(sharing is built for {sharing})",
            )
        for j, workload in enumerate(scenario.workloads):
            applies = not workload.transports or target.transport in workload.transports
            share = (workload.verify_size or 0) * max(workload.numjobs) * len(initiators)
            if applies and share > target.size:
                yield (
                    f"workloads[{j}].verify_size",
                    f"{len(initiators)} initiators x {max(workload.numjobs)} job(s) of "
                    f"{format_size(workload.verify_size or 0)} do not fit in targets[{i}]'s size "
                    f"({format_size(target.size)})",
                )
