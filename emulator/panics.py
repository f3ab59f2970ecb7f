"""A guest's last words: the kernel oops that ended it, read from its console log in one line.

A guest boots with ``panic=-1`` under QEMU's ``-no-reboot``, so a kernel
panic ends its QEMU and the lab sees the VM go down at once.  Its console
log then holds the oops, forty lines or more; what a record needs of it is
what went wrong, where, in which task and kernel, and which storage or RDMA
modules were on the way::

    kernel panicked: double fault in kmem_cache_alloc_node_noprof (Linux
    6.12.117+deb13-amd64, task kworker/u4:0, workqueue rxe_wq), called from
    rxe_init_packet [rdma_rxe] <- prepare_ack_packet [rdma_rxe] <- ...

When the oops's saved flags hold bits no x86-64 CPU sets, the line says
so: the emulator corrupted the guest, not the kernel (``cpuflags``).
A log with no oops in it (QEMU killed from outside, say) gives its last
lines instead.  Only the log's tail is read, so a chatty guest costs bounded
time and memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from sanlab.emulator.cpuflags import impossible, saved_flags, verdict

TAIL_BYTES = 256 << 10  # an oops is the end of a log; 256 KiB holds several
FRAMES_SHOWN = 3

# Where an oops begins, most telling first: the line that names the fault.
_START = re.compile(r"BUG: |Oops: |traps: PANIC: |general protection fault|Kernel panic - not syncing: ")
_KIND = (
    re.compile(r"traps: PANIC: (double fault)"),
    re.compile(r"BUG: ([^,]+)"),  # "kernel NULL pointer dereference, address: ..." without the address
    re.compile(r"(general protection fault)"),
    re.compile(r"Oops: (?:Oops: )?(.+?) \[#\d+\]"),
    re.compile(r"Kernel panic - not syncing: (.+)"),
)
_KERNEL = re.compile(r"\bComm: (?P<comm>\S+) (?:Not tainted|Tainted:[^0-9]*)\s*(?P<kernel>\d+\.\d+\S*)")
_WORKQUEUE = re.compile(r"\bWorkqueue: (\S+)")
_RIP = re.compile(r"\bRIP: 0010:([\w.]+)\+0x[0-9a-f]+/0x[0-9a-f]+(?:\s+\[(\w+)\])?")
_FRAME = re.compile(r"\]\s+([\w.]+)\+0x[0-9a-f]+/0x[0-9a-f]+(?:\s+\[(\w+)\])?\s*$")


@dataclass(frozen=True)
class Oops:
    """The essentials of a kernel oops, as its first report gave them."""

    kind: str
    function: str | None = None
    comm: str | None = None
    kernel: str | None = None
    workqueue: str | None = None
    callers: tuple[str, ...] = ()
    flags: int | None = None  # the saved EFLAGS at the fault

    def line(self) -> str:
        """The oops as a record's error gives it: what, where, in which kernel and task, how."""
        where = f" in {self.function}" if self.function else ""
        known = (("Linux", self.kernel), ("task", self.comm), ("workqueue", self.workqueue))
        told = ", ".join(f"{label} {value}" for label, value in known if value)
        text = f"kernel panicked: {self.kind}{where}" + (f" ({told})" if told else "")
        text += f", called from {' <- '.join(self.callers)}" if self.callers else ""
        emulator = self.flags is not None and impossible(self.flags)
        return text + (f"; its {verdict(self.flags)}" if self.flags is not None and emulator else "")


def read_tail(path: Path, limit: int = TAIL_BYTES) -> str:
    """The last ``limit`` bytes of ``path`` as text; empty if it cannot be read."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - limit))
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def find_oops(text: str) -> Oops | None:
    """The first oops in a console log's text, or None if it holds none."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _START.search(line)), None)
    if start is None:
        return None
    report = lines[start:]
    kind = next(
        (m.group(1).strip() for pattern in _KIND for line in report[:8] if (m := pattern.search(line))),
        "oops",
    )
    rip = _first(_RIP, report)
    kernel = _first(_KERNEL, report)
    return Oops(
        kind=kind,
        function=_named(rip.group(1), rip.group(2)) if rip else None,
        comm=kernel.group("comm") if kernel else None,
        kernel=kernel.group("kernel") if kernel else None,
        workqueue=m.group(1) if (m := _first(_WORKQUEUE, report)) else None,
        callers=_callers(report),
        flags=saved_flags("\n".join(report)),
    )


def last_words(path: Path, lines: int = 3) -> str:
    """What a dead guest's console log says of its end: the oops in one line, else its last
    ``lines`` lines; empty if the log is empty or missing."""
    text = read_tail(path)
    oops = find_oops(text)
    if oops is not None:
        return f"its {oops.line()}; the whole oops is in {path.name}"
    tail = [line.strip() for line in text.splitlines()[-lines:] if line.strip()]
    return f"last console lines: {' | '.join(tail)}" if tail else ""


def _first(pattern: re.Pattern[str], lines: list[str]) -> re.Match[str] | None:
    return next((m for line in lines if (m := pattern.search(line))), None)


def _named(function: str, module: str | None) -> str:
    return f"{function} [{module}]" if module else function


def _callers(report: list[str]) -> tuple[str, ...]:
    """The first frames of the oops's call trace, certain ones only (a "?" frame is a guess
    from the stack's leftovers), those inside a module preferred: that is where a storage or
    RDMA driver shows."""
    begin = next((i for i, line in enumerate(report) if "Call Trace:" in line), None)
    if begin is None:
        return ()
    frames: list[tuple[str, str | None]] = []
    for line in report[begin + 1 :]:
        if "</TASK>" in line or "Modules linked in" in line:  # an interrupt's frames, then the task's
            break
        if (m := _FRAME.search(line)) and "] ? " not in line:
            frames.append((m.group(1), m.group(2)))
    in_modules = [frame for frame in frames if frame[1]]
    chosen = in_modules or frames
    return tuple(_named(function, module) for function, module in chosen[:FRAMES_SHOWN])
