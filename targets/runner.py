"""Run a scenario's matrix on hosts that are already up: one target at a time.

For each target: export it, connect the initiator, run every workload point
that applies to its transport with fio, and take it all down again.  Each
point becomes a ``ResultRecord`` (``mode: emulated``) with the raw fio JSON
kept beside it; a point or a whole target that fails is recorded with its
error and the run goes on.
"""

from __future__ import annotations

import itertools
import queue
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Protocol

from sanlab.scenarios.endpoints import Endpoints
from sanlab.scenarios.errors import HostDown, SanlabError
from sanlab.scenarios.hosts import Say
from sanlab.scenarios.plan import PlannedTarget
from sanlab.scenarios.records import BackendFacts, HostFacts, MachineFacts, NicFacts, ResultRecord, aggregate
from sanlab.scenarios.registry import PLAIN_FABRIC, TRANSPORTS
from sanlab.scenarios.schema import Fault, Scenario, Target, Workload
from sanlab.scenarios.semantics import faults_of, faults_on
from sanlab.scenarios.sizes import format_size
from sanlab.scenarios.writing import write_file
from sanlab.targets import backstores, dm_multipath, faults, host_facts, kernel_stacks, nvme_host
from sanlab.targets.fio import DEFAULT_VERIFY_SIZE, FioJob, judge, parse, verify_failures
from sanlab.targets.host import Host, StackError, kernel_tail
from sanlab.targets.naming import nqn
from sanlab.targets.stacks import Wiring, connect_only, export_only, exported, reset_script, service_scripts

# A verified run is bounded by size, not time: under TCG 16 MiB of 4k blocks
# written and read back takes about 15 s; this is the limit for a stuck one.
VERIFIED_RUN_TIMEOUT = 900.0
# How long a task must stay stuck in the kernel, after a failed target, to count as left
# behind rather than caught on its way through.
STUCK_CONFIRM_S = 5.0


@dataclass(frozen=True)
class Point:
    target: Target
    name: str
    workload: Workload
    rw: str
    bs: int
    iodepth: int
    numjobs: int
    faults: tuple[Fault, ...] = ()  # what goes wrong on the target's link while fio runs

    @property
    def label(self) -> str:
        return f"{self.name} {self.rw} {format_size(self.bs)} qd{self.iodepth} j{self.numjobs}"


def points(scenario: Scenario, placed: PlannedTarget) -> Iterator[Point]:
    """A target's points: each workload that applies to its transport, with the faults that
    fall on its links or on it while fio runs."""
    target, name = placed.target, placed.name
    hits = [f for path in placed.paths for f in faults_on(scenario, path)]
    hits += faults_of(scenario, name)
    on_link = tuple(sorted(hits, key=lambda f: f.at))
    for workload in scenario.workloads:
        if workload.transports and target.transport not in workload.transports:
            continue
        for rw, bs, qd, nj in itertools.product(workload.rw, workload.bs, workload.iodepth, workload.numjobs):
            yield Point(target, name, workload, rw, bs, qd, nj, on_link)


def planned_points(scenario: Scenario) -> int:
    """How many points a run of ``scenario`` will record."""
    return sum(len(list(points(scenario, placed))) for placed in scenario.plan.targets)


def records_per_point(scenario: Scenario) -> list[int]:
    """How many records each planned point writes, in run order: one, or one per initiator of a
    shared target and then their aggregate."""
    counts = []
    for placed in scenario.plan.targets:
        sharing = len(placed.initiators)
        counts += [1 if sharing <= 1 else sharing + 1] * len(list(points(scenario, placed)))
    return counts


def finished_points(scenario: Scenario, records: int) -> tuple[int, int]:
    """(points, records) that a run cut short after writing ``records`` records finished whole."""
    done = kept = 0
    for count in records_per_point(scenario):
        if kept + count > records:
            break
        done, kept = done + 1, kept + count
    return done, kept


@dataclass(frozen=True)
class Placement:
    """Where one target runs: its hosts and addresses, and what its records say of the link."""

    wiring: Wiring
    fabric: str  # as the transport sees it: 'eth' for TCP transports, whatever the link carries
    rdma_driver: str | None
    link_gbps: float | None
    mtu: int
    mode: str = "emulated"  # 'measured' on real machines
    hardware: Mapping[str, object] | None = None  # facts of the target and initiator hosts
    machine: MachineFacts | None = None  # what a model needs of both hosts (targets/host_facts.py)
    devices: Mapping[tuple[str, str], BackendFacts] = field(default_factory=dict)  # (host, device)

    def record_base(self, target: Target) -> dict[str, object]:
        """The fields every record of this target shares."""
        return {
            "mode": self.mode,
            "initiator": self.wiring.initiator_host.name,
            "hardware": self.hardware,
            "machine": self.machine,
            "backend": host_facts.backend_of(target, self.devices),
            "transport": target.transport,
            "fabric": self.fabric,
            "rdma_driver": self.rdma_driver,
            "target_stack": target.stack,
            "link_gbps": self.link_gbps,
            "mtu": self.mtu,
        }


def placements(
    scenario: Scenario, target: Target, hosts: Mapping[str, Host], ends: Endpoints
) -> list[Placement]:
    """Where a target runs, once per initiator that reaches it (several behind a switch)."""
    placed = scenario.plan.placed(target)
    if placed.link is None:
        raise SanlabError(f"target on {target.host!r} has no link")
    link, lname = placed.link.link, placed.link.name
    rate = link.rate / 1e9 if link.rate else None
    found_ends = [
        Wiring(
            hosts[target.host],
            hosts[initiator],
            ends[(lname, target.host)],
            ends[(via, initiator)],
            tuple((ends[(path, target.host)], ends[(path, initiator)]) for path in (target.paths or [])[1:]),
        )
        for initiator, via in placed.initiators
    ]
    if not found_ends:
        raise SanlabError(f"no initiator reaches target host {target.host!r}")
    if not TRANSPORTS[target.transport].rdma:  # plain TCP/IP, whatever else the link carries
        return [Placement(wire, PLAIN_FABRIC.name, None, rate, link.mtu) for wire in found_ends]
    return [Placement(wire, link.fabric, placed.link.rdma_driver, rate, link.mtu) for wire in found_ends]


def place(scenario: Scenario, target: Target, hosts: Mapping[str, Host], ends: Endpoints) -> Placement:
    """Where a target runs, for its first (on a cable, its only) initiator."""
    return placements(scenario, target, hosts, ends)[0]


def rehearse(scenario: Scenario, hosts: Mapping[str, Host], ends: Endpoints) -> None:
    """Send every command of a run to ``hosts`` (dry-run hosts that only write them down).

    Each target is exported, connected, given its points' fio commands and
    taken down again, in the order a real run would.
    """
    for planned in scenario.plan.targets:
        target, name = planned.target, planned.name
        wires = [placed.wiring for placed in placements(scenario, target, hosts, ends)]
        with export_only(target, name, admitting_all(wires)) as made, ExitStack() as connections:
            devices = [connections.enter_context(connect_only(target, name, w, made))[0] for w in wires]
            for p in points(scenario, planned):
                for share, (wire, device) in enumerate(zip(wires, devices, strict=True)):
                    job = job_for(p, device, share)
                    if job.verify and "read" in p.rw:
                        wire.initiator_host.run(job.fill_argv())
                    wire.initiator_host.run(job.argv())
                    for fault in p.faults if share == 0 else ():  # one initiator's side applies them
                        for host, command in _fault_commands(p, wire, fault, device):
                            host.run(command)


def admitting_all(wires: list[Wiring]) -> Wiring:
    """The first initiator's wiring, told of the others: what a shared target is exported with,
    so that its ACLs admit every initiator (each by its own IQN and address)."""
    sharers = tuple((w.initiator_host.name, w.initiator_address) for w in wires[1:])
    return replace(wires[0], sharers=sharers)


def devices_refused(scenario: Scenario, hosts: Mapping[str, Host]) -> list[str]:
    """Why a target's block device may not be served, per target; checked before anything changes."""
    problems = []
    for target in scenario.targets:
        if target.backstore == "device" and target.device:
            problem = backstores.device_problem(hosts[target.host], target.device, target.destroy)
            if problem:
                problems.append(f"{target.host}: {problem}")
    return problems


def _cpu_sample(host: Host) -> tuple[int, int]:
    fields = host.run("head -n1 /proc/stat", timeout=30).stdout.split()[1:]
    values = [int(v) for v in fields]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return sum(values), idle


def _busy_pct(before: tuple[int, int], after: tuple[int, int]) -> float:
    total, idle = after[0] - before[0], after[1] - before[1]
    return round(100.0 * (total - idle) / total, 2) if total > 0 else 0.0


class LinkState(Protocol):
    @property
    def ok(self) -> bool: ...

    @property
    def detail(self) -> str: ...


@dataclass(frozen=True)
class _Unchecked:
    """A link whose check itself failed: as good as stalled."""

    detail: str
    ok: bool = False


class Sink(Protocol):
    """Where finished points go as they finish (a run's journal), so an interrupted run loses none."""

    def add(self, record: ResultRecord) -> None: ...

    def drop_last(self, count: int) -> None: ...


class _Discard:
    def add(self, record: ResultRecord) -> None:
        pass

    def drop_last(self, count: int) -> None:
        pass


class LinkDoctor(Protocol):
    """Whoever owns the links: can tell whether one still carries packets, and restart it."""

    def check_link(self, link: str) -> LinkState: ...

    def restart_link(self, link: str, say: Say) -> LinkState:
        """Restart ``link`` as harshly as it takes (down/up, NIC reset, reboot), saying each
        step that takes long."""
        ...

    def reboot_link_hosts(self, link: str, say: Say) -> None:
        """Reboot the hosts at both ends of ``link`` and set them up again."""
        ...


@dataclass(frozen=True)
class Machines:
    """Real machines under a run: their records say 'measured' and carry each host's facts."""

    facts: Mapping[str, Mapping[str, object]]  # host name -> hardware facts
    link_gbps: Mapping[str, float | None]  # link name -> the NICs' negotiated speed
    mtu: Mapping[str, int]  # link name -> the interfaces' MTU
    # host name -> its CPU and kernel, and the NIC of each of its link interfaces
    hosts: Mapping[str, tuple[HostFacts, Mapping[str, NicFacts]]] = field(default_factory=dict)
    devices: Mapping[tuple[str, str], BackendFacts] = field(default_factory=dict)  # (host, device)

    def _host(self, name: str, interface: str) -> HostFacts | None:
        if name not in self.hosts:
            return None
        cpu, nics = self.hosts[name]
        return cpu.model_copy(update={"nic": nics.get(interface)})

    def apply(self, placement: Placement) -> Placement:
        wire = placement.wiring
        hardware = {
            "target": self.facts.get(wire.target_host.name),
            "initiator": self.facts.get(wire.initiator_host.name),
        }
        machine = MachineFacts(
            initiator=self._host(wire.initiator_host.name, wire.initiator_end.interface),
            target=self._host(wire.target_host.name, wire.target_end.interface),
        )
        return replace(
            placement,
            mode="measured",
            hardware=hardware,
            machine=machine,
            devices=self.devices,
            link_gbps=self.link_gbps.get(wire.link),
            mtu=self.mtu.get(wire.link, placement.mtu),
        )


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
) -> list[ResultRecord]:
    """Every target's points, in order, less the first ``skip`` (a resumed run has them).

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
    todo = []
    for planned in scenario.plan.targets:
        cells = list(points(scenario, planned))
        todo.append((planned.target, planned.name, cells[skip:]))
        skip = max(0, skip - len(cells))
    total = sum(len(cells) for _, _, cells in todo)
    done = 0
    todo = [(t, name, cells) for t, name, cells in todo if cells]  # a finished target is not exported again
    for target, name, cells in todo:
        group = placements(scenario, target, hosts, ends)
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
            withdraw = partial(sink.drop_last, len(attempt))
            stuck = partial(_still_stuck, wire.initiator_host, wire.target_host)
            attempt = _consult(doctor, wire.link, name, attempt, run_target, say, withdraw, stuck)
            sink.drop_last(len(attempt))  # the same points again, now with the link's findings
            for record in attempt:
                sink.add(record)
        records.extend(attempt)
        done += len(cells)
    return records


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
        with exported(target, name, wire, _prefixed(say, name)) as devices:
            for p in cells:
                rec = run_point(p, devices[0], wire, raw_dir, base, say)
                records.append(rec)
                sink.add(rec)
                say(f"[{done + len(records)}/{total}] {p.label}: {_outcome(rec)}")
    except SanlabError as exc:
        error = str(exc) + _stuck_tasks(wire.initiator_host, wire.target_host)
        for p in cells[len(records) :]:
            verify = "fail" if p.workload.verify != "off" else "off"
            records.append(_record(base, p, error=error, verify=verify))
            sink.add(records[-1])
        say(f"{name}: FAILED: {error}")
    return records


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
        say = _prefixed(self.say, self.name)
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
                    self.say(f"[{done + finished}/{total}] {p.label}: {_outcome(point[-1])} ({each})")
        except SanlabError as exc:
            error = str(exc) + _stuck_tasks(wires[0].target_host, *(w.initiator_host for w in wires))
            for p in cells[finished:]:
                verify = "fail" if p.workload.verify != "off" else "off"
                failed = [
                    _record(pl.record_base(self.target), p, error=error, verify=verify) for pl in self.group
                ]
                for record in [*failed, aggregate(failed)]:
                    records.append(record)
                    self.sink.add(record)
            self.say(f"{self.name}: FAILED: {error}")
        return records

    def _point(self, p: Point, devices: list[str]) -> list[ResultRecord]:
        """Every initiator's fio at once; their records, then the aggregate."""

        injects = _shared_faults(p, [pl.wiring for pl in self.group], devices)

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


def _outcome(record: ResultRecord) -> str:
    if record.error is not None:
        return f"FAILED: {record.error}"
    told = f"{record.iops:.0f} IOPS ({record.mode}), verify {record.verify}"
    if record.throughput_dip_pct is not None:
        told += f", throughput dip {record.throughput_dip_pct:.0f}%"
    if record.failover_s is not None:
        told += f", failed over in {record.failover_s:.2f} s"
    if record.failback_s is not None:
        told += f", all paths back {record.failback_s:.2f} s after the fault"
    elif record.recovery_s is not None:
        told += f", I/O back {record.recovery_s:.2f} s after the fault"
    return told


def _stuck_tasks(*hosts: Host) -> str:
    """Storage and RDMA tasks that wait somewhere in the kernel, per host, as error lines."""
    return _stuck_lines("stuck", ((h.name, kernel_stacks.snapshot(h)) for h in hosts))


def _still_stuck(*hosts: Host) -> str:
    """Storage and RDMA tasks that wait in the kernel now and still ``STUCK_CONFIRM_S`` later,
    per host, as error lines ('' if none): what a failed target left that no teardown freed."""
    first = {h.name: set(kernel_stacks.snapshot(h)) for h in hosts}
    time.sleep(STUCK_CONFIRM_S)
    again = ((h.name, [line for line in kernel_stacks.snapshot(h) if line in first[h.name]]) for h in hosts)
    return _stuck_lines("still stuck", again)


def _stuck_lines(how: str, found: Iterable[tuple[str, list[str]]]) -> str:
    """One error line per host with tasks in ``found``: '<host> <how> in kernel: a; b'."""
    return "".join(f"\n  {name} {how} in kernel: {'; '.join(lines)}" for name, lines in found if lines)


def _consult(
    doctor: LinkDoctor,
    link: str,
    name: str,
    attempt: list[ResultRecord],
    rerun: Callable[[], list[ResultRecord]],
    say: Say,
    withdraw: Callable[[], None],
    stuck: Callable[[], str] = lambda: "",
) -> list[ResultRecord]:
    """A target failed: was it the cable?  Restart a stalled one and ``rerun`` the target once.

    ``withdraw`` is called just before a rerun, to take the first attempt's
    points back from wherever they were already recorded.  On a link that
    answers, the failure stands; but if ``stuck`` finds tasks the target left
    waiting in the kernel, its hosts are rebooted so that the targets after it
    do not inherit them.  A target that failed before any of its I/O ran
    (an export or a login that hung in what the targets before it left in
    the kernel) has measured nothing, so after that reboot it runs once
    more, on clean hosts, and its records say so in ``note``.
    """
    try:
        health: LinkState = doctor.check_link(link)
    except HostDown as exc:  # nothing to restart: the records already say the host is down
        finding = f"link {link} not restarted: {str(exc).split(';')[0]}"  # without the console's lines
        say(f"{name}: {finding}")
        return [_with_link(r, finding) for r in attempt]
    except SanlabError as exc:  # a host that no longer answers its agent: its kernel is wedged
        health = _Unchecked(f"could not be checked: {str(exc).splitlines()[0]}")
    if health.ok:
        cleared, rebooted = _cleared(doctor, link, name, stuck, say)
        if rebooted and not _measured(attempt):
            say(f"{name}: it failed before its I/O began; running {name} once more on the rebooted hosts")
            note = (
                f"first attempt failed before its I/O began, on link {link}, which answered; "
                f"tasks stayed stuck in the kernel, so the hosts were rebooted: {_first_error(attempt)}"
            )
            return _again(note, rerun, withdraw)
        return [_with_link(r, f"link {link} answered afterwards{cleared}") for r in attempt]
    say(f"{name}: link {link} stalled ({health.detail}); restarting its interfaces")
    try:
        revived = doctor.restart_link(link, _prefixed(say, name))
    except SanlabError as exc:
        return [_with_link(r, f"link {link} stalled and could not be restarted: {exc}") for r in attempt]
    if not revived.ok:
        return [
            _with_link(r, f"link {link} stalled and did not come back ({revived.detail})") for r in attempt
        ]
    step = revived.detail.split(":")[0]  # down/up, NIC reset or reboot
    say(f"{name}: link {link} answers again ({step}); running {name} once more")
    note = (
        f"first attempt failed on a stalled link {link} ({health.detail}), revived by {step}: "
        f"{_first_error(attempt)}"
    )
    return _again(note, rerun, withdraw)


def _again(
    note: str, rerun: Callable[[], list[ResultRecord]], withdraw: Callable[[], None]
) -> list[ResultRecord]:
    """Run the target once more, the first attempt's points giving way to the rerun's, whose
    records carry ``note``: why there was a second attempt."""
    withdraw()
    return [r.model_copy(update={"note": note}) for r in rerun()]


def _cleared(
    doctor: LinkDoctor, link: str, name: str, stuck: Callable[[], str], say: Say
) -> tuple[str, bool]:
    """Reboot ``link``'s hosts if tasks stay stuck in their kernels: what was found and done,
    and whether the hosts were rebooted."""
    left = stuck()
    if not left:
        return "", False
    say(f"{name}: link {link} answers, but tasks stay stuck in the kernel; rebooting its hosts")
    try:
        doctor.reboot_link_hosts(link, _prefixed(say, name))
    except SanlabError as exc:
        return f"{left}\n  rebooting the hosts failed: {str(exc).splitlines()[0]}", False
    return f"{left}\n  the hosts were rebooted, so that the targets after it start clean", True


def _measured(attempt: list[ResultRecord]) -> bool:
    """Whether any point of ``attempt`` ran its I/O (fio gave figures, errors included)."""
    return any(r.iops is not None or r.io_errors is not None for r in attempt)


def _with_link(record: ResultRecord, finding: str) -> ResultRecord:
    return record.model_copy(update={"error": f"{record.error}\n  {finding}"}) if record.error else record


def _first_error(records: list[ResultRecord]) -> str:
    return next((r.error or "" for r in records if r.error), "").splitlines()[0]


def _prefixed(say: Say, name: str) -> Say:
    """``say`` with the target's name in front, for steps deep inside a stack."""
    return lambda message: say(f"{name}: {message}")


def _record(base: dict[str, object], p: Point, **figures: object) -> ResultRecord:
    point = {"rw": p.rw, "bs": p.bs, "iodepth": p.iodepth, "numjobs": p.numjobs}
    return ResultRecord.model_validate(base | point | figures)


def verify_size(p: Point) -> int:
    """Bytes each fio job writes and checks: the workload's ``verify_size``, else 16 MiB or
    the job's share of the LUN, in whole blocks."""
    size = p.workload.verify_size or min(DEFAULT_VERIFY_SIZE, p.target.size // p.numjobs)
    return size - size % p.bs


def fio_job(p: Point, device: str) -> FioJob:
    """The fio job of point ``p`` on ``device``."""
    verify = p.workload.verify != "off"
    return FioJob(device, p.rw, p.bs, p.iodepth, p.numjobs, p.workload.runtime, verify, verify_size(p))


def job_for(p: Point, device: str, share: int = 0) -> FioJob:
    """Point ``p``'s job for the ``share``-th initiator of its target: its own stretch of the LUN."""
    job = fio_job(p, device)
    return replace(job, tolerant=bool(p.faults), first_offset=share * p.numjobs * job.verify_size)


@dataclass(frozen=True)
class FioRun:
    """What one fio run printed, and, under faults, how long the I/O took to come back."""

    stdout: str
    rc: int
    stderr: str
    recovery_s: float | None = None
    failover_s: float | None = None
    dip_pct: float | None = None
    failback_s: float | None = None


def _shared_faults(p: Point, wires: list[Wiring], devices: list[str]) -> list[faults.Inject | None]:
    """One injector per initiator of a shared target: the first applies each fault and
    hands its window to the others, each of which reads it on its own clock."""
    if not p.faults:
        return [None] * len(wires)
    followers = [queue.Queue[faults.Window]() for _ in wires[1:]]
    applied = _injector(p, wires[0], devices[0])

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


def _link_ends(wire: Wiring, link: str) -> list[faults.LinkEnd]:
    """The cable a fault pulls, the initiator's end first (its clock times the run)."""
    target_end, initiator_end = wire.ends_of(link)
    return [
        faults.LinkEnd(wire.initiator_host, initiator_end.interface, initiator_end.address),
        faults.LinkEnd(wire.target_host, target_end.interface, target_end.address),
    ]


def _fault_commands(p: Point, wire: Wiring, fault: Fault, device: str) -> list[tuple[Host, str]]:
    """What each host runs for ``fault`` on point ``p``, in order (for a dry run)."""
    if fault.action == "restart":
        stop, start = service_scripts(p.target, p.name)
        return [(wire.target_host, stop), (wire.target_host, start)]
    if fault.action == "reset":
        return [(wire.initiator_host, reset_script(p.target, p.name, wire))]
    near, far = _link_ends(wire, fault.link or "")
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


def _injector(p: Point, wire: Wiring, device: str) -> faults.Inject:
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
        ends = _link_ends(wire, fault.link or "")
        if fault.action == "down" and wire.cables is not None:
            return faults.pull_carrier(wire.cables, fault.link or "", ends, fault.length)
        return faults.inject(ends, fault)

    return inject


def _run_fio(
    p: Point, job: FioJob, wire: Wiring, timeout: float, say: Say, inject: faults.Inject | None = None
) -> FioRun:
    """fio in the background, watched for a device that stops completing I/O, with the
    point's faults (if any) on its timeline, applied by ``inject`` (default: this wiring's)."""
    if not p.faults:
        watched = faults.run_watched(wire.initiator_host, job.argv(), timeout, job.device)
        return FioRun(watched.output, watched.exit_code, watched.stderr)
    inject = inject or _injector(p, wire, job.device)
    run = faults.run_faulted(wire.initiator_host, job.argv(), p.faults, inject, say, timeout, job.device)
    return FioRun(
        run.output,
        run.exit_code,
        run.stderr,
        run.recovery_s(),
        run.failover_s(),
        run.dip_pct(),
        run.failback_s(),
    )


def run_point(
    p: Point,
    device: str,
    wire: Wiring,
    raw_dir: Path,
    base: dict[str, object],
    say: Say = lambda m: None,
    share: int | None = None,
    inject: faults.Inject | None = None,
) -> ResultRecord:
    """One fio run of point ``p`` and its record.

    ``share`` numbers the initiator when several share the target: its
    region of the LUN, and its name in the raw fio file's.  ``inject``
    applies the point's faults (a shared target's initiators share one).
    """
    verify = p.workload.verify != "off"
    if verify_size(p) < p.bs:
        return _record(
            base, p, error=f"{p.target.size} bytes cannot hold {p.numjobs} jobs of {p.bs}-byte blocks"
        )
    job = job_for(p, device, share or 0)
    initiator, target = wire.initiator_host, wire.target_host
    if verify and "read" in p.rw:
        filled = initiator.run(job.fill_argv(), timeout=VERIFIED_RUN_TIMEOUT)
        if not filled.ok:
            return _record(base, p, error=f"fio fill failed: {filled.stderr.strip()[-300:]}", verify="fail")
    before = _cpu_sample(initiator), _cpu_sample(target)
    timeout = VERIFIED_RUN_TIMEOUT if verify else p.workload.runtime + 600
    result = _run_fio(p, job, wire, timeout, say, inject)
    after = _cpu_sample(initiator), _cpu_sample(target)
    stem = p.label.replace(" ", "_") + (f"_{initiator.name}" if share is not None else "")
    write_file(raw_dir / f"{stem}.json", result.stdout or "{}", what="fio output")
    try:
        fio = parse(result.stdout, p.rw)
    except SanlabError as exc:
        detail = f"{exc}; fio stderr: {result.stderr.strip()[-300:]}"
        return _record(base, p, error=detail, verify="fail" if verify else "off")
    bad_blocks = verify_failures(result.stderr)
    check = judge(job, result.rc, fio, bad_blocks)
    problem = check.problem
    if problem and (result.rc != 0 or fio.error != 0 or fio.io_errors or bad_blocks):
        problem += f": {result.stderr.strip()[-300:]}"
        problem += "".join(f"\n  {h.name} kernel log: {kernel_tail(h)}" for h in (initiator, target))
        problem += _stuck_tasks(initiator, target)
    return _record(
        base,
        p,
        iops=round(fio.iops, 1),
        bw_mibps=round(fio.bw_mibps, 3),
        lat_mean_us=round(fio.lat_mean_us, 1),
        lat_p99_us=round(fio.lat_p99_us, 1),
        cpu_initiator_pct=_busy_pct(before[0], after[0]),
        cpu_target_pct=_busy_pct(before[1], after[1]),
        verify=check.verify,
        verified_bytes=check.verified_bytes,
        io_errors=fio.io_errors,
        verify_errors=bad_blocks,
        recovery_s=result.recovery_s,
        failover_s=result.failover_s if p.target.paths else None,  # only another path can take over
        failback_s=result.failback_s,
        throughput_dip_pct=result.dip_pct,
        error=problem,
    )
