"""The rules of targets, workloads and projections: what a stack serves and over which link,
sizes that fit together, options only some transports have, what only some guests' kernels
offer, and multipath."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sanlab.scenarios.plan import PlannedLink, real_machines
from sanlab.scenarios.registry import FABRICS, GUESTS, STACKS, TRANSPORTS, limits, names, serving
from sanlab.scenarios.schema import Projection, Scenario, Target
from sanlab.scenarios.semantics.common import (
    CHAP_TRANSPORTS,
    DIGEST_TRANSPORTS,
    EMULATED_STACKS,
    NVME_TRANSPORTS,
    RDMA_FABRICS,
    either,
    fabric_problem,
    listed,
    tls_owners,
)
from sanlab.scenarios.sizes import format_size


def check_targets(scenario: Scenario, links_ok: bool) -> Iterator[tuple[str, str]]:
    """Target problems; when a link is itself broken, what follows from it is not repeated."""
    roles = {h.name: h.role for h in scenario.hosts}
    link_names = scenario.plan.link_names
    for i, placed in enumerate(scenario.plan.targets):
        target = placed.target
        where = f"targets[{i}]"
        if target.host not in roles:
            yield f"{where}.host", f"{target.host!r} is not a host (hosts: {listed(list(roles))})"
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
            yield f"{where}.link", f"{target.link!r} is not a link (links: {listed(link_names)})"
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
            f"fabric {link.fabric!r} (use {either(RDMA_FABRICS)})",
        )
    else:
        for limit in limits(target.transport, target.stack, link.fabric):
            yield f"{where}.{limit.field}", limit.why.format(link=repr(planned.name))


def check_devices(scenario: Scenario) -> Iterator[tuple[str, str]]:
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


# In-flight I/Os of one point: the block layer's and transports' queues
# (nvme-tcp 128 per queue, open-iscsi 128 commands per session) stay well
# below this, and it bounds the model's work at a few seconds a point.
MAX_OUTSTANDING = 4096


RAM_BACKSTORES = ("ramdisk", "file")  # the guest's root is RAM too, so a file lives in RAM


def check_sizes(scenario: Scenario) -> Iterator[tuple[str, str]]:
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


def check_workloads_and_projections(scenario: Scenario) -> Iterator[tuple[str, str]]:
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


def _fabric_for(where: str, transport: str, fabric: str) -> Iterator[tuple[str, str]]:
    problem = fabric_problem(transport, fabric)
    if problem:
        yield f"{where}.fabric", problem


def _nvme_only(where: str, projection: Projection, transports: Iterable[str]) -> Iterator[tuple[str, str]]:
    """Polling and a count of I/O queues are NVMe hosts' knobs: SCSI initiators have neither."""
    others = sorted(str(t) for t in transports if t not in NVME_TRANSPORTS)
    without = sorted(str(t) for t in transports if not TRANSPORTS[str(t)].tls)
    if projection.tls and without:
        yield f"{where}.tls", f"TLS is {tls_owners()}, not {', '.join(without)}"
    for field, value in (("poll", projection.poll), ("queues", projection.queues)):
        if value and others:
            yield (
                f"{where}.{field}",
                f"is for NVMe hosts (poll queues, nr_io_queues), not {', '.join(others)} "
                f"(use transport {' or '.join(NVME_TRANSPORTS)})",
            )


def check_guest_features(scenario: Scenario) -> Iterator[tuple[str, str]]:
    """What only some kernels have: NVMe in-band authentication needs an NVMe transport and,
    on sanlab's VMs, a guest whose kernel has it."""
    guest = GUESTS[scenario.guest_name]
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


def _tls(i: int, target: Target, scenario: Scenario) -> Iterator[tuple[str, str]]:
    """TLS is NVMe/TCP's, on a guest whose kernel has it (sanlab runs tlshd on its guests only)."""
    if not target.tls:
        return
    with_it = ", ".join(g.name for g in GUESTS.values() if g.nvme_tls)
    guest = GUESTS[scenario.guest_name]
    if not TRANSPORTS[target.transport].tls:
        yield f"targets[{i}].tls", f"TLS is {tls_owners()}; not {target.transport}"
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


def check_multipath(scenario: Scenario) -> Iterator[tuple[str, str]]:
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
                yield f"{where}[{j}]", f"{path!r} is not a link (links: {listed(list(links))})"
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
