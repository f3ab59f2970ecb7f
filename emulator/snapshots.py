"""Guests that start from a booted snapshot instead of booting cold.

Under TCG a cold boot costs about 8 s and 12 CPU-seconds, most of it the
kernel unpacking a 230 MiB initramfs; every lab, run and VM test pays it
for every guest.  So each guest image is booted once per device shape
(CPUs, memory, NICs, CPU model, kernel arguments), up to the point where
its agent answers and before anything lab-specific is set, and the
machine's state is saved with QEMU's migration to a file (``mapped-ram``:
RAM at fixed offsets, zero pages left as holes).  Later guests of that
shape start with ``-incoming defer`` and load it in a fraction of a second.

What a guest sees must stay true, so identity is applied after the
restore, through the agent, before the guest is handed over:
- its host name (and /etc/hosts), as a cold boot takes from the kernel
  command line; the console's shell is restarted to show it;
- each NIC's MAC: the template's NICs carry fixed MACs, set to the
  lab's own through the guest's driver (QEMU's filter follows it), before
  any address or RDMA device (whose GIDs come from them) exists;
- the wall clock, which the snapshot froze at the moment it was saved;
- entropy: every guest has a ``vmgenid`` device whose generation ID is
  new each time QEMU starts, so the restored kernel reseeds its random
  number generator at once (Linux's vmgenid driver), and two guests of one
  snapshot never share a TCP sequence number or a CHAP challenge.
QEMU's announcement after a migration is cut to one round at once, while
every NIC is still down, so no gratuitous ARP from it enters a capture.

A snapshot belongs to the image's key and QEMU's version line; another
QEMU or image never finds it.  One that fails to restore costs a cold boot
and one line saying why; ``SANLAB_SNAPSHOTS=off`` boots every guest cold.
Labs with a management NIC (``Lab(ssh=True)``) boot cold: user-mode
networking's forwarded port is per lab.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shlex
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from sanlab.emulator import accel as accelerator
from sanlab.emulator.agent import AgentError
from sanlab.emulator.images import Image, cache_root, own_manifest
from sanlab.emulator.monitor import listening, qmp
from sanlab.emulator.processes import pid_alive
from sanlab.emulator.qemu import (
    NicSpec,
    Vm,
    VmSpec,
    cpu_under_tcg,
    extra_kernel_args,
    icount_shift,
    qemu_binary,
    version_line,
)
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.writing import open_lock, rename_into_place, write_file

FORMAT = "1"  # bump when what is saved, or how identity is applied, changes
SWITCH = "SANLAB_SNAPSHOTS"
RAM_FILE = "ram"
MANIFEST = "manifest.json"
MANIFEST_BYTES = 1 << 16
SAVING = ".saving"  # in a save's folder, with the saver's PID, until it is renamed into place
TEMPLATE_HOST = "template"
SAVE_TIMEOUT_S = 180.0
RESTORE_TIMEOUT_S = 60.0
AGENT_AFTER_RESTORE_S = 20.0
Command = tuple[str, dict[str, object]]
MAPPED_RAM: Command = (
    "migrate-set-capabilities",
    {"capabilities": [{"capability": "mapped-ram", "state": True}]},
)

Say = Callable[[str], None]


def template_mac(index: int) -> str:
    """The MAC of the template's NIC ``index``: fixed, so identity finds each NIC by it."""
    return f"52:54:00:5a:5e:{index:02x}"


@dataclass(frozen=True)
class Shape:
    """What a restored machine must share with the one that was saved: its devices and the
    kernel's command line (module parameters apply when a module loads, after the restore)."""

    accel: str
    cpu: str
    cpus: int
    memory_mib: int
    nics: int
    kernel_args: tuple[str, ...]


def enabled() -> bool:
    value = os.environ.get(SWITCH, "on")
    if value not in ("on", "off"):
        raise SanlabError(f"${SWITCH}={value!r}: give on or off")
    return value == "on"


def shape_of(spec: VmSpec, accel: str) -> Shape | None:
    """The spec's shape, or None where a snapshot cannot serve it (a management NIC, or a guest
    whose clock counts instructions: a booted snapshot's clock did not)."""
    if spec.ssh_port is not None or icount_shift() is not None:
        return None
    cpu = "host" if accel == "kvm" else cpu_under_tcg()
    return Shape(accel, cpu, spec.cpus, spec.memory_mib, len(spec.nics), tuple(extra_kernel_args()))


def snapshots_dir() -> Path:
    return cache_root() / "snapshots"


@dataclass(frozen=True)
class Snapshot:
    key: str
    path: Path

    @property
    def ram(self) -> Path:
        return self.path / RAM_FILE


def snapshot_key(image: Image, qemu: str, shape: Shape) -> str:
    facts = {"format": FORMAT, "image": image.key, "qemu": version_line(qemu), "shape": asdict(shape)}
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]


def _usable(snapshot: Snapshot) -> bool:
    manifest = own_manifest(snapshot.path, "snapshot manifest", MANIFEST_BYTES)
    return manifest is not None and manifest.get("key") == snapshot.key and snapshot.ram.is_file()


@contextmanager
def _locked(key: str) -> Iterator[None]:
    """One saver per snapshot across processes (two test workers may want the same shape)."""
    fd = open_lock(snapshots_dir() / f".{key}.lock", "snapshot lock")  # O_NOFOLLOW, never truncated
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def ready_snapshot(image: Image, qemu: str, shape: Shape | None, say: Say) -> Snapshot | None:
    """The snapshot of ``shape``, saved now (once) if missing; None where guests boot cold."""
    if shape is None or not enabled():
        return None
    key = snapshot_key(image, qemu, shape)
    snapshot = Snapshot(key, snapshots_dir() / key)
    if _usable(snapshot):
        return snapshot
    with _locked(key):
        if _usable(snapshot):
            return snapshot
        say(f"snapshot {key}: booting a {shape.nics}-NIC guest once to save it (later guests restore it)")
        try:
            seconds = _save(image, qemu, shape, snapshot)
        except SanlabError as exc:
            say(f"snapshot {key}: not saved ({exc}); guests boot cold")
            return None
        say(f"snapshot {key}: saved in {seconds:.1f} s")
    return snapshot


def _save(image: Image, qemu: str, shape: Shape, snapshot: Snapshot) -> float:
    """Boot the template, wait for its agent, save it to a folder beside the final one and
    rename that into place, so a reader never sees half a snapshot."""
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix=f".{snapshot.key}-", dir=snapshots_dir()))
    try:
        write_file(work / SAVING, f"{os.getpid()}\n", exists="refuse")
        vm = Vm(_template_spec(shape, work), image, shape.accel, work, qemu)
        vm.start()
        try:
            vm.wait_ready(RESTORE_TIMEOUT_S * 3)
            vm.agent.close()
            migrate: Command = ("migrate", {"uri": f"file:{work / RAM_FILE}"})
            qmp(vm.qmp_socket, "save the template guest", ("stop", {}), MAPPED_RAM, migrate)
            _wait_migration(vm, SAVE_TIMEOUT_S, "saving")
        finally:
            vm.stop(grace=1.0)
        manifest: dict[str, object] = {"key": snapshot.key, "format": FORMAT, "image": image.key}
        manifest |= {"qemu": version_line(qemu), "shape": asdict(shape), "saved": time.time()}
        manifest["seconds"] = round(time.monotonic() - started, 1)
        for leftover in work.iterdir():
            if leftover.name != RAM_FILE:
                leftover.unlink()  # the template's sockets, logs and the SAVING mark: ours
        write_file(work / MANIFEST, json.dumps(manifest, indent=1) + "\n", what="snapshot manifest")
        if snapshot.path.exists():  # unusable (a corrupt or older save of ours): replace it
            shutil.rmtree(snapshot.path)
        rename_into_place(work, snapshot.path, "the snapshot")
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return time.monotonic() - started


def _template_spec(shape: Shape, work: Path) -> VmSpec:
    nics = [
        NicSpec(f"t{i}", template_mac(i), work / f"t{i}.link.sock", work / f"t{i}.peer.sock")
        for i in range(shape.nics)
    ]
    return VmSpec(TEMPLATE_HOST, shape.cpus, shape.memory_mib, nics)


class RestoreTimedOut(SanlabError):
    """A restore that ran out of time while QEMU still ran: on a loaded machine a good snapshot
    can be slow, so it is not thrown away for this (a garbled one fails or exits QEMU)."""


def _wait_migration(vm: Vm, timeout: float, doing: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        (status,) = qmp(vm.qmp_socket, f"report on {doing}", ("query-migrate", {}))
        status = status if isinstance(status, dict) else {}
        state = status.get("status")
        if state == "completed":
            return
        if state in ("failed", "cancelled"):
            raise SanlabError(f"{doing} the machine's state {state}: {status.get('error-desc', '')}".strip())
        if not vm.running():
            raise SanlabError(f"QEMU exited while {doing} the machine's state")
        if time.monotonic() > deadline:
            raise RestoreTimedOut(f"{doing} the machine's state did not finish within {timeout:.0f} s")
        time.sleep(0.05)


MONITOR_TIMEOUT_S = 10.0
# After a migration QEMU asks the guest to announce itself (gratuitous ARP) for a few rounds.
# One round, 1 ms after the restore, comes while every NIC is still down, so the guest sends
# nothing.  Not zero rounds: QEMU 10 then frees virtio-net's announce timer, and the next
# device reset (links.reset unbinds the NIC) calls timer_del on it and crashes QEMU.
ANNOUNCE_ONCE_AT_ONCE: Command = ("migrate-set-parameters", {"announce-rounds": 1, "announce-initial": 1})


def _wait_monitor(vm: Vm) -> None:
    """QEMU listens on its monitor a moment after it starts (after its socket's file appears);
    a QEMU that died says so."""
    deadline = time.monotonic() + MONITOR_TIMEOUT_S
    while not listening(vm.qmp_socket):
        if not vm.running():
            raise SanlabError("QEMU exited before its monitor opened")
        if time.monotonic() > deadline:
            raise SanlabError(f"QEMU's monitor did not open within {MONITOR_TIMEOUT_S:.0f} s")
        time.sleep(0.02)


def restore(vm: Vm, snapshot: Snapshot) -> None:
    """Load ``snapshot`` into ``vm`` (started with ``-incoming defer``), run it, and give the
    guest its own identity.  Raises SanlabError with the reason when any step fails."""
    _wait_monitor(vm)
    qmp(
        vm.qmp_socket,
        "load the snapshot",
        MAPPED_RAM,
        ANNOUNCE_ONCE_AT_ONCE,
        ("migrate-incoming", {"uri": f"file:{snapshot.ram}"}),
    )
    _wait_migration(vm, RESTORE_TIMEOUT_S, "loading")
    qmp(vm.qmp_socket, "run the restored guest", ("cont", {}))
    try:
        vm.agent.wait_ready(AGENT_AFTER_RESTORE_S)
    except AgentError as exc:
        if vm.running():
            raise RestoreTimedOut(str(exc)) from None
        raise
    vm.agent.run(identity_script(vm.spec), timeout=30).check()


def identity_script(spec: VmSpec) -> str:
    """The shell that makes the template this guest: name, MACs, clock, console."""
    name = shlex.quote(spec.name)
    lines = [
        "set -e",
        f"hostname {name}",
        f"sed -i 's/^127\\.0\\.1\\.1 .*/127.0.1.1 '{name}'/' /etc/hosts",
        f"date -s @{time.time():.3f} >/dev/null",
    ]
    for index, nic in enumerate(spec.nics):
        mac = template_mac(index)
        lines += [
            f"dev=$(grep -l '{mac}' /sys/class/net/*/address | head -n1 | cut -d/ -f5)",
            f'[ -n "$dev" ] || {{ echo "no NIC with the template MAC {mac}" >&2; exit 1; }}',
            f'ip link set dev "$dev" address {shlex.quote(nic.mac)}',
        ]
    # The console's shell started under the template's name; init starts it again.
    lines.append("pkill -x bash -t ttyS0 || true")
    return "\n".join(lines)


def start(vm: Vm, snapshot: Snapshot | None) -> None:
    """Start ``vm``'s QEMU: to load ``snapshot`` when there is one, else to boot."""
    vm.incoming = snapshot is not None
    vm.start()


def wait_started(
    vm: Vm, snapshot: Snapshot | None, timeout: float, say: Say, cancelled: threading.Event
) -> float:
    """Seconds until ``vm``'s agent answered as itself: restored, or booted cold when there is
    no snapshot or it would not restore (one line says why; that snapshot is saved anew next
    time, and the QEMU that failed, ours, is stopped first).  Once ``cancelled`` is set (Ctrl-C,
    another guest's failure) a restore that fails is not followed by a cold boot.  A restore
    that only timed out keeps its snapshot: the next lab tries it again."""
    if snapshot is None or not vm.incoming:
        return vm.wait_ready(timeout)
    started = time.monotonic()
    try:
        restore(vm, snapshot)
    except SanlabError as exc:
        if cancelled.is_set():
            raise
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        say(f"  {vm.name}: snapshot {snapshot.key} did not restore ({why}); booting cold")
        vm.stop(grace=1.0)
        vm.agent.close()
        if not isinstance(exc, RestoreTimedOut):
            (snapshot.path / MANIFEST).unlink(missing_ok=True)
        start(vm, None)
        return vm.wait_ready(timeout)
    vm.boot_seconds = time.monotonic() - started
    return vm.boot_seconds


def clean_snapshots(current_images: set[str], qemu_line: str | None, everything: bool = False) -> list[Path]:
    """Remove snapshots of images or a QEMU no longer current (all with ``everything``), and
    saves a kill left half done.  Only folders sanlab marked as its own (a manifest naming
    their key, or a save's mark whose PID is gone) lose only the files it wrote there; a
    folder that still holds anything else is kept."""
    removed: list[Path] = []
    folder = snapshots_dir()
    if not folder.is_dir():
        return removed
    for path in sorted(folder.iterdir()):
        if path.is_symlink() or not path.is_dir():
            continue
        if _stale(path, current_images, qemu_line, everything) and _remove_ours(path):
            removed.append(path)
    return removed


def _stale(path: Path, current_images: set[str], qemu_line: str | None, everything: bool) -> bool:
    mark = path / SAVING
    if mark.is_file() and not mark.is_symlink():
        try:  # a saver that died (or is a zombie) left its mark: the folder is stale
            saver = int(mark.read_text().strip())
        except (ValueError, OSError):
            return False
        return saver > 0 and not pid_alive(saver)
    manifest = own_manifest(path, "snapshot manifest", MANIFEST_BYTES)
    if manifest is None:
        return False
    return everything or manifest.get("image") not in current_images or manifest.get("qemu") != qemu_line


def _remove_ours(path: Path) -> bool:
    """Unlink what a save writes in ``path`` (never following a link), then the folder if empty."""
    for entry in path.iterdir():
        ours = entry.name in (RAM_FILE, MANIFEST, SAVING) or entry.suffix in (".sock", ".log")
        if ours and not entry.is_dir():
            entry.unlink()
    try:
        path.rmdir()
    except OSError:
        return False
    lock = path.parent / f".{path.name}.lock"
    if lock.is_file() and not lock.is_symlink():
        lock.unlink()
    return True


def prepare(image: Image, say: Say) -> Snapshot | None:
    """Save ``image``'s snapshot for the most common shape (one CPU, 1 GiB, one NIC: every
    host of a pair), so that a first lab after an image build already starts in seconds."""
    qemu = qemu_binary()
    spec = VmSpec("host", nics=[NicSpec("link", template_mac(0), Path("unused"), Path("unused"))])
    return ready_snapshot(image, qemu, shape_of(spec, accelerator.choose(qemu, image, say)), say)
