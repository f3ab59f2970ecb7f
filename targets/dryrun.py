"""``--dry-run``: the commands a run would send each host, written down instead of run.

A ``DryRunHost`` stands where a machine or VM would and answers like a
quiet, healthy host that has nothing of anyone else's: every command
succeeds with no output, no daemon is running (``pidof`` finds none), a
file read gives ``<its path>`` in place of what a real host would say
(a port GID, say), and a login's new block device is a placeholder.  The targets code runs its
recipes against it unchanged, so the list is exactly what those recipes
send, in order, undo steps included; nothing reaches a real host.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Reply:
    """What the imagined host answers."""

    rc: int = 0
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.rc == 0


@dataclass
class DryRunHost:
    """Keeps every command it is asked to run; changes nothing anywhere."""

    name: str
    commands: list[str] = field(default_factory=list)
    dry_run: bool = True  # read by wait_for_devices: no device will ever appear here

    def run(self, command: str | list[str], timeout: float = 60.0, stdin: str = "") -> Reply:
        text = command if isinstance(command, str) else shlex.join(command)
        self.commands.append(text)
        body = text.removeprefix("set -e\n").strip()
        if body.startswith("pidof "):  # nothing of anyone else's runs on the host a dry run imagines
            return Reply(1)
        words = body.split()
        if len(words) == 2 and words[0] == "cat" and "\n" not in body:  # a value read from a file
            return Reply(0, f"<{words[1]}>")
        return Reply()

    def spawn(self, command: str, log: str = "/dev/null") -> int:
        self.commands.append(f"{command} >{shlex.quote(log)} 2>&1 &")
        return 0

    def put(self, path: str, data: bytes, mode: int = 0o644) -> None:
        self.commands.append(f"# write {len(data)} bytes to {shlex.quote(path)} (mode {mode:o})")

    def get(self, path: str) -> bytes:
        self.commands.append(f"cat {shlex.quote(path)}")
        return b""
