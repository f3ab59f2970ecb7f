"""A kernel the user brings: a Debian kernel package or a built tree, read (never written).

``guest: {kernel: FILE}`` names either
- a kernel package, ``linux-image-*.deb`` (Debian's, or ``make bindeb-pkg``'s): its
  ``/boot/vmlinuz-V``, ``/boot/config-V`` and ``/lib/modules/V/`` are read through
  ``dpkg-deb --fsys-tarfile``, which reads every compression a .deb may use; or
- a built tree: ``arch/x86/boot/bzImage`` (or ``bzImage``), ``.config`` (or ``config``)
  and ``lib/modules/V/`` (``make modules_install INSTALL_MOD_PATH=<tree>``).

Before anything is built or booted the kernel's config is read and every option the
scenario needs (scenarios/kernel_needs.py) is looked up in it; what is missing is one line
naming the file, each option and what needs it.  A path is only ever read: it reaches
dpkg-deb as one argv word, absolute (never taken for an option), and no shell sees it.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Literal

from sanlab.emulator import siw_debs
from sanlab.emulator.siw_debs import SiwPlan
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.files import open_regular, read_bounded
from sanlab.scenarios.kernel_needs import kernel_needs
from sanlab.scenarios.schema import Scenario

DEB_MAGIC = b"!<arch>\ndebian-binary"  # an ar archive whose first member is a .deb's
CONFIG_BYTES = 4 << 20  # a kernel's .config is about 300 KB
TREE_KERNELS = ("arch/x86/boot/bzImage", "bzImage")
TREE_CONFIGS = (".config", "config")
MODULE_SUFFIXES = (".ko", ".ko.xz", ".ko.gz")
_RELEASE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+~-]{0,127}$")  # uname -r: 6.12.57+deb13-amd64
READ_TIMEOUT_S = 600.0  # dpkg-deb unpacking a 100 MB kernel package takes seconds


@dataclass(frozen=True)
class KernelSource:
    """A kernel file or tree as the user gave it, found and of a known kind."""

    given: str  # as written in the scenario
    path: Path  # absolute
    kind: Literal["deb", "tree"]


@dataclass(frozen=True)
class KernelConfig:
    """What the kernel says of itself: its release (``uname -r``) and its build options."""

    version: str
    options: dict[str, str]  # CONFIG_X -> y, m or a value; an option "not set" is absent
    siw: SiwPlan | None = None  # siw to compile for it: the scenario needs siw, the kernel lacks it

    def has(self, option: str) -> bool:
        return self.options.get(option) in ("y", "m")


def kernel_source(given: str) -> KernelSource:
    """The kernel the scenario names, or one line saying why it cannot be one."""
    path = Path(os.path.abspath(os.path.expanduser(given)))
    where = f"kernel {given!r}"
    if path.is_dir():
        return KernelSource(given, path, "tree")
    if not path.exists():
        raise SanlabError(f"{where}: no such file or directory (a linux-image .deb or a built kernel tree)")
    if not path.is_file():
        raise SanlabError(f"{where}: is neither a file nor a directory")
    with open_regular(path, where) as handle:
        head = handle.read(len(DEB_MAGIC))
    if head != DEB_MAGIC:
        raise SanlabError(f"{where}: is not a Debian package (.deb); give a linux-image .deb or a built tree")
    return KernelSource(given, path, "deb")


def kernel_digest(source: KernelSource) -> str:
    """What the image cache is keyed by: the .deb's SHA-256; for a tree, that of its bzImage and
    config and of each module file's path, size and modification time (a rebuilt module is a
    new key without hashing gigabytes of modules on every run)."""
    digest = hashlib.sha256(source.kind.encode())
    if source.kind == "deb":
        _hash_file(digest, source.path, "kernel package")
        return digest.hexdigest()
    _hash_file(digest, tree_file(source, TREE_KERNELS, "kernel image"), "kernel image")
    _hash_file(digest, tree_file(source, TREE_CONFIGS, "config"), "kernel config")
    for path in sorted(module_files(tree_modules(source))):
        info = path.stat()
        digest.update(f"{path.relative_to(source.path)}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _hash_file(digest: hashlib._Hash, path: Path, what: str) -> None:
    with open_regular(path, what) as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)


def read_config(source: KernelSource) -> KernelConfig:
    """The kernel's release and build options, from the .deb's /boot/config-V or the tree's .config."""
    if source.kind == "tree":
        config = tree_file(source, TREE_CONFIGS, "config")
        text = read_bounded(config, CONFIG_BYTES, "kernel config").decode(errors="replace")
        return KernelConfig(tree_modules(source).name, parse_config(text))
    with deb_members(source) as members:
        for member, data in members:
            if member.name.startswith("boot/config-") and member.isfile():
                if member.size > CONFIG_BYTES:
                    raise SanlabError(f"{source.path}: {member.name} is over {CONFIG_BYTES >> 20} MiB")
                text = data.read().decode(errors="replace") if data else ""
                release = checked_release(member.name.removeprefix("boot/config-"), source.path)
                return KernelConfig(release, parse_config(text))
    raise SanlabError(f"{source.path}: no /boot/config-* in it: sanlab reads the kernel's config from there")


def parse_config(text: str) -> dict[str, str]:
    """``CONFIG_X=value`` lines; ``# CONFIG_X is not set`` and comments leave X out."""
    options = {}
    for line in text.splitlines():
        name, sep, value = line.strip().partition("=")
        if sep and name.startswith("CONFIG_"):
            options[name] = value.strip('"')
    return options


def check_kernel(scenario: Scenario, source: KernelSource) -> KernelConfig:
    """The kernel's config, if it has every option the scenario needs; else one line naming the
    file, each missing option and what needs it.  siw is the one option sanlab can supply: for
    a Debian kernel .deb whose headers and source it finds, the config returned says to compile
    it (emulator/siw_debs.py); otherwise the refusal says what to provide."""
    config = read_config(source)
    missing = [need for need in kernel_needs(scenario) if not config.has(need.option)]
    hint, plan = "", None
    if any(need.option == siw_debs.OPTION for need in missing):
        try:
            plan = siw_debs.plan_siw(source.kind, source.path, config.version)
            missing = [need for need in missing if need.option != siw_debs.OPTION]
        except SanlabError as exc:
            hint = f" ({exc})"
    if missing:
        said = "; ".join(
            f"{need.option} is not set, and {need.why} needs it"
            + (hint if need.option == siw_debs.OPTION else "")
            for need in missing
        )
        raise SanlabError(f"kernel {source.path} ({config.version}): {said}")
    return replace(config, siw=plan)


@contextmanager
def deb_members(source: KernelSource) -> Iterator[Iterator[tuple[tarfile.TarInfo, IO[bytes] | None]]]:
    """The .deb's files in archive order, names without "./", each with its data when it is a
    regular file; dpkg-deb (ours) is stopped when the caller has read enough."""
    command = ["dpkg-deb", "--fsys-tarfile", str(source.path)]  # absolute: never an option
    try:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise SanlabError("reading a kernel .deb needs dpkg-deb: apt-get install dpkg") from None
    stdout, stderr = proc.stdout, proc.stderr
    assert stdout is not None and stderr is not None

    def members() -> Iterator[tuple[tarfile.TarInfo, IO[bytes] | None]]:
        try:
            with tarfile.open(fileobj=stdout, mode="r|") as tar:
                for member in tar:
                    member.name = member.name.removeprefix("./")
                    yield member, tar.extractfile(member) if member.isfile() else None
        except tarfile.TarError as exc:
            said = stderr.read(4096).decode(errors="replace").strip().splitlines()
            raise SanlabError(f"{source.path}: cannot read it ({said[-1] if said else exc})") from None

    try:
        yield members()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=READ_TIMEOUT_S)
        stdout.close()
        stderr.close()


def tree_file(source: KernelSource, names: tuple[str, ...], what: str) -> Path:
    for name in names:
        if (source.path / name).is_file():
            return source.path / name
    raise SanlabError(f"kernel {source.path}: no {what} in the tree (looked for {', '.join(names)})")


def tree_modules(source: KernelSource) -> Path:
    """The tree's one ``lib/modules/V`` (named after the kernel's release)."""
    base = source.path / "lib" / "modules"
    found = sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink()) if base.is_dir() else []
    if len(found) != 1:
        raise SanlabError(
            f"kernel {source.path}: expected one lib/modules/<release> (make modules_install "
            f"INSTALL_MOD_PATH={source.path}), found {len(found)}"
        )
    checked_release(found[0].name, source.path)
    return found[0]


def checked_release(release: str, where: Path) -> str:
    """A kernel release as ``uname -r`` prints it; it names folders and reaches depmod, so a
    name with a newline, a slash or a leading dash is one line, not a path or an option."""
    if not _RELEASE.match(release):
        raise SanlabError(f"kernel {where}: release {release[:60]!r} is not one (letters, digits, . _ + ~ -)")
    return release


def module_files(root: Path) -> Iterator[Path]:
    """Every module file under ``root``; links (a tree's ``build`` and ``source``) are not followed."""
    for folder, _dirs, files in os.walk(root, followlinks=False):
        for name in files:
            path = Path(folder) / name
            if name.endswith(MODULE_SUFFIXES) and not path.is_symlink():
                yield path
