"""The host side of the control channel: talk to a guest's agent over a unix socket.

QEMU exposes the guest's ``sanlab.agent`` virtio-serial port as a unix
socket in the lab's run directory.  Requests and answers are JSON lines
matched by ``id`` (see vm-images/agent.py).  No SSH, no passwords, and it
works before the guest has any network at all.
"""

from __future__ import annotations

import base64
import itertools
import json
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.reading import parse_json, typed


class AgentError(SanlabError):
    """The guest agent could not be reached or did not answer in time."""


@dataclass(frozen=True)
class Completed:
    """What a command run in a guest returned."""

    argv: str
    rc: int
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def check(self) -> Completed:
        if self.rc != 0:
            why = "timed out" if self.timed_out else f"exit {self.rc}"
            detail = (self.stderr or self.stdout).strip()[-2000:]
            raise SanlabError(f"{self.argv!r} failed ({why}): {detail}")
        return self


# The longest reply line read: a file fetched whole (base64), with room; a guest that sends more
# without a newline is broken or hostile, and is not let fill this process's memory.
MAX_REPLY_BYTES = 512 << 20


class _Reply(BaseModel):
    """What every agent answer holds; typed, so that a guest that answers ``rc: "abc"`` or
    ``rc: 256`` is one line, never a traceback or an exit 0 (vm-images/agent.py writes them)."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


class _ExecReply(_Reply):
    # an exit status (0-255), or minus the signal that ended the command
    rc: int = Field(1, ge=-64, le=255)
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False


class _PingReply(_Reply):
    uptime: float = Field(ge=0, le=1e9)


class _SpawnReply(_Reply):
    pid: int = Field(ge=1, le=1 << 22)


class _FileReply(_Reply):
    rc: int = Field(ge=-64, le=255)
    stderr: str = ""
    data: str = ""


def _request_ids() -> Iterator[str]:
    """Request ids no other connection uses: a random nonce, then a counter.

    The guest's port is one stream that outlives its clients: a client that
    dies after sending leaves its reply queued for whoever connects next.
    Were every client to number from 1, that stale reply would match the next
    client's first request and hand it another command's output.
    """
    nonce = secrets.token_hex(8)
    return (f"{nonce}-{n}" for n in itertools.count(1))


class AgentClient:
    def __init__(self, path: Path, host: str, alive: Callable[[], bool] = lambda: True):
        self.path, self.host = path, host
        # Asked while the socket cannot be reached: a VM that died will never open it again.
        self.alive = alive
        self._sock: socket.socket | None = None
        self._buffer = b""
        self._ids = _request_ids()
        # One request at a time: replies share one stream and one buffer, and
        # threads that reach the same guest (incast's target) take turns.
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """The lab host it reaches, so that an agent client is a targets ``Host`` too."""
        return self.host

    def close(self) -> None:
        if self._sock:
            self._sock.close()
            self._sock = None

    def _connect(self, deadline: float) -> socket.socket:
        while self._sock is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(str(self.path))
            except OSError as exc:
                sock.close()
                if time.monotonic() > deadline or not self.alive():
                    raise AgentError(
                        f"{self.host}: cannot reach the agent socket {self.path}: {exc}"
                    ) from None
                time.sleep(0.2)
                continue
            self._sock = sock
            # A fresh connection starts clean: its ids are new, and nothing
            # buffered from the last one can be taken for a reply.
            self._buffer = b""
            self._ids = _request_ids()
        return self._sock

    def request(self, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request and wait for its answer (other answers are dropped)."""
        with self._lock:
            return self._request(body, timeout)

    def _request(self, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        sock = self._connect(deadline)
        ident = next(self._ids)
        try:
            sock.sendall((json.dumps({**body, "id": ident}) + "\n").encode())
        except OSError as exc:  # a full socket the guest does not read, or a closed one
            self.close()
            raise AgentError(f"{self.host}: cannot send to the agent: {exc!r}") from None
        while True:
            while b"\n" in self._buffer:
                line, self._buffer = self._buffer.split(b"\n", 1)
                try:
                    reply = parse_json(line, f"{self.host}: the agent's reply")
                except SanlabError:
                    continue  # a torn or foreign line is no answer to this request
                if isinstance(reply, dict) and reply.get("id") == ident:
                    return dict(reply)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AgentError(f"{self.host}: no answer from the agent within {timeout:.0f} s")
            sock.settimeout(min(remaining, 1.0))
            try:
                chunk = sock.recv(1 << 20)
            except TimeoutError:
                continue
            except OSError:  # reset: the VM died or is stopping
                chunk = b""
            if not chunk:
                self.close()
                raise AgentError(f"{self.host}: the agent connection closed (did the VM stop?)")
            self._buffer += chunk
            if len(self._buffer) > MAX_REPLY_BYTES and b"\n" not in self._buffer:
                self.close()
                raise AgentError(
                    f"{self.host}: the agent sent over {MAX_REPLY_BYTES:,} bytes without an answer"
                )

    def wait_ready(self, timeout: float) -> float:
        """Ping until the guest answers; returns the guest's uptime in seconds.

        The client's ``alive`` is asked between pings: a VM that died (or was
        stopped because the user pressed Ctrl-C) ends the wait at once.
        """
        deadline = time.monotonic() + timeout
        while True:
            if not self.alive():
                raise AgentError(f"{self.host}: the VM stopped before its guest answered")
            left = deadline - time.monotonic()
            if left <= 0:
                raise AgentError(f"{self.host}: the guest did not answer within {timeout:.0f} s")
            try:
                return float(self._typed(_PingReply, self.request({"op": "ping"}, min(2.0, left))).uptime)
            except AgentError as exc:
                if time.monotonic() >= deadline:
                    raise AgentError(f"{self.host}: the guest did not answer within {timeout:.0f} s") from exc

    def run(self, command: str | list[str], timeout: float = 60.0, stdin: str = "") -> Completed:
        body: dict[str, Any] = {"op": "exec", "timeout": timeout, "stdin": stdin}
        body["argv" if isinstance(command, list) else "shell"] = command
        reply = self._typed(_ExecReply, self.request(body, timeout + 10))
        text = command if isinstance(command, str) else " ".join(command)
        return Completed(text, reply.rc, reply.stdout, reply.stderr, reply.timed_out)

    def _typed(self, schema: Any, reply: dict[str, Any]) -> Any:
        """``reply`` held to ``schema``: a wrong type is an AgentError naming field and value."""
        try:
            return typed(schema, reply, f"{self.host}: the agent's reply")
        except SanlabError as exc:
            raise AgentError(str(exc)) from None

    def spawn(self, command: str, log: str = "/dev/null") -> int:
        return int(
            self._typed(_SpawnReply, self.request({"op": "spawn", "shell": command, "log": log}, 30)).pid
        )

    def put(self, path: str, data: bytes, mode: int = 0o644) -> None:
        body = {"op": "put", "path": path, "data": base64.b64encode(data).decode(), "mode": mode}
        reply = self._typed(_FileReply, self.request(body, 60))
        if reply.rc != 0:
            raise SanlabError(f"{self.host}: cannot write {path}: {reply.stderr}")

    def get(self, path: str) -> bytes:
        reply = self._typed(_FileReply, self.request({"op": "get", "path": path}, 120))
        if reply.rc != 0:
            raise SanlabError(f"{self.host}: cannot read {path}: {reply.stderr}")
        try:
            return base64.b64decode(reply.data, validate=True)
        except ValueError:
            raise AgentError(f"{self.host}: the agent's reply: data: not base64") from None
