"""Faults on a timeline while fio runs: pull a cable, plug it back, see what the I/O did.

fio is started in the background on the initiator, so the hosts stay free
for the faults.  At each fault's time from the start, both ends of the link
go down together (``ip link set ... down``), stay down for the fault's
length and come back up, as a pulled and replugged cable would; each end
notes the moment on its own clock.  fio runs with ``continue_on_error`` and
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

from sanlab.scenarios.schema import Fault
from sanlab.targets.host import Host, StackError

Say = Callable[[str], None]
POLL_S = 0.5


@dataclass(frozen=True)
class LinkEnd:
    """One end of the cable a fault pulls: a host and the interface on it."""

    host: Host
    interface: str


@dataclass(frozen=True)
class Window:
    """When the cable was out, on the initiator's clock (epoch seconds)."""

    down: float
    up: float


@dataclass(frozen=True)
class FaultedRun:
    """What fio said, and what the faults did while it ran."""

    output: str  # fio's JSON
    exit_code: int
    stderr: str
    windows: list[Window]
    completions: list[float]  # every I/O's completion time, initiator's clock, epoch seconds

    def recovery_s(self) -> float | None:
        """Seconds from the end of the last fault to the first I/O completed after it."""
        if not self.windows:
            return None
        up = self.windows[-1].up
        after = [c for c in self.completions if c >= up]
        return round(min(after) - up, 3) if after else None


def flap_script(interface: str, length: float) -> str:
    """Down, wait, up; the two moments on this host's clock, one per line."""
    dev = shlex.quote(interface)
    return (
        f"date +%s.%N; ip link set dev {dev} down; sleep {length:.3f}; ip link set dev {dev} up; date +%s.%N"
    )


def _flap(end: LinkEnd, length: float) -> Window:
    """Take one end down for ``length`` seconds and up again; the moments on that host's clock."""
    result = end.host.run(flap_script(end.interface, length), timeout=length + 60)
    stamps = result.stdout.split()
    if not result.ok or len(stamps) != 2:
        raise StackError(
            f"{end.host.name}: could not take {end.interface} down and up: {result.stderr.strip()}"
        )
    return Window(float(stamps[0]), float(stamps[1]))


def pull(ends: Sequence[LinkEnd], length: float) -> Window:
    """Both ends at once (a real cable drops carrier on both); the first end's clock is kept."""
    with ThreadPoolExecutor(len(ends)) as pool:
        windows = list(pool.map(lambda end: _flap(end, length), ends))
    return windows[0]


def run_faulted(
    initiator: Host,
    argv: list[str],
    faults: Sequence[Fault],
    ends: Sequence[LinkEnd],
    say: Say,
    timeout: float,
) -> FaultedRun:
    """Run fio ``argv`` on ``initiator`` in the background and inject ``faults`` on its timeline.

    ``ends`` are the link's ends, the initiator's first.
    """
    tag = f"/tmp/sanlab-faulted-{secrets.token_hex(4)}"
    logs = [f"--output={tag}.json", f"--write_lat_log={tag}", "--log_avg_msec=0", "--log_unix_epoch=1"]
    pid = initiator.spawn(f"{shlex.join(argv + logs)}; echo $? > {tag}.rc", log=f"{tag}.err")
    start = time.monotonic()
    try:
        windows = [_at(start, fault, ends, say) for fault in faults]
        _wait(initiator, pid, start + timeout)
        return _collect(initiator, tag, windows)
    finally:
        initiator.run(f"kill {pid} 2>/dev/null; rm -f {tag}.json {tag}.rc {tag}.err {tag}_*.log", timeout=60)


def _at(start: float, fault: Fault, ends: Sequence[LinkEnd], say: Say) -> Window:
    time.sleep(max(0.0, start + fault.at - time.monotonic()))
    say(f"t+{time.monotonic() - start:.1f}s: link {fault.link} {fault.action} for {fault.length:g}s")
    window = pull(ends, fault.length)
    say(f"t+{time.monotonic() - start:.1f}s: link {fault.link} up")
    return window


def _wait(host: Host, pid: int, deadline: float) -> None:
    while host.run(f"kill -0 {pid} 2>/dev/null", timeout=30).ok:
        if time.monotonic() > deadline:
            raise StackError(f"{host.name}: fio (pid {pid}) did not finish in time under faults")
        time.sleep(POLL_S)


def _collect(host: Host, tag: str, windows: list[Window]) -> FaultedRun:
    read = host.run(f"cat {tag}.json; echo; echo '---'; cat {tag}.rc; echo '---'; cat {tag}.err", timeout=60)
    output, _, rest = read.stdout.partition("\n---\n")
    code, _, stderr = rest.partition("\n---\n")
    lat = host.run(f"cat {tag}_lat.*.log 2>/dev/null", timeout=120).stdout
    # --log_unix_epoch: each completion's time in epoch ms, on the initiator's clock
    completions = [int(line.split(",")[0]) / 1000 for line in lat.splitlines() if line.strip()]
    return FaultedRun(output, int(code.strip() or 1), stderr, windows, completions)
