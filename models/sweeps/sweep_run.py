"""Running a sweep: serially or on Dask, journalled so that an interrupted sweep resumes.

Rows are appended to ``DIR/points.jsonl`` as batches finish (one JSON
object a line, flushed), next to ``DIR/sweep.json`` which records the spec.
Run the same spec into the same folder again and only the missing points
are computed; a different spec there is refused, so two sweeps never mix.
When every point is in, the tables and the chart are written.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from sanlab.models.sweeps.sweep import KEYS, Grid, SweepPoint, chunks, solve_many
from sanlab.models.sweeps.sweep_goals import meeting, pareto_chart, pareto_front
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.files import read_bounded
from sanlab.scenarios.reading import parse_json
from sanlab.scenarios.results.outdir import OutputFolder, signals_held
from sanlab.scenarios.results.records import ResultRecord
from sanlab.scenarios.writing import cannot_write

Progress = Callable[[int, int], None]
JOURNAL = "points.jsonl"
SPEC = "sweep.json"
# Rows in one worker task: enough work that scheduling is a small part of it.
BATCH = {"sim": 8, "mva": 200, "auto": 50}


@dataclass
class Outcome:
    rows: list[dict[str, Any]]
    computed: int
    reused: int
    seconds: float
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> points
    files: list[str] = field(default_factory=list)
    goals_met: int = 0
    pareto: list[dict[str, Any]] = field(default_factory=list)


class Journal:
    """The sweep folder: its spec, and the rows finished so far, in its manifest
    (scenarios/results/outdir.py)."""

    def __init__(self, out: Path, grid: Grid):
        self.out = out
        self.folder = OutputFolder.open(out, "--out")
        self.path = out / JOURNAL
        spec = grid.spec.model_dump(mode="json")
        self.fingerprint = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
        self._claim(spec)

    def _claim(self, spec: dict[str, Any]) -> None:
        marker = self.out / SPEC
        if marker.exists() or marker.is_symlink():
            if not self.folder.ours(SPEC):
                raise SanlabError(f"--out {self.out}: its {SPEC} is not one sanlab wrote; give a new folder")
            try:
                held = parse_json(read_bounded(marker, 1 << 20, f"--out {self.out}:"), str(marker))
                held = held.get("fingerprint") if isinstance(held, dict) else None
            except SanlabError:
                held = None
            if held != self.fingerprint:
                raise SanlabError(
                    f"--out {self.out}: holds a sweep of another spec; give a new folder "
                    "(a sweep resumes only into the folder of the same spec)"
                )
        elif self.folder.foreign():
            raise SanlabError(f"--out {self.out}: is not empty and holds no sweep; give a new folder")
        else:
            self.folder.write_text(
                SPEC, json.dumps({"fingerprint": self.fingerprint, "spec": spec}, indent=2)
            )
        if self.folder.listed(JOURNAL):
            self.folder.grows.add(JOURNAL)  # a journal of an older sanlab, stamped after each append

    def done(self) -> dict[str, dict[str, Any]]:
        """Rows already computed, by key; a line torn by a crash, or damaged, is ignored."""
        rows: dict[str, dict[str, Any]] = {}
        if not self.path.exists():
            return rows
        if not self.folder.ours(JOURNAL):
            raise SanlabError(
                f"--out {self.out}: its {JOURNAL} is not a file sanlab wrote (a symlink, or not in "
                "the folder's manifest); give a new folder"
            )
        # The journal is sanlab's while it is the regular file the manifest names: a line torn by a
        # kill, or edited by hand, is skipped below and computed again.
        with open(self.path, "rb") as handle:
            for raw in handle:
                with contextlib.suppress(SanlabError):
                    row = parse_json(raw, str(self.path))
                    if isinstance(row, dict) and isinstance(row.get("key"), str):
                        rows[row["key"]] = row
        return rows

    @contextlib.contextmanager
    def appending(self) -> Iterator[Callable[[list[dict[str, Any]]], None]]:
        """Rows appended as they finish; the journal is entered as a file that grows before its
        first byte, so a kill at any moment leaves a journal the next run resumes."""
        with self.folder.append(JOURNAL) as handle:

            def add(rows: list[dict[str, Any]]) -> None:
                with signals_held():  # whole lines: a Ctrl-C waits for the batch to be on disk
                    try:
                        handle.write("".join(json.dumps(r) + "\n" for r in rows))
                        handle.flush()
                        os.fsync(handle.fileno())
                    except OSError as exc:
                        raise cannot_write(f"--out {self.path}", exc) from None

            yield add


def run_sweep(
    grid: Grid,
    out: Path,
    scheduler: Any = None,
    workers: int | None = None,
    progress: Progress | None = None,
) -> Outcome:
    """Compute what the journal lacks (serially when ``workers`` is 0), then write the outputs.

    ``scheduler`` is an address, or a Dask client already connected (``connected``)."""
    started = time.monotonic()
    journal = Journal(out, grid)
    have = journal.done()
    todo = [p for p in grid.points if p.key not in have]
    report = progress or (lambda done, total: None)
    report(len(grid.points) - len(todo), len(grid.points))
    with journal.appending() as add:
        batches = list(chunks(todo, BATCH[grid.spec.solver]))
        finished = len(grid.points) - len(todo)
        for rows in _solve(batches, grid, scheduler, workers):
            add(rows)
            for row in rows:
                have[row["key"]] = row
            finished += len(rows)
            report(finished, len(grid.points))
    rows, skipped = [], dict(grid.skipped)
    for p in grid.points:  # grid order, whatever order they finished in
        row = have[p.key]
        if "skipped" in row:  # the profile could not build it: counted, as the grid's own skips are
            skipped[row["skipped"]] = skipped.get(row["skipped"], 0) + 1
        else:
            rows.append(row)
    outcome = Outcome(rows, len(todo), len(grid.points) - len(todo), time.monotonic() - started, skipped)
    if not rows:
        raise SanlabError(f"--out {out}: no point of the grid could be projected ({describe_skips(skipped)})")
    _write_outputs(grid, journal.folder, outcome)
    return outcome


def _solve(
    batches: list[list[SweepPoint]], grid: Grid, scheduler: Any, workers: int | None
) -> Iterator[list[dict[str, Any]]]:
    solver, p99 = grid.spec.solver, grid.needs_p99
    if not batches:
        return
    if workers == 0 and scheduler is None:
        for batch in batches:
            yield solve_many(batch, solver, p99)
        return
    yield from _on_dask(batches, solver, p99, scheduler, workers)


def _on_dask(
    batches: list[list[SweepPoint]], solver: str, p99: bool, scheduler: Any, workers: int | None
) -> Iterator[list[dict[str, Any]]]:
    """Batches as Dask tasks, on the user's cluster or on a LocalCluster of this machine's cores."""
    from dask.distributed import Client, LocalCluster, as_completed

    with contextlib.ExitStack() as stack:
        if isinstance(scheduler, str):
            client = stack.enter_context(_connect(scheduler))
        elif scheduler is not None:  # a client the command connected before any work began
            client = scheduler
        else:
            n = check_workers(workers, oversubscribe=True)  # the hard ceiling; the command asked
            # The dashboard on a free loopback port: None means Dask's default :8787 on every
            # address, and a second cluster on the machine then warns "Port 8787 is in use".
            cluster = stack.enter_context(
                LocalCluster(
                    n_workers=n, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0"
                )
            )
            client = stack.enter_context(Client(cluster))
        futures = client.map(solve_many, batches, solver=solver, needs_p99=p99, pure=False)
        try:
            for future in as_completed(futures):
                yield future.result()
        finally:
            client.cancel(futures)


# Local workers are processes of about 150 MB each: past the cores they only take turns on them,
# so more than the cores is refused unless asked for, and even then at most this many per core.
WORKERS_PER_CORE = 4
OVERSUBSCRIBE_ENV = "SANLAB_SWEEP_OVERSUBSCRIBE"


def usable_cores() -> int:
    """The cores this process may run on (its affinity, not the machine's count)."""
    return len(os.sched_getaffinity(0)) or 1


def check_workers(workers: int | None, oversubscribe: bool = False) -> int:
    """How many local workers to start: ``workers``, or one per core; a count past the cores
    is refused before anything starts unless ``oversubscribe`` (--oversubscribe) says so."""
    cores = usable_cores()
    if workers is None:
        return cores
    most = cores * WORKERS_PER_CORE if oversubscribe else cores
    if 1 <= workers <= most:
        return workers
    told = f"--oversubscribe or {OVERSUBSCRIBE_ENV}=1"
    if workers < 1:
        allowed = f"give 1 to {most} (this machine has {cores} cores)"
    elif oversubscribe:
        allowed = f"at most {WORKERS_PER_CORE} per core even with {told}: {most} here"
    else:
        allowed = (
            f"at most one per core: {cores} here (with {told}, up to {cores * WORKERS_PER_CORE}), "
            "or --scheduler for a cluster"
        )
    raise SanlabError(f"--workers {workers}: {allowed}")


# How long a scheduler has, in all, to accept the connection and answer Dask's handshake, less
# what Python takes to exit (its modules' teardown, about 0.4 s): the user's answer is in 20 s.
HANDSHAKE_S = 20.0
EXIT_S = 0.75
SCHEMES = ("tcp", "tls")
_ADDRESS = re.compile(r"^(tcp|tls)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]{0,252}):([0-9]{1,5})$")


def check_scheduler(address: str) -> str:
    """``address`` if it names a Dask scheduler's endpoint (tcp:// or tls://HOST:PORT)."""
    match = _ADDRESS.fullmatch(address)  # not .match: its $ lets a trailing newline through
    if not match or not 0 < int(match.group(3)) < 65536:
        raise SanlabError(
            f"--scheduler {address[:80]!r}: not a scheduler address (write tcp://HOST:PORT or tls://HOST:PORT)"
        )
    return address


@contextlib.contextmanager
def connected(scheduler: str | None, since: float | None = None) -> Iterator[Any]:
    """A client of ``scheduler`` (None without one), connected before any work and closed after;
    the deadline counts from ``since`` (a ``time.monotonic()``; default: now)."""
    if scheduler is None:
        yield None
        return
    with _connect(scheduler, since) as client:
        yield client


def _connect(scheduler: str, since: float | None = None) -> Any:
    """A Dask client of ``scheduler``, or a one-line error: ``HANDSHAKE_S`` in all, not per step.

    A refused port is an answer, given at once (a plain TCP connect first: Dask
    would retry it until its own timeout).  A listener that accepts and never
    speaks is waited for until the deadline and no longer: the client is made on
    a thread, and one that arrives after the deadline is closed by that thread.
    """
    deadline = (time.monotonic() if since is None else since) + HANDSHAKE_S - EXIT_S
    address = check_scheduler(scheduler)
    made: dict[str, Any] = {}
    lock = threading.Lock()

    def attempt() -> None:
        try:
            _reach(address, deadline)
            from dask.distributed import Client  # only once something answers: a second to load

            client = Client(address, timeout=max(deadline - time.monotonic() - 0.5, 0.5))
        except Exception as exc:  # noqa: BLE001 - Dask raises many kinds; each becomes one line
            made["error"] = exc
            return
        with lock:
            if made.get("abandoned"):
                client.close()
            else:
                made["client"] = client

    worker = threading.Thread(target=attempt, daemon=True, name="dask-connect")
    worker.start()
    worker.join(max(deadline - time.monotonic(), 0.1))
    with lock:
        if "client" in made:
            return made["client"]
        made["abandoned"] = True
    late = f"no Dask handshake before the {HANDSHAKE_S:.0f} s deadline"
    why = str(made.get("error") or late).splitlines()[0][:160]
    raise SanlabError(f"--scheduler {scheduler}: cannot reach a Dask scheduler there ({why})")


def _reach(address: str, deadline: float) -> None:
    """A TCP connect to the scheduler's port, then (tcp://) the first bytes of Dask's handshake,
    which a scheduler sends unasked: refused, unknown or silent fails here, in plain sockets, so
    no half-made Dask client is left waiting.  (TLS servers wait for the client: connect only.)"""
    scheme, rest = address.split("://", 1)
    host, port = rest.rsplit(":", 1)
    try:
        with socket.create_connection(
            (host.strip("[]"), int(port)), timeout=deadline - time.monotonic()
        ) as sock:
            if scheme == "tcp":
                sock.settimeout(max(deadline - time.monotonic(), 0.01))
                if not sock.recv(1):
                    raise OSError(f"{host}:{port} closed the connection without a Dask handshake")
    except TimeoutError:
        raise OSError(f"no Dask handshake before the {HANDSHAKE_S:.0f} s deadline") from None
    except ConnectionRefusedError:
        raise OSError(f"connection refused by {host}:{port}") from None
    except socket.gaierror as exc:
        raise OSError(f"unknown host {host}: {exc.strerror}") from None


def describe_skips(skipped: Mapping[str, int], most: int = 4) -> str:
    """The commonest reasons points were skipped, bounded: a line, not a page."""
    ranked = sorted(skipped.items(), key=lambda item: -item[1])
    text = "; ".join(f"{n:,} x {reason}" for reason, n in ranked[:most])
    return text + (f"; and {len(ranked) - most} more reasons (summary.json)" if len(ranked) > most else "")


COLUMNS = [
    *KEYS,
    *(f for f in ResultRecord.model_fields if f not in KEYS and f not in ("iops_ci95", "iops_range95")),
]
COLUMNS += ["iops_ci95_low", "iops_ci95_high", "iops_range95_low", "iops_range95_high", "solver", "key"]


OUTPUTS = ("results.parquet", "results.csv", "goals.csv", "pareto.csv", "pareto.png", "summary.json")


def _write_outputs(grid: Grid, folder: OutputFolder, outcome: Outcome) -> None:
    for name in OUTPUTS:
        folder.claim(name)  # before any work: a user's file or a symlink there is refused
    rows = outcome.rows
    goals = meeting(rows, grid.goals)
    front = pareto_front(goals, grid.spec.pareto)
    table = pa.Table.from_pylist([{c: r.get(c) for c in COLUMNS} for r in rows])
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    folder.write_bytes("results.parquet", sink.getvalue().to_pybytes())
    for name, selection in (("results.csv", rows), ("goals.csv", goals), ("pareto.csv", front)):
        folder.write_text(name, _csv_text(selection))
    folder.write_bytes("pareto.png", pareto_chart(rows, front, grid.spec.pareto, grid.goals, AXIS_NAMES))
    summary = {
        "points": len(rows),
        "computed": outcome.computed,
        "reused": outcome.reused,
        "skipped": outcome.skipped,
        "solvers": {s: sum(1 for r in rows if r["solver"] == s) for s in ("mva", "sim")},
        "goals": [str(g) for g in grid.goals],
        "goals_met": len(goals),
        "pareto_objectives": grid.spec.pareto,
        "pareto_points": len(front),
        "seconds": round(outcome.seconds, 2),
    }
    folder.write_text("summary.json", json.dumps(summary, indent=2) + "\n")
    outcome.goals_met, outcome.pareto = len(goals), front
    outcome.files = list(OUTPUTS)


def _csv_text(rows: list[dict[str, Any]]) -> str:
    handle = io.StringIO(newline="")
    writer = csv.DictWriter(handle, fieldnames=COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return handle.getvalue()


# How a metric is named on a chart's axis: words and units, not a field name.
AXIS_NAMES = {
    "iops": "IOPS",
    "bw_mibps": "throughput (MiB/s)",
    "lat_mean_us": "mean latency (µs)",
    "lat_p99_us": "p99 latency (µs)",
    "link_gbps": "link speed (Gb/s)",
    "cores": "cores per host",
    "cpu_initiator_pct": "initiator CPU (%)",
    "cpu_target_pct": "target CPU (%)",
    "numjobs": "fio jobs",
    "iodepth": "queue depth",
    "bs": "block size (bytes)",
    "sessions": "sessions",
    "queues": "I/O queues",
    "wire_gbps": "on the wire (Gb/s)",
}
