#!/usr/bin/env python3
"""The guest side of sanlab's control channel: JSON lines on a virtio-serial port.

Instead of SSH and passwords, the host talks to this agent through a
paravirtual serial port named ``sanlab.agent``.  Each request is one JSON
object on a line with an ``id``; each answer carries the same ``id``, so
several requests (a long fio run and a quick ``lab exec``) can be in flight
at once.  Operations:

  {"op": "exec", "argv": [...] | "shell": "...", "timeout": s, "stdin": "..."}
      -> {"rc": n, "stdout": "...", "stderr": "...", "timed_out": bool}
  {"op": "spawn", "shell": "...", "log": "/path"}   -> {"rc": 0, "pid": n}
  {"op": "put", "path": "...", "data": base64, "mode": 420} -> {"rc": 0}
  {"op": "get", "path": "..."}                        -> {"rc": 0, "data": base64}
  {"op": "ping"}                                      -> {"rc": 0, "uptime": s}

It uses only the standard library: the guest has python3-minimal.
"""

import base64
import json
import os
import subprocess
import sys
import threading

PORT_NAME = "sanlab.agent"


def find_port():
    base = "/sys/class/virtio-ports"
    for entry in sorted(os.listdir(base)):
        try:
            with open(os.path.join(base, entry, "name")) as handle:
                if handle.read().strip() == PORT_NAME:
                    return "/dev/" + entry
        except OSError:
            continue
    raise SystemExit(f"no virtio-serial port named {PORT_NAME}")


def run(request):
    op = request.get("op")
    if op == "ping":
        with open("/proc/uptime") as handle:
            return {"rc": 0, "uptime": float(handle.read().split()[0])}
    if op == "exec":
        command = request.get("argv") or ["/bin/sh", "-c", request["shell"]]
        try:
            done = subprocess.run(
                command,
                input=request.get("stdin", "").encode(),
                capture_output=True,
                timeout=request.get("timeout"),
            )
        except subprocess.TimeoutExpired as exc:
            return {
                "rc": 124,
                "stdout": (exc.stdout or b"").decode(errors="replace"),
                "stderr": (exc.stderr or b"").decode(errors="replace"),
                "timed_out": True,
            }
        except OSError as exc:
            return {"rc": 127, "stdout": "", "stderr": str(exc), "timed_out": False}
        return {
            "rc": done.returncode,
            "stdout": done.stdout.decode(errors="replace"),
            "stderr": done.stderr.decode(errors="replace"),
            "timed_out": False,
        }
    if op == "spawn":
        with open(request.get("log", "/dev/null"), "ab") as log:
            child = subprocess.Popen(
                ["/bin/sh", "-c", request["shell"]],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        return {"rc": 0, "pid": child.pid}
    if op == "put":
        path = request["path"]
        os.makedirs(os.path.dirname(path) or "/", exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(base64.b64decode(request["data"]))
        os.chmod(path, request.get("mode", 0o644))
        return {"rc": 0}
    if op == "get":
        with open(request["path"], "rb") as handle:
            return {"rc": 0, "data": base64.b64encode(handle.read()).decode()}
    return {"rc": 2, "stderr": f"unknown op {op!r}"}


def main():
    port = os.open(find_port(), os.O_RDWR)
    reader = os.fdopen(port, "rb", buffering=0)
    lock = threading.Lock()

    def answer(request):
        try:
            reply = run(request)
        except Exception as exc:  # the host must always get an answer
            reply = {"rc": 1, "stderr": f"{type(exc).__name__}: {exc}"}
        reply["id"] = request.get("id")
        data = (json.dumps(reply) + "\n").encode()
        with lock:
            view = memoryview(data)
            while view:
                view = view[os.write(port, view) :]

    buffer = b""
    while True:
        chunk = reader.read(65536)
        if not chunk:  # host not connected yet: the port reads EOF; wait
            threading.Event().wait(0.2)
            continue
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                try:
                    request = json.loads(line)
                except ValueError:
                    continue
                threading.Thread(target=answer, args=(request,), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
