"""A running lab's targets: exported, connected and removed from separate shells.

``sanlab run`` holds a target's paired create/remove steps in one ``with``
block.  A lab outlives the command that exports its target, so each half of
the recipe (targets/stacks.py: the target side, then the initiator side)
runs in a small keeper process of its own, started in a new session: it
enters the half's ``with`` block, writes what it made into a status file
beside the lab's state, and waits.  ``unexport``/``disconnect`` (and ``lab
down``) send it SIGTERM; it leaves the block - removing exactly what it
created - and exits.  These are the same recipes ``sanlab run`` uses.

Like run_session.py and on_machines.py it reaches into the emulator, which
made the lab: its hosts, addresses and cables are the emulator's, and what
runs on them is ours.  The command line only calls ``start``, ``stop``,
``fio``, ``pull`` and ``probe``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sanlab.emulator.agent import AgentClient
from sanlab.emulator.interactive import SCENARIO_COPY
from sanlab.emulator.lab_state import LabCables, lab_dir, labs_root, live_agent_path, read_state
from sanlab.emulator.processes import Recorded, is_ours, me, recorded, signal_ours
from sanlab.scenarios.endpoints import Endpoint, emulated
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.hosts import Say
from sanlab.scenarios.loader import load_scenario
from sanlab.scenarios.reading import load_json, typed
from sanlab.scenarios.results.records import ResultRecord
from sanlab.scenarios.schema import Scenario, Target, Workload
from sanlab.scenarios.writing import open_stream, write_file
from sanlab.targets import faults
from sanlab.targets.placement import Placement, place
from sanlab.targets.point_run import run_point
from sanlab.targets.points import Point
from sanlab.targets.stacks import Wiring, connect_only, export_only

PHASES = ("export", "connect")  # connect needs export; undone in the reverse order
READY_TIMEOUT_S = 600.0
STOP_TIMEOUT_S = 180.0
STATUS_BYTES = 1 << 20
KEEPER_MODULE = "sanlab.targets.sessions.lab_keeper"


@dataclass(frozen=True)
class LabTarget:
    """One target of a running lab, placed on the lab's hosts."""

    lab: str
    name: str
    target: Target
    placement: Placement
    agents: tuple[AgentClient, ...]

    def release(self) -> None:
        """Hang up on the hosts' agents: QEMU serves one client per agent socket at a
        time, so a keeper that stayed on the line would block every other command.
        They dial again when the keeper has something to undo."""
        for agent in self.agents:
            agent.close()


def lab_scenario(lab: str) -> Scenario:
    path = lab_dir(lab) / SCENARIO_COPY
    if not path.is_file():
        raise SanlabError(f"lab {lab!r} keeps no scenario ({path}); bring it up again with this sanlab")
    return load_scenario(path)


def target_names(lab: str) -> list[str]:
    """The names of a running lab's targets, as its scenario's plan gives them."""
    return lab_scenario(lab).plan.target_names


def lab_hosts(lab: str) -> dict[str, AgentClient]:
    """An agent client for each host of a running lab."""
    return {h: AgentClient(live_agent_path(lab, h), h) for h in read_state(lab)["hosts"]}


def lab_endpoints(lab: str, scenario: Scenario) -> dict[tuple[str, str], Endpoint]:
    """Each (link, host) end of a running lab, from the addresses its state file keeps."""
    addresses = {
        (where.split("/", 1)[1], where.split("/", 1)[0]): address
        for where, address in dict(read_state(lab).get("addresses") or {}).items()
    }
    return emulated(scenario, addresses)


def resolve(lab: str, name: str) -> LabTarget:
    """The scenario's target called ``name``, wired to the lab's live hosts."""
    scenario = lab_scenario(lab)
    names = scenario.plan.target_names
    if name not in names:
        raise SanlabError(f"lab {lab!r} has no target {name!r} (targets: {', '.join(names) or 'none'})")
    target = scenario.plan.target(name).target
    hosts = lab_hosts(lab)
    placement = place(scenario, target, hosts, lab_endpoints(lab, scenario))
    return LabTarget(lab, name, target, placement, tuple(hosts.values()))


# --- status files -------------------------------------------------------------


def status_path(lab: str, name: str, phase: str) -> Path:
    """Where the keeper of one half writes its status; the names are names, never paths."""
    if "/" in name or name.startswith(".") or "\0" in name:
        raise SanlabError(f"target name {name!r} is not allowed (a name, not a path)")
    return lab_dir(lab) / f"keeper-{name}-{phase}.json"


class _Status(BaseModel):
    """What a keeper writes (``_write_status``), typed: a planted ``devices`` is never handed to
    fio as its file name, nor a planted ``pid`` signalled."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    pid: int = Field(ge=1, le=1 << 22)
    started: int | None = Field(None, ge=0)
    state: Literal["ready", "failed"]
    error: str = ""
    devices: list[Annotated[str, Field(pattern=r"^/dev/[A-Za-z0-9][A-Za-z0-9/_.:-]{0,100}$")]] = []


def read_status(lab: str, name: str, phase: str) -> dict[str, Any] | None:
    """A keeper's status file, or None if there is none or it is not one (a FIFO, damaged,
    or of the wrong types)."""
    path = status_path(lab, name, phase)
    try:
        return dict(typed(_Status, load_json(path, "keeper status", STATUS_BYTES), str(path)).model_dump())
    except SanlabError:
        return None


def _write_status(path: Path, **fields: object) -> None:
    write_file(path, json.dumps(fields), what="keeper status")


def _keeper_argv(lab: str, name: str, phase: str) -> list[str]:
    return ["-m", KEEPER_MODULE, lab, name, phase]


def _is_keeper(pid: object, started: object, lab: str, name: str, phase: str) -> bool:
    """Whether ``pid`` is this keeper, proven by its command line and its start time.

    A status file can outlive its keeper, and its PID can be reused by any
    process; only one whose command line is the keeper's own and whose start
    time is the one the keeper wrote down is ever signalled.
    """
    return is_ours(recorded(pid, started), argv_tail=_keeper_argv(lab, name, phase))


def held(lab: str, name: str, phase: str) -> dict[str, Any] | None:
    """The status of a keeper that is still running (and proven to be it), else None."""
    status = read_status(lab, name, phase)
    if status and _is_keeper(status.get("pid"), status.get("started"), lab, name, phase):
        return status
    return None


# --- the keeper process ---------------------------------------------------------


class _Release(Exception):
    """SIGTERM: leave the with block, undoing what it made."""


def _release(signum: int, frame: object) -> None:
    raise _Release


def _me() -> dict[str, int | None]:
    """What proves this keeper to whoever signals it later: its PID and its start time."""
    who: Recorded = me()
    return {"pid": who.pid, "started": who.started}


def keep(lab: str, name: str, phase: str) -> int:
    """Body of the keeper process: hold one half of a recipe until told to let go."""
    path = status_path(lab, name, phase)
    signal.signal(signal.SIGTERM, _release)
    signal.signal(signal.SIGINT, _release)
    say = lambda message: print(message, flush=True)  # noqa: E731 - goes to the keeper's log
    try:
        where = resolve(lab, name)
        with _half(where, phase, say) as made:
            _write_status(path, **_me(), state="ready", **made)
            where.release()
            while True:
                signal.pause()
    except _Release:  # what it made is undone by now
        path.unlink(missing_ok=True)
        return 0
    except (SanlabError, OSError) as exc:
        _write_status(path, **_me(), state="failed", error=str(exc))
        return 1


def _half(where: LabTarget, phase: str, say: Say) -> AbstractContextManager[dict[str, Any]]:
    wire = where.placement.wiring
    if phase == "export":
        return _Shaped(export_only(where.target, where.name, wire, say), lambda made: {"made": made})
    exported = read_status(where.lab, where.name, "export") or {}
    return _Shaped(
        connect_only(where.target, where.name, wire, dict(exported.get("made") or {}), say),
        lambda devices: {"devices": devices},
    )


class _Shaped(AbstractContextManager[dict[str, Any]]):
    """A context manager whose value is reshaped into the status file's fields."""

    def __init__(self, inner: AbstractContextManager[Any], shape: Callable[[Any], dict[str, Any]]):
        self.inner, self.shape = inner, shape

    def __enter__(self) -> dict[str, Any]:
        return self.shape(self.inner.__enter__())

    def __exit__(self, *exc: Any) -> bool | None:
        return self.inner.__exit__(*exc)


# --- what the CLI calls -----------------------------------------------------------


def start(lab: str, name: str, phase: str, say: Say) -> dict[str, Any]:
    """Start a keeper for one half and wait until it holds (or fails); return its status."""
    if held(lab, name, phase):
        raise SanlabError(f"lab {lab!r}: target {name!r} is already {phase}ed")
    if phase == "connect" and not held(lab, name, "export"):
        raise SanlabError(
            f"lab {lab!r}: target {name!r} is not exported: 'sanlab lab export {lab} {name}' first"
        )
    resolve(lab, name)  # a bad name or a dead VM is an error here, not in the keeper's log
    _remove_status(lab, name, phase)
    log = open_stream(lab_dir(lab) / f"keeper-{name}-{phase}.log", "append", binary=True)
    proc = subprocess.Popen(
        [sys.executable, *_keeper_argv(lab, name, phase)],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # survives this command, and its Ctrl-C
    )
    return _wait_ready(lab, name, phase, proc, say)


def _wait_ready(lab: str, name: str, phase: str, proc: subprocess.Popen[bytes], say: Say) -> dict[str, Any]:
    started, last_word = time.monotonic(), 0.0
    while time.monotonic() - started < READY_TIMEOUT_S:
        status = read_status(lab, name, phase)
        if status and status.get("state") == "ready":
            return status
        if status and status.get("state") == "failed":
            raise SanlabError(f"{phase} {name}: {status.get('error')}")
        if proc.poll() is not None:
            log = _log(lab, name, phase)
            raise SanlabError(f"{phase} {name}: its keeper exited ({proc.returncode}); see {log}")
        if time.monotonic() - last_word >= 15:
            say(f"{phase} {name}: working ({time.monotonic() - started:.0f} s)")
            last_word = time.monotonic()
        time.sleep(0.2)
    stop(lab, name, phase)
    raise SanlabError(f"{phase} {name}: not done in {READY_TIMEOUT_S:.0f} s; see {_log(lab, name, phase)}")


def _log(lab: str, name: str, phase: str) -> Path:
    return lab_dir(lab) / f"keeper-{name}-{phase}.log"


def stop(lab: str, name: str, phase: str) -> bool:
    """Tell a keeper to undo what it made; wait for it.  False if none was running."""
    status = held(lab, name, phase)
    if status is None:
        _remove_status(lab, name, phase)
        return False
    who, argv_tail = recorded(status["pid"], status["started"]), _keeper_argv(lab, name, phase)
    ours = partial(is_ours, who, argv_tail=argv_tail)
    signal_ours(who, signal.SIGTERM, argv_tail=argv_tail)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while ours() and time.monotonic() < deadline:
        time.sleep(0.2)
    signal_ours(who, signal.SIGKILL, argv_tail=argv_tail)  # only if it is still the keeper
    _remove_status(lab, name, phase)
    return True


def _remove_status(lab: str, name: str, phase: str) -> None:
    """The keeper's status file, if it is a file (anything else there was not written by a keeper)."""
    path = status_path(lab, name, phase)
    if path.is_file() and not path.is_symlink():
        path.unlink()


def held_targets(lab: str) -> Iterator[tuple[str, str]]:
    """(target, phase) of every keeper of the lab still running, connections first."""
    for phase in reversed(PHASES):
        for path in sorted((lab_dir(lab)).glob(f"keeper-*-{phase}.json")):
            name = path.name.removeprefix("keeper-").removesuffix(f"-{phase}.json")
            if held(lab, name, phase):
                yield name, phase


def stop_all(lab: str) -> list[str]:
    """Undo every target half the lab holds (before its VMs stop)."""
    stopped = []
    for name, phase in list(held_targets(lab)):
        stop(lab, name, phase)
        stopped.append(f"{name} ({phase})")
    return stopped


def fio(lab: str, name: str, workload: Workload) -> ResultRecord:
    """One verified fio point of ``workload`` on a connected target, recorded as ``sanlab run`` would."""
    where = resolve(lab, name)
    status = held(lab, name, "connect")
    if not status or not status.get("devices"):
        raise SanlabError(f"lab {lab!r}: target {name!r} is not connected: 'sanlab lab connect {lab} {name}'")
    point = Point(
        where.target, name, workload, workload.rw[0], workload.bs[0], workload.iodepth[0], workload.numjobs[0]
    )
    raw = labs_root() / lab / "fio"
    raw.mkdir(exist_ok=True)
    try:
        wire = where.placement.wiring
        record = run_point(point, status["devices"][0], wire, raw, where.placement.record_base(where.target))
        if record.error:  # was it the link?  what 'sanlab run''s doctor would look at first
            record = record.model_copy(update={"error": f"{record.error}\n  {link_finding(wire)}"})
        return record
    finally:
        where.release()


def link_finding(wire: Wiring) -> str:
    """Does the path from the initiator to the target carry packets now (a ping, through a
    switch if there is one)?  The RDMA/CM check that 'sanlab run''s doctor adds is not made
    here: it needs the lab's own VM objects, which live in the process that brought it up."""
    near = faults.LinkEnd(wire.initiator_host, wire.initiator_end.interface, wire.initiator_address)
    far = faults.LinkEnd(wire.target_host, wire.target_end.interface, wire.target_address)
    try:
        faults.check_carries(near, far, wire.link)
    except SanlabError as exc:
        return str(exc)
    return f"link {wire.link} answered afterwards: the failure was not the link's"


def pull(lab: str, link: str, seconds: float) -> faults.Window:
    """Take both ends of a running lab's ``link`` down for ``seconds``, then check it carries a ping."""
    scenario = lab_scenario(lab)
    ends = lab_endpoints(lab, scenario)
    hosts = lab_hosts(lab)
    chosen = [
        faults.LinkEnd(hosts[end.host], end.interface, end.address)
        for (lk, _), end in ends.items()
        if lk == link
    ]
    if not chosen:
        links = sorted({lk for lk, _ in ends})
        raise SanlabError(f"lab {lab!r} has no link {link!r} (links: {', '.join(links) or 'none'})")
    return faults.pull_carrier(LabCables(lab), link, chosen, seconds)


def probe(lab: str, name: str, phase: str) -> tuple[bool, str]:
    """What a lab check sees of a target: (is a keeper holding it in ``phase``?, its devices)."""
    status = held(lab, name, phase)
    if status is None:
        return False, f"{name} is not {phase}ed"
    return True, f"{name} {phase}ed " + " ".join(status.get("devices") or [])
