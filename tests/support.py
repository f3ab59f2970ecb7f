"""Paths and the rule for missing tools, shared by the tests.

Outside CI a test whose external tool (qemu, tshark) is missing is skipped
with the reason; with CI=true it fails instead, so CI can never go green by
skipping what it was meant to run.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sanlab.scenarios.registry import TRANSPORTS
from sanlab.targets.dryrun import Reply  # noqa: F401 - what a scripted host answers (a targets Result)

REPO = Path(__file__).resolve().parent.parent
SCENARIOS = REPO / "scenarios"


def require_tool(name: str) -> str:
    """The path of ``name``, or skip (outside CI) / fail (in CI) naming what is missing."""
    path = shutil.which(name)
    if path:
        return path
    message = f"{name} is not installed (install it, or run the README's test command)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and {message}")
    pytest.skip(message)


def reruns(records) -> int:
    """How many records come from a second attempt: made after the link doctor revived a
    stalled link, or rebooted the hosts of a target that failed before its I/O began
    (``sanlab run`` does the same; such a record's note says so)."""
    return sum(1 for r in records if r.note and r.note.startswith("first attempt failed"))


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# Popen options for a child a test will interrupt with SIGINT, as Ctrl-C would from a terminal.
# A shell starts background jobs with SIGINT ignored and children inherit that, so Python in
# the child would never raise KeyboardInterrupt and the test would see SIGINT do nothing.
INTERRUPTIBLE = {"preexec_fn": _default_sigint}


def sanlab_here(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``sanlab ARGS`` run in this process by click's runner, answered as a subprocess would be.

    What the user is told is the same (exit code, stdout, stderr apart); it costs milliseconds
    instead of an interpreter's start, so a test that checks messages stays in the fast tier.
    """
    from click.testing import CliRunner

    from sanlab.main import cli

    result = CliRunner().invoke(cli, list(args), env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(["sanlab", *args], result.exit_code, result.stdout, result.stderr)


def run_scenario(data: dict, folder: Path, timeout: float) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Write scenario ``data`` into ``folder`` and run it as a user would (``sanlab run --json``,
    a process of its own, booting its VMs); the finished process and the run's output folder."""
    import yaml

    spec = folder / "scenario.yaml"
    spec.write_text(yaml.safe_dump(data))
    out = folder / "out"
    result = subprocess.run(
        [sys.executable, "-m", "sanlab", "run", str(spec), "--out", str(out), "--json"],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )
    return result, out


def every_target_verified(data: dict, records: list[dict], per_rw: dict[str, int]) -> None:
    """A smoke-shaped run's records: three points a target, each over its link's soft-RDMA
    driver (a TCP transport over none), no error, and every byte fio wrote read back."""
    combos = sorted((r["transport"], r["target_stack"], r["rdma_driver"]) for r in records)
    drivers = {lk["name"]: lk.get("rdma_driver") for lk in data["links"]}
    wanted = [
        (t["transport"], t["stack"], drivers[t["link"]] if TRANSPORTS[t["transport"]].rdma else None)
        for t in data["targets"]
    ]
    assert combos == sorted(wanted * 3)  # three points a target
    for r in records:
        assert r["error"] is None and r["verify"] == "pass", r
        assert r["verified_bytes"] == per_rw[r["rw"]] * r["numjobs"], r


def verifying(scenario, per_rw: dict[str, int], fault_at_s: float | None = None):
    """``scenario`` whose workloads each verify ``per_rw[their rw]`` bytes per job, and whose
    faults come at ``fault_at_s`` at the latest when it is given.

    The VM tier's time is its emulated, verified I/O (issue #50): a test whose claim is a
    mechanism (a fault under writes, a path over SSH) verifies less than the scenario file,
    every block of it still read back and checked; the file's sizes stay what a user runs.
    A shorter write must still span its fault: 8 MiB of 4 KiB writes at the 900-1,200 IOPS
    an idle host's guests reach end within 2 s of the first write, before the file's
    ``at: 2s`` (flap and restart found no I/O back on their fastest targets, 2026-11-27),
    so those tests move the fault to 1 s after it.
    """
    workloads = [w.model_copy(update={"verify_size": per_rw[w.rw[0]]}) for w in scenario.workloads]
    update: dict[str, object] = {"workloads": workloads}
    if fault_at_s is not None:
        update["faults"] = [f.model_copy(update={"at": min(f.at, fault_at_s)}) for f in scenario.faults]
    return scenario.model_copy(update=update)


def attempts(heard: list[str]) -> list[list[str]]:
    """What a run said, split where a target is exported: one list per attempt at a target."""
    split: list[list[str]] = []
    for message in heard:
        if ": exporting " in message:
            split.append([])
        if split:
            split[-1].append(message)
    return split


def pulls_per_attempt(heard: list[str], pulled: str, back: tuple[str, ...]) -> None:
    """Each attempt whose I/O ran (its result line) had its cable pulled once and saw it back;
    one that failed before its I/O began was pulled at most once; every pull came back."""
    for said in attempts(heard):
        pulls = sum(pulled in m for m in said)
        assert pulls == sum(any(b in m for b in back) for m in said), said
        finished = any(m.startswith("[") for m in said)
        assert (pulls == 1) if finished else (pulls <= 1), said
