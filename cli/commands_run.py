"""``sanlab run``: boot a scenario's hosts, run its matrix on the real stacks, tear down."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import click

from sanlab.commands_compare import compared
from sanlab.dissectors.rewrites import rewritten_retransmissions
from sanlab.emulator.images import GUEST_OVERRIDE
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.kernel_runs import KernelRun, kernel_runs
from sanlab.scenarios.results import known_bad
from sanlab.scenarios.results.compare import kernel_of
from sanlab.scenarios.results.records import RESULTS, ResultRecord, RunJournal, results_document
from sanlab.scenarios.schema import Scenario
from sanlab.scenarios.sizes import format_size
from sanlab.targets.points import planned_points
from sanlab.targets.sessions import cluster, run_session
from sanlab.validation import check_loaded, fail, load_checked


def _say(message: str) -> None:
    click.echo(f"{time.strftime('%H:%M:%S')} {message}", err=True)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@click.command()
@click.argument("scenario", type=click.Path(path_type=Path), required=False)
@click.option("--out", type=click.Path(path_type=Path), help="Output directory (default: runs/NAME-TIME).")
@click.option("--force", is_flag=True, help="Replace a previous sanlab run in --out (its manifest's files).")
@click.option(
    "--resume",
    type=click.Path(path_type=Path),
    help="Continue the interrupted run in this folder: its finished points are kept.",
)
@click.option(
    "--snaplen",
    type=click.IntRange(64, 65535),
    help="Keep only this many bytes of each captured frame (headers, not data: smaller pcaps).",
)
@click.option("--json", "as_json", is_flag=True, help="Print {'results': [...]} on stdout, nothing else.")
@click.option(
    "--inventory",
    type=click.Path(path_type=Path),
    help="Reach the scenario's hosts as this Ansible-style YAML inventory says (real machines).",
)
@click.option("--dry-run", is_flag=True, help="Print every command each host would run, and change nothing.")
@click.option(
    "--scheduler",
    metavar="ADDRESS|local:N",
    help="Spread the points over a Dask cluster (tcp://HOST:PORT), or N worker processes here "
    "(local:N); each worker boots its own VMs.",
)
@click.option(
    "--kernel",
    "kernels",
    multiple=True,
    metavar="KERNEL",
    help="Twice: run the scenario on kernel A, then on B (a guest such as debian-13, a linux-image "
    ".deb or a built tree), into OUT/a-A and OUT/b-B, and print 'sanlab compare' of the two.",
)
def run(
    scenario: Path | None,
    out: Path | None,
    force: bool,
    resume: Path | None,
    snaplen: int | None,
    as_json: bool,
    inventory: Path | None,
    dry_run: bool,
    scheduler: str | None,
    kernels: tuple[str, ...],
) -> None:
    """Boot the hosts of SCENARIO, run its fio matrix, capture and tear down.

    Writes results.json, the raw fio JSON, one pcap per link (when capture is
    on) and console and kernel logs into the output directory, which must be
    new or empty.  results.json is rewritten after every point, so an
    interrupted run keeps what it finished; its "run" section says whether
    the run is complete.  IOPS are the speed of software emulation on this
    machine, not of any hardware; use 'sanlab model' for projections.

    \b
    Hosts with ssh: (or from --inventory) are real machines: sanlab
    reads them first (preflight: CPU, kernel, NICs, firmware, PCIe, RDMA
    devices, tools) and refuses to start where anything is missing; their
    records say 'measured' and carry those facts.

    \b
    Example:
      sanlab run scenarios/smoke.yaml --out runs/smoke
      sanlab run my-servers.yaml --inventory hosts.yaml --dry-run
      sanlab run --resume runs/smoke
      sanlab run scenarios/smoke.yaml --scheduler local:2
      sanlab run scenarios/smoke.yaml --kernel debian-12 --kernel ./linux > cover-letter.md

    \b
    --scheduler: each worker that has QEMU and the guest image (one that
    lacks either says so and gets none) runs a share of the points; all
    merge into one folder, captures and logs in share-K/.  With --dry-run
    too, the records say nothing ran; share-K/dry-run/ has the commands.

    \b
    Exit status: 0 every point passed; 1 a point failed; 3 every point that
    did not pass is known-bad (a reproducer's bug, on a kernel it lists).
    """
    where = _Where(scheduler, dry_run)
    if kernels:
        _on_kernels(scenario, kernels, out, force, snaplen, where, (resume, inventory, as_json))
    _one_run(scenario, out, force, resume, snaplen, as_json, inventory, where)


def _one_run(
    scenario: Path | None,
    out: Path | None,
    force: bool,
    resume: Path | None,
    snaplen: int | None,
    as_json: bool,
    inventory: Path | None,
    where: _Where,
) -> None:
    """One run of SCENARIO (or the rest of an interrupted one), its table, its exit status (a
    dry run, or a run whose every point passed, returns: click's own exit 0, and a caller that
    invokes the command in-process, such as benchmarks/climbs.py, gets control back)."""
    try:
        if where.scheduler is not None:
            _check_scheduler(where.scheduler)
        if resume is not None:
            scenario, loaded, journal = _resumed(
                resume, scenario is not None or out is not None or force, inventory
            )
        else:
            if scenario is None:
                raise SanlabError("give a SCENARIO file to run, or --resume DIR to continue a run")
            loaded = _loaded(scenario, inventory)
            if where.dry_run and where.scheduler is None:
                _dry_run(loaded)
                return
            if where.scheduler is not None and loaded.plan.real_machines:
                raise SanlabError(f"{scenario}: runs on real machines; --scheduler is for VM runs")
            journal = run_session.fresh(scenario, loaded, out, force)
    except SanlabError as exc:
        fail(exc)
    status = _execute(loaded, scenario.stem, journal, as_json, snaplen, where)
    if status:
        sys.exit(status)


def _on_kernels(
    scenario: Path | None,
    kernels: tuple[str, ...],
    out: Path | None,
    force: bool,
    snaplen: int | None,
    where: _Where,
    alone: tuple[Path | None, Path | None, bool],
) -> NoReturn:
    """Run SCENARIO on each kernel, one after the other, then print the two runs' compare page
    (the runs' own tables go to stderr).  Both kernels are checked before anything boots."""
    try:
        check_kernel_options(*alone, where.dry_run)
        if scenario is None:
            raise SanlabError("--kernel: give the SCENARIO to run on each kernel")
        runs = _kernel_runs(scenario, kernels, where)
        parent = out or run_session.default_out(scenario)
        journals = [run_session.fresh(scenario, r.scenario, parent / r.folder, force, r.text) for r in runs]
    except SanlabError as exc:
        fail(exc)
    codes = []
    for r, journal in zip(runs, journals, strict=True):
        _say(f"--kernel {r.given}: running into {journal.folder.root}")
        codes.append(_execute(r.scenario, r.folder, journal, False, snaplen, where, err=True))
    try:
        click.echo(compared(journals[0].folder.root, journals[1].folder.root), nl=False)
    except SanlabError as exc:
        fail(exc)
    sys.exit(1 if 1 in codes else max(codes))


def check_kernel_options(resume: Path | None, inventory: Path | None, as_json: bool, dry_run: bool) -> None:
    """--kernel runs the scenario on two kernels' VMs, printing their compare page: the options
    that resume one run, reach real machines or print only JSON or commands do not go with it."""
    given = {"--resume": resume, "--inventory": inventory, "--json": as_json, "--dry-run": dry_run}
    alone = [name for name, value in given.items() if value]
    if alone:
        raise SanlabError(f"--kernel: runs the scenario on two kernels' VMs; not with {', '.join(alone)}")
    if os.environ.get(GUEST_OVERRIDE):
        raise SanlabError(
            f"--kernel: ${GUEST_OVERRIDE} is set and would boot both runs on one guest; unset it"
        )


def _kernel_runs(scenario: Path, kernels: tuple[str, ...], where: _Where) -> list[KernelRun]:
    """The scenario once per kernel, each checked as a run would check it; one line if not."""
    if where.scheduler is not None:
        _check_scheduler(where.scheduler)
    runs = kernel_runs(scenario, kernels)
    for r in runs:
        _checked(check_loaded(r.scenario, f"{scenario} (--kernel {r.given})"), scenario)
        if r.scenario.plan.real_machines:
            raise SanlabError(
                f"{scenario}: runs on real machines, whose kernels are their own; --kernel is for VMs"
            )
    return runs


def _resumed(resume: Path, more: bool, inventory: Path | None) -> tuple[Path, Scenario, RunJournal]:
    """The interrupted run in ``resume``: its scenario copy, loaded, and its journal."""
    if more:
        raise SanlabError("--resume DIR: give it alone (the folder keeps its scenario and is the output)")
    folder = run_session.check_resumable(resume)
    scenario = resume / run_session.SCENARIO_COPY
    loaded = _loaded(scenario, inventory)
    return scenario, loaded, run_session.resumed(folder, loaded, _say)


def _check_scheduler(scheduler: str) -> None:
    """A scheduler's address or local:N, checked before anything is read or booted."""
    if scheduler.startswith(cluster.LOCAL_PREFIX):
        cluster.check_local(scheduler)
    else:
        from sanlab.models.sweeps.sweep_run import check_scheduler  # pyarrow's load, only when asked

        check_scheduler(scheduler)


class _Where:
    """Where the points run: here, or on the workers of a Dask cluster (and whether for real)."""

    def __init__(self, scheduler: str | None, dry_run: bool):
        self.scheduler, self.dry_run = scheduler, dry_run

    def execute(self, loaded: Scenario, stem: str, journal: RunJournal, snaplen: int | None) -> None:
        if self.scheduler is None:
            run_session.execute(loaded, stem, journal, _say, snaplen)
            return
        if self.scheduler.startswith(cluster.LOCAL_PREFIX):
            clients = cluster.local_cluster(cluster.check_local(self.scheduler))
        else:
            from sanlab.models.sweeps.sweep_run import connected

            clients = connected(self.scheduler)
        with clients as client:
            if self.dry_run:
                cluster.rehearse_on_cluster(loaded, journal, client, _say)
            else:
                cluster.run_on_cluster(loaded, stem, journal, client, snaplen, _say)


def _loaded(scenario: Path, inventory: Path | None) -> Scenario:
    """The scenario, checked, with something to run on hosts that can be reached."""
    return _checked(load_checked(scenario, inventory), scenario)


def _checked(loaded: Scenario, scenario: Path) -> Scenario:
    """``loaded`` if it has something to run on hosts that can be reached."""
    if loaded.plan.unreached:
        raise SanlabError(
            f"{scenario}: is for real machines, but nothing says how to reach "
            f"{', '.join(loaded.plan.unreached)}: give each host ssh: USER@HOST, or --inventory FILE"
        )
    if not loaded.targets:
        raise SanlabError(f"{scenario}: declares no targets: nothing to run (try 'sanlab lab up')")
    if not planned_points(loaded):
        raise SanlabError(f"{scenario}: no workload applies to any target: nothing to run")
    return loaded


def _execute(
    loaded: Scenario,
    stem: str,
    journal: RunJournal,
    as_json: bool,
    snaplen: int | None,
    where: _Where,
    err: bool = False,
) -> int:
    """Run what the journal lacks; judge a reproducer's points; finish the journal however it
    ends; print the table (on stderr with ``err``); return the exit status."""
    out, planned = journal.folder.root, int(journal.run["planned_points"])  # type: ignore[call-overload]
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        where.execute(loaded, stem, journal, snaplen)
    except KeyboardInterrupt:
        journal.finish("interrupted", f"{len(journal.records)} of {planned} points finished")
        _say(f"interrupted: {len(journal.records)} of {planned} points are in {out / RESULTS}")
        _say(f"'sanlab run --resume {out}' runs the rest")
        sys.exit(130)
    except SanlabError as exc:
        journal.finish("failed", str(exc).splitlines()[0])
        fail(exc)
    said = _judge(loaded, journal)
    journal.finish("complete")
    captured = loaded.capture and not where.dry_run  # a dry run captured nothing
    return _report(journal.records, out, as_json, captured, said, err)


def _judge(loaded: Scenario, journal: RunJournal) -> list[str]:
    """A reproducer's points judged against its bug on the kernel its guests ran (their logs):
    known-bad where it showed.  What the run says of it at its end."""
    if loaded.known_bug is None:
        return []
    kernel = kernel_of(journal.folder.root)
    records = known_bad.judged(journal.records, loaded.known_bug, kernel)
    journal.replace(records, kernel=kernel, known_bug=loaded.known_bug.name)
    return known_bad.summary(records, loaded.known_bug, kernel)


def _dry_run(loaded: Scenario) -> None:
    """Print, per host, every command the run would send it."""
    for host in run_session.rehearse(loaded, _say):
        click.echo(f"== {host.name}: {len(host.commands)} commands")
        for command in host.commands:
            click.echo("  " + command.replace("\n", "\n  "))
    click.echo("dry run: nothing was changed on any host")


def _report(
    records: list[ResultRecord],
    out: Path,
    as_json: bool,
    captured: bool,
    said: Sequence[str] = (),
    err: bool = False,
) -> int:
    """Print the run's table (or its JSON) and what a reproducer's run says; the exit status."""
    if as_json:
        click.echo(json.dumps(results_document(records), indent=2))
        for line in said:
            _say(line)
    else:
        for line in [*_table(records, out, captured), *said]:
            click.echo(line, err=err)
    if captured and any(r.verify == "fail" for r in records):
        _point_at_rewrites(out)
    return known_bad.exit_status(records)


def _table(records: list[ResultRecord], out: Path, captured: bool) -> list[str]:
    """One line per point; its outcome word is known_bad.outcome's where it is not a plain verdict."""
    shared = any(r.initiators for r in records)  # incast: a column says whose record it is
    who = f"{'initiator':<10} " if shared else ""
    wide = len(known_bad.KNOWN_BAD) if any(r.known_bad for r in records) else 6  # the column fits the word
    lines = [
        f"{who}{'transport':<10} {'stack':<6} {'fabric':<6} {'rdma':<4} {'rw':<9} {'bs':>4} "
        f"{'qd':>3} {'IOPS*':>8} {'lat us':>8} {'verify':<{wide}} {'checked':>8}"
    ]
    for r in records:
        checked = format_size(r.verified_bytes) if r.verified_bytes else "-"
        who = f"{r.initiator or '-':<10} " if shared else ""
        verify = known_bad.outcome(r) if r.known_bad else r.verify
        lines.append(
            f"{who}{r.transport:<10} {r.target_stack:<6} {r.fabric:<6} {r.rdma_driver or '-':<4} "
            f"{r.rw:<9} {format_size(r.bs):>4} {r.iodepth:>3} {r.iops or 0:>8.0f} "
            f"{r.lat_mean_us or 0:>8.0f} {verify:<{wide}} {checked:>8}" + _error_note(r)
        )
    if any(r.mode == "emulated" for r in records):
        lines.append("* emulated under software virtualisation: protocol behaviour, not hardware speed")
    else:
        lines.append("* measured on the real machines named in each record's 'hardware'")
    logs = ", logs/" if (out / "logs").is_dir() else ""  # VMs' console and kernel logs
    lines.append(f"results in {out}/ (results.json, fio/{logs}{', *.pcap' if captured else ''})")
    return lines


def _point_at_rewrites(out: Path) -> None:
    """A block failed verification: say whether a capture holds a retransmission whose bytes
    changed since their first sending, the wire's sign of a ghost write (targets/README.md)."""
    for pcap in sorted(out.glob("*.pcap")):
        rewrites = rewritten_retransmissions(pcap)
        if rewrites:
            click.echo(
                f"{pcap.name}: {len(rewrites)} TCP retransmission(s) carried other bytes than their "
                f"first sending ({rewrites[0].line()}): a write that failed over may have landed "
                f"again from this path (a ghost write; targets/README.md); 'sanlab analyze {pcap}' "
                "names the write and its LBA",
                err=True,
            )


def _error_note(r: ResultRecord) -> str:
    if r.known_bad:
        return f" {known_bad.KNOWN_BAD.upper()}: {r.known_bad[:100]}"
    if r.error:
        return f" ERROR: {r.error[:80]}"
    return f" (note: {r.note[:80]})" if r.note else ""
