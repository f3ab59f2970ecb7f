"""Small exception classes shared by every layer.

A user should never see a traceback for a mistake they made: each error here
carries a message that names the file, the field, the value and what is
allowed, and the CLI prints it and exits non-zero.
"""

from __future__ import annotations

from dataclasses import dataclass


class SanlabError(Exception):
    """Base of all errors that sanlab reports to the user as plain text."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file: where, what, and what is allowed."""

    source: str
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.source}: {self.path}" if self.path else self.source
        return f"{where}: {self.message}"


class ScenarioError(SanlabError):
    """A scenario (or profile) file is invalid; carries one Problem per mistake."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class HostDown(SanlabError):
    """A host has stopped for good (a guest whose QEMU exited after a kernel panic): no
    command reaches it, and no restart or reboot can bring it back within the run."""


class ToolMissing(SanlabError):
    """An external program (qemu, tshark, fio...) is not installed."""

    def __init__(self, tool: str, hint: str = ""):
        self.tool = tool
        message = f"{tool} is not installed"
        super().__init__(f"{message}; {hint}" if hint else message)
