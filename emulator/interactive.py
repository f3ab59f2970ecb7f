"""A lab that outlives the command that made it: brought up, then attached to from any shell.

``sanlab run`` holds its lab in a ``with`` block; ``sanlab lab up`` leaves
the VMs running and keeps, in the lab's run directory, the scenario it
booted, so that later commands (``lab export``, ``lab fio``, ``lab check``)
configure what was booted and not whatever the file says by then.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

from sanlab.emulator.blueprint import blueprint
from sanlab.emulator.kernel_image import ready_scenario_image
from sanlab.emulator.lab import Lab
from sanlab.emulator.lab_state import check_lab_name, labs_root, live_agent_path, new_run_dir, read_state
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.hosts import Say
from sanlab.scenarios.schema import Scenario
from sanlab.scenarios.writing import copy_file

SCENARIO_COPY = "scenario.yaml"  # lab up keeps the scenario it booted here
LEAVE_CONSOLE = b"\x1d"  # Ctrl-]


def bring_up(
    source: Path, scenario: Scenario, name: str, capture: bool, snaplen: int | None, say: Say
) -> Path:
    """Boot a lab and leave it up; return its run directory.  A lab that fails (or is
    interrupted) half-way is torn down before the error goes on."""
    if scenario.plan.real_machines:
        raise SanlabError(
            f"{source}: its hosts are real machines (ssh:); a lab boots VMs only: "
            f"use 'sanlab run {source}' (or --dry-run to see what it would do)"
        )
    # Planned first, on paper: a socket path too long for QEMU (a long XDG_RUNTIME_DIR) is one
    # line now, not after minutes of image build.
    blueprint(scenario, name, labs_root() / check_lab_name(name), None)
    image = ready_scenario_image(scenario, say)
    run_dir = new_run_dir(name)
    copy_file(source, run_dir / SCENARIO_COPY, what="lab scenario copy")
    handle = Lab(scenario, name, run_dir, run_dir if capture or scenario.capture else None, snaplen)
    try:
        handle.up(say, image)
    except BaseException:
        say(f"lab {name}: bringing up failed or was interrupted; tearing down")
        handle.down()
        raise
    return run_dir


def console_socket(name: str, host: str) -> tuple[socket.socket, str]:
    """A connection to a lab host's serial console, and its path."""
    try:
        live_agent_path(name, host)
        path = str(read_state(name)["hosts"][host]["console"])
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
    except (OSError, KeyError, TypeError) as exc:
        raise SanlabError(f"lab {name!r}: cannot attach to {host!r}'s console ({exc})") from None
    return sock, path


def attach(sock: socket.socket, stdin: int = 0, stdout: int = 1) -> None:
    """Copy the console to ``stdout`` and ``stdin`` to the console until Ctrl-] (or end of input)."""

    def pump() -> None:
        while data := sock.recv(4096):
            os.write(stdout, data)

    threading.Thread(target=pump, daemon=True).start()
    while data := os.read(stdin, 1024):
        if LEAVE_CONSOLE in data:
            break
        sock.sendall(data)
    sock.close()
