"""The one way sanlab writes a file: never through a link, never half a file.

A hostile pass found every writer following links out of its folder: a
linked lock file truncated a user's document, a planted ``NAME.tmp`` was
written through, a full disk left a 0-byte file and a traceback.  So every
file sanlab writes goes through this module, and tests/test_one_writer.py
fails when a new writer bypasses it:

* the folder is opened once and every name is used relative to its file
  descriptor, each component with ``O_NOFOLLOW``: a link inside the folder is
  never followed (the folder the user named may itself be a link: that is
  the user's choice);
* a new file is written to a temporary of an unpredictable name created
  exclusively (``O_CREAT|O_EXCL|O_NOFOLLOW``) in the same folder, flushed,
  and renamed over its name in one step; a rename replaces a link itself,
  never the file it points to;
* ``ENOSPC``, ``EROFS`` and their kin end in one line naming the file, and
  the temporary is removed: no partial or 0-byte file is left behind;
* locks are opened ``O_NOFOLLOW`` and never truncated.

Whether a name may be replaced at all is the caller's policy (``exists``);
a folder shared with the user decides it by its manifest
(scenarios/results/outdir.py), whose stamps are written in the same window, with
Ctrl-C held (``signals_held``).
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import secrets
import signal
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Literal

from sanlab.scenarios.errors import SanlabError

HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# What to do when the name is taken: replace whatever is there (sanlab's own folders; a rename
# replaces a link itself), replace only a regular file (a file the user named), or refuse.
Exists = Literal["replace", "regular", "refuse"]
_TEMP = re.compile(r"^\..+\.sanlab-[0-9a-f]{12}\.tmp$")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Let Ctrl-C and SIGTERM wait until a file and its manifest stamp agree again.

    A write cut between the file and its stamp leaves a file the manifest no
    longer vouches for.  Python raises KeyboardInterrupt in the main thread
    only, and only there can handlers change; a signal that arrives
    meanwhile is raised again as soon as the block ends.
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


def cannot_write(where: object, exc: OSError) -> SanlabError:
    """The one line for a write the system refused (a full disk, a read-only one, no permission)."""
    reason = exc.strerror or os.strerror(exc.errno or 0) or type(exc).__name__
    if exc.errno == errno.ELOOP:
        reason = "a symlink is in the way; sanlab never writes through one"
    return SanlabError(f"{where}: cannot write it ({reason})")


def is_temporary(name: str) -> bool:
    """Whether ``name`` is one of this module's temporaries (left only by a kill -9)."""
    return bool(_TEMP.match(name))


def temporary_name(name: str) -> str:
    """An unpredictable name beside ``name``: nobody can plant a file or link there beforehand."""
    return f".{name}.sanlab-{secrets.token_hex(6)}.tmp"


# --- folders ---------------------------------------------------------------------------------


def open_folder(folder: Path, make: bool = True) -> int:
    """A descriptor of ``folder`` (made, with its parents, if missing)."""
    if make:
        folder.mkdir(parents=True, exist_ok=True)
    return os.open(folder, _DIR_FLAGS)


def open_subfolder(dir_fd: int, parts: list[str], make: bool = True) -> int:
    """A descriptor of ``parts`` under ``dir_fd``, each step ``O_NOFOLLOW`` (made if missing).

    A link or a file in the way raises ``OSError`` (``ELOOP``/``ENOTDIR``); the
    caller's descriptor stays open, the returned one is new.
    """
    current = os.dup(dir_fd)
    try:
        for part in parts:
            if part in ("", ".", "..") or "/" in part:
                raise SanlabError(f"internal: {part!r} is not a folder name")
            if make:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=current)
            following = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=current)
            os.close(current)
            current = following
    except BaseException:
        os.close(current)
        raise
    return current


@contextlib.contextmanager
def folder_of(path: Path, make: bool = True) -> Iterator[tuple[int, str]]:
    """(descriptor of ``path``'s folder, ``path``'s name): the pair every write here works on."""
    if not path.name or path.name in (".", ".."):
        raise SanlabError(f"{path}: is not a file name")
    fd = open_folder(path.parent, make)
    try:
        yield fd, path.name
    finally:
        os.close(fd)


def lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    """``name``'s own stat (a link is not followed), or None when nothing is there."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def what_is(info: os.stat_result) -> str:
    """What sanlab found where it would write, as its refusal says it."""
    if stat.S_ISLNK(info.st_mode):
        return "a symlink"
    if stat.S_ISDIR(info.st_mode):
        return "a directory"
    if stat.S_ISREG(info.st_mode):
        return "a file sanlab did not write"
    return "not a regular file"


def check_exists(dir_fd: int, name: str, exists: Exists, where: object) -> os.stat_result | None:
    """What is at ``name`` now, or a one-line refusal when ``exists`` forbids replacing it."""
    info = lstat_at(dir_fd, name)
    if info is None:
        return None
    if stat.S_ISDIR(info.st_mode) or (exists == "regular" and not stat.S_ISREG(info.st_mode)):
        raise SanlabError(f"{where}: is {what_is(info)}; sanlab will not replace it")
    if exists == "refuse":
        raise SanlabError(f"{where}: exists ({what_is(info)}); sanlab will not replace it")
    return info


# --- writing ---------------------------------------------------------------------------------


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_at(
    dir_fd: int,
    name: str,
    data: bytes,
    *,
    exists: Exists = "replace",
    where: object = None,
    mode: int | None = None,
    durable: bool = True,
    before_rename: Callable[[str, os.stat_result], None] | None = None,
    temporary: str | None = None,
) -> os.stat_result:
    """Write ``data`` as ``name`` in ``dir_fd``: temporary, flush, check, rename; return its stat.

    ``before_rename(temporary, stat)`` runs once the bytes are safe and before
    the name changes (a manifest records the new stamp there first).  On any
    failure the temporary is gone and ``name`` is as it was.
    """
    where = where if where is not None else name
    tmp = temporary or temporary_name(name)
    fd = os.open(tmp, _NEW_FLAGS, 0o666 if mode is None else mode, dir_fd=dir_fd)
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            _write_all(fd, data)
            if durable:
                os.fsync(fd)
            info = os.fstat(fd)
        finally:
            os.close(fd)
        check_exists(dir_fd, name, exists, where)
        if before_rename is not None:
            before_rename(tmp, info)
        if exists == "refuse":
            # link() never replaces: a name taken since the check stays as it is.
            os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
            os.unlink(tmp, dir_fd=dir_fd)
        else:
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        if durable:
            with contextlib.suppress(OSError):
                os.fsync(dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    return info


def write_file(
    path: Path,
    data: bytes | str,
    *,
    exists: Exists = "replace",
    what: str = "",
    mode: int | None = None,
    durable: bool = True,
) -> None:
    """Write ``path`` whole (see ``write_at``); a refused write is one ``SanlabError`` line."""
    where = f"{what} {path}".strip()
    payload = data.encode() if isinstance(data, str) else data
    try:
        with folder_of(path) as (dir_fd, name):
            write_at(dir_fd, name, payload, exists=exists, where=where, mode=mode, durable=durable)
    except OSError as exc:
        raise cannot_write(where, exc) from None


def figure_bytes(figure: Any, **options: Any) -> bytes:
    """A Matplotlib figure rendered in memory, for ``write_file``: savefig never opens a path."""
    buffer = io.BytesIO()
    figure.savefig(buffer, **options)
    return buffer.getvalue()


# --- files written as a stream: locks, logs, journals, fresh files ---------------------------


def open_at(dir_fd: int, name: str, how: Literal["new", "append", "lock"], mode: int = 0o666) -> int:
    """A descriptor of ``name`` opened ``O_NOFOLLOW``: created exclusively ("new"), or
    appended to / locked (created if missing, never truncated); only ever a regular file."""
    flags = {
        "new": _NEW_FLAGS,
        "append": os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
        "lock": os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
    }[how]
    fd = os.open(name, flags, mode, dir_fd=dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", name)
    os.set_blocking(fd, True)
    return fd


def open_stream(path: Path, how: Literal["new", "append"], binary: bool = False) -> IO[Any]:
    """``path`` as a file object (for a child's output, a log, a fresh file in a fresh folder)."""
    try:
        with folder_of(path) as (dir_fd, name):
            fd = open_at(dir_fd, name, how)
    except OSError as exc:
        raise cannot_write(path, exc) from None
    letters = ("a" if how == "append" else "w") + ("b" if binary else "")
    return os.fdopen(fd, letters)


def open_lock(path: Path, what: str = "lock") -> int:
    """A lock file's descriptor (made if missing, never truncated, never through a link)."""
    try:
        with folder_of(path) as (dir_fd, name):
            return open_at(dir_fd, name, "lock", 0o600)
    except OSError as exc:
        raise cannot_write(f"{what} {path}", exc) from None


def probe_writable(folder: Path, option: str) -> None:
    """Prove ``folder`` takes a new file: one of an unpredictable name, made and removed."""
    try:
        with folder_of(folder / ".probe", make=True) as (dir_fd, _):
            name = temporary_name("sanlab-probe")
            os.close(open_at(dir_fd, name, "new", 0o600))
            os.unlink(name, dir_fd=dir_fd)
    except FileExistsError:
        raise SanlabError(f"{option} {folder}: exists and is not a directory") from None
    except NotADirectoryError:
        raise SanlabError(f"{option} {folder}: exists and is not a directory") from None
    except OSError as exc:
        raise cannot_write(f"{option} {folder}", exc) from None


def rename_into_place(work: Path, final: Path, what: str) -> Path:
    """A folder sanlab built whole (its own ``mkdtemp``) given its final name in one rename, so a
    reader sees all of it or none of it.  ``work`` must be a real folder, not a link to one;
    anything at ``final`` (a link, a file, a folder of someone else's) is refused, never replaced:
    the caller removes what it proved its own first."""
    try:
        info: os.stat_result | None = os.lstat(work)
    except FileNotFoundError:
        info = None
    if info is None or not stat.S_ISDIR(info.st_mode):
        kind = "gone" if info is None else what_is(info)
        raise SanlabError(f"{work}: is {kind}, not the folder sanlab built for {what}")
    if os.path.lexists(final):
        raise SanlabError(f"{final}: is in the way of {what} and not sanlab's; move it away")
    try:
        os.rename(work, final)
    except OSError as exc:
        raise cannot_write(final, exc) from None
    return final


def copy_file(source: Path, path: Path, *, exists: Exists = "replace", what: str = "") -> None:
    """Copy a file sanlab reads whole (a log, a plugin, a scenario) to ``path`` via ``write_file``."""
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise SanlabError(f"{source}: cannot read it ({exc.strerror})") from None
    write_file(path, data, exists=exists, what=what)


def remove_listed(folder: Path, names: tuple[str, ...]) -> list[str]:
    """Unlink the files named ``names`` that sanlab wrote in ``folder`` (a link is unlinked, never
    followed; a folder of that name stays), then ``folder`` itself if nothing else is left.
    Returns the names of what is left: anything sanlab did not write stays."""
    for name in names:
        entry = folder / name
        if entry.is_symlink() or entry.is_file():
            entry.unlink()
    left = sorted(entry.name for entry in folder.iterdir())
    if not left:
        folder.rmdir()
    return left
