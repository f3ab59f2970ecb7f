"""Write a Linux initramfs (cpio 'newc') from a tar stream.

The guest's root file system is an initramfs the kernel unpacks straight
into RAM: no disk, no bootloader, no root= to find.  mmdebstrap hands us a
tar (it can build one without root); this turns it into the cpio the kernel
wants, with every file owned as the tar says, whoever runs the build.
"""

from __future__ import annotations

import stat
import tarfile
from collections.abc import Callable, Iterator
from typing import BinaryIO

from sanlab.scenarios.errors import SanlabError

_MODES = {tarfile.DIRTYPE: stat.S_IFDIR, tarfile.SYMTYPE: stat.S_IFLNK}


class CpioWriter:
    def __init__(self, out: BinaryIO):
        self.out = out
        self.inode = 1
        self.written = 0

    def _entry(self, name: str, mode: int, uid: int, gid: int, mtime: int, data: bytes) -> None:
        encoded = name.encode() + b"\0"
        fields = [self.inode, mode, uid, gid, 1, mtime, len(data), 0, 0, 0, 0, len(encoded), 0]
        header = b"070701" + b"".join(b"%08X" % f for f in fields)
        self.inode += 1
        self._write(header + encoded)
        self._pad()
        self._write(data)
        self._pad()

    def _write(self, data: bytes) -> None:
        self.out.write(data)
        self.written += len(data)

    def _pad(self) -> None:
        self._write(b"\0" * (-self.written % 4))

    def add(self, name: str, mode: int, uid: int, gid: int, mtime: int, data: bytes = b"") -> None:
        self._entry(name, mode, uid, gid, mtime, data)

    def close(self) -> None:
        self._entry("TRAILER!!!", 0, 0, 0, 0, b"")
        self._write(b"\0" * (-self.written % 512))


def tar_to_cpio(
    tar: tarfile.TarFile, out: BinaryIO, keep: Callable[[str], bool], take: Callable[[str, bytes], bool]
) -> int:
    """Copy ``tar`` into ``out`` as newc cpio; returns the number of entries.

    ``keep(path)`` drops members; ``take(path, data)`` may claim a regular
    file (the kernel image) instead of packing it.  Hard links become copies
    and device nodes are left out: devtmpfs provides them at boot.
    """
    writer = CpioWriter(out)
    members = {m.name: m for m in tar.getmembers()}
    count = 0
    for member in members.values():
        name = member.name.removeprefix("./").rstrip("/")
        if not name or not keep(name):
            continue
        target: tarfile.TarInfo | None = member
        if member.islnk():
            target = members.get(member.linkname) or members.get("./" + member.linkname.removeprefix("./"))
        if target is None:
            continue
        if target.isfile():
            handle = tar.extractfile(target)
            data = handle.read() if handle else b""
            if take(name, data):
                continue
            mode = stat.S_IFREG | target.mode
        elif target.type in _MODES:
            data = target.linkname.encode() if target.issym() else b""
            mode = _MODES[target.type] | target.mode
        else:
            continue
        writer.add(name, mode, target.uid, target.gid, int(target.mtime), data)
        count += 1
    writer.close()
    return count


# A newc header: magic, then 13 fields of 8 hex digits (inode, mode, uid, gid, nlink, mtime,
# file size, dev major/minor, rdev major/minor, name size, check).
_HEADER = 110


def read_cpio(stream: BinaryIO) -> Iterator[tuple[str, int, int, int, int, bytes]]:
    """The entries of a newc cpio (as CpioWriter writes them), each as (name, mode, uid, gid,
    mtime, data), up to its trailer; a damaged archive is a SanlabError, not a traceback."""
    while True:
        header = stream.read(_HEADER)
        if len(header) < _HEADER or header[:6] != b"070701":
            raise SanlabError("not a newc cpio archive, or cut short (a header is missing)")
        try:
            fields = [int(header[6 + 8 * i : 14 + 8 * i], 16) for i in range(13)]
        except ValueError:
            raise SanlabError("a cpio header holds something other than hex digits") from None
        name_size, size = fields[11], fields[6]
        name = stream.read(name_size)[:-1].decode()
        stream.read(-(_HEADER + name_size) % 4)
        if name == "TRAILER!!!":
            return
        data = stream.read(size)
        if len(data) < size:
            raise SanlabError(f"cpio entry {name!r} is cut short")
        stream.read(-size % 4)
        yield name, fields[1], fields[2], fields[3], fields[5], data
