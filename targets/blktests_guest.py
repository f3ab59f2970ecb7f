#!/usr/bin/python3
"""blktests' NVME_TARGET_CONTROL, as sanlab puts it in the host guest (python3, stdlib only).

blktests' nvme group runs against an external target when ``NVME_TARGET_CONTROL`` names a
program (blktests common/nvme, Documentation/running-tests.md): it asks ``config --show-X``
for the target's address and names, and calls ``setup --subsysnqn N --subsys-uuid U
--hostnqn H [--hostkey K] [--ctrkey K]`` and ``cleanup --subsysnqn N`` around each test.
The target lives in another guest, which this program cannot reach: it answers ``config``
from the values sanlab wrote beside it, and hands ``setup`` and ``cleanup`` to sanlab as a
request file in its spool, then waits for sanlab's reply.  sanlab (targets/blktests_relay.py)
reads the request, checks it again with this same ``parse``, and makes or removes the export
on the target guest through its own nvmet code.

What crosses is data, never a command: a fixed set of verbs and options, each value held
to the pattern of what it names (an NQN, a UUID, a DH-HMAC-CHAP secret), so no value is ever
a path, an option or a word for a shell.  Anything else is refused in one line, exit 2.

This file imports nothing of sanlab (it runs in the guest, as a file); sanlab imports its
``parse`` for the host side's check.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

SPOOL = "/run/sanlab-blktests"  # config.json, requests/, replies/ (made by sanlab)
REPLY_WAIT_S = 300.0  # an export under TCG takes seconds; a stuck relay must not hang blktests

# config --show-X: what blktests asks, and the key of sanlab's config.json that answers it.
SHOW = {
    "--show-blkdev-type": "blkdev_type",
    "--show-trtype": "trtype",
    "--show-hostnqn": "hostnqn",
    "--show-hostid": "hostid",
    "--show-host-traddr": "host_traddr",
    "--show-traddr": "traddr",
    "--show-trsvid": "trsvid",
    "--show-subsys-uuid": "subsys_uuid",
    "--show-subsysnqn": "subsysnqn",
}
# An NQN as nvmet's configfs takes it for a directory name: at most 223 bytes (NVMe base spec),
# no '/', never '.' or '..' (it starts with a letter or digit).
NQN = re.compile(r"[A-Za-z0-9][A-Za-z0-9.:_-]{0,222}")
UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# A DH-HMAC-CHAP secret as nvme gen-dhchap-key writes it (NVMe base spec 8.13.5.8).
DHCHAP = re.compile(r"DHHC-1:0[0-3]:[A-Za-z0-9+/]{4,256}={0,2}:")
# setup and cleanup: each option, the pattern of its value, and which must be given.
# blktests passes --ctrkey (common/nvme); its documentation says --ctrlkey: both mean one thing.
OPTIONS = {
    "setup": {
        "--subsysnqn": NQN,
        "--subsys-uuid": UUID,
        "--hostnqn": NQN,
        "--hostkey": DHCHAP,
        "--ctrkey": DHCHAP,
        "--ctrlkey": DHCHAP,
    },
    "cleanup": {"--subsysnqn": NQN},
}
REQUIRED = {"setup": ("--subsysnqn", "--subsys-uuid", "--hostnqn"), "cleanup": ("--subsysnqn",)}
MAX_ARGS = 16


class UsageError(Exception):
    """An argument vector this program does not take: one line naming the argument."""


def _shown(text: str) -> str:
    return repr(text[:60])


def parse(argv: list[str]) -> tuple[str, dict[str, str]]:
    """``(verb, values)`` for an allowed call, else UsageError: ``config`` gives
    ``{"show": KEY}``; ``setup`` and ``cleanup`` their options, named without dashes
    (``subsysnqn``, ``subsys_uuid``, ``hostnqn``, ``hostkey``, ``ctrlkey``)."""
    if not argv:
        raise UsageError("no verb: give config, setup or cleanup")
    if len(argv) > MAX_ARGS or not all(isinstance(a, str) for a in argv):
        raise UsageError(f"over {MAX_ARGS} arguments, or one that is not text")
    verb, rest = argv[0], argv[1:]
    if verb == "config":
        if len(rest) != 1 or rest[0] not in SHOW:
            got = " ".join(_shown(a) for a in rest) or "nothing"
            raise UsageError(f"config takes one of {', '.join(SHOW)}; got {got}")
        return verb, {"show": SHOW[rest[0]]}
    if verb not in OPTIONS:
        raise UsageError(f"verb {_shown(verb)} is none of config, setup, cleanup")
    allowed, values = OPTIONS[verb], {}
    if len(rest) % 2:
        raise UsageError(f"{verb}: option {_shown(rest[-1])} has no value")
    for option, value in zip(rest[::2], rest[1::2], strict=True):
        if option not in allowed:
            raise UsageError(f"{verb}: option {_shown(option)} is none of {', '.join(allowed)}")
        key = "ctrlkey" if option == "--ctrkey" else option[2:].replace("-", "_")
        if key in values:
            raise UsageError(f"{verb}: {option} is given twice")
        if not allowed[option].fullmatch(value):
            raise UsageError(f"{verb}: {option} {_shown(value)} is not a valid {key}")
        values[key] = value
    missing = [o for o in REQUIRED[verb] if o[2:].replace("-", "_") not in values]
    if missing:
        raise UsageError(f"{verb}: {', '.join(missing)} must be given")
    return verb, values


def _config(key: str) -> int:
    with open(os.path.join(SPOOL, "config.json"), encoding="utf-8") as handle:
        print(json.load(handle)[key])
    return 0


def _relay(argv: list[str]) -> int:
    """Hand the call to sanlab as ``requests/SEQ.json`` and wait for ``replies/SEQ.json``."""
    seq = f"{time.time_ns()}{os.getpid():07d}"
    requests, replies = os.path.join(SPOOL, "requests"), os.path.join(SPOOL, "replies")
    temporary = os.path.join(requests, f".{seq}.tmp")
    with open(temporary, "x", encoding="utf-8") as handle:
        json.dump({"seq": seq, "argv": argv}, handle)
    os.rename(temporary, os.path.join(requests, f"{seq}.json"))
    reply_path = os.path.join(replies, f"{seq}.json")
    deadline = time.monotonic() + REPLY_WAIT_S
    while not os.path.exists(reply_path):
        if time.monotonic() > deadline:
            print(f"sanlab-blktests: no reply from sanlab in {REPLY_WAIT_S:.0f} s", file=sys.stderr)
            return 1
        time.sleep(0.1)
    with open(reply_path, encoding="utf-8") as handle:
        reply = json.load(handle)
    os.unlink(reply_path)
    if reply.get("said"):
        print(f"sanlab-blktests: {reply['said']}", file=sys.stderr)
    return int(reply.get("rc", 1))


def main(argv: list[str]) -> int:
    try:
        verb, values = parse(argv)
    except UsageError as exc:
        print(f"sanlab-blktests: {exc}", file=sys.stderr)
        return 2
    if verb == "config":
        return _config(values["show"])
    return _relay(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
