"""What a lab check sees on a lab host, or in a shell on this machine.

A ``host`` step is done when its command exits 0 on that lab VM (asked
through the VM's agent); a ``local`` step when a command run where the
student works exits as the exercise says and prints what it should.  The
commands are the exercise file's own shell text, never a student's.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from sanlab.emulator.agent import AgentClient
from sanlab.emulator.lab_state import live_agent_path

PROBE_TIMEOUT_S = 120.0


def on_host(lab: str, host: str, command: str) -> tuple[bool, str]:
    """Run ``command`` on a lab host: (exit 0?, its first line of output)."""
    agent = AgentClient(live_agent_path(lab, host), host)
    try:
        result = agent.run(command, timeout=PROBE_TIMEOUT_S)
    finally:
        agent.close()
    first = (result.stdout or result.stderr).strip().splitlines()[:1]
    return result.rc == 0, (first[0][:120] if first else f"exit {result.rc}")


def on_this_machine(command: str, exit_code: int, output: str | None) -> tuple[bool, str]:
    """Run ``command`` here with this sanlab first on PATH: (exits and prints as expected?, what it said)."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    run = subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, env=env
    )
    said = run.stdout + run.stderr
    matched = output is None or re.search(output, said) is not None
    first = said.strip().splitlines()[:1]
    return (
        run.returncode == exit_code and matched,
        f"exit {run.returncode}: {first[0][:100] if first else ''}",
    )
