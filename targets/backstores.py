"""Where the bytes live on the target host: a RAM disk, the null device, a file.

``null`` discards writes and reads zeros (null_blk): the fastest back end,
and one that no verified run can pass.  ``ramdisk`` keeps data in RAM;
``file`` is a sparse file on the guest's own (RAM-backed) root.
"""

from __future__ import annotations

from dataclasses import dataclass

from sanlab.targets.host import Host, sh


@dataclass(frozen=True)
class Backing:
    kind: str  # 'block' (a /dev path) or 'file'
    path: str
    size: int


def block_device(host: Host, kind: str, name: str, size: int) -> Backing:
    """A block device or file for stacks that take one (nvmet, tgt, LIO iblock/fileio)."""
    if kind == "null":
        # Linux 6.1 names a configfs null_blk disk after its directory
        # ("null_blk: disk <name> created"), so it appears as /dev/<name>.
        script = (
            "[ -e /sys/kernel/config/nullb ] || modprobe null_blk nr_devices=0\n"
            f"d=/sys/kernel/config/nullb/{name}; mkdir -p $d\n"
            f"echo {max(1, size >> 20)} > $d/size\n"
            "echo 1 > $d/power"
        )
        sh(host, script, f"creating null_blk {name}")
        return Backing("block", f"/dev/{name}", size)
    if kind == "ramdisk":
        path = f"/dev/shm/sanlab-{name}.img"
        sh(host, f"truncate -s {size} {path}", f"creating RAM-backed file {path}")
        return Backing("file", path, size)
    path = f"/var/tmp/sanlab-{name}.img"
    sh(host, f"mkdir -p /var/tmp && truncate -s {size} {path}", f"creating file {path}")
    return Backing("file", path, size)


def remove(host: Host, backing: Backing, name: str) -> None:
    if backing.kind == "block":
        host.run(f"echo 0 > /sys/kernel/config/nullb/{name}/power; rmdir /sys/kernel/config/nullb/{name}")
    else:
        host.run(f"rm -f {backing.path}")
