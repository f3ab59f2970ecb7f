"""Faults on a timeline while fio runs: pull a cable, plug it back, see what the I/O did.

fio is started in the background on the initiator, so the hosts stay free
for the faults.  At each fault's time from the run's first completed I/O
(``first_io``), the cable is pulled for the fault's length and plugged
back.  Where an emulator owns the cable
(``Cables``), carrier drops at both ends and nothing else changes, as on
hardware; on real hosts both ends go down together (``ip link set ...
down``), which also takes their routes away.  The window is noted on the
initiator's clock, a replugged cable must carry packets again, and once
the faults are over the device must complete I/O again within
``NO_PROGRESS_S``.  fio runs with ``continue_on_error`` and
a completion log (every I/O's completion time, ``--write_lat_log``), so when
it ends the record can say how many I/Os failed, how many blocks did not
verify, and how long after the cable came back the first I/O completed
(the recovery time).  Every file it leaves on the initiator is removed.
"""

from __future__ import annotations

import secrets
import shlex
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from sanlab.scenarios.hosts import Say
from sanlab.scenarios.schema import Fault
from sanlab.targets import first_io
from sanlab.targets.fault_measures import FaultedRun, Window
from sanlab.targets.fio import directions
from sanlab.targets.host import Host, StackError

# How long one look at a running fio waits in the host for it to end.
POLL_S = 2.0
# How long a replugged cable has to carry a ping again before the run stops
# waiting for I/O that cannot come back (an emulated NIC's queue can stall).
CARRY_WAIT_S = 20
# How long the device may complete no I/O at all, once every fault is over,
# before the run stops waiting for a transport that is not coming back: longer
# than open-iscsi's 120 s replacement timeout, after which the SCSI layer fails
# the I/O it held (an ending that is recorded, as I/O errors).
NO_PROGRESS_S = 150.0
# Applies one fault and says when it began and ended, on the initiator's clock.
Inject = Callable[[Fault], "Window"]


class Cables(Protocol):
    """Whoever owns the cables (an emulator) and can pull one as hardware would: carrier goes
    at both ends, and nothing else changes."""

    def set_carrier(self, link: str, up: bool) -> None: ...


@dataclass(frozen=True)
class LinkEnd:
    """One end of the cable a fault pulls: a host, the interface on it and its address there."""

    host: Host
    interface: str
    address: str


def flap_script(interface: str, length: float) -> str:
    """Down, wait, up; on this host's clock, the moment before it goes down and the moment
    before it comes up, one per line (so no I/O completed after the cable's return is
    counted as completed while it was out)."""
    dev = shlex.quote(interface)
    return (
        f"date +%s.%N; ip link set dev {dev} down; sleep {length:.3f}; date +%s.%N; ip link set dev {dev} up"
    )


def burst_script(interface: str, fault: Fault) -> str:
    """A netem qdisc of its own at the root for the burst, then the interface's default again."""
    dev = shlex.quote(interface)
    what = f"loss {fault.loss:g}%" if fault.action == "loss" else f"delay {(fault.delay or 0) * 1e6:.0f}us"
    return (
        f"tc qdisc add dev {dev} root handle 9: netem limit 100000 {what}; date +%s.%N; "
        f"sleep {fault.length:.3f}; date +%s.%N; tc qdisc del dev {dev} root handle 9:"
    )


def carries_script(interface: str, peer: str, seconds: int = CARRY_WAIT_S) -> str:
    """Ping ``peer`` out of ``interface`` once a second or so until it answers; fail after
    about ``seconds`` (neighbour discovery and the route come back with the link)."""
    ping = shlex.join(["ping", "-q", "-n", "-c", "1", "-W", "1", "-I", interface, peer])
    return f"for i in $(seq {max(1, seconds)}); do {ping} >/dev/null 2>&1 && exit 0; sleep 1; done; exit 1"


def fault_script(interface: str, fault: Fault) -> str:
    """What one end of the link runs for ``fault``; it prints the fault's start and end."""
    return flap_script(interface, fault.length) if fault.action == "down" else burst_script(interface, fault)


def _inject(end: LinkEnd, fault: Fault) -> Window:
    """One end's part of ``fault``; its start and end on that host's clock."""
    result = end.host.run(fault_script(end.interface, fault), timeout=fault.length + 60)
    stamps = result.stdout.split()
    if not result.ok or len(stamps) != 2:
        raise StackError(
            f"{end.host.name}: could not apply {fault.action} to {end.interface}: {result.stderr.strip()}"
        )
    return Window(float(stamps[0]), float(stamps[1]))


def inject(ends: Sequence[LinkEnd], fault: Fault) -> Window:
    """Both ends at once (a real cable drops carrier on both); the first end's clock is kept.

    A cable that was pulled must carry packets again once it is back: if it
    does not, no I/O can come back either, and waiting out fio's time limit
    would only hide why.  The run stops here, naming the link, and whoever
    ran it (``sanlab run``'s link doctor) can look at the link itself.
    """
    with ThreadPoolExecutor(len(ends)) as pool:
        windows = list(pool.map(lambda end: _inject(end, fault), ends))
    if fault.action == "down":
        check_carries(ends[0], ends[1], fault.link or "")
    return windows[0]


def check_carries(near: LinkEnd, far: LinkEnd, link: str) -> None:
    """Raise StackError if ``far`` does not answer pings sent out of ``near``'s interface."""
    if not near.host.run(carries_script(near.interface, far.address), timeout=CARRY_WAIT_S + 60).ok:
        raise StackError(
            f"link {link} carries no packets after it came back up: {near.host.name} got no answer "
            f"from {far.address} over {near.interface} within {CARRY_WAIT_S} s"
        )


def pull_carrier(cables: Cables, link: str, ends: Sequence[LinkEnd], length: float) -> Window:
    """Pull ``link``'s cable for ``length`` seconds through whoever owns it, and plug it back.

    The window is read on the first end's clock just before each step, as
    ``flap_script`` does, and the replugged cable must carry packets again.
    """
    near = ends[0]
    down = clock(near.host)
    cables.set_carrier(link, False)
    try:
        time.sleep(length)
        up = clock(near.host)
    finally:
        cables.set_carrier(link, True)
    check_carries(ends[0], ends[1], link)
    return Window(down, up)


# How long after a pulled path's return the run waits for multipath to use it again.
FAILBACK_WAIT_S = 60.0


# A path is back when it stays in use: dm-multipath reinstates a path whose
# checker answers (every second here), and a session that is broken behind it
# fails it again at the next I/O.  iSER over rxe did exactly that, for good,
# while dmsetup showed both paths active for 20 ms.  Three checker rounds
# running with every path in use is what counts.
FAILBACK_STEADY_S = 3.0


def all_paths_back(host: Host, script: str, paths: int) -> float | None:
    """Wait until ``script`` (run on the initiator; it prints how many paths are in use)
    says ``paths`` and keeps saying it for ``FAILBACK_STEADY_S``: the start of that
    stretch on the initiator's clock, or None when none came within ``FAILBACK_WAIT_S``."""
    deadline = time.monotonic() + FAILBACK_WAIT_S
    since: float | None = None  # the initiator's clock when the present run of full counts began
    while time.monotonic() < deadline:
        out = host.run(f"{script}; date +%s.%N", timeout=30).stdout.split()
        full = len(out) == 2 and out[0].isdigit() and int(out[0]) >= paths
        if not full:
            since = None
        elif since is None:
            since = float(out[1])
        elif float(out[1]) - since >= FAILBACK_STEADY_S:
            return since
        time.sleep(0.25)
    return None


def run_faulted(
    initiator: Host,
    argv: list[str],
    faults: Sequence[Fault],
    inject: Inject,
    say: Say,
    timeout: float,
    device: str | None = None,
    rw: str = "randrw",
) -> FaultedRun:
    """Run fio ``argv`` on ``initiator`` in the background and ``inject`` each of ``faults``
    at its time; each injection answers with its window on the initiator's clock.

    Once the faults are over, ``device``'s completed-I/O count is watched:
    if it stands still for ``NO_PROGRESS_S`` the transport is not coming back
    and the run stops there, rather than at ``timeout``.  The times kept are
    the completions of workload ``rw``'s own direction: a write workload whose
    writes all ended before a fault then has no I/O back after it, rather than
    its read-back standing in for the writes.
    """

    def during(start: float) -> list[Window]:
        return [_at(start, fault, inject, say) for fault in faults]

    return _in_background(initiator, argv, timeout, device, during, completion_log=directions(rw))


def run_watched(initiator: Host, argv: list[str], timeout: float, device: str | None) -> FaultedRun:
    """Run fio ``argv`` with no faults, watched as a faulted run is once its faults are over.

    In the foreground a transport that stalls holds fio until the initiator
    gives up on it: open-iscsi's 120 s replacement timeout, or NVMe's
    controller-loss timeout (minutes; 7.5 of them in one CI run).  Watched,
    a device that completes no I/O for ``NO_PROGRESS_S`` stops the run with
    a StackError that the link doctor looks into.  No completion log is kept:
    with no fault there is nothing to time.
    """
    return _in_background(initiator, argv, timeout, device, lambda start: [], completion_log=None)


def _in_background(
    initiator: Host,
    argv: list[str],
    timeout: float,
    device: str | None,
    during: Callable[[float], list[Window]],
    completion_log: frozenset[str] | None,
) -> FaultedRun:
    """fio in the background; ``during(start)`` while it runs, then wait for it, watching
    ``device``; with a ``completion_log``, the completions of those directions are kept.
    Whatever happens, fio (its whole process group) is stopped and its files go."""
    tag = f"/tmp/sanlab-faulted-{secrets.token_hex(4)}"
    logs = [f"--output={tag}.json"]
    if completion_log is not None:
        logs += [f"--write_lat_log={tag}", "--log_avg_msec=0", "--log_unix_epoch=1"]
    before = first_io.completed(initiator, device) if completion_log is not None else None
    pid = initiator.spawn(f"{shlex.join(argv + logs)}; echo $? > {tag}.rc", log=f"{tag}.err")
    start = time.monotonic()
    try:
        first_io.wait(initiator, device, before, pid, f"{tag}.rc")  # faults are timed from it
        windows = during(time.monotonic())
        since = "after the last fault ended" if windows else ""
        _wait(initiator, pid, start + timeout, device, since, done=f"{tag}.rc")
        return _collect(initiator, tag, windows, completion_log or frozenset())
    finally:  # spawned in a session of its own: the group is the shell and fio
        stop = f"kill -- -{pid} 2>/dev/null || kill {pid} 2>/dev/null"
        initiator.run(f"{stop}; rm -f {tag}.json {tag}.rc {tag}.err {tag}_*.log", timeout=60)


def _at(start: float, fault: Fault, inject: Inject, say: Say) -> Window:
    """Apply ``fault`` at its time.  A replugged cable is said to be up when its carrier came
    back (the window's end, the moment the record's recovery time counts from), not once the
    injection returns: proving that it carries packets, or waiting for every path of a
    multipath target to be in use again, can take seconds more."""
    time.sleep(max(0.0, start + fault.at - time.monotonic()))
    began = time.monotonic() - start
    say(f"t+{began:.1f}s: {describe(fault)}")
    window = inject(fault)
    if fault.action != "down":
        say(f"t+{time.monotonic() - start:.1f}s: {_ended(fault)}")
        return window
    on_our_clock = began - window.down  # the window is on the initiator's clock
    said = f"t+{window.up + on_our_clock:.1f}s: {_ended(fault)}"
    if window.restored is not None:
        said += f" (every path in use again by t+{window.restored + on_our_clock:.1f}s)"
    say(said)
    return window


def describe(fault: Fault) -> str:
    """What a fault does, as ``sanlab run`` prints it when it starts."""
    if fault.action == "restart":
        return f"target {fault.target} stops for {fault.length:g}s"
    if fault.action == "reset":
        return f"target {fault.target}: the initiator resets its connections"
    return f"link {fault.link} {_what(fault)} for {fault.length:g}s"


def _ended(fault: Fault) -> str:
    if fault.action == "restart":
        return f"target {fault.target} started again"
    if fault.action == "reset":
        return f"target {fault.target}: connections reset"
    return f"link {fault.link} {'up' if fault.action == 'down' else 'clear'}"


def clock(host: Host) -> float:
    """``host``'s clock, epoch seconds."""
    return float(host.run("date +%s.%N", timeout=30).stdout.strip() or 0)


def clock_offset(host: Host, reference: Host) -> float:
    """How far ``host``'s clock is ahead of ``reference``'s: read between two readings of the
    reference, against their midpoint, so the round trips cancel."""
    before = clock(reference)
    here = clock(host)
    after = clock(reference)
    return here - (before + after) / 2


def shifted(window: Window, offset: float) -> Window:
    """``window`` read on a clock ``offset`` seconds ahead of the one it was taken on."""
    restored = window.restored + offset if window.restored is not None else None
    return Window(window.down + offset, window.up + offset, restored)


def restart(initiator: Host, target: Host, stop: str, start: str, length: float) -> Window:
    """Stop the target's service, wait ``length``, start it again; the window on the
    initiator's clock (the moments just before each command was sent)."""
    down = clock(initiator)
    _must(target, stop, "stop its service")
    try:  # started again whatever happens meanwhile (Ctrl-C included)
        time.sleep(max(0.0, down + length - clock(initiator)))
        up = clock(initiator)
    finally:
        _must(target, start, "start its service again")
    return Window(down, up)


def reset(initiator: Host, script: str) -> Window:
    """Run the initiator's reset; the window is from just before it to its return."""
    down = clock(initiator)
    _must(initiator, script, "reset its connections")
    return Window(down, clock(initiator))


def _must(host: Host, script: str, what: str) -> None:
    result = host.run(script, timeout=60)
    if not result.ok:
        raise StackError(f"{host.name}: could not {what}: {result.stderr.strip()}")


def _what(fault: Fault) -> str:
    if fault.action == "loss":
        return f"loses {fault.loss:g}%"
    if fault.action == "delay":
        return f"delays {(fault.delay or 0) * 1e3:g}ms"
    return "down"


def _wait(
    host: Host, pid: int, deadline: float, device: str | None, since: str = "", done: str | None = None
) -> None:
    """Until fio ``pid`` ends (or its shell writes ``done``); StackError past ``deadline`` or
    when ``device`` stalls (the stall is told as ``since``: when the watch began)."""
    watch = Progress()
    while True:
        alive, completed = _poll(host, pid, device, done)
        if not alive:
            return
        now = time.monotonic()
        if now > deadline:
            raise StackError(f"{host.name}: fio (pid {pid}) did not finish in time")
        if watch.stalled(completed, now):
            raise StackError(
                f"{host.name}: no I/O completed on {device} for {NO_PROGRESS_S:g} s"
                + (f" {since}" if since else "")
                + ": the transport stalled and did not come back"
            )


def _poll(host: Host, pid: int, device: str | None, done: str | None = None) -> tuple[bool, int | None]:
    """Whether fio still runs, and how many I/Os ``device`` has completed (None: unknown),
    counted as ``first_io.count_script`` counts them."""
    count = f"; {first_io.count_script(device)}" if device else ""
    result = host.run(f"{poll_script(pid, done)}{count}", timeout=POLL_S + 30)
    if result.rc == 3:
        return False, None
    return True, first_io.parse_count(result.stdout)


def poll_script(pid: int, done: str | None = None) -> str:
    """Waits up to POLL_S in the host for fio to end, learning of its end within a tenth of it;
    exits 3 once it has.

    ``pid`` is the shell the agent spawned, which runs fio and then writes ``done`` (fio's exit
    code).  The agent reaps that shell only at its next command, so the ended shell is a zombie
    meanwhile, and a zombie answers ``kill -0`` and ``tail --pid`` as if it ran: the wait is on
    fio (the shell's child, which the shell reaps) and on ``done``, not on the shell alone.
    """
    fio = f"c=$(pgrep -o -P {pid}); "
    waited = f'[ -z "$c" ] || timeout {POLL_S:g} tail -s {POLL_S / 10:g} --pid="$c" -f /dev/null; '
    ended = f"[ -e {shlex.quote(done)} ] && exit 3; " if done else ""
    return f"{fio}{waited}{ended}kill -0 {pid} 2>/dev/null || exit 3"


@dataclass
class Progress:
    """When a count last moved; ``stalled`` once it has stood still ``NO_PROGRESS_S``."""

    count: int | None = None
    since: float = 0.0

    def stalled(self, count: int | None, now: float) -> bool:
        if count is None:
            return False
        if count != self.count:
            self.count, self.since = count, now
            return False
        return now - self.since >= NO_PROGRESS_S


def _collect(host: Host, tag: str, windows: list[Window], kept: frozenset[str]) -> FaultedRun:
    read = host.run(f"cat {tag}.json; echo; echo '---'; cat {tag}.rc; echo '---'; cat {tag}.err", timeout=60)
    output, _, rest = read.stdout.partition("\n---\n")
    code, _, stderr = rest.partition("\n---\n")
    lat = host.run(f"cat {tag}_lat.*.log 2>/dev/null", timeout=120).stdout
    return FaultedRun(output, int(code.strip() or 1), stderr, windows, completion_times(lat, kept))


def completion_times(lat_log: str, kept: frozenset[str]) -> list[float]:
    """The completion times (epoch seconds, --log_unix_epoch's ms) of fio completion-log lines
    (time, latency, direction, block size, ...) whose direction is one of ``kept``."""
    times = []
    for line in lat_log.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) >= 3 and fields[2] in kept:
            times.append(int(fields[0]) / 1000)
    return times
