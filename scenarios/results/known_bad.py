"""``known-bad``: a reproducer's point that failed the way its kernel bug says, on a kernel it lists.

A reproducer (scenarios/reproducers/) is a scenario with a ``known_bug``: the
bug, the kernels where it shows, what sanlab measures as its symptom, and what
a fix must change.  Run on a kernel that has the bug, its points fail; a plain
``FAIL`` would send a kernel developer hunting for a regression, and a pass
would be a lie.  So a failed point whose error carries one of the bug's marks
(``shows``), on a kernel that matches one of its ``kernels``, is judged
*known-bad*, with one line of why, and keeps its error as evidence.  Anything
else stays what it was: a failure on another kernel is a failure (the bug
reached a kernel it was not known on, or the fix did not hold), and so is a
failure the bug does not explain.  A point hit by a fault whose I/O is not back
within ``recover_within`` fails here even if fio itself finished.

This module is the one home of the word and of its exit status; ``sanlab run``
prints it, ``sanlab compare`` sets it beside pass and FAIL.
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase

from sanlab.scenarios.results.records import ResultRecord
from sanlab.scenarios.schema import KnownBug

KNOWN_BAD = "known-bad"
# ``sanlab run``'s exit status when every point that did not pass is known-bad (1: any other
# failure; 0: every point passed).
EXIT_KNOWN_BAD = 3
# What a point whose I/O came back too late (or never) carries in its error.
LATE = "recover_within"


def affected(bug: KnownBug, kernel: str) -> bool:
    """Whether ``kernel`` (a release as ``uname -r`` prints it) is one the bug lists."""
    return bool(kernel) and any(fnmatchcase(kernel, pattern) for pattern in bug.kernels)


def _late(record: ResultRecord, bug: KnownBug) -> str | None:
    """Why a faulted point's recovery fails the bug's bound, or None if it meets it (or none
    applies: no bound, no fault, or the point failed already)."""
    limit = bug.recover_within
    faulted = record.recovery_s is not None or record.throughput_dip_pct is not None
    if limit is None or record.error or not faulted:
        return None
    if record.recovery_s is None:
        return f"no I/O came back after the fault ({LATE} {limit:g} s)"
    if record.recovery_s > limit:
        return f"I/O came back {record.recovery_s:.2f} s after the fault, later than {LATE} {limit:g} s"
    return None


def reason(bug: KnownBug, kernel: str) -> str:
    """The one line a known-bad point carries."""
    return f"{bug.name} on {kernel}: {bug.title}"[:200]


def judged(records: Sequence[ResultRecord], bug: KnownBug | None, kernel: str) -> list[ResultRecord]:
    """The run's records judged against its reproducer's bug (unchanged without one).

    Judging again gives the same records (a resumed run's kept points are judged with the rest)."""
    if bug is None:
        return list(records)
    out = []
    for record in records:
        late = _late(record, bug)
        if late is not None:
            record = record.model_copy(update={"error": late})
        said = f"{record.error}\n{record.note or ''}".lower()  # a rerun's note keeps the first attempt's
        shows = record.error is not None and any(mark.lower() in said for mark in bug.shows)
        marked = reason(bug, kernel) if shows and affected(bug, kernel) else None
        out.append(record.model_copy(update={"known_bad": marked}))
    return out


def outcome(record: ResultRecord) -> str:
    """A point's outcome in a word: pass, known-bad, FAIL (verification), ERROR, or ran (unverified)."""
    if record.known_bad:
        return KNOWN_BAD
    if record.error:
        return "ERROR"
    return {"pass": "pass", "fail": "FAIL"}.get(record.verify, "ran")


def exit_status(records: Sequence[ResultRecord]) -> int:
    """0 when every point passed, EXIT_KNOWN_BAD when each that did not is known-bad, else 1."""
    if any(r.error and not r.known_bad for r in records):
        return 1
    return EXIT_KNOWN_BAD if any(r.known_bad for r in records) else 0


def summary(records: Sequence[ResultRecord], bug: KnownBug | None, kernel: str) -> list[str]:
    """What a reproducer's run says at its end: the bug showed (and what a fix must change), did
    not show where it is known, or the kernel is not one it lists."""
    if bug is None:
        return []
    bad = sum(1 for r in records if r.known_bad)
    if bad:
        return [
            f"{KNOWN_BAD}: {bad} of {len(records)} points: {reason(bug, kernel)}",
            f"  symptom: {bug.symptom}",
            f"  a fix must: {bug.fix}",
        ]
    said = kernel or "a kernel that was not logged"
    if affected(bug, kernel):
        return [f"{bug.name}: did not show on {said}, a kernel it is known on ({len(records)} points)"]
    return [f"{bug.name}: not known on {said} (known on {', '.join(bug.kernels)}); judged as any run"]
