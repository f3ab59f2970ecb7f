"""Where the bytes live on the target host: a RAM disk, the null device, a file, a device.

``null`` discards writes and reads zeros (null_blk): the fastest back end,
and one that no verified run can pass.  ``ramdisk`` keeps data in RAM;
``file`` is a sparse file on the guest's own (RAM-backed) root.  ``device``
is a block device the host already has (an NVMe drive of a real target):
sanlab neither creates nor removes it, and refuses it when it is mounted,
swapped on, held by another device or export, or holds a file system or a
partition table that the scenario did not mark ``destroy: true``.

Each backing is created and removed as a pair (``backing``), and creation
refuses a path or null_blk device that already exists: sanlab never
resizes, reuses or deletes what it did not create.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from sanlab.scenarios.schema import Scenario
from sanlab.targets.host import Host, StackError, sh

NULLB = "/sys/kernel/config/nullb"


@dataclass(frozen=True)
class Backing:
    kind: str  # 'block' (a /dev path) or 'file'
    path: str
    size: int
    name: str = ""  # the null_blk configfs name, for a 'block' backing
    owned: bool = True  # made by sanlab, so removed by it; a served device is neither


def _refuse_existing(path: str, what: str) -> str:
    return (
        f"if [ -e {shlex.quote(path)} ]; then echo '{what} {path} already exists: sanlab "
        "does not touch what it did not create' >&2; exit 17; fi\n"
    )


def _plan(kind: str, name: str, size: int) -> Backing:
    if kind == "null":
        # Linux 6.1 names a configfs null_blk disk after its directory
        # ("null_blk: disk <name> created"), so it appears as /dev/<name>.
        return Backing("block", f"/dev/{name}", size, name)
    path = f"/dev/shm/sanlab-{name}.img" if kind == "ramdisk" else f"/var/tmp/sanlab-{name}.img"
    return Backing("file", path, size)


def claim(host: Host, kind: str, name: str, size: int) -> Backing:
    """The backing's names, checked free on ``host``: what is made after this is sanlab's."""
    made = _plan(kind, name, size)
    paths = [f"{NULLB}/{name}", made.path] if made.kind == "block" else [made.path]
    sh(host, "".join(_refuse_existing(p, "path") for p in paths), f"checking that {made.path} is free")
    return made


def create(host: Host, made: Backing) -> None:
    if not made.owned:
        return
    if made.kind == "block":
        folder = f"{NULLB}/{made.name}"
        script = (
            f"[ -e {NULLB} ] || modprobe null_blk nr_devices=0\n"
            f"mkdir {folder}\necho {max(1, made.size >> 20)} > {folder}/size\necho 1 > {folder}/power"
        )
        sh(host, script, f"creating null_blk {made.name}")
        return
    folder = made.path.rsplit("/", 1)[0]
    sh(host, f"mkdir -p {folder}\ntruncate -s {made.size} {made.path}", f"creating file {made.path}")


def remove(host: Host, made: Backing) -> None:
    if not made.owned:
        return
    if made.kind == "block":
        folder = f"{NULLB}/{made.name}"
        host.run(f"[ -d {folder} ] && {{ echo 0 > {folder}/power; rmdir {folder}; }}; true", timeout=60)
    else:
        host.run(f"rm -f {made.path}", timeout=60)


@contextmanager
def backing(
    host: Host, kind: str, name: str, size: int, device: str | None = None, destroy: bool = False
) -> Iterator[Backing]:
    """Create a backing for the ``with`` block, and remove exactly it afterwards.

    A ``device`` is checked (see ``device_problem``) and served as it is.
    """
    if kind == "device":
        if device is None:
            raise StackError("backstore 'device' names no device")
        problem = device_problem(host, device, destroy)
        if problem:
            raise StackError(f"{host.name}: {problem}")
        yield Backing("block", device, size, owned=False)
        return
    made = claim(host, kind, name, size)
    try:
        create(host, made)
        yield made
    finally:
        remove(host, made)


# What a device is and who uses it, read without changing anything.  blkid
# probes the device itself (no udev database is needed, as on the guests).
_DEVICE_FACTS = """
dev={dev}
[ -b "$dev" ] || {{ echo "not-a-block-device"; exit 0; }}
real=$(readlink -f "$dev")
echo "mounts: $(lsblk -nro MOUNTPOINTS "$real" 2>/dev/null | grep -v '^$' | tr '\\n' ' ')"
echo "swap: $(swapon --noheadings --show=NAME 2>/dev/null | grep -Fx "$real")"
echo "holders: $(ls /sys/class/block/$(basename "$real")/holders 2>/dev/null | tr '\\n' ' ')"
echo "parts: $(lsblk -nro TYPE "$real" 2>/dev/null | grep -c part)"
echo "probe: $(blkid -p -o export "$real" 2>/dev/null | grep -E '^(TYPE|PTTYPE)=' | tr '\\n' ' ')"
lio={cfs}/target/core/*/*/udev_path
nvmet={cfs}/nvmet/subsystems/*/namespaces/*/device_path
echo "exports: $(grep -lsFx -e "$real" -e "$dev" $lio $nvmet | tr '\\n' ' ')"
"""


def device_facts(host: Host, device: str) -> dict[str, str]:
    """What ``device`` holds and who uses it, as ``key: value`` words (see ``_DEVICE_FACTS``)."""
    script = _DEVICE_FACTS.format(dev=shlex.quote(device), cfs="/sys/kernel/config")
    out = host.run(script, timeout=60).stdout
    if out.strip() == "not-a-block-device":
        return {"missing": "yes"}
    facts = {}
    for line in out.splitlines():
        key, _, value = line.partition(":")
        facts[key.strip()] = value.strip()
    return facts


def device_problem(host: Host, device: str, destroy: bool) -> str | None:
    """Why ``device`` must not be served, or None.  Mounted or in use: never; holding data: only
    with ``destroy``."""
    facts = device_facts(host, device)
    if facts.get("missing"):
        return f"{device} is not a block device on {host.name}"
    in_use = [
        (facts.get("mounts"), "is mounted at"),
        (facts.get("swap"), "is in use as swap"),
        (facts.get("holders"), "is held by"),
        (facts.get("exports"), "is already served by"),
    ]
    for found, what in in_use:
        if found:
            return f"{device} {what} {found}: sanlab never serves a device in use"
    held = [
        facts.get("probe", ""),
        f"{facts.get('parts')} partition(s)" if facts.get("parts", "0") != "0" else "",
    ]
    data = " ".join(h for h in held if h)
    if data and not destroy:
        return (
            f"{device} holds data ({data.strip()}): sanlab would overwrite it; set destroy: true on "
            "the target if it may be lost"
        )
    return None


def devices_refused(scenario: Scenario, hosts: Mapping[str, Host]) -> list[str]:
    """Why a target's block device may not be served, per target; checked before anything changes."""
    problems = []
    for target in scenario.targets:
        if target.backstore == "device" and target.device:
            problem = device_problem(hosts[target.host], target.device, target.destroy)
            if problem:
                problems.append(f"{target.host}: {problem}")
    return problems
