"""An output folder that sanlab shares with its user: a manifest of what sanlab wrote.

``run --out``, ``model --report`` and ``sweep --out`` write into folders the
user names, which may already hold the user's own files.  Guessing which
files are ours from their names (``*.pcap``, ``logs/``) once deleted a
customer's captures, so every file sanlab writes is entered in the folder's
manifest, with its size and modification time, *before* it is written and
stamped after.  Only a file the manifest names, still as sanlab left it, is
ever replaced or removed.  Writers never follow a symlink: a name that is a
symlink, or that passes through one, belongs to the user.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import IO, Any

from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.files import read_bounded
from sanlab.scenarios.reading import parse_json
from sanlab.scenarios.writing import (
    HELD_SIGNALS,
    cannot_write,
    is_temporary,
    open_at,
    open_folder,
    open_subfolder,
    probe_writable,
    signals_held,
    temporary_name,
    what_is,
    write_at,
)

__all__ = ["HELD_SIGNALS", "MANIFEST", "OutputFolder", "claim_fresh", "copy_into", "signals_held"]

MANIFEST = ".sanlab-manifest.json"
MANIFEST_BYTES = 4 << 20
_KIND = "sanlab output manifest"


def _checked_name(name: str) -> str:
    """A name inside the folder: relative, no '..', no empty parts."""
    parts = PurePosixPath(name).parts
    if not parts or PurePosixPath(name).is_absolute() or any(p in ("..", ".") for p in parts):
        raise SanlabError(f"internal: {name!r} is not a name inside an output folder")
    return "/".join(parts)


def _stamp(info: os.stat_result) -> list[int]:
    return [info.st_size, info.st_mtime_ns]


Stamp = list[int] | list[list[int]] | None


def _matches(stamp: Stamp, info: os.stat_result) -> bool:
    """Whether a file's stat is the one its entry records: one stamp, or either of two while a
    replacement was being renamed into place (a kill then leaves the old file or the new)."""
    if not stamp:
        return False
    now = _stamp(info)
    return now in stamp if isinstance(stamp[0], list) else stamp == now


def _valid_stamp(stamp: object) -> bool:
    def one(value: object) -> bool:
        return isinstance(value, list) and len(value) == 2 and all(type(v) is int for v in value)

    if stamp is None or one(stamp):
        return True
    return isinstance(stamp, list) and 1 <= len(stamp) <= 2 and all(one(v) for v in stamp)


class OutputFolder:
    """A folder and the manifest of the files sanlab wrote in it (by name, with stamps).

    ``grows`` names files sanlab appends to (a sweep's journal): they stay
    sanlab's while they are regular files the manifest names, whatever their
    size, so a kill between an append and a stamp never orphans them.
    """

    def __init__(self, root: Path, option: str, files: dict[str, Stamp], grows: set[str] | None = None):
        self.root, self.option, self.files = root, option, files
        self.grows: set[str] = grows or set()

    # --- opening ------------------------------------------------------------------

    @classmethod
    def open(cls, root: Path, option: str) -> OutputFolder:
        """The folder (made if missing) with the manifest it holds, or an empty one; a
        temporary a killed write left behind, which the manifest names, is removed."""
        if root.is_symlink() and not root.is_dir():
            raise SanlabError(f"{option} {root}: is a symlink to nothing; give a folder")
        if root.exists() and not root.is_dir():
            raise SanlabError(f"{option} {root}: exists and is not a directory")
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SanlabError(f"{option} {root}: cannot write there ({exc.strerror})") from None
        probe_writable(root, option)  # a read-only or full disk is said now, before any work
        files, grows = cls._read_manifest(root, option)
        folder = cls(root, option, files, grows)
        folder._repair()
        return folder

    @staticmethod
    def _read_manifest(root: Path, option: str) -> tuple[dict[str, Stamp], set[str]]:
        path = root / MANIFEST
        if not path.exists() and not path.is_symlink():
            return {}, set()
        where = f"{option} {root}: its {MANIFEST}"
        data = read_bounded(path, MANIFEST_BYTES, where)
        try:
            document = parse_json(data, where)
        except SanlabError:
            raise SanlabError(f"{where} is not valid JSON; sanlab will not touch that folder") from None
        files = document.get("files") if isinstance(document, dict) else None
        grows = document.get("grows", []) if isinstance(document, dict) else None
        if not isinstance(document, dict) or document.get("kind") != _KIND or not isinstance(files, dict):
            raise SanlabError(f"{where} is not one sanlab wrote; sanlab will not touch that folder")
        if not isinstance(grows, list) or not all(isinstance(g, str) and g in files for g in grows):
            raise SanlabError(f"{where} has a damaged 'grows' list; sanlab will not touch that folder")
        checked: dict[str, Stamp] = {}
        for name, stamp in files.items():
            if not isinstance(name, str) or not _valid_stamp(stamp):
                raise SanlabError(
                    f"{where} has a damaged entry ({str(name)[:60]!r}); sanlab will not touch it"
                )
            try:
                checked[_checked_name(name)] = stamp
            except SanlabError:
                raise SanlabError(f"{where} names {name[:60]!r}, outside the folder") from None
        return checked, {_checked_name(g) for g in grows}

    def _repair(self) -> None:
        """Remove the temporaries the manifest names (a write killed before its rename)."""
        left = [n for n in self.files if is_temporary(PurePosixPath(n).name)]
        for name in left:
            info = self._lstat(name)
            if info is not None and stat.S_ISREG(info.st_mode):
                (self.root / name).unlink()
            del self.files[name]
        if left:
            self._save()

    # --- what is whose ------------------------------------------------------------

    def _lstat(self, name: str) -> os.stat_result | None:
        """lstat of ``name``, or None; a name that passes through a symlink is refused."""
        path = self.root
        parts = name.split("/")
        for part in parts[:-1]:
            path = path / part
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                return None
            if not stat.S_ISDIR(info.st_mode):
                raise SanlabError(
                    f"{self.option} {self.root}: {path.relative_to(self.root)} is not a folder sanlab made "
                    "(a symlink or a file); sanlab will not write through it"
                )
        try:
            return os.lstat(path / parts[-1])
        except FileNotFoundError:
            return None

    def ours(self, name: str) -> bool:
        """Whether ``name`` is a regular file sanlab wrote and nobody changed since (a file
        sanlab appends to is sanlab's while it is a regular file the manifest names)."""
        info = self._lstat(name)
        if info is None or not stat.S_ISREG(info.st_mode) or name not in self.files:
            return False
        return name in self.grows or _matches(self.files[name], info)

    def listed(self, name: str) -> bool:
        """Whether ``name`` is a regular file the manifest names, stamped or not (a file sanlab
        appends to may have grown past its stamp when a run was cut short)."""
        info = self._lstat(name)
        return name in self.files and info is not None and stat.S_ISREG(info.st_mode)

    def foreign(self) -> list[str]:
        """Entries of the folder (top level, and inside folders sanlab made) that are not sanlab's."""
        ours_dirs = self._folders()
        found: list[str] = []
        self._walk(self.root, "", ours_dirs, found)
        return found

    def _folders(self) -> set[str]:
        """Every folder the manifest's names pass through, nested ones' parents too (a cluster
        run's ``share-1/dry-run/``): sanlab made each of them."""
        return {str(parent) for n in self.files for parent in PurePosixPath(n).parents} - {"."}

    def _walk(self, folder: Path, prefix: str, ours_dirs: set[str], found: list[str]) -> None:
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            name = prefix + entry.name
            if name == MANIFEST or (is_temporary(name) and name.startswith(f".{MANIFEST}.")):
                continue  # the manifest, and a temporary of it that a kill -9 left
            if entry.is_dir(follow_symlinks=False) and name in ours_dirs:
                self._walk(folder / entry.name, name + "/", ours_dirs, found)
            elif not self.ours(name):
                found.append(name)

    # --- writing --------------------------------------------------------------------

    def _refuse_unless_ours(self, name: str) -> os.stat_result | None:
        info = self._lstat(name)
        if info is not None and not self.ours(name):
            what = what_is(info)
            raise SanlabError(
                f"{self.option} {self.root}: {name} is {what}; sanlab will not replace it "
                "(move it away, or give another folder)"
            )
        return info

    def _parent_fd(self, name: str) -> int:
        """A descriptor of the folder ``name`` is in, each step made if missing, never a link."""
        root_fd = open_folder(self.root, make=False)
        try:
            return open_subfolder(root_fd, name.split("/")[:-1])
        finally:
            os.close(root_fd)

    def claim(self, name: str) -> Path:
        """The path another program (QEMU, fio) is to write ``name`` at, entered in the manifest first.

        Refused when something the manifest does not own (a user's file, a
        symlink, a file changed since sanlab wrote it) is there already.
        """
        name = _checked_name(name)
        self._refuse_unless_ours(name)
        if name not in self.files:
            self.files[name] = None
            self._save()
        try:
            os.close(self._parent_fd(name))
        except OSError as exc:
            raise cannot_write(f"{self.option} {self.root / name}", exc) from None
        return self.root / name

    def stamp(self, names: Iterable[str]) -> None:
        """Record the size and time of files sanlab has just written (one not there yet waits)."""
        for name in names:
            info = self._lstat(_checked_name(name))
            if info is not None and stat.S_ISREG(info.st_mode):
                self.files[name] = _stamp(info)
        self._save()

    def adopt(self, folder: str) -> None:
        """Enter every regular file under ``folder`` that sanlab's own writers put there.

        Only for a subfolder this run made itself, empty when claimed (fio's
        JSON, the VMs' logs): the files in it are the run's by construction.
        """
        base = self.root / _checked_name(folder)
        if base.is_symlink() or not base.is_dir():
            return
        names = [
            f"{folder}/{entry.name}" for entry in os.scandir(base) if entry.is_file(follow_symlinks=False)
        ]
        for name in names:
            self.files.setdefault(name, None)
        self.stamp(names)

    def write_bytes(self, name: str, data: bytes, mode: int | None = None) -> Path:
        """Write ``name`` whole, its stamp first: the manifest names the temporary before it
        exists and both stamps (old and new) before the rename, so a kill at any moment leaves
        a file the manifest vouches for; a full or read-only disk is one line, nothing left.
        ``mode`` is the file's from its creation (0o600 for a secret: never readable by others)."""
        name = _checked_name(name)
        where = f"{self.option} {self.root / name}"
        with signals_held():
            info = self._refuse_unless_ours(name)
            parent = str(PurePosixPath(name).parent)
            base = PurePosixPath(name).name
            tmp = temporary_name(base)
            tmp_name = tmp if parent == "." else f"{parent}/{tmp}"
            old = [_stamp(info)] if info is not None else []
            self.files.setdefault(name, old[0] if old else None)
            self.files[tmp_name] = None
            try:
                self._save()
                fd = self._parent_fd(name)
                try:
                    new = write_at(
                        fd,
                        base,
                        data,
                        where=where,
                        mode=mode,
                        temporary=tmp,
                        before_rename=self._pending(name, old),
                    )
                finally:
                    os.close(fd)
            except OSError as exc:
                self._forget(tmp_name)
                raise cannot_write(where, exc) from None
            self.files.pop(tmp_name, None)
            self.files[name] = _stamp(new)
            self._save()
        return self.root / name

    def _pending(self, name: str, old: list[list[int]]) -> Any:
        def record(_tmp: str, new: os.stat_result) -> None:
            self.files[name] = [*old, _stamp(new)]
            self._save()

        return record

    def _forget(self, tmp_name: str) -> None:
        """Drop a temporary's entry after a failed write (kept on disk if the manifest cannot be
        saved now, on a full disk: the next open removes it)."""
        self.files.pop(tmp_name, None)
        with contextlib.suppress(SanlabError):
            self._save()

    def write_text(self, name: str, text: str) -> Path:
        return self.write_bytes(name, text.encode())

    def append(self, name: str) -> IO[str]:
        """``name`` opened to append (made if missing, never through a link), as a file that grows."""
        name = _checked_name(name)
        self._refuse_unless_ours(name)
        with signals_held():
            self.files.setdefault(name, None)
            self.grows.add(name)
            self._save()
        try:
            fd = self._parent_fd(name)
            try:
                handle = open_at(fd, PurePosixPath(name).name, "append")
            finally:
                os.close(fd)
        except OSError as exc:
            raise cannot_write(f"{self.option} {self.root / name}", exc) from None
        return os.fdopen(handle, "a")

    def _save(self) -> None:
        document: dict[str, Any] = {"kind": _KIND, "files": dict(sorted(self.files.items()))}
        if self.grows:
            document["grows"] = sorted(self.grows & set(self.files))
        data = (json.dumps(document, indent=1) + "\n").encode()
        try:
            fd = open_folder(self.root, make=False)
            try:
                write_at(fd, MANIFEST, data, where=f"{self.option} {self.root / MANIFEST}")
            finally:
                os.close(fd)
        except OSError as exc:
            raise cannot_write(f"{self.option} {self.root / MANIFEST}", exc) from None

    # --- clearing ---------------------------------------------------------------------

    def clear(self) -> list[str]:
        """Remove the files sanlab wrote here (and folders it made, once empty).

        Refused, with nothing removed, when anything else is in the folder:
        the caller asked for a clean folder, and the rest is the user's.
        """
        foreign = self.foreign()
        if foreign:
            shown = ", ".join(foreign[:4]) + (" ..." if len(foreign) > 4 else "")
            raise SanlabError(
                f"{self.option} {self.root}: holds files sanlab did not write ({shown}); "
                "it will not delete them: give another folder"
            )
        removed = sorted(n for n in self.files if self.ours(n))
        for name in removed:
            (self.root / name).unlink()
        for folder in sorted(self._folders(), reverse=True):  # the deepest first
            path = self.root / folder
            if path.is_dir() and not path.is_symlink() and not any(path.iterdir()):
                path.rmdir()
        self.files, self.grows = {}, set()
        self._save()
        return removed


def claim_fresh(root: Path, option: str, force: bool) -> OutputFolder:
    """A folder for one run that must start empty: ``force`` clears a previous sanlab run only.

    A folder with anything in it is refused without ``force``; with it, the
    folder must hold a manifest and nothing the manifest does not own.
    """
    folder = OutputFolder.open(root, option)
    entries = [e for e in sorted(os.listdir(root)) if e != MANIFEST]
    if not entries:
        return folder
    shown = ", ".join(entries[:4]) + (" ..." if len(entries) > 4 else "")
    if not force:
        raise SanlabError(
            f"{option} {root}: is not empty ({shown}); give a new folder, "
            "or --force to replace the previous sanlab run there"
        )
    if not (root / MANIFEST).is_file():
        raise SanlabError(
            f"{option} {root}: holds no sanlab manifest ({MANIFEST}), so nothing there is known to be "
            f"sanlab's ({shown}); --force deletes only what sanlab wrote: give another folder"
        )
    folder.clear()
    return folder


def copy_into(folder: OutputFolder, source: Path, name: str) -> None:
    """Copy a file sanlab made elsewhere (a VM's console log) into the folder, as sanlab's."""
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise SanlabError(f"{source}: cannot read it ({exc.strerror})") from None
    folder.write_bytes(name, data)
