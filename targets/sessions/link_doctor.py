"""After a target failed: was it the cable?  The run asks the link doctor, whoever owns the links.

A link that no longer answers is the emulator's fault, not the stack's: the doctor restarts
it and, if it answers again, the target runs once more and its records say so.  A failure on
a link that answers stands; tasks it left stuck in the kernel get the link's hosts rebooted,
so that the targets after it start clean.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from sanlab.scenarios.errors import HostDown, SanlabError
from sanlab.scenarios.hosts import Say
from sanlab.scenarios.results.records import ResultRecord
from sanlab.targets import kernel_stacks
from sanlab.targets.host import Host
from sanlab.targets.kernel_stacks import stuck_lines
from sanlab.targets.point_run import prefixed

# How long a task must stay stuck in the kernel, after a failed target, to count as left
# behind rather than caught on its way through.
STUCK_CONFIRM_S = 5.0


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


def still_stuck(*hosts: Host) -> str:
    """Storage and RDMA tasks that wait in the kernel now and still ``STUCK_CONFIRM_S`` later,
    per host, as error lines ('' if none): what a failed target left that no teardown freed."""
    first = {h.name: set(kernel_stacks.snapshot(h)) for h in hosts}
    time.sleep(STUCK_CONFIRM_S)
    again = ((h.name, [line for line in kernel_stacks.snapshot(h) if line in first[h.name]]) for h in hosts)
    return stuck_lines("still stuck", again)


def consult(
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
        revived = doctor.restart_link(link, prefixed(say, name))
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
    records carry ``note``: why there was a second attempt (before their own, if any)."""
    withdraw()
    return [r.model_copy(update={"note": note if r.note is None else f"{note}; {r.note}"}) for r in rerun()]


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
        doctor.reboot_link_hosts(link, prefixed(say, name))
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
