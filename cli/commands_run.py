"""``sanlab run``: boot a scenario's hosts, run its matrix on the real stacks, tear down."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from sanlab.commands_machines import check_machines, machine_hosts, run_on_machines
from sanlab.emulator.images import ready_image
from sanlab.emulator.lab import Lab, lab_name, plan, running_lab
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.files import read_bounded
from sanlab.scenarios.outdir import OutputFolder, claim_fresh, copy_into
from sanlab.scenarios.records import RESULTS, ResultRecord, RunJournal, results_document
from sanlab.scenarios.schema import Scenario
from sanlab.scenarios.semantics import link_name, real_machines, unreached
from sanlab.scenarios.sizes import format_size
from sanlab.targets import runner
from sanlab.targets.dryrun import DryRunHost
from sanlab.validation import fail, load_checked

SCENARIO_COPY = "scenario.yaml"  # a run keeps the scenario it ran, so that --resume can go on
MAX_SCENARIO_BYTES = 1 << 20  # as scenarios/yamlfile.py reads them
MAX_RESULTS_BYTES = 64 << 20


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
def run(
    scenario: Path | None,
    out: Path | None,
    force: bool,
    resume: Path | None,
    snaplen: int | None,
    as_json: bool,
    inventory: Path | None,
    dry_run: bool,
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
    """
    try:
        if resume is not None:
            if scenario is not None or out is not None or force:
                raise SanlabError(
                    "--resume DIR: give it alone (the folder keeps its scenario and is the output)"
                )
            loaded, journal = _resumed(resume, inventory)
            scenario = resume / SCENARIO_COPY
        else:
            if scenario is None:
                raise SanlabError("give a SCENARIO file to run, or --resume DIR to continue a run")
            loaded = _loaded(scenario, inventory)
            if dry_run:
                _dry_run(loaded)
                return
            journal = _fresh(scenario, loaded, out, force)
    except SanlabError as exc:
        fail(exc)
    _execute(loaded, scenario, journal, as_json, snaplen)


def _loaded(scenario: Path, inventory: Path | None) -> Scenario:
    """The scenario, checked, with something to run on hosts that can be reached."""
    loaded = load_checked(scenario, inventory)
    if unreached(loaded):
        raise SanlabError(
            f"{scenario}: is for real machines, but nothing says how to reach "
            f"{', '.join(unreached(loaded))}: give each host ssh: USER@HOST, or --inventory FILE"
        )
    if not loaded.targets:
        raise SanlabError(f"{scenario}: declares no targets: nothing to run (try 'sanlab lab up')")
    if not runner.planned_points(loaded):
        raise SanlabError(f"{scenario}: no workload applies to any target: nothing to run")
    return loaded


def _fresh(scenario: Path, loaded: Scenario, out: Path | None, force: bool) -> RunJournal:
    """A new run's folder, holding a copy of its scenario (for --resume) and its journal."""
    out = out or Path("runs") / f"{lab_name(scenario.stem)}-{time.strftime('%Y%m%d-%H%M%S')}"
    folder = claim_fresh(out, "--out", force)
    folder.write_text(SCENARIO_COPY, read_bounded(scenario, MAX_SCENARIO_BYTES, "scenario").decode())
    planned = runner.planned_points(loaded)
    journal = RunJournal(folder, loaded.name or scenario.stem, planned, _settler(folder, loaded))
    return journal


def _resumed(resume: Path, inventory: Path | None) -> tuple[Scenario, RunJournal]:
    """An interrupted run's folder, scenario and journal, holding the points it finished whole."""
    folder = OutputFolder.open(resume, "--resume")
    for name in (SCENARIO_COPY, RESULTS):
        if not folder.listed(name):
            raise SanlabError(f"--resume {resume}: holds no {name} of a sanlab run; nothing to resume")
    foreign = folder.foreign()
    if foreign:
        raise SanlabError(f"--resume {resume}: holds files sanlab did not write ({', '.join(foreign[:4])})")
    loaded = _loaded(resume / SCENARIO_COPY, inventory)
    document = _results_of(resume)
    run = document["run"]
    if run.get("status") == "complete":
        raise SanlabError(f"--resume {resume}: that run is complete; nothing to resume")
    records = [ResultRecord.model_validate(r) for r in document["results"]]
    points, kept = runner.finished_points(loaded, len(records))
    planned = runner.planned_points(loaded)
    settle = _settler(folder, loaded, _capture_prefix(points))
    journal = RunJournal(folder, str(run.get("scenario") or "run"), planned, settle, records[:kept])
    journal.run["resumed_after"] = points
    _say(f"resuming {resume}: {points} of {planned} points are kept, {planned - points} to run")
    return loaded, journal


def _results_of(folder: Path) -> dict[str, Any]:
    """A run's results.json, checked enough to resume from: a one-line error otherwise."""
    where = f"--resume {folder}: its {RESULTS}"
    try:
        document = json.loads(read_bounded(folder / RESULTS, MAX_RESULTS_BYTES, "--resume"))
        if not isinstance(document.get("run"), dict) or not isinstance(document.get("results"), list):
            raise ValueError
        for record in document["results"]:
            ResultRecord.model_validate(record)
    except (ValueError, AttributeError, TypeError):
        raise SanlabError(f"{where} is not a run's results (damaged?); it cannot be resumed") from None
    return dict(document)


def _execute(
    loaded: Scenario, scenario: Path, journal: RunJournal, as_json: bool, snaplen: int | None
) -> None:
    """Run what the journal lacks; finish the journal however it ends; print the table."""
    out, planned = journal.folder.root, int(journal.run["planned_points"])  # type: ignore[call-overload]
    skip = int(journal.run.get("resumed_after") or 0)  # type: ignore[call-overload]
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        if real_machines(loaded):
            run_on_machines(loaded, out, journal, _say, skip)
        else:
            _run_matrix(loaded, scenario, journal, skip, snaplen)
    except KeyboardInterrupt:
        journal.finish("interrupted", f"{len(journal.records)} of {planned} points finished")
        _say(f"interrupted: {len(journal.records)} of {planned} points are in {out / RESULTS}")
        _say(f"'sanlab run --resume {out}' runs the rest")
        sys.exit(130)
    except SanlabError as exc:
        journal.finish("failed", str(exc).splitlines()[0])
        fail(exc)
    journal.finish("complete")
    _report(journal.records, out, as_json, loaded.capture)


def _captures(loaded: Scenario, prefix: str) -> list[str]:
    """The pcap each captured link writes into the run folder (emulator/lab.py names them)."""
    if not loaded.capture:
        return []
    return [f"{prefix}{link_name(link, i)}.pcap" for i, link in enumerate(loaded.links)]


def _settler(folder: OutputFolder, loaded: Scenario, prefix: str = "") -> Callable[[], None]:
    """Enter in the folder's manifest what a run's writers have added: fio's JSON, captures.

    A resumed run captures into a subfolder of its own (``prefix``), so that
    QEMU does not truncate the captures of the points already kept.
    """
    captures = _captures(loaded, prefix)
    for name in captures:
        folder.claim(name)  # before QEMU opens it: a symlink or a user's file there is refused

    def settle() -> None:
        folder.adopt("fio")
        folder.stamp(captures)

    return settle


def _capture_prefix(skip: int) -> str:
    return f"resumed-{skip}/" if skip else ""


def _run_matrix(
    loaded: Scenario, scenario: Path, journal: RunJournal, skip: int, snaplen: int | None
) -> None:
    ready_image(_say)
    name = lab_name(f"run-{scenario.stem}")[:24] + f"-{os.getpid()}"
    out = journal.folder.root
    capture = out / _capture_prefix(skip) if loaded.capture else None
    with running_lab(loaded, name, _say, capture, keep_logs=False, snaplen=snaplen) as lab:
        try:
            runner.run(
                loaded,
                lab.vms,
                lab.plan.endpoints,
                out,
                _say,
                doctor=lab,
                sink=journal,
                cables=lab,
                skip=skip,
            )
        finally:
            _collect_logs(lab, journal.folder)


def _dry_run(loaded: Scenario) -> None:
    """Walk the run with hosts that only write down what they are sent, and print it per host."""
    if real_machines(loaded):
        with machine_hosts(loaded) as hosts:
            checked = check_machines(loaded, hosts, _say)
            ends = checked.endpoints
    else:
        ends = plan(loaded, "dry-run", Path("/dry-run"), None).endpoints
    imagined = {h.name: DryRunHost(h.name) for h in loaded.hosts}
    runner.rehearse(loaded, imagined, ends)
    for host in imagined.values():
        click.echo(f"== {host.name}: {len(host.commands)} commands")
        for command in host.commands:
            click.echo("  " + command.replace("\n", "\n  "))
    click.echo("dry run: nothing was changed on any host")


def _report(records: list[ResultRecord], out: Path, as_json: bool, captured: bool) -> None:
    failed = [r for r in records if r.error]
    if as_json:
        click.echo(json.dumps(results_document(records), indent=2))
    else:
        shared = any(r.initiators for r in records)  # incast: a column says whose record it is
        who = f"{'initiator':<10} " if shared else ""
        click.echo(
            f"{who}{'transport':<10} {'stack':<6} {'fabric':<6} {'rdma':<4} {'rw':<9} {'bs':>4} "
            f"{'qd':>3} {'IOPS*':>8} {'lat us':>8} {'verify':<6} {'checked':>8}"
        )
        for r in records:
            checked = format_size(r.verified_bytes) if r.verified_bytes else "-"
            who = f"{r.initiator or '-':<10} " if shared else ""
            click.echo(
                f"{who}{r.transport:<10} {r.target_stack:<6} {r.fabric:<6} {r.rdma_driver or '-':<4} "
                f"{r.rw:<9} {format_size(r.bs):>4} {r.iodepth:>3} {r.iops or 0:>8.0f} "
                f"{r.lat_mean_us or 0:>8.0f} {r.verify:<6} {checked:>8}" + _error_note(r.error, r.note)
            )
        if any(r.mode == "emulated" for r in records):
            click.echo("* emulated under software virtualisation: protocol behaviour, not hardware speed")
        else:
            click.echo("* measured on the real machines named in each record's 'hardware'")
        logs = ", logs/" if (out / "logs").is_dir() else ""  # VMs' console and kernel logs
        click.echo(f"results in {out}/ (results.json, fio/{logs}{', *.pcap' if captured else ''})")
    sys.exit(1 if failed else 0)


def _error_note(error: str | None, note: str | None) -> str:
    if error:
        return f" ERROR: {error[:80]}"
    return f" (note: {note[:80]})" if note else ""


def _collect_logs(lab: Lab, folder: OutputFolder) -> None:
    for vm in lab.vms.values():
        try:
            folder.write_text(f"logs/{vm.name}.dmesg", vm.run("dmesg", timeout=30).stdout)
            tgtd = vm.run("cat /var/log/tgtd.log 2>/dev/null", timeout=30).stdout
            if tgtd:
                folder.write_text(f"logs/{vm.name}.tgtd.log", tgtd)
        except SanlabError:
            pass
        if vm.console_log.exists():
            copy_into(folder, vm.console_log, f"logs/{vm.console_log.name}")
