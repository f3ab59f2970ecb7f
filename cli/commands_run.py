"""``sanlab run``: boot a scenario's hosts, run its matrix on the real stacks, tear down."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import click

from sanlab.commands_machines import check_machines, machine_hosts, run_on_machines
from sanlab.emulator.images import build_image
from sanlab.emulator.lab import Lab, lab_name, plan, running_lab
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.records import ResultRecord, RunJournal, claim_out_dir, results_document
from sanlab.scenarios.schema import Scenario
from sanlab.scenarios.semantics import real_machines, unreached
from sanlab.scenarios.sizes import format_size
from sanlab.targets import runner
from sanlab.targets.dryrun import DryRunHost
from sanlab.validation import fail, load_checked


def _say(message: str) -> None:
    click.echo(f"{time.strftime('%H:%M:%S')} {message}", err=True)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@click.command()
@click.argument("scenario", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), help="Output directory (default: runs/NAME-TIME).")
@click.option("--force", is_flag=True, help="Replace a previous sanlab run in --out (nothing else there).")
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
    scenario: Path,
    out: Path | None,
    force: bool,
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
    Hosts with ``ssh:`` (or from --inventory) are real machines: sanlab
    reads them first (preflight: CPU, kernel, NICs, firmware, PCIe, RDMA
    devices, tools) and refuses to start where anything is missing; their
    records say ``measured`` and carry those facts.

    \b
    Example:
      sanlab run scenarios/smoke.yaml --out runs/smoke
      sanlab run my-servers.yaml --inventory hosts.yaml --dry-run
    """
    try:
        loaded = load_checked(scenario, inventory)
        if unreached(loaded):
            raise SanlabError(
                f"{scenario}: is for real machines, but nothing says how to reach "
                f"{', '.join(unreached(loaded))}: give each host ssh: USER@HOST, or --inventory FILE"
            )
        if dry_run:
            _dry_run(loaded)
            return
        if not loaded.targets:
            raise SanlabError(f"{scenario}: declares no targets: nothing to run (try 'sanlab lab up')")
        planned = runner.planned_points(loaded)
        if not planned:
            raise SanlabError(f"{scenario}: no workload applies to any target: nothing to run")
        out = out or Path("runs") / f"{lab_name(scenario.stem)}-{time.strftime('%Y%m%d-%H%M%S')}"
        claim_out_dir(out, force)
        journal = RunJournal(out / "results.json", loaded.name or scenario.stem, planned)
    except SanlabError as exc:
        fail(exc)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        if real_machines(loaded):
            run_on_machines(loaded, out, journal, _say)
        else:
            _run_matrix(loaded, scenario, out, journal, snaplen)
    except KeyboardInterrupt:
        journal.finish("interrupted", f"{len(journal.records)} of {planned} points finished")
        _say(f"interrupted: {len(journal.records)} of {planned} points are in {out / 'results.json'}")
        sys.exit(130)
    except SanlabError as exc:
        journal.finish("failed", str(exc).splitlines()[0])
        fail(exc)
    journal.finish("complete")
    _report(journal.records, out, as_json, loaded.capture)


def _run_matrix(
    loaded: Scenario, scenario: Path, out: Path, journal: RunJournal, snaplen: int | None
) -> None:
    build_image(_say)
    name = lab_name(f"run-{scenario.stem}")[:24] + f"-{os.getpid()}"
    capture = out if loaded.capture else None
    with running_lab(loaded, name, _say, capture, keep_logs=False, snaplen=snaplen) as lab:
        try:
            runner.run(loaded, lab.vms, lab.plan.endpoints, out, _say, doctor=lab, sink=journal, cables=lab)
        finally:
            _collect_logs(lab, out)


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


def _collect_logs(lab: Lab, out: Path) -> None:
    logs = out / "logs"
    logs.mkdir(exist_ok=True)
    for vm in lab.vms.values():
        try:
            (logs / f"{vm.name}.dmesg").write_text(vm.run("dmesg", timeout=30).stdout)
            tgtd = vm.run("cat /var/log/tgtd.log 2>/dev/null", timeout=30).stdout
            if tgtd:
                (logs / f"{vm.name}.tgtd.log").write_text(tgtd)
        except SanlabError:
            pass
        if vm.console_log.exists():
            shutil.copy(vm.console_log, logs / vm.console_log.name)
