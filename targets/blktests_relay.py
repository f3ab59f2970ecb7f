"""blktests' external NVMe target, served across a wire: the host side of the control relay.

blktests runs in the initiator guest with ``NVME_TARGET_CONTROL`` naming sanlab's control
program (``blktests_guest.py``, copied there as a file).  That program answers ``config``
itself and spools ``setup`` and ``cleanup`` as request files; this module waits for them on
the initiator (one fixed script, no value of a request in it), checks each request again with
the control program's own ``parse`` (the one allowlist of verbs, options and value patterns),
and makes or removes the export on the target guest through sanlab's nvmet and backstore
recipes: a RAM-backed file per subsystem, a port on the target's end of the cable, the
namespace UUID blktests asked for, and, when it gave keys, the one host allowed in with its
DH-HMAC-CHAP secrets.  Each export is an ExitStack of those paired steps, closed at
``cleanup`` or, for whatever blktests left, when the run ends: sanlab removes exactly what it
made, nothing blktests or anyone else made.

A request names a subsystem only as an NQN, never a path: the backing file is named after a
digest of it, and the reply file after the request's own checked sequence number.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from contextlib import ExitStack
from dataclasses import dataclass, field

from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.reading import parse_json
from sanlab.scenarios.registry import TRANSPORTS
from sanlab.targets import backstores, nvmet
from sanlab.targets.blktests_guest import SPOOL, UsageError, parse
from sanlab.targets.host import Host
from sanlab.targets.naming import NVME_PORT

CONTROL = f"{SPOOL}/control"  # the control program's path in the initiator guest
MAX_REQUEST_BYTES = 8192  # a request is one short JSON line
_SEQ = re.compile(r"[0-9]{20,40}")
# blktests' own defaults (common/nvme): its tests' expected output and its UUID lookups assume them.
HOSTID = "0f01fb42-9f7f-4856-b0b3-51e60b8de349"
HOSTNQN = f"nqn.2014-08.org.nvmexpress:uuid:{HOSTID}"
SUBSYSNQN = "blktests-subsystem-1"
SUBSYS_UUID = "91fdba0d-f87b-4c25-b80f-db7be1418b9e"

# What the initiator runs to wait up to SECONDS for a request or for the end of blktests' check:
# fixed text, the spool's path its only word from sanlab.  POSIX sh: the agent's shell is dash,
# which has no $SECONDS (a loop on it ended at once and never saw check end).  It prints
# "request NAME" and the request's first bytes, "done RC", or "idle".
_WAIT = """cd {requests} || exit 3
i=0
while [ "$i" -lt {polls} ]; do
  i=$((i+1))
  for f in [0-9]*.json; do
    [ -f "$f" ] || continue
    echo "request $f"; head -c {limit} -- "$f"; exit 0
  done
  [ -e ../check.rc ] && {{ echo "done $(head -c 16 ../check.rc)"; exit 0; }}
  sleep 0.1
done
echo idle
"""


def wait_script(seconds: int = 5, spool: str = SPOOL) -> str:
    return _WAIT.format(
        requests=shlex.quote(f"{spool}/requests"), polls=int(seconds) * 10, limit=MAX_REQUEST_BYTES
    )


def config_document(transport: str, traddr: str, host_traddr: str) -> dict[str, str]:
    """The answers to ``config --show-X``: the target's end of the cable and blktests' names."""
    return {
        "blkdev_type": "file",  # each namespace is a RAM-backed file on the target guest
        "trtype": TRANSPORTS[transport].carrier,  # nvmet's and nvme-cli's trtype: tcp or rdma
        "hostnqn": HOSTNQN,
        "hostid": HOSTID,
        "host_traddr": host_traddr,
        "traddr": traddr,
        "trsvid": str(NVME_PORT),
        "subsys_uuid": SUBSYS_UUID,
        "subsysnqn": SUBSYSNQN,
    }


@dataclass(frozen=True)
class Request:
    """One spooled call: its sequence number (the reply's name) and its checked values."""

    seq: str
    verb: str
    values: dict[str, str]


def read_request(name: str, body: str) -> Request:
    """A request file's name and text, checked whole; a bad one is one line (SanlabError)."""
    if not name.endswith(".json") or not _SEQ.fullmatch(name[: -len(".json")]):
        raise SanlabError(f"blktests request {name[:60]!r}: not a name the control program writes")
    if len(body.encode()) >= MAX_REQUEST_BYTES:
        raise SanlabError(f"blktests request {name}: over {MAX_REQUEST_BYTES} bytes")
    document = parse_json(body, f"blktests request {name}")
    if not isinstance(document, dict) or document.get("seq") != name[: -len(".json")]:
        raise SanlabError(f"blktests request {name}: its seq does not match its name")
    argv = document.get("argv")
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise SanlabError(f"blktests request {name}: argv is not a list of strings")
    try:
        verb, values = parse(argv)
    except UsageError as exc:
        raise SanlabError(f"blktests request {name}: {exc}") from None
    if verb == "config":
        raise SanlabError(f"blktests request {name}: config is answered in the guest, not relayed")
    return Request(document["seq"], verb, values)


@dataclass
class Relay:
    """The exports blktests asked for, on ``target``, reached over ``transport`` at ``address``."""

    target: Host
    transport: str  # nvme-rdma or nvme-tcp
    address: str  # the target's end of the cable
    size: int  # bytes of each namespace
    live: dict[str, ExitStack] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)

    def handle(self, request: Request) -> tuple[int, str]:
        """Do what ``request`` asks; ``(exit code, what to tell blktests)``."""
        nqn = request.values["subsysnqn"]
        if request.verb == "cleanup":
            stack = self.live.pop(nqn, None)
            if stack is None:
                return 0, f"cleanup {nqn}: nothing of that name was made"
            stack.close()
            self.log.append(f"cleanup {nqn}")
            return 0, ""
        if nqn in self.live:
            return 1, f"setup {nqn}: already set up and not cleaned up"
        try:
            self.live[nqn] = self._export(request.values)
        except SanlabError as exc:
            return 1, f"setup {nqn}: {exc}".splitlines()[0]
        self.log.append(f"setup {nqn} ({self.transport} on {self.address})")
        return 0, ""

    def _export(self, values: dict[str, str]) -> ExitStack:
        nqn, hostkey = values["subsysnqn"], values.get("hostkey")
        key = nvmet.HostKey(values["hostnqn"], hostkey, values.get("ctrlkey")) if hostkey else None
        name = "blktests-" + hashlib.sha256(nqn.encode()).hexdigest()[:12]
        with ExitStack() as stack:
            backing = stack.enter_context(backstores.backing(self.target, "ramdisk", name, self.size))
            settings = nvmet.NvmetSettings(
                nqn, self.transport, (self.address,), (backing,), key, uuids=(values["subsys_uuid"],)
            )
            stack.enter_context(nvmet.exported(self.target, settings))
            return stack.pop_all()

    def close(self) -> list[str]:
        """Remove every export blktests left behind; the NQNs, for the run's log."""
        left = sorted(self.live)
        while self.live:
            self.live.popitem()[1].close()
        return left


def reply_path(request: Request) -> str:
    return f"{SPOOL}/replies/{request.seq}.json"


def request_path(request: Request) -> str:
    return f"{SPOOL}/requests/{request.seq}.json"
