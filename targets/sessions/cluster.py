"""A run's points on a Dask cluster: each worker boots its own VMs, on its own machine.

``sanlab run SCENARIO --scheduler ADDR`` (or ``local:N``, a cluster of N
worker processes on this machine) asks every worker first whether it can boot
the scenario's guests at all: QEMU on its PATH, the guest image in its
cache and the kernel the scenario brings, if any, at its path there
(``probe``).  A worker that cannot says why and gets no points.  The
run's points, in run order, are cut into one contiguous share per fit worker
(a target's points stay together where they can, so few targets are exported
twice); each worker runs its share on a lab of its own (run_session.run_share)
into a folder of its machine and sends back the records and the files.

The records go into the run's journal in run order: a share that finishes
early waits for the ones before it, so results.json is always a prefix of the
serial run's, and ``--resume`` of an interrupted cluster run works as for any
run.  fio's JSON keeps its names (one per point); what each lab wrote once
(captures, the VMs' logs, TLS key logs) goes under ``share-K/``, since two
labs' captures of one link are two captures.  A dry run walks the same
dispatch and merge with hosts that only write commands down (``rehearse``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sanlab.emulator import kernels
from sanlab.emulator.blueprint import blueprint
from sanlab.emulator.images import current_image, guest_of, image_key, missing_packages
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.files import read_bounded
from sanlab.scenarios.hosts import Say
from sanlab.scenarios.registry import DEFAULT_GUEST
from sanlab.scenarios.results.records import RESULTS, ResultRecord, RunJournal
from sanlab.scenarios.schema import Scenario
from sanlab.targets import rehearsal
from sanlab.targets.dryrun import DryRunHost
from sanlab.targets.placement import placements
from sanlab.targets.point_run import point_record
from sanlab.targets.points import planned_points
from sanlab.targets.sessions import run_session

LOCAL_PREFIX = "local:"
MOST_LOCAL_WORKERS = 16  # each boots a lab of its own: more than this on one machine only thrashes
MAX_SHARE_BYTES = 4 << 30  # what one worker may send back (captures, fio's JSON, logs)
DRY_RUN_NOTE = "dry run: the commands were written down, nothing ran"


@dataclass(frozen=True)
class Fitness:
    """What a worker said of itself: its machine, and why it cannot boot the guests (if so)."""

    address: str
    host: str
    problems: tuple[str, ...] = ()


@dataclass
class ShareOutcome:
    """What one worker sends back: its records in run order, and the files its lab wrote."""

    host: str
    records: list[dict[str, Any]]
    files: dict[str, bytes] = field(default_factory=dict)


def probe(loaded: Scenario) -> tuple[str, tuple[str, ...]]:
    """Run on a worker: its host name and what it lacks to boot ``loaded``'s guests (nothing:
    fit): QEMU, the guest's image, and the kernel the scenario brings (at its path there)."""
    guest = guest_of(loaded.guest)
    problems = [f"lacks {package} (QEMU)" for package in missing_packages(building=False)]
    if current_image(guest) is None:
        build = "sanlab images build" + ("" if guest == DEFAULT_GUEST else f" --guest {guest}")
        problems.append(f"has no {guest} guest image (key {image_key(guest)}) in its cache: run '{build}'")
    if loaded.kernel is not None:
        try:
            kernels.check_kernel(loaded, kernels.kernel_source(loaded.kernel))
        except SanlabError as exc:
            problems.append(f"cannot boot the kernel {loaded.kernel!r} there: {str(exc).splitlines()[0]}")
    return socket.gethostname(), tuple(problems)


def fit_workers(client: Any, loaded: Scenario, say: Say) -> list[Fitness]:
    """Every worker's answer to ``probe``, each unfit one said in a line; an error if none is fit."""
    guest = guest_of(loaded.guest)
    found = [_fitness(address, answer) for address, answer in sorted(client.run(probe, loaded).items())]
    for worker in found:
        if worker.problems:
            say(f"worker {worker.address} ({worker.host}) {'; '.join(worker.problems)}: it gets no points")
    fit = [worker for worker in found if not worker.problems]
    if not fit:
        raise SanlabError(f"no worker of the cluster can boot the {guest} guests ({len(found)} asked)")
    return fit


def _fitness(address: str, answer: Any) -> Fitness:
    """A worker's answer to ``probe``; one that is not (another sanlab's, say) makes it unfit."""
    if (
        isinstance(answer, tuple | list)
        and len(answer) == 2
        and isinstance(answer[0], str)
        and isinstance(answer[1], tuple | list)
        and all(isinstance(p, str) for p in answer[1])
    ):
        return Fitness(address, answer[0][:100], tuple(p.splitlines()[0][:300] for p in answer[1] if p))
    return Fitness(address, "?", ("answered the probe with no (host, problems): another sanlab?",))


def shares(numbers: list[int], workers: int) -> list[list[int]]:
    """``numbers`` (run order) cut into at most ``workers`` contiguous shares, sizes within one."""
    count = min(workers, len(numbers))
    size, extra = divmod(len(numbers), count) if count else (0, 0)
    cut, start = [], 0
    for k in range(count):
        end = start + size + (1 if k < extra else 0)
        cut.append(numbers[start:end])
        start = end
    return cut


def run_on_cluster(
    loaded: Scenario, stem: str, journal: RunJournal, client: Any, snaplen: int | None, say: Say
) -> None:
    """The journal's missing points over the cluster's fit workers, merged in run order."""
    _dispatch(loaded, journal, client, say, lambda only: (_vm_share, (loaded, stem, only, snaplen)))


def rehearse_on_cluster(loaded: Scenario, journal: RunJournal, client: Any, say: Say) -> None:
    """The same dispatch and merge with dry-run hosts: each point's record says nothing ran,
    and ``dry-run/HOST.commands`` what each host would have been sent."""
    _dispatch(loaded, journal, client, say, lambda only: (rehearse_share, (loaded, only)))


Task = Callable[[frozenset[int]], tuple[Callable[..., ShareOutcome], tuple[Any, ...]]]


def _dispatch(loaded: Scenario, journal: RunJournal, client: Any, say: Say, task: Task) -> None:
    """Probe, cut, submit one share per fit worker (to it alone), merge each share in run order."""
    from dask.distributed import as_completed

    skip = int(journal.run.get("resumed_after") or 0)  # type: ignore[call-overload]
    fit = fit_workers(client, loaded, say)
    cut = shares(list(range(skip, planned_points(loaded))), len(fit))
    futures = []
    for k, (numbers, worker) in enumerate(zip(cut, fit, strict=False), 1):
        say(f"share {k}: points {numbers[0] + 1}-{numbers[-1] + 1} to {worker.address} ({worker.host})")
        function, args = task(frozenset(numbers))
        futures.append(
            client.submit(function, *args, workers=[worker.address], allow_other_workers=False, pure=False)
        )
    share_of = {future.key: k for k, future in enumerate(futures, 1)}
    prefix = f"resumed-{skip}/" if skip else ""
    finished: dict[int, ShareOutcome] = {}
    merged = 0
    try:
        for future in as_completed(futures):
            k = share_of[future.key]
            finished[k] = _outcome(future, k, fit[k - 1])
            while merged + 1 in finished:
                merged += 1
                merge(journal, finished.pop(merged), f"{prefix}share-{merged}/")
                say(f"share {merged} merged: {len(journal.records)} records in {RESULTS}")
    finally:
        client.cancel(futures)


def _outcome(future: Any, k: int, worker: Fitness) -> ShareOutcome:
    """A share's outcome, or its failure as one line naming the worker (a SanlabError as it is)."""
    try:
        outcome = future.result()
    except SanlabError:
        raise
    except Exception as exc:  # noqa: BLE001 - Dask re-raises what the worker raised, of any kind
        first = (str(exc) or type(exc).__name__).splitlines()[0][:200]
        raise SanlabError(f"share {k} on {worker.address} ({worker.host}) failed: {first}") from None
    if not isinstance(outcome, ShareOutcome):
        raise SanlabError(f"share {k} on {worker.address}: the worker sent back no share's outcome")
    return outcome


def merge(journal: RunJournal, outcome: ShareOutcome, prefix: str) -> None:
    """A share's files into the run folder (fio's under their own names, the rest under
    ``prefix``), then its records into the journal, which rewrites results.json.  Every name
    and record is checked first: a worker's answer is data, and nothing of a bad one is merged."""
    records, files = checked_outcome(outcome, prefix)
    folder = journal.folder  # the run's OutputFolder: its writer refuses a link out
    for name, data in files:
        folder.write_bytes(name, data)
    for record in records:
        journal.add(record)


def checked_outcome(outcome: ShareOutcome, prefix: str) -> tuple[list[ResultRecord], list[tuple[str, bytes]]]:
    """A share's records as ResultRecords and its files as (name in the run folder, bytes), or
    one line naming what a worker sent that is not a share's: a name that is a path out
    (absolute, '..', empty parts), a file that is not bytes, a record that is not one."""
    where = f"the share from {str(outcome.host)[:60]!r}"
    if not isinstance(outcome.files, dict) or not isinstance(outcome.records, list):
        raise SanlabError(f"{where}: its files are not a mapping of names or its records not a list")
    files = []
    for name, data in sorted(outcome.files.items(), key=lambda item: str(item[0])):
        parts = name.split("/") if isinstance(name, str) else []
        if not parts or any(p in ("", ".", "..") or "\0" in p for p in parts) or not isinstance(data, bytes):
            raise SanlabError(
                f"{where}: file {str(name)[:80]!r} is not a name inside a run folder with bytes"
            )
        files.append((name if name.startswith("fio/") else prefix + name, data))
    records = []
    for index, record in enumerate(outcome.records):
        try:
            records.append(ResultRecord.model_validate(record))
        except ValueError:
            raise SanlabError(f"{where}: records[{index}] is not a result record") from None
    return records, files


def _vm_share(loaded: Scenario, stem: str, only: frozenset[int], snaplen: int | None) -> ShareOutcome:
    """Run on a worker: its share on VMs it boots, in a folder of its machine sent back whole."""
    host = socket.gethostname()
    work = Path(tempfile.mkdtemp(prefix="sanlab-share-"))
    try:
        journal = run_session.run_share(loaded, stem, work / "run", only, snaplen, _worker_say(host))
        return ShareOutcome(host, _dumped(journal.records), _files_of(journal, work / "run"))
    finally:
        shutil.rmtree(work, ignore_errors=True)  # a folder this call made, with only its lab's files


def rehearse_share(loaded: Scenario, only: frozenset[int]) -> ShareOutcome:
    """Run on a worker (or here, for a serial dry run): the share's commands written down by
    dry-run hosts, and one record per point that says nothing ran."""
    ends = blueprint(loaded, "dry-run", Path("/dry-run"), None).endpoints
    hosts = {h.name: DryRunHost(h.name) for h in loaded.hosts}
    records = []
    for work in rehearsal.rehearse(loaded, hosts, ends, only):
        base = placements(work.planned, hosts, ends)[0].record_base(work.planned.target)
        records += [point_record(base, p, note=DRY_RUN_NOTE) for p in work.points]
    files = {f"dry-run/{h.name}.commands": "\n".join(h.commands).encode() + b"\n" for h in hosts.values()}
    return ShareOutcome(socket.gethostname(), _dumped(records), files)


def _dumped(records: list[ResultRecord]) -> list[dict[str, Any]]:
    return [r.model_dump(mode="json") for r in records]


def _files_of(journal: RunJournal, root: Path) -> dict[str, bytes]:
    """The files the share's folder holds as sanlab's (its manifest's), but its results.json."""
    journal.settle()
    names = sorted(n for n in journal.folder.files if n != RESULTS and journal.folder.ours(n))
    total = sum((root / n).stat().st_size for n in names)
    if total > MAX_SHARE_BYTES:
        raise SanlabError(f"the share wrote {total:,} bytes; at most {MAX_SHARE_BYTES:,} go back (--snaplen)")
    return {n: read_bounded(root / n, MAX_SHARE_BYTES, "share file") for n in names}


def _worker_say(host: str) -> Say:
    """A worker's progress lines, on its own stderr (a local cluster's is this terminal's)."""

    def say(message: str) -> None:
        print(f"[{host}:{os.getpid()}] {message}", file=sys.stderr, flush=True)

    return say


def check_local(spec: str) -> int:
    """The worker count of ``local:N``, or a one-line error saying what is allowed."""
    count = spec.removeprefix(LOCAL_PREFIX)
    if not count.isdigit() or not 1 <= int(count) <= MOST_LOCAL_WORKERS:
        raise SanlabError(
            f"--scheduler {spec[:40]!r}: write local:N with N from 1 to {MOST_LOCAL_WORKERS} "
            "(worker processes on this machine, each booting its own VMs), or tcp://HOST:PORT"
        )
    return int(count)


@contextlib.contextmanager
def local_cluster(workers: int) -> Iterator[Any]:
    """A client of ``workers`` worker processes on this machine, one thread each, closed after."""
    from dask.distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0"
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client
