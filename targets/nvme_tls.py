"""NVMe/TCP inside TLS 1.3, as the NVMe/TCP transport specification (3.6) and nvme-cli set it up.

Both ends hold the same configured PSK for one (host NQN, subsystem NQN)
pair: ``nvme check-tls-key --insert`` derives the retained PSK from it
and puts it in the kernel's ``.nvme`` keyring under the pair's identity
(``NVMe1R01 <hostnqn> <subnqn> <digest>``).  The kernel hands each new
queue's socket to tlshd (ktls-utils), which does the handshake with that
key and gives the socket back with kTLS on; from then on the kernel
encrypts every PDU with the agreed AEAD (AES-GCM, say).  nvmet asks for
TLS on a port with ``addr_tsas tls1.3``; the host with ``nvme connect
--tls``.

A key sanlab inserted is invalidated when its export or connection ends.
tlshd stays up for the guest's life, as iscsid does, with a configuration
of sanlab's own (``/run``), never ``/etc/tlshd.conf``.

tlshd does the handshake with GnuTLS, which writes each session's secrets
in the NSS key log format to the file ``SSLKEYLOGFILE`` names (GnuTLS
3.8.9 on the Debian 13 guest; checked by the golden capture's key log
decrypting it).  sanlab starts tlshd with that variable and a umask of
077, so the key log in ``/run`` is root's alone; a captured run copies it
beside the capture (``keep_keys``), where the analyser decrypts with it.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import shlex
from collections.abc import Iterator
from contextlib import contextmanager

from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.nvme_keys import TLS_PREFIX, interchange
from sanlab.scenarios.results.outdir import OutputFolder
from sanlab.scenarios.schema import Scenario
from sanlab.targets.host import Host, StackError, sh

CONF = "/run/sanlab-tlshd.conf"
CONFIG = "[authenticate]\nkeyrings=.nvme\n"
LOG = "/var/log/sanlab-tlshd.log"
KEYLOG = "/run/sanlab-tlshd.keylog"  # GnuTLS appends every handshake's secrets here (mode 0600)
# kTLS and the AEADs a TLS 1.3 handshake may settle on; nvme-tcp registers the keyring's
# "psk" key type.
MODULES = ("tls", "gcm", "ccm", "chacha20poly1305", "aesni_intel", "ghash_clmulni_intel", "nvme_tcp")


def new_psk() -> str:
    """A fresh configured PSK in the interchange format, as ``nvme gen-tls-key`` makes one:
    32 random bytes and their CRC-32 (little-endian), base64, hash 01 (SHA-256)."""
    return interchange(TLS_PREFIX, 1, secrets.token_bytes(32))


def start_tlshd(host: Host) -> None:
    """Load kTLS and the ciphers, and start tlshd (with sanlab's configuration) if none runs."""
    modules = " ".join(MODULES)
    sh(
        host,
        f"for m in {modules}; do modprobe $m 2>/dev/null || true; done\n"
        f"printf %s {shlex.quote(CONFIG)} > {CONF}\n"
        "pidof tlshd >/dev/null && exit 0\n"
        f"(umask 077; SSLKEYLOGFILE={KEYLOG} setsid tlshd -c {CONF} -s >>{LOG} 2>&1 </dev/null &)\n"
        "for i in $(seq 20); do pidof tlshd >/dev/null && exit 0; sleep 0.25; done\n"
        f"tail -n 3 {LOG} >&2; exit 1",
        "starting tlshd",
    )


def session_keys(host: Host) -> bytes:
    """The key log tlshd's GnuTLS wrote on ``host`` (empty if it made no handshake).

    Read with ``Host.get``, never through a command's output, so the secrets
    never pass through anything that logs or prints what a command said."""
    if getattr(host, "dry_run", False):
        return b""
    if not host.run(f"test -s {KEYLOG}", timeout=30).ok:
        return b""
    return host.get(KEYLOG)


def merged_key_logs(logs: list[bytes]) -> bytes:
    """One NSS key log from both ends' (each end logs the same secrets): every line once, in order."""
    seen: dict[bytes, None] = {}
    for log in logs:
        for line in log.splitlines():
            if line.strip() and not line.startswith(b"#"):
                seen.setdefault(line.strip(), None)
    return b"".join(line + b"\n" for line in seen)


def keep_keys(loaded: Scenario, hosts: list[Host], folder: OutputFolder, prefix: str = "") -> list[str]:
    """Beside each capture, the TLS session keys of the handshakes the run made: ``LINK.keylog``
    (NSS key log, mode 0600 from its creation), which ``sanlab analyze`` decrypts the capture
    with.  Its bytes go from the guest to the file and nowhere else: no record, log or line."""
    if not loaded.capture or not any(t.tls for t in loaded.targets):
        return []
    logs = []
    for host in hosts:
        with contextlib.suppress(SanlabError):  # a guest that died: the other end logged the same
            logs.append(session_keys(host))
    keys = merged_key_logs(logs)
    if not keys:
        return []
    names = [f"{prefix}{link.name}.keylog" for link in loaded.plan.links]
    for name in names:
        folder.write_bytes(name, keys, mode=0o600)
    return names


@contextmanager
def key_inserted(host: Host, host_nqn: str, subsystem_nqn: str, psk: str) -> Iterator[str]:
    """``psk`` in the host's ``.nvme`` keyring for the pair, for the block; its key id."""
    command = shlex.join(
        [
            "nvme", "check-tls-key", f"--hostnqn={host_nqn}", f"--subsysnqn={subsystem_nqn}",
            "--identity=1", f"--keydata={psk}", "--insert",
        ]
    )  # fmt: skip
    out = sh(host, f"modprobe nvme-tcp\n{command}", f"inserting the TLS PSK for {subsystem_nqn}")
    found = re.search(r"Inserted TLS key ([0-9a-f]+)", out)
    if getattr(host, "dry_run", False):  # a rehearsal: the real key id is learnt only when it runs
        key = "0"
    elif found is None:
        raise StackError(f"{host.name}: nvme check-tls-key inserted no key: {out.strip()}")
    else:
        key = found.group(1)
    try:
        yield key
    finally:
        host.run(f"keyctl invalidate 0x{key} 2>/dev/null; true", timeout=30)
