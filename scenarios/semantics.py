"""Consistency rules that a schema alone cannot express.

The facts they apply are the registry's (scenarios/registry.py): which
fabrics a transport needs, which stacks serve it and which of them the
guests ship, what each protocol has (digests, CHAP, poll queues).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator

from sanlab.scenarios.plan import PlannedLink
from sanlab.scenarios.registry import (
    FABRICS,
    GUESTS,
    STACKS,
    TRANSPORTS,
    driver_fabric,
    limits,
    names,
    serving,
)
from sanlab.scenarios.schema import Fault, Link, Projection, Scenario, Target
from sanlab.scenarios.sizes import format_duration, format_size
from sanlab.scenarios.topology import FABRIC_HOST, switch_names

# Named sets the messages list (each read from the registry, in its order).
NVME_TRANSPORTS = names(TRANSPORTS, family="nvme")
RDMA_FABRICS = names(FABRICS, rdma=True)
EMULATED_STACKS = names(STACKS, emulated=True)
DIGEST_TRANSPORTS = names(TRANSPORTS, digests=True)
CHAP_TRANSPORTS = names(TRANSPORTS, chap=True)


def _names(items: list[str]) -> str:
    return ", ".join(items) if items else "none declared"


def check_scenario(scenario: Scenario) -> list[tuple[str, str]]:
    """Every consistency problem as (field path, message)."""
    link_problems = list(_links(scenario))
    return (
        list(_hosts(scenario))
        + link_problems
        + list(_targets(scenario, links_ok=not link_problems))
        + list(_workloads_and_projections(scenario))
        + list(_sizes(scenario))
        + list(_machines(scenario))
        + list(_devices(scenario))
        + list(_faults(scenario))
        + list(_fault_timeline(scenario, links_ok=not link_problems))
        + list(_switches(scenario))
        + list(_switch_loops(scenario))
        + list(_multipath(scenario))
        + list(_guest_features(scenario))
        + list(_incast(scenario, links_ok=not link_problems))
    )


def real_machines(scenario: Scenario) -> bool:
    """Is the scenario for real machines (reached over SSH) rather than VMs?

    It is when a host says how to reach it or a link names a real
    interface; hosts that do not say it yet get it from ``--inventory``.
    """
    return any(h.ssh for h in scenario.hosts) or any(lk.interfaces for lk in scenario.links)


def unreached(scenario: Scenario) -> list[str]:
    """Real-machine hosts that no ``ssh`` reaches (yet): what ``--inventory`` must supply."""
    return [h.name for h in scenario.hosts if not h.ssh] if real_machines(scenario) else []


# Link fields that shape an emulated cable; a real one is what it is.
SHAPING_FIELDS = ("rate", "delay", "loss", "rdma_driver")


def _machines(scenario: Scenario) -> Iterator[tuple[str, str]]:
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


def _faults(scenario: Scenario) -> Iterator[tuple[str, str]]:
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
            yield f"faults[{i}].link", f"{fault.link!r} is not a link (links: {_names(names)})"
        elif scenario.plan.link(fault.link).kind != "cable":
            yield from _switch_port(i, fault, scenario)
        else:
            yield from _burst(i, fault, scenario.plan.link(fault.link).link)
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
            f"{fault.target!r} is not a named target (targets: {_names(list(named))})",
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
    ports = sorted({t.link.name for t in scenario.plan.targets if t.link and t.link.kind != "cable"})
    if fault.link not in ports:
        where = _or(ports) if ports else "a target's link to its switch"
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


def _fault_timeline(scenario: Scenario, links_ok: bool) -> Iterator[tuple[str, str]]:
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


def _switch_loops(scenario: Scenario) -> Iterator[tuple[str, str]]:
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


def faults_on(scenario: Scenario, link: str) -> list[Fault]:
    """The faults that hit every point of a target on ``link``, in time order."""
    return sorted((f for f in scenario.faults if f.link == link), key=lambda f: f.at)


def faults_of(scenario: Scenario, target: str) -> list[Fault]:
    """The faults that act on the target named ``target`` itself (restart, reset)."""
    return [f for f in scenario.faults if f.target == target]


def _devices(scenario: Scenario) -> Iterator[tuple[str, str]]:
    """``device`` goes with backstore 'device' and nothing else; ``destroy`` with a device."""
    for i, target in enumerate(scenario.targets):
        if target.backstore == "device" and target.device is None:
            yield (
                f"targets[{i}].device",
                "backstore 'device' needs the block device to serve, e.g. /dev/nvme1n1",
            )
        if target.backstore != "device" and target.device is not None:
            yield f"targets[{i}].device", f"is only read with backstore: device (not {target.backstore!r})"
        if target.destroy and target.device is None:
            yield f"targets[{i}].destroy", "applies to a device backstore only"
        if target.device is not None and target.luns != 1:
            yield f"targets[{i}].luns", "a device backstore serves one LUN: the device itself"


def _hosts(scenario: Scenario) -> Iterator[tuple[str, str]]:
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


def _links(scenario: Scenario) -> Iterator[tuple[str, str]]:
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
                switches = f"; switches: {_names(switch_names(scenario))}" if scenario.switches else ""
                yield (
                    f"links[{i}].endpoints[{j}]",
                    f"{end!r} is not a host (hosts: {_names(hosts)}{switches})",
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
            f"{driver!r} needs an RDMA fabric (set fabric: {_or(RDMA_FABRICS)})",
        )
    elif driver != fabric.soft_driver:
        emulated = driver_fabric(driver)
        yield (
            f"links[{i}].rdma_driver",
            f"{driver!r} is {emulated.title}, not {link.fabric} "
            f"(use {fabric.soft_driver}, or set fabric: {emulated.name})",
        )


def _targets(scenario: Scenario, links_ok: bool) -> Iterator[tuple[str, str]]:
    """Target problems; when a link is itself broken, what follows from it is not repeated."""
    roles = {h.name: h.role for h in scenario.hosts}
    link_names = scenario.plan.link_names
    for i, placed in enumerate(scenario.plan.targets):
        target = placed.target
        where = f"targets[{i}]"
        if target.host not in roles:
            yield f"{where}.host", f"{target.host!r} is not a host (hosts: {_names(list(roles))})"
        elif roles[target.host] != "target":
            yield f"{where}.host", f"{target.host!r} has role {roles[target.host]!r}, not 'target'"
        if target.stack not in EMULATED_STACKS:
            yield (
                f"{where}.stack",
                f"{target.stack!r} is for projections only (emulated stacks: {', '.join(EMULATED_STACKS)})",
            )
        allowed = serving(target.stack)
        if target.transport not in allowed:
            yield (
                f"{where}.transport",
                f"{target.transport!r} is not served by {target.stack} (use {', '.join(allowed)})",
            )
        if (target.header_digest or target.data_digest) and target.transport not in DIGEST_TRANSPORTS:
            yield (
                f"{where}.header_digest",
                f"digests apply to {' and '.join(DIGEST_TRANSPORTS)} only",
            )
        if target.chap and target.transport not in CHAP_TRANSPORTS:
            yield f"{where}.chap", f"CHAP applies to {' and '.join(CHAP_TRANSPORTS)} only"
        forbids = STACKS[target.stack].chap_name_forbids if target.stack in STACKS else ""
        if target.chap and (bad := sorted(set(forbids) & set(target.chap.username))):
            shown = " ".join(repr(c) for c in bad)
            yield (
                f"{where}.chap.username",
                f"{target.stack} cannot hold a CHAP name with {shown} (it cuts the name there)",
            )
        if target.link is not None and target.link not in link_names:
            yield f"{where}.link", f"{target.link!r} is not a link (links: {_names(link_names)})"
            continue
        if target.paths and not set(target.paths) <= set(link_names):
            continue  # said by _multipath
        if placed.link is None:
            if target.host in roles and links_ok:
                yield f"{where}.link", f"cannot tell which link {target.host!r} serves on: name one"
            continue
        yield from _target_link(where, placed.target, placed.link)


def _target_link(where: str, target: Target, planned: PlannedLink) -> Iterator[tuple[str, str]]:
    """The link a target serves on reaches its host and carries its transport."""
    link = planned.link
    if target.host not in link.endpoints:
        yield f"{where}.link", f"{planned.name!r} does not reach host {target.host!r}"
    if TRANSPORTS[target.transport].rdma and not FABRICS[link.fabric].rdma:
        yield (
            f"{where}.transport",
            f"{target.transport!r} needs an RDMA link, but {planned.name!r} is "
            f"fabric {link.fabric!r} (use {_or(RDMA_FABRICS)})",
        )
    else:
        for limit in limits(target.transport, target.stack, link.fabric):
            yield f"{where}.{limit.field}", limit.why.format(link=repr(planned.name))


def _or(items: Iterable[str]) -> str:
    """'roce, iwarp or ib'."""
    listed = list(items)
    return ", ".join(listed[:-1]) + " or " + listed[-1] if len(listed) > 1 else "".join(listed)


# In-flight I/Os of one point: the block layer's and transports' queues
# (nvme-tcp 128 per queue, open-iscsi 128 commands per session) stay well
# below this, and it bounds the model's work at a few seconds a point.
MAX_OUTSTANDING = 4096
RAM_BACKSTORES = ("ramdisk", "file")  # the guest's root is RAM too, so a file lives in RAM


def _sizes(scenario: Scenario) -> Iterator[tuple[str, str]]:
    """Sizes that are each fine alone but not together: RAM disks vs memory, blocks vs LUNs."""
    real = real_machines(scenario)
    memory = {h.name: h.memory for h in scenario.hosts if not real}  # a real machine has its own
    for j, target in enumerate(scenario.targets):
        held = target.size * target.luns
        if target.backstore in RAM_BACKSTORES and target.host in memory and held > memory[target.host] // 2:
            yield (
                f"targets[{j}].size",
                f"{format_size(target.size)} x {target.luns} LUN(s) of {target.backstore} is held in RAM, "
                f"more than half of {target.host!r}'s memory ({format_size(memory[target.host])}); "
                "use a smaller size, backstore: null, or more memory",
            )
        for i, workload in enumerate(scenario.workloads):
            if workload.transports and target.transport not in workload.transports:
                continue
            for k, bs in enumerate(workload.bs):
                if bs > target.size:
                    yield (
                        f"workloads[{i}].bs[{k}]",
                        f"{format_size(bs)} is larger than targets[{j}]'s size ({format_size(target.size)})",
                    )
            jobs = max(workload.numjobs)
            if workload.verify_size and workload.verify_size * jobs > target.size:
                yield (
                    f"workloads[{i}].verify_size",
                    f"{jobs} job(s) of {format_size(workload.verify_size)} each do not fit in "
                    f"targets[{j}]'s size ({format_size(target.size)})",
                )
    for i, workload in enumerate(scenario.workloads):
        outstanding = max(workload.iodepth) * max(workload.numjobs)
        if outstanding > MAX_OUTSTANDING:
            yield (
                f"workloads[{i}].iodepth",
                f"iodepth {max(workload.iodepth)} x numjobs {max(workload.numjobs)} is {outstanding} I/Os "
                f"in flight; at most {MAX_OUTSTANDING} (no initiator queues more)",
            )
        if workload.verify_size and workload.verify_size < max(workload.bs):
            yield (
                f"workloads[{i}].verify_size",
                f"{format_size(workload.verify_size)} is smaller than the largest block "
                f"({format_size(max(workload.bs))})",
            )


def _digests_only_on_tcp(
    where: str, projection: Projection, transports: Iterable[str]
) -> Iterator[tuple[str, str]]:
    """Header and data digests are iSCSI's and NVMe/TCP's: RDMA transports have none to cost."""
    for option in ("header_digest", "data_digest"):
        if getattr(projection, option):
            without = sorted(t for t in transports if t not in DIGEST_TRANSPORTS)
            if without:
                yield (
                    f"{where}.{option}",
                    f"{without[0]} has no {option.replace('_', ' ')} "
                    f"(digests are {' and '.join(DIGEST_TRANSPORTS)}'s; RDMA checks its own frames)",
                )


def _workloads_and_projections(scenario: Scenario) -> Iterator[tuple[str, str]]:
    declared = {t.transport for t in scenario.targets}
    for i, workload in enumerate(scenario.workloads):
        if workload.verify == "off":
            continue
        for j, target in enumerate(scenario.targets):
            applies = not workload.transports or target.transport in workload.transports
            if applies and target.backstore == "null":
                yield (
                    f"targets[{j}].backstore",
                    f"'null' discards writes, so workloads[{i}] (verify: {workload.verify}) cannot pass "
                    "(use ramdisk or file, or verify: off)",
                )
    for i, projection in enumerate(scenario.projections):
        where = f"projections[{i}]"
        if projection.transport is None and not declared:
            yield f"{where}.transport", "is required when the scenario declares no targets"
        transport = projection.transport
        if transport and projection.target_stack and transport not in serving(projection.target_stack):
            yield (
                f"{where}.target_stack",
                f"{projection.target_stack!r} does not serve {transport!r} "
                f"(use {', '.join(TRANSPORTS[transport].stacks)})",
            )
        if transport and projection.fabric:
            yield from _fabric_for(where, transport, projection.fabric)
        yield from _nvme_only(where, projection, {transport} if transport else declared)
        yield from _digests_only_on_tcp(where, projection, {transport} if transport else declared)
    for i, workload in enumerate(scenario.workloads):
        for j, transport in enumerate(workload.transports or []):
            possible = declared | {p.transport for p in scenario.projections if p.transport}
            if possible and transport not in possible:
                yield (
                    f"workloads[{i}].transports[{j}]",
                    f"{transport!r} is used by no target or projection here "
                    f"(used: {', '.join(sorted(str(p) for p in possible))})",
                )


def fabric_problem(transport: str, fabric: str) -> str | None:
    """Why ``transport`` is not modelled over ``fabric``, or None when it is."""
    t, f = TRANSPORTS[transport], FABRICS[fabric]
    if t.runs_over(fabric):
        return None
    if not t.rdma:
        return f"{transport!r} runs over TCP; {fabric!r} is not modelled for it (use {_or(t.fabrics)})"
    if not f.rdma:
        return f"{transport!r} needs an RDMA fabric (use {_or(t.fabrics)})"
    over = " and ".join(FABRICS[n].title for n in t.fabrics)
    return f"{t.title} runs over {over}, not {f.title} (use {_or(t.fabrics)})"


def _fabric_for(where: str, transport: str, fabric: str) -> Iterator[tuple[str, str]]:
    problem = fabric_problem(transport, fabric)
    if problem:
        yield f"{where}.fabric", problem


def _nvme_only(where: str, projection: Projection, transports: Iterable[str]) -> Iterator[tuple[str, str]]:
    """Polling and a count of I/O queues are NVMe hosts' knobs: SCSI initiators have neither."""
    others = sorted(str(t) for t in transports if t not in NVME_TRANSPORTS)
    without = sorted(str(t) for t in transports if not TRANSPORTS[str(t)].tls)
    if projection.tls and without:
        yield f"{where}.tls", f"TLS is {_tls_owners()}, not {', '.join(without)}"
    for field, value in (("poll", projection.poll), ("queues", projection.queues)):
        if value and others:
            yield (
                f"{where}.{field}",
                f"is for NVMe hosts (poll queues, nr_io_queues), not {', '.join(others)} "
                f"(use transport {' or '.join(NVME_TRANSPORTS)})",
            )


def _switches(scenario: Scenario) -> Iterator[tuple[str, str]]:
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
            yield f"background[{i}].switch", f"{flow.switch!r} is not a switch ({_names(list(segment))})"
            continue
        reached = sorted({p.host for p in scenario.plan.ports if p.segment == segment[flow.switch]})
        if flow.to not in reached:
            yield (
                f"background[{i}].to",
                f"{flow.to!r} has no port on {flow.switch!r}'s segment (hosts there: {_names(reached)})",
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


def _incast(scenario: Scenario, links_ok: bool) -> Iterator[tuple[str, str]]:
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


def _guest_features(scenario: Scenario) -> Iterator[tuple[str, str]]:
    """What only some kernels have: NVMe in-band authentication needs an NVMe transport and,
    on sanlab's VMs, a guest whose kernel has it."""
    guest = GUESTS[scenario.guest]
    with_it = ", ".join(g.name for g in GUESTS.values() if g.nvme_auth)
    for i, target in enumerate(scenario.targets):
        yield from _tls(i, target, scenario)
        if target.auth is None:
            continue
        if not TRANSPORTS[target.transport].nvme:
            yield (
                f"targets[{i}].auth",
                f"NVMe in-band authentication is for nvme-tcp and nvme-rdma; not {target.transport}",
            )
        elif not guest.nvme_auth and not real_machines(scenario):
            yield (
                f"targets[{i}].auth",
                f"NVMe in-band authentication needs guest {with_it} ({guest.title} has none): "
                f"set guest: {with_it}",
            )


def _tls_owners() -> str:
    """Whose TLS it is, for an error message: "NVMe/TCP's (nvme-tcp)"."""
    owners = [t for t in TRANSPORTS.values() if t.tls]
    return " and ".join(f"{t.title}'s ({t.name})" for t in owners)


def _tls(i: int, target: Target, scenario: Scenario) -> Iterator[tuple[str, str]]:
    """TLS is NVMe/TCP's, on a guest whose kernel has it (sanlab runs tlshd on its guests only)."""
    if not target.tls:
        return
    with_it = ", ".join(g.name for g in GUESTS.values() if g.nvme_tls)
    guest = GUESTS[scenario.guest]
    if not TRANSPORTS[target.transport].tls:
        yield f"targets[{i}].tls", f"TLS is {_tls_owners()}; not {target.transport}"
    elif real_machines(scenario):
        yield (
            f"targets[{i}].tls",
            "TLS is configured on sanlab's guests only (tlshd and the keyring are ours there)",
        )
    elif not guest.nvme_tls:
        yield (
            f"targets[{i}].tls",
            f"NVMe/TCP TLS needs guest {with_it} ({guest.title} has none): set guest: {with_it}",
        )


def _multipath_stack(i: int, target: Target, real: bool) -> Iterator[tuple[str, str]]:
    """Something joins the paths: NVMe's own multipath, or dm-multipath on sanlab's guests."""
    joiner = TRANSPORTS[target.transport].multipath
    if not joiner:
        built = ", ".join(t.name for t in TRANSPORTS.values() if t.multipath)
        yield f"targets[{i}].transport", f"multipath is built for {built}; not {target.transport}"
    elif not STACKS[target.stack].multipath:
        served = " and ".join(names(STACKS, multipath=True))
        yield f"targets[{i}].stack", f"multipath targets are served by {served}; not {target.stack}"
    elif joiner == "dm-multipath" and real:
        yield (
            f"targets[{i}].paths",
            "dm-multipath is configured on sanlab's guests only: a real host's multipath.conf is its owner's",
        )


def _multipath(scenario: Scenario) -> Iterator[tuple[str, str]]:
    """Paths are cables from the target's host to one initiator, served by a stack that can."""
    links = {lk.name: lk for lk in scenario.plan.links}
    for i, target in enumerate(scenario.targets):
        if not target.paths:
            continue
        where = f"targets[{i}].paths"
        yield from _multipath_stack(i, target, real_machines(scenario))
        if target.link is not None:
            yield f"targets[{i}].link", "give either link or paths (the first path is the target's link)"
        if len(set(target.paths)) != len(target.paths):
            yield where, "names a link twice (each path is its own cable)"
        peers = set()
        for j, path in enumerate(target.paths):
            planned = links.get(path)
            if planned is None:
                yield f"{where}[{j}]", f"{path!r} is not a link (links: {_names(list(links))})"
                continue
            link = planned.link
            if TRANSPORTS[target.transport].rdma and not FABRICS[link.fabric].rdma:
                yield (
                    f"{where}[{j}]",
                    f"{target.transport!r} needs an RDMA link, but path {path!r} is fabric {link.fabric!r} "
                    "(use roce, iwarp or ib)",
                )
            elif target.host not in link.endpoints or planned.kind != "cable":
                yield f"{where}[{j}]", f"{path!r} is not a cable from {target.host!r} to an initiator"
            else:
                peers.add(next(h for h in link.endpoints if h != target.host))
        if len(peers) > 1:
            hosts = ", ".join(sorted(peers))
            yield where, f"lead to {len(peers)} hosts ({hosts}); all paths join one initiator"
