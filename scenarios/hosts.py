"""What every layer means by a host, and by progress: one home for both.

A Host is anything with a name that can run a shell command (returning its
exit code and output), start a background command, and write or read a
file: sanlab's VMs (through the guest agent), real machines over SSH, and
the scripted hosts of the tests.  The emulator makes Hosts; the targets
layer configures stacks on them; neither needs to know which kind it has.

Say is how a long step reports progress: one line of text at a time, to a
terminal, a log or a list a test reads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

Say = Callable[[str], None]


class Result(Protocol):
    """What running one command on a host returned."""

    @property
    def rc(self) -> int: ...

    @property
    def stdout(self) -> str: ...

    @property
    def stderr(self) -> str: ...

    @property
    def ok(self) -> bool: ...

    @property
    def timed_out(self) -> bool:
        """The command was stopped at its timeout; what it started in the kernel may go on."""
        ...


class Host(Protocol):
    @property
    def name(self) -> str: ...

    def run(self, command: str | list[str], timeout: float = 60.0, stdin: str = "") -> Result: ...

    def spawn(self, command: str, log: str = "/dev/null") -> int: ...

    def put(self, path: str, data: bytes, mode: int = 0o644) -> None: ...

    def get(self, path: str) -> bytes: ...
