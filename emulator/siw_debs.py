"""Whether sanlab can compile siw for a brought kernel, and from which Debian packages.

Debian builds no siw (``# CONFIG_RDMA_SIW is not set``), so sanlab compiles it for its own
guests from ``linux-source`` against the matching ``linux-headers`` (vm-images/customize.sh).
A brought Debian kernel .deb gets the same, when a scenario needs siw and the kernel lacks
it: its ``linux-headers-<release>`` and ``linux-source-<X.Y>`` of the kernel's own Debian
version must be found -- as .debs beside the kernel (downloaded by hand with it), in
``<cache>/siw/debs`` (where sanlab's ``apt-get download`` puts them), or known to this
machine's apt.  This module only decides and names; emulator/siw_compile.py fetches and
builds.  A built tree has no headers package: it brings its own siw (``CONFIG_RDMA_SIW=m``)
or is refused, saying so.  Every name read from a package is checked before it reaches
apt or dpkg-deb, always as one argv word.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sanlab.emulator.images import cache_root
from sanlab.scenarios.errors import SanlabError

OPTION = "CONFIG_RDMA_SIW"
FIELDS_TIMEOUT_S = 60.0  # dpkg-deb reading a control file; apt-cache reading its index
_VERSION = re.compile(r"^[0-9][A-Za-z0-9.+~:-]{0,127}$")  # Debian's: 6.12.95-1~bpo12+1
_ARCH = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")
_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9.+-]{1,127}$")
_SERIES = re.compile(r"^([0-9]+\.[0-9]+)(?:[.~+-]|$)")
_BUILT_USING = re.compile(r"(?:^|,)\s*linux \(= ([^)\s]+)\)")
AVAILABLE = "apt"  # where a package is to come from when no .deb of it was found


@dataclass(frozen=True)
class SiwPlan:
    """The packages siw is compiled from for one kernel .deb, and where each was found."""

    kernel: Path  # the kernel .deb, absolute
    release: str  # uname -r: 6.12.95+deb12-amd64
    version: str  # the Debian version of the kernel's source package: 6.12.95-1~bpo12+1
    arch: str  # amd64
    source: str  # linux-source-6.12
    found: tuple[tuple[str, str], ...]  # (package, its .deb's path, or AVAILABLE: apt has it)

    @property
    def headers(self) -> str:
        return headers_package(self.release)


def headers_package(release: str) -> str:
    return f"linux-headers-{release}"


def source_package(version: str) -> str | None:
    """``linux-source-6.12`` for 6.12.95-1~bpo12+1; None when the version names no series."""
    series = _SERIES.match(version)
    return f"linux-source-{series.group(1)}" if series else None


def debs_dir() -> Path:
    """Where sanlab's apt-get download puts the packages it compiles siw from."""
    return cache_root() / "siw" / "debs"


def deb_file_name(package: str, version: str, arch: str) -> str:
    """The name apt-get download gives the package's .deb (an epoch's colon as %3a)."""
    return f"{package}_{version.replace(':', '%3a')}_{arch}.deb"


def find_deb(package: str, version: str, arch: str, places: list[Path]) -> Path | None:
    """The package's .deb in the first of ``places`` that has it (a link is not taken)."""
    for place in places:
        for each in (arch, "all"):
            path = place / deb_file_name(package, version, arch=each)
            if path.is_file() and not path.is_symlink():
                return path
    return None


def deb_fields(deb: Path, *names: str) -> dict[str, str]:
    """Control fields of a .deb (dpkg-deb gets its absolute path as one argv word; asked for
    all, as it prints one field asked alone without its name)."""
    command = ["dpkg-deb", "--field", str(deb.absolute())]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=FIELDS_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise SanlabError("reading a .deb needs dpkg-deb: apt-get install dpkg") from None
    if done.returncode != 0:
        raise SanlabError(f"{deb}: cannot read its control fields ({done.stderr.strip()[-200:]})")
    fields: dict[str, str] = {}
    for line in done.stdout.splitlines():
        name, sep, value = line.partition(":")
        if sep and not line[:1].isspace() and name.strip() in names:
            fields[name.strip()] = value.strip()
    return fields


def apt_knows(packages: list[str], version: str) -> set[str]:
    """Which of ``packages`` this machine's apt has at ``version`` (checked names), asked in
    one apt-cache call (each took 3-4 s on the busy 2-core machine)."""
    if not packages or shutil.which("apt-cache") is None:
        return set()
    command = ["apt-cache", "show", "--no-all-versions", *(f"{p}={version}" for p in packages)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=FIELDS_TIMEOUT_S, check=False)
    shown = set(re.findall(r"^Package: (\S+)$", done.stdout, re.M))
    return {package for package in packages if package in shown}


def plan_siw(
    kind: str,
    kernel: Path,
    release: str,
    fields: Callable[[Path], dict[str, str]] | None = None,
    knows: Callable[[list[str], str], set[str]] | None = None,
) -> SiwPlan:
    """How siw is compiled for this kernel, or a SanlabError saying what to provide.
    ``fields`` reads the .deb's control fields and ``knows`` asks apt (dpkg-deb and apt-cache
    unless a test gives others)."""
    rebuild = f"or give a kernel built with {OPTION}=m"
    if kind != "deb":
        raise SanlabError(f"a built tree brings its own siw: rebuild it with {OPTION}=m")
    said = (fields or _kernel_fields)(kernel)
    knows = knows or apt_knows
    built = _BUILT_USING.search(said.get("Built-Using", ""))
    version = built.group(1) if built else said.get("Version", "")
    arch = said.get("Architecture", "")
    source = source_package(version)
    if not (_VERSION.match(version) and _ARCH.match(arch) and source):
        raise SanlabError(
            f"sanlab compiles siw from a Debian kernel's linux-source, and cannot tell which one "
            f"its version {version[:40]!r} ({arch[:20]!r}) needs; {rebuild}"
        )
    places = [kernel.parent, debs_dir()]
    packages = (headers_package(release), source)
    for package in packages:
        if not _PACKAGE.match(package):
            raise SanlabError(f"sanlab compiles siw from {package[:60]!r}, which is not a package name")
    debs = {package: find_deb(package, version, arch, places) for package in packages}
    in_apt = knows([package for package, deb in debs.items() if deb is None], version)
    found = [(package, str(deb) if deb else AVAILABLE) for package, deb in debs.items()]
    lacking = [package for package, deb in debs.items() if deb is None and package not in in_apt]
    if lacking:
        wanted = " ".join(f"{package}={version}" for package in lacking)
        raise SanlabError(
            f"sanlab compiles siw for a Debian kernel from its {' and '.join(p for p, _ in found)} "
            f"(= {version}), and found no .deb of {' nor '.join(lacking)} beside the kernel or in "
            f"{debs_dir()}, nor in apt: put them there (apt-get download {wanted}), {rebuild}"
        )
    return SiwPlan(kernel, release, version, arch, source, tuple(found))


def _kernel_fields(deb: Path) -> dict[str, str]:
    return deb_fields(deb, "Version", "Architecture", "Built-Using")


def depends(field: str) -> list[tuple[str, str]]:
    """A Depends field as (package, pinned version or ''), the first of each alternative."""
    out = []
    for group in field.split(","):
        first = group.split("|")[0].strip()
        if not first:
            continue
        name, _, rest = first.partition(" ")
        pinned = re.match(r"^\(=\s*([^)\s]+)\)$", rest.strip())
        out.append((name.split(":")[0], pinned.group(1) if pinned else ""))
    return out
