"""Where a host's kernel is stuck: storage and RDMA tasks that are not idle, one line each.

When a Connect hangs or I/O stops, the kernel log is often silent: a worker
waits in a TCP connect inside siw, or a logout waits for a completion that
will never come.  Every task's kernel stack (``/proc/PID/stack``) says
where it waits, like a list of who is queueing at which counter.  This
module reads them all and keeps the tasks that are inside a storage or RDMA
module and not in that module's normal idle loop, e.g.::

    kworker/u2:0+rdma_cm (S): __inet_stream_connect <- siw_connect [siw] <- iw_cm_connect [iw_cm]
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from sanlab.scenarios.errors import SanlabError
from sanlab.targets.host import Host

# Modules whose presence on a stack makes a task worth reporting.
STORAGE_MODULES = frozenset(
    {
        "siw",
        "rdma_rxe",
        "ib_core",
        "ib_cm",
        "iw_cm",
        "rdma_cm",
        "ib_iser",
        "ib_isert",
        "ib_srp",
        "ib_srpt",
        "scsi_transport_srp",
        "scsi_transport_iscsi",
        "libiscsi",
        "libiscsi_tcp",
        "iscsi_tcp",
        "iscsi_target_mod",
        "target_core_mod",
        "nvme_core",
        "nvme_fabrics",
        "nvme_rdma",
        "nvme_tcp",
        "nvmet",
        "nvmet_rdma",
        "nvmet_tcp",
    }
)
# Where such tasks wait when nothing is wrong.
IDLE_FRAMES = frozenset({"siw_run_sq", "scsi_error_handler", "worker_thread", "rescuer_thread"})

SCRIPT = "grep -H . /proc/[0-9]*/comm; grep -H '^State:' /proc/[0-9]*/status; grep -H . /proc/[0-9]*/stack"
_LINE = re.compile(r"^/proc/(\d+)/(comm|status|stack):(.*)$")
_FRAME = re.compile(r"\]\s+([\w.]+)\+0x[0-9a-f]+/0x[0-9a-f]+(?:\s+\[(\w+)\])?")


@dataclass
class Task:
    """One process or kernel thread and the kernel stack it sleeps on."""

    pid: int
    comm: str = "?"
    state: str = "?"
    frames: list[tuple[str, str | None]] = field(default_factory=list)  # (function, module), innermost first

    def stuck_in_storage(self) -> bool:
        if not any(module in STORAGE_MODULES for _, module in self.frames):
            return False
        return self.frames[0][0] not in IDLE_FRAMES

    def summary(self, depth: int = 4) -> str:
        """The core function a module called into (where it waits), then the module frames."""
        frames = self.frames
        first = next((i for i, (_, module) in enumerate(frames) if module), len(frames))
        shown = [frames[first - 1][0]] if first > 0 else []
        shown += [f"{function} [{module}]" for function, module in frames[first:] if module][:depth]
        return f"{self.comm} ({self.state}): " + " <- ".join(shown)


def parse(text: str) -> list[Task]:
    """Tasks from the output of ``SCRIPT`` (comm, state and stack files, grep -H form)."""
    tasks: dict[int, Task] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        pid, kind, value = int(m.group(1)), m.group(2), m.group(3)
        task = tasks.setdefault(pid, Task(pid))
        if kind == "comm":
            task.comm = value.strip()
        elif kind == "status":
            task.state = value.split()[1] if len(value.split()) > 1 else "?"
        else:
            frame = _FRAME.search(value)
            if frame:
                task.frames.append((frame.group(1), frame.group(2)))
    return sorted(tasks.values(), key=lambda t: t.pid)


def stuck(text: str) -> list[str]:
    """One line per storage or RDMA task that is not idle."""
    return [t.summary() for t in parse(text) if t.stuck_in_storage()]


def snapshot(host: Host) -> list[str]:
    """Read every task's stack on ``host`` and return the stuck ones (empty if unreadable)."""
    try:
        result = host.run(SCRIPT, timeout=60)
    except SanlabError:  # diagnosis must never turn one failure into another
        return []
    return stuck(result.stdout)


def stuck_tasks(*hosts: Host) -> str:
    """Storage and RDMA tasks that wait somewhere in the kernel, per host, as error lines."""
    return stuck_lines("stuck", ((h.name, snapshot(h)) for h in hosts))


def stuck_lines(how: str, found: Iterable[tuple[str, list[str]]]) -> str:
    """One error line per host with tasks in ``found``: '<host> <how> in kernel: a; b'."""
    return "".join(f"\n  {name} {how} in kernel: {'; '.join(lines)}" for name, lines in found if lines)
