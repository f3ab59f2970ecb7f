"""Where the bytes live on the target host: a RAM disk, the null device, a file.

``null`` discards writes and reads zeros (null_blk): the fastest back end,
and one that no verified run can pass.  ``ramdisk`` keeps data in RAM;
``file`` is a sparse file on the guest's own (RAM-backed) root.

Each backing is created and removed as a pair (``backing``), and creation
refuses a path or null_blk device that already exists: sanlab never
resizes, reuses or deletes what it did not create.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sanlab.targets.host import Host, sh

NULLB = "/sys/kernel/config/nullb"


@dataclass(frozen=True)
class Backing:
    kind: str  # 'block' (a /dev path) or 'file'
    path: str
    size: int
    name: str = ""  # the null_blk configfs name, for a 'block' backing


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
    if made.kind == "block":
        folder = f"{NULLB}/{made.name}"
        host.run(f"[ -d {folder} ] && {{ echo 0 > {folder}/power; rmdir {folder}; }}; true", timeout=60)
    else:
        host.run(f"rm -f {made.path}", timeout=60)


@contextmanager
def backing(host: Host, kind: str, name: str, size: int) -> Iterator[Backing]:
    """Create a backing for the ``with`` block, and remove exactly it afterwards."""
    made = claim(host, kind, name, size)
    try:
        create(host, made)
        yield made
    finally:
        remove(host, made)
