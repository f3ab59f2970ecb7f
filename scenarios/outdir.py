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
import shutil
import signal
import stat
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath

from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.files import read_bounded, write_atomically

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


HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Let Ctrl-C and SIGTERM wait until a file and its manifest stamp agree again.

    A write cut between the file and its stamp leaves a file the manifest no
    longer vouches for, and the next command (``--resume``, a resumed sweep)
    rightly refuses it as not sanlab's.  Python raises KeyboardInterrupt in
    the main thread only, and only there can handlers change; a signal that
    arrives meanwhile is raised again as soon as the block ends.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: caught.append(signum)) for s in HELD_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
        if caught:
            signal.raise_signal(caught[0])


class OutputFolder:
    """A folder and the manifest of the files sanlab wrote in it (by name, with stamps)."""

    def __init__(self, root: Path, option: str, files: dict[str, list[int] | None]):
        self.root, self.option, self.files = root, option, files

    # --- opening ------------------------------------------------------------------

    @classmethod
    def open(cls, root: Path, option: str) -> OutputFolder:
        """The folder (made if missing) with the manifest it holds, or an empty one."""
        if root.is_symlink() and not root.is_dir():
            raise SanlabError(f"{option} {root}: is a symlink to nothing; give a folder")
        if root.exists() and not root.is_dir():
            raise SanlabError(f"{option} {root}: exists and is not a directory")
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SanlabError(f"{option} {root}: cannot write there ({exc.strerror})") from None
        if not os.access(root, os.W_OK | os.X_OK):
            raise SanlabError(f"{option} {root}: cannot write there (permission denied)")
        return cls(root, option, cls._read_manifest(root, option))

    @staticmethod
    def _read_manifest(root: Path, option: str) -> dict[str, list[int] | None]:
        path = root / MANIFEST
        if not path.exists() and not path.is_symlink():
            return {}
        where = f"{option} {root}: its {MANIFEST}"
        data = read_bounded(path, MANIFEST_BYTES, where)
        try:
            document = json.loads(data)
        except ValueError:
            raise SanlabError(f"{where} is not valid JSON; sanlab will not touch that folder") from None
        files = document.get("files") if isinstance(document, dict) else None
        if document.get("kind") != _KIND or not isinstance(files, dict):
            raise SanlabError(f"{where} is not one sanlab wrote; sanlab will not touch that folder")
        checked: dict[str, list[int] | None] = {}
        for name, stamp in files.items():
            ok = stamp is None or (
                isinstance(stamp, list) and len(stamp) == 2 and all(type(v) is int for v in stamp)
            )
            if not isinstance(name, str) or not ok:
                raise SanlabError(
                    f"{where} has a damaged entry ({str(name)[:60]!r}); sanlab will not touch it"
                )
            try:
                checked[_checked_name(name)] = stamp
            except SanlabError:
                raise SanlabError(f"{where} names {name[:60]!r}, outside the folder") from None
        return checked

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
        """Whether ``name`` is a regular file sanlab wrote and nobody changed since."""
        info = self._lstat(name)
        stamp = self.files.get(name)
        return info is not None and stat.S_ISREG(info.st_mode) and stamp == _stamp(info)

    def listed(self, name: str) -> bool:
        """Whether ``name`` is a regular file the manifest names, stamped or not (a file sanlab
        appends to may have grown past its stamp when a run was cut short)."""
        info = self._lstat(name)
        return name in self.files and info is not None and stat.S_ISREG(info.st_mode)

    def foreign(self) -> list[str]:
        """Entries of the folder (top level, and inside folders sanlab made) that are not sanlab's."""
        ours_dirs = {str(PurePosixPath(n).parent) for n in self.files} - {"."}
        found: list[str] = []
        self._walk(self.root, "", ours_dirs, found)
        return found

    def _walk(self, folder: Path, prefix: str, ours_dirs: set[str], found: list[str]) -> None:
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            name = prefix + entry.name
            if name == MANIFEST:
                continue
            if entry.is_dir(follow_symlinks=False) and name in ours_dirs:
                self._walk(folder / entry.name, name + "/", ours_dirs, found)
            elif not self.ours(name):
                found.append(name)

    # --- writing --------------------------------------------------------------------

    def claim(self, name: str) -> Path:
        """The path to write ``name`` at, entered in the manifest first.

        Refused when something the manifest does not own (a user's file, a
        symlink, a file changed since sanlab wrote it) is there already.
        """
        name = _checked_name(name)
        info = self._lstat(name)
        if info is not None and not self.ours(name):
            what = "a symlink" if stat.S_ISLNK(info.st_mode) else "a file sanlab did not write"
            raise SanlabError(
                f"{self.option} {self.root}: {name} is {what}; sanlab will not replace it "
                "(move it away, or give another folder)"
            )
        if name not in self.files:
            self.files[name] = None
            self._save()
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

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

    def write_text(self, name: str, text: str) -> Path:
        path = self.claim(name)
        with signals_held():
            write_atomically(path, text)
            self.stamp([name])
        return path

    def _save(self) -> None:
        document = {"kind": _KIND, "files": dict(sorted(self.files.items()))}
        write_atomically(self.root / MANIFEST, json.dumps(document, indent=1) + "\n")

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
        for folder in sorted({str(PurePosixPath(n).parent) for n in self.files} - {"."}, reverse=True):
            path = self.root / folder
            if path.is_dir() and not path.is_symlink() and not any(path.iterdir()):
                path.rmdir()
        self.files = {}
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
    shutil.copyfile(source, folder.claim(name))
    folder.stamp([name])
