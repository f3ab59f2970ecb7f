"""Labs seen from any shell: their names and run folders, and the state a running lab shares.

A lab records its state (PIDs, sockets, addresses, captures) in its run folder, so that
``sanlab lab exec``, ``list``, ``capture``, ``down`` and the keepers find it from another
shell.  Everything read here is typed (a planted or torn state is a one-line error), and a
PID is a lab's qemu only when emulator/processes.py proves it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from sanlab.emulator.monitor import set_netdev_link
from sanlab.emulator.panics import last_words
from sanlab.emulator.processes import Recorded, recorded, stop_ours
from sanlab.emulator.processes import is_ours as is_process_ours
from sanlab.emulator.qemu import own_socket
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.files import regular_file
from sanlab.scenarios.reading import load_json, typed

# A lab's name is a name, never a path: it becomes one folder under labs_root().
LAB_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,30}$")


# Everything a lab writes into its run directory; nothing else there is ever removed.
LAB_FILES = (
    "state.json",
    "state.tmp",
    ".state.json.sanlab-*.tmp",  # the state's temporary (scenarios/writing.py), left only by a kill
    "*.sock",
    "*.console.log",
    "*.qemu.log",
    "*.pcap",
    "ssh-*",
    "ssh_key*",
)


STATE_BYTES = 1 << 20  # a lab's state.json: a few hosts' PIDs, sockets and addresses


def check_lab_name(name: str) -> str:
    """``name`` if it is a lab name; otherwise a one-line error saying what is allowed."""
    if not LAB_NAME.match(name):
        raise SanlabError(
            f"lab name {name!r} is not allowed (lower-case letters, digits and '-', "
            "at most 31, not starting with '-')"
        )
    return name


def lab_name(text: str) -> str:
    """A lab name made from free text such as a file's stem: 'My Pair.v2' -> 'my-pair-v2'."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:31].rstrip("-")
    return name or "lab"


def clear_run_dir(run_dir: Path) -> None:
    """Remove what a lab wrote in ``run_dir`` (and the folder, once empty); nothing else."""
    if run_dir.is_symlink() or not run_dir.is_dir():
        return
    for pattern in LAB_FILES:
        for path in run_dir.glob(pattern):
            if path.is_file() or path.is_socket():
                path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        run_dir.rmdir()


def lab_dir(name: str) -> Path:
    """Lab ``name``'s run directory; a name that is not a lab name (``../x``) is refused first."""
    return labs_root() / check_lab_name(name)


def labs_root() -> Path:
    """Short paths: unix socket names are limited to 107 bytes."""
    base = os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/sanlab-{os.getuid()}"
    return Path(base) / "sanlab-labs" if os.environ.get("XDG_RUNTIME_DIR") else Path(base) / "labs"


_PATH = r"^[^\x00\n]{1,4096}$"


def _ipv4(text: str) -> str:
    """An address in a lab's state is a dotted IPv4 address, each part 0-255."""
    ipaddress.IPv4Address(text)  # ValueError: pydantic names the field and value
    return text


class _HostState(BaseModel):
    """One host of a lab's state file, typed: a planted or torn entry is a line, never a
    KeyError, and a PID is a PID (Lab._write_state writes these)."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    pid: int = Field(ge=1, le=1 << 22)
    started: int | None = Field(None, ge=0)  # clock ticks since boot (emulator/processes.py)
    agent: str = Field(pattern=_PATH)
    console: str = Field("", pattern=r"^[^\x00\n]{0,4096}$")
    console_log: str = Field("", pattern=r"^[^\x00\n]{0,4096}$")
    qmp: str = Field("", pattern=r"^[^\x00\n]{0,4096}$")
    links: list[str] = Field(default_factory=list, max_length=64)


class _LabState(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    name: str = ""
    scenario: str | None = None
    accel: str = ""
    started: float = Field(0.0, ge=0)
    hosts: dict[str, _HostState] = Field(min_length=1, max_length=64)
    # "host/link": the host's address on that link
    addresses: dict[
        Annotated[str, Field(pattern=r"^[^/\x00]+/[^/\x00]+$")],
        Annotated[str, Field(pattern=r"^\d{1,3}(\.\d{1,3}){3}$"), AfterValidator(_ipv4)],
    ] = Field(default_factory=dict)
    captures: dict[str, Annotated[str, Field(pattern=_PATH)]] = Field(default_factory=dict)


def read_state(name: str) -> dict[str, Any]:
    """A lab's state file, read through the one reader and typed: a corrupt, partial or
    planted one is an error that says which field is wrong and how to clear it."""
    path = lab_dir(name) / "state.json"
    if not path.exists() and not path.is_symlink():
        known = ", ".join(sorted(lab_names())) or "none"
        raise SanlabError(f"no lab named {name!r} is up (labs up: {known})")
    try:
        state = typed(_LabState, load_json(path, "lab state", STATE_BYTES), f"lab state {path}")
    except SanlabError as exc:
        raise SanlabError(f"{exc}; 'sanlab lab down {name}' clears it") from None
    return dict(state.model_dump())


def lab_names() -> list[str]:
    root = labs_root()
    return sorted(p.name for p in root.iterdir() if (p / "state.json").is_file()) if root.is_dir() else []


def vm_alive(name: str, entry: dict[str, Any], host: str | None = None) -> bool:
    """Whether a lab host's qemu still runs (and is ours, not a recycled PID: ``_our_qemu``)."""
    who, sockets = _our_qemu(name, entry, host)
    return is_process_ours(who, paths=sockets)


def live_agent_path(name: str, host: str) -> Path:
    """The agent socket of a running host of lab ``name``; a dead VM is named, with its last words."""
    hosts = read_state(name)["hosts"]
    if host not in hosts:
        raise SanlabError(f"lab {name!r} has no host {host!r} (hosts: {', '.join(hosts)})")
    entry = hosts[host]
    if not vm_alive(name, entry, host):
        path = entry.get("console_log")
        words = last_words(Path(path)) if isinstance(path, str) else ""
        raise SanlabError(
            f"lab {name!r}: host {host!r} is down (its qemu, pid {entry['pid']}, is not running)"
            + (f"; {words}" if words else "")
            + f"; 'sanlab lab down {name}' clears the lab"
        )
    return own_socket(lab_dir(name), host, "agent")  # the one its qemu was proven to name


def capture_file(name: str, link: str) -> Path:
    """Where QEMU writes the pcap of ``link`` of a running lab."""
    state = read_state(name)
    captures = state.get("captures") or {}
    if link not in captures:
        links = sorted({key.split("/", 1)[1] for key in state.get("addresses", {})})
        if not captures:
            raise SanlabError(f"lab {name!r} was not started with --capture: 'sanlab lab up ... --capture'")
        raise SanlabError(f"lab {name!r} has no captured link {link!r} (links: {', '.join(links)})")
    return Path(captures[link])


def follow_capture(name: str, link: str, poll_s: float = 0.2) -> Iterator[bytes]:
    """The pcap of ``link`` from its first byte, then whatever QEMU appends, while the lab runs.

    QEMU's filter-dump writes a classic pcap as frames pass, so following
    the file gives a live stream that Wireshark or tshark read from a pipe.
    """
    path = capture_file(name, link)
    state = read_state(name)
    regular_file(path, f"lab {name!r}: capture of {link!r}")  # a FIFO planted there would block
    with open(path, "rb") as handle:
        while True:
            chunk = handle.read(1 << 16)
            if chunk:
                yield chunk
                continue
            if not any(vm_alive(name, entry, host) for host, entry in state["hosts"].items()):
                return
            time.sleep(poll_s)


@dataclass(frozen=True)
class LabCables:
    """The cables of a lab that is up, pulled from any shell through each VM's QMP socket."""

    name: str

    def set_carrier(self, link: str, up: bool) -> None:
        """Carrier off (``up=False``) or on at every NIC on ``link``, as ``Lab.set_carrier``."""
        hosts = read_state(self.name)["hosts"]
        ends = {host: entry for host, entry in hosts.items() if link in (entry.get("links") or [])}
        if not ends:
            raise SanlabError(f"lab {self.name!r}: no host is on link {link!r} (or the lab predates QMP)")
        for host, entry in ends.items():
            if not vm_alive(self.name, entry, host):
                raise SanlabError(f"lab {self.name!r}: host {host!r} is down")
            qmp = own_socket(lab_dir(self.name), host, "qmp")  # the one its qemu was proven to name
            set_netdev_link(qmp, entry["links"].index(link), up, f"{host}'s link {link!r}")


def left_over(name: str) -> bool:
    """Whether lab ``name``'s state outlived every one of its VMs (a ``lab up`` that was
    killed before it could tear down, say): a readable state none of whose qemus runs.
    A state that cannot be read is not called left over; ``lab down`` clears that one."""
    try:
        hosts = read_state(name)["hosts"]
    except SanlabError:
        return False
    return not any(vm_alive(name, entry, host) for host, entry in hosts.items())


def _our_qemu(name: str, entry: dict[str, Any], host: str | None) -> tuple[Recorded | None, list[Path]]:
    """What proves a state entry's PID is this lab's qemu (emulator/processes.py): the PID and
    start time the state recorded, and the sockets only that qemu names, worked out from the
    lab's own run folder (never taken from the state file, which anyone may have edited).
    A host's agent socket is ``<run folder>/<host>.agent.sock``; an entry whose host is not
    known is matched on every socket it names that lies directly in this lab's folder."""
    who = recorded(entry.get("pid"), entry.get("started"))
    run_dir = lab_dir(name)
    if host is not None and (Path(host).name != host or host.startswith(".")):
        return who, []  # a host name is a name, never a path
    if host is not None:
        return who, [own_socket(run_dir, host, kind) for kind in ("agent", "qmp")]
    named = [entry.get(key) for key in ("agent", "qmp")]
    return who, [Path(p) for p in named if isinstance(p, str) and Path(p).parent == run_dir]


def stop_lab(name: str) -> tuple[list[int], list[str]]:
    """Tear a lab down from its state file: (PIDs stopped, hosts that were already down).

    A corrupt state file is cleared too (with the lab's sockets), so that
    ``lab down`` always leaves a clean slate; only processes proven to be
    this lab's qemu are ever signalled.
    """
    run_dir = lab_dir(name)
    try:
        hosts = read_state(name)["hosts"]
    except SanlabError:
        if not (run_dir / "state.json").exists():
            raise
        hosts = {}
    stopped, dead = [], []
    for host, entry in hosts.items():
        who, sockets = _our_qemu(name, entry, host)
        if stop_ours(who, paths=sockets):
            stopped.append(entry["pid"])
        else:
            dead.append(host)
    for sock in run_dir.glob("*.sock"):
        if sock.is_socket():
            sock.unlink()
    state = run_dir / "state.json"
    if state.is_file() and not state.is_symlink():
        state.unlink()
    return stopped, dead


def new_run_dir(name: str) -> Path:
    """The run directory of a lab about to start: refused if that lab is up, cleared of its
    own leftovers (old console logs, the state of a lab whose VMs all died) otherwise."""
    run_dir = labs_root() / check_lab_name(name)
    if (run_dir / "state.json").exists() and not left_over(name):
        raise SanlabError(f"a lab named {name!r} is already up: 'sanlab lab down {name}' first")
    clear_run_dir(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir
