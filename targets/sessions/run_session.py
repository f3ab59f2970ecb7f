"""One ``sanlab run`` from start to end: its folder and journal, the hosts it runs on, its logs.

A run is a scenario's matrix on VMs the emulator boots for it (and stops
afterwards), or on real machines (targets/on_machines.py), written into an
output folder that only sanlab writes: ``results.json`` after every point,
fio's JSON, the captures and the VMs' logs, each entered in the folder's
manifest.  An interrupted run can be resumed: the points it finished whole
are kept and only the rest run again.  The command line calls ``fresh`` or
``resumed``, then ``execute``, and prints what comes back.
"""

from __future__ import annotations

import fcntl
import os
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sanlab.emulator.blueprint import blueprint
from sanlab.emulator.kernel_image import ready_scenario_image
from sanlab.emulator.lab import Lab, running_lab
from sanlab.emulator.lab_state import lab_name, labs_root
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.files import read_bounded
from sanlab.scenarios.hosts import Say
from sanlab.scenarios.reading import parse_json
from sanlab.scenarios.results.outdir import OutputFolder, claim_fresh, copy_into
from sanlab.scenarios.results.records import RESULTS, ResultRecord, RunJournal
from sanlab.scenarios.schema import Scenario
from sanlab.targets import nvme_tls, rehearsal
from sanlab.targets.dryrun import DryRunHost
from sanlab.targets.points import finished_points, planned_points
from sanlab.targets.sessions import matrix
from sanlab.targets.sessions.on_machines import check_machines, machine_hosts, run_on_machines

SCENARIO_COPY = "scenario.yaml"  # a run keeps the scenario it ran, so that --resume can go on
MAX_SCENARIO_BYTES = 1 << 20  # as scenarios/yamlfile.py reads them
MAX_RESULTS_BYTES = 64 << 20


def fresh(
    scenario: Path, loaded: Scenario, out: Path | None, force: bool, text: str | None = None
) -> RunJournal:
    """A new run's folder, holding a copy of its scenario (for --resume) and its journal.
    ``text``: the scenario as this run has it, when that is not the file (another kernel)."""
    out = out or default_out(scenario)
    folder = claim_fresh(out, "--out", force)
    _hold(folder, _locked(out, "--out"))
    copy = text if text is not None else read_bounded(scenario, MAX_SCENARIO_BYTES, "scenario").decode()
    folder.write_text(SCENARIO_COPY, copy)
    planned = planned_points(loaded)
    return RunJournal(folder, loaded.name or scenario.stem, planned, _settler(folder, loaded))


def default_out(scenario: Path) -> Path:
    """Where a run goes without --out: runs/NAME-TIME."""
    return Path("runs") / f"{lab_name(scenario.stem)}-{time.strftime('%Y%m%d-%H%M%S')}"


def check_resumable(resume: Path) -> OutputFolder:
    """An interrupted run's folder, if it is one sanlab wrote and holds nothing else.  A path
    that is no folder is refused as it is: a mistyped name is never made into one."""
    if not resume.is_dir():
        what = "is not a directory" if resume.exists() or resume.is_symlink() else "does not exist"
        raise SanlabError(f"--resume {resume}: {what}: nothing to resume (give an interrupted run's folder)")
    lock = _locked(resume, "--resume")  # before the folder is read or repaired; held to the end
    try:
        folder = OutputFolder.open(resume, "--resume")
    except BaseException:
        if lock is not None:
            os.close(lock)
        raise
    _hold(folder, lock)
    for name in (SCENARIO_COPY, RESULTS):
        if not folder.listed(name):
            raise SanlabError(f"--resume {resume}: holds no {name} of a sanlab run; nothing to resume")
    foreign = folder.foreign()
    if foreign:
        raise SanlabError(f"--resume {resume}: holds files sanlab did not write ({', '.join(foreign[:4])})")
    return folder


def _locked(root: Path, option: str) -> int | None:
    """The run folder's lock (``flock`` on the folder itself: no file is added to it), or a
    one-line error when another sanlab holds it: two resumes of one run would boot two labs
    and write one journal.  None when ``root`` is no folder: the caller says what it is."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise SanlabError(
            f"{option} {root}: another sanlab holds this run folder's lock (a run or a resume of it "
            "is under way); wait for it to end, or stop it"
        ) from None
    return fd


def _hold(folder: OutputFolder, lock: int | None) -> None:
    """Keep the lock while the run's folder is in use: released when the folder object goes
    (or the process ends, which the kernel sees to, kill -9 included)."""
    if lock is not None:
        weakref.finalize(folder, os.close, lock)


def resumed(folder: OutputFolder, loaded: Scenario, say: Say) -> RunJournal:
    """The journal of an interrupted run, holding the points it finished whole."""
    resume = folder.root
    document = _results_of(resume)
    run = document["run"]
    if run.get("status") == "complete":
        raise SanlabError(f"--resume {resume}: that run is complete; nothing to resume")
    records = [ResultRecord.model_validate(r) for r in document["results"]]
    points, kept = finished_points(loaded, len(records))
    planned = planned_points(loaded)
    settle = _settler(folder, loaded, _capture_prefix(points))
    journal = RunJournal(folder, str(run.get("scenario") or "run"), planned, settle, records[:kept])
    journal.run["resumed_after"] = points
    say(f"resuming {resume}: {points} of {planned} points are kept, {planned - points} to run")
    return journal


def _results_of(folder: Path) -> dict[str, Any]:
    """A run's results.json, checked enough to resume from: a one-line error otherwise."""
    where = f"--resume {folder}: its {RESULTS}"
    document = parse_json(read_bounded(folder / RESULTS, MAX_RESULTS_BYTES, "--resume"), where)
    try:
        if not isinstance(document.get("run"), dict) or not isinstance(document.get("results"), list):
            raise ValueError
        for record in document["results"]:
            ResultRecord.model_validate(record)
    except (ValueError, AttributeError, TypeError):
        raise SanlabError(f"{where} is not a run's results (damaged?); it cannot be resumed") from None
    return dict(document)


def _captures(loaded: Scenario, prefix: str) -> list[str]:
    """The pcap each captured link writes into the run folder (emulator/lab.py names them)."""
    if not loaded.capture:
        return []
    return [f"{prefix}{link.name}.pcap" for link in loaded.plan.links]


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


def execute(loaded: Scenario, stem: str, journal: RunJournal, say: Say, snaplen: int | None) -> None:
    """Run the points the journal lacks, on real machines or on VMs booted for the run."""
    skip = int(journal.run.get("resumed_after") or 0)  # type: ignore[call-overload]
    if loaded.plan.real_machines:
        run_on_machines(loaded, journal.folder.root, journal, say, skip)
    else:
        _on_vms(loaded, stem, journal, skip, snaplen, say)


def run_share(
    loaded: Scenario, stem: str, out: Path, only: frozenset[int], snaplen: int | None, say: Say
) -> RunJournal:
    """One worker's share of a run (cluster.py): the points ``only`` numbers, on VMs booted on
    this machine, into ``out``, a new folder of this machine's that the caller sends back."""
    folder = claim_fresh(out, "share", force=False)
    journal = RunJournal(folder, loaded.name or stem, len(only), _settler(folder, loaded))
    _on_vms(loaded, stem, journal, 0, snaplen, say, only)
    return journal


def _on_vms(
    loaded: Scenario,
    stem: str,
    journal: RunJournal,
    skip: int,
    snaplen: int | None,
    say: Say,
    only: frozenset[int] | None = None,
) -> None:
    name = lab_name(f"run-{stem}")[:24] + f"-{os.getpid()}"
    blueprint(loaded, name, labs_root() / name, None)  # socket paths short enough, before any image build
    ready_scenario_image(loaded, say)
    out = journal.folder.root
    capture = out / _capture_prefix(skip) if loaded.capture else None
    with running_lab(loaded, name, say, capture, keep_logs=False, snaplen=snaplen) as lab:
        try:
            matrix.run(
                loaded,
                lab.vms,
                lab.blueprint.endpoints,
                out,
                say,
                doctor=lab,
                sink=journal,
                cables=lab,
                skip=skip,
                only=only,
            )
        finally:
            _collect_logs(lab, journal.folder)
            if capture is not None:
                nvme_tls.keep_keys(loaded, list(lab.vms.values()), journal.folder, _capture_prefix(skip))


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


def rehearse(loaded: Scenario, say: Say) -> list[DryRunHost]:
    """Walk the run with hosts that only write down what they are sent (real machines are
    read first, with ssh and nothing else); return them, commands and all."""
    if loaded.plan.real_machines:
        with machine_hosts(loaded) as hosts:
            ends = check_machines(loaded, hosts, say).endpoints
    else:
        ends = blueprint(loaded, "dry-run", Path("/dry-run"), None).endpoints
    return rehearsal.dry_run(loaded, ends)
