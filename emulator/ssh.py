"""A real machine as a targets ``Host``: every command over OpenSSH.

The user's own ``ssh`` runs each command, so their ssh config, agent,
ProxyJump and known_hosts apply unchanged.  One master connection per host
is shared by every command (``ControlMaster``), which keeps a step's cost
at one round trip instead of a new handshake.  Commands travel as one
quoted string (``shlex``) that the remote login shell splits back into
exactly the words given; nothing is ever pasted into a local shell.
``BatchMode`` makes a missing key an error rather than a password prompt
that would hang a run.
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import tempfile
from pathlib import Path

from sanlab.emulator.agent import Completed
from sanlab.scenarios import ssh_options
from sanlab.scenarios.errors import SanlabError

# ssh's own exit status when it, not the remote command, failed.
SSH_FAILED = 255
CONNECT_TIMEOUT_S = 15


class SshError(SanlabError):
    """A machine could not be reached over SSH (not: a command there failed)."""


def check_identity(host: str, identity: str) -> None:
    """A key file ssh can read: a missing one, a folder or a FIFO is named here, before any
    ssh runs (scenarios/ssh_options.py holds the rule)."""
    try:
        ssh_options.check_key_file(identity)
    except ValueError as exc:
        raise SshError(f"{host}: identity {exc}") from None


class SshHost:
    """``name`` reached as ``destination`` ([USER@]HOST) with ``port`` and ``identity`` if given."""

    def __init__(
        self,
        name: str,
        destination: str,
        port: int | None = None,
        identity: str | None = None,
        control_dir: Path | None = None,
        options: tuple[str, ...] = (),
    ):
        if destination.startswith("-"):
            raise SshError(f"{name}: ssh destination {destination!r} would be read as an option")
        try:  # the allowlist again, whichever way the options came: a file, an inventory, code
            ssh_options.check_destination(destination)
            self.options = tuple(ssh_options.check_option(option) for option in options)
        except ValueError as exc:
            raise SshError(f"{name}: {exc}") from None
        if identity:
            check_identity(name, identity)
        self._name, self.port, self.identity, self.destination = name, port, identity, destination
        self.control_dir = control_dir or Path(tempfile.mkdtemp(prefix="sanlab-ssh-"))

    @property
    def name(self) -> str:
        return self._name

    def ssh_argv(self, remote: str) -> list[str]:
        """The local argument vector that runs ``remote`` (one shell string) on the host;
        scenarios/ssh_options.py builds it, every option checked."""
        try:
            return ssh_options.ssh_argv(
                self.destination,
                [remote],
                self.control_dir,
                self.port,
                self.identity,
                self.options,
                CONNECT_TIMEOUT_S,
            )
        except ValueError as exc:
            raise SshError(f"{self.name}: {exc}") from None

    def _call(self, remote: str, timeout: float, stdin: bytes) -> tuple[int, bytes, bytes, bool]:
        try:
            done = subprocess.run(
                self.ssh_argv(remote),
                input=stdin,
                capture_output=True,
                timeout=timeout,
                start_new_session=True,  # Ctrl-C reaches sanlab, which then undoes its work over SSH
            )
        except subprocess.TimeoutExpired as exc:
            return 124, exc.stdout or b"", exc.stderr or b"", True
        except FileNotFoundError:
            raise SshError(
                "ssh is not installed here (the OpenSSH client is needed for real machines)"
            ) from None
        if done.returncode == SSH_FAILED and not done.stdout:
            why = done.stderr.decode(errors="replace").strip().splitlines()
            raise SshError(f"{self.name}: ssh {self.destination} failed: {why[-1] if why else 'exit 255'}")
        return done.returncode, done.stdout, done.stderr, False

    def run(self, command: str | list[str], timeout: float = 60.0, stdin: str = "") -> Completed:
        """Run a shell script (a string) or an argument vector; bash runs scripts, as on the VMs."""
        remote = shlex.join(command) if isinstance(command, list) else "bash -c " + shlex.quote(command)
        rc, out, err, timed_out = self._call(remote, timeout, stdin.encode())
        shown = command if isinstance(command, str) else shlex.join(command)
        return Completed(shown, rc, out.decode(errors="replace"), err.decode(errors="replace"), timed_out)

    def spawn(self, command: str, log: str = "/dev/null") -> int:
        """Start ``command`` in the background, detached from the SSH session; return its PID."""
        script = f"setsid bash -c {shlex.quote(command)} >{shlex.quote(log)} 2>&1 </dev/null & echo $!"
        result = self.run(script, timeout=60)
        if not result.ok or not result.stdout.strip().isdigit():
            raise SanlabError(f"{self.name}: could not start {command!r}: {result.stderr.strip()}")
        return int(result.stdout.strip())

    def put(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Write a file in one step (a temporary name, then rename), with ``mode``."""
        target = shlex.quote(path)
        tmp = shlex.quote(f"{path}.sanlab-tmp")
        script = f"cat > {tmp} && chmod {mode:o} {tmp} && mv -f {tmp} {target}"
        rc, _, err, _ = self._call("bash -c " + shlex.quote(script), 120, data)
        if rc != 0:
            raise SanlabError(f"{self.name}: writing {path} failed: {err.decode(errors='replace').strip()}")

    def get(self, path: str) -> bytes:
        rc, out, err, _ = self._call("cat -- " + shlex.quote(path), 120, b"")
        if rc != 0:
            raise SanlabError(f"{self.name}: reading {path} failed: {err.decode(errors='replace').strip()}")
        return out

    def close(self) -> None:
        """Stop the shared master connection (harmless if there is none)."""
        argv = self.ssh_argv("true")
        argv[1:1] = ["-O", "exit"]
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):  # no ssh here: no master to stop
            subprocess.run(argv[: argv.index("--") + 2], capture_output=True, timeout=30)
