"""Tools a run needs in a guest that the image does not carry, brought as Debian's own .debs.

blktests' ``check`` wants GNU awk (``gawk``) and util-linux's ``column`` (Debian's
``bsdextrautils``), and its srp group ``killall`` (``psmisc``), which the guest image
(vm-images/recipe.yaml) does not hold.  Adding them
to the recipe would change the image's key, and with it every guest's image and snapshot, so a
run that needs them brings them instead: Debian's packages for the guest's release, fetched
once with ``apt-get download`` into sanlab's cache (``~/.cache/sanlab/debs/RELEASE``) when this
machine runs that release, or put there by hand.  Only the programs asked for and the shared
libraries beside them are unpacked (the guest has no dpkg database: its image is pruned), packed
as a tar the guest unpacks over ``/`` without replacing any file it has.
"""

from __future__ import annotations

import io
import re
import subprocess
import tarfile
from pathlib import Path, PurePosixPath

from sanlab.emulator import kernels
from sanlab.emulator.images import cache_root
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.files import read_bounded
from sanlab.scenarios.hosts import Say

# Per release: the packages, and the programs of theirs a blktests run uses.
PACKAGES = {"bookworm": ("gawk", "libsigsegv2", "libmpfr6", "bsdextrautils", "psmisc")}
# killall: blktests' srp teardown stops multipathd with it; without it the next srp test finds
# multipathd running and the group says 'not run'.
PROGRAMS = ("usr/bin/gawk", "usr/bin/column", "usr/bin/killall")
LIBRARIES = "usr/lib/x86_64-linux-gnu/"
_LIBRARY = re.compile(r"lib[A-Za-z0-9_+-]+\.so(\.[0-9]+)*")
DOWNLOAD_TIMEOUT_S = 300.0
TOOLS_BYTES = 32 << 20  # gawk, column and two libraries: about 2 MB


def debs_dir(release: str) -> Path:
    return cache_root() / "debs" / release


def _host_release() -> str:
    try:
        text = read_bounded(Path("/etc/os-release"), 1 << 16, "os-release").decode(errors="replace")
    except SanlabError:
        return ""
    found = re.search(r"^VERSION_CODENAME=\"?([a-z]+)\"?$", text, re.MULTILINE)
    return found.group(1) if found else ""


def _found(release: str, packages: tuple[str, ...]) -> dict[str, Path]:
    folder = debs_dir(release)
    debs = sorted(folder.glob("*.deb")) if folder.is_dir() else []
    return {p: d for p in packages for d in debs if d.name.startswith(f"{p}_") and not d.is_symlink()}


def ready_debs(release: str, say: Say, packages: tuple[str, ...] = ()) -> list[Path]:
    """The release's .debs (its tools, or ``packages``), downloaded first when missing and this
    machine runs that release; otherwise one line naming the packages and the folder for them."""
    if release not in PACKAGES:
        raise SanlabError(
            f"no tool packages are known for Debian {release[:20]!r} (known: {', '.join(PACKAGES)})"
        )
    packages = packages or PACKAGES[release]
    found = _found(release, packages)
    missing = [p for p in packages if p not in found]
    if missing and _host_release() == release:
        folder = debs_dir(release)
        folder.mkdir(parents=True, exist_ok=True)
        say(f"fetching {', '.join(missing)} for the {release} guest (apt-get download, into {folder})")
        try:
            done = subprocess.run(
                ["apt-get", "download", *missing],
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=DOWNLOAD_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SanlabError(f"apt-get download {' '.join(missing)}: {exc}") from None
        if done.returncode != 0:
            said = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise SanlabError(f"apt-get download {' '.join(missing)} failed: {said}")
        found = _found(release, packages)
        missing = [p for p in packages if p not in found]
    if missing:
        raise SanlabError(
            f"the {release} guest needs {', '.join(missing)}: put their .debs in {debs_dir(release)} "
            f"(apt-get download {' '.join(missing)}, on a Debian {release} machine)"
        )
    return [found[p] for p in packages]


def tools_tar(debs: list[Path]) -> bytes:
    """The programs and the libraries beside them, from ``debs``, as one tar to unpack over /."""
    buffer, total = io.BytesIO(), 0
    with tarfile.open(fileobj=buffer, mode="w") as out:
        for deb in debs:
            with kernels.deb_members(kernels.KernelSource(str(deb), deb, "deb")) as members:
                for member, data in members:
                    name = member.name
                    library = name.startswith(LIBRARIES) and _LIBRARY.fullmatch(PurePosixPath(name).name)
                    if name not in PROGRAMS and not (library and name.count("/") == 3):
                        continue
                    if member.issym() and _LIBRARY.fullmatch(member.linkname):
                        out.addfile(member)
                    elif data is not None:
                        total += member.size
                        if total > TOOLS_BYTES:
                            raise SanlabError(
                                f"{deb}: its tools are over {TOOLS_BYTES >> 20} MiB; not the package?"
                            )
                        member.uid = member.gid = 0
                        out.addfile(member, data)
    return buffer.getvalue()


_KERNEL = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+-[0-9]+-amd64")  # a Debian kernel's uname -r


def kernel_config(release: str, version: str, say: Say) -> bytes:
    """The build configuration of Debian's kernel ``version`` (``/boot/config-VERSION``, which
    the guest image leaves out and blktests reads to skip tests whose options are not built),
    from its linux-image .deb."""
    if not _KERNEL.fullmatch(version):
        raise SanlabError(f"kernel {version[:40]!r} is not a Debian kernel release (like 6.1.0-50-amd64)")
    (deb,) = ready_debs(release, say, (f"linux-image-{version}",))
    with kernels.deb_members(kernels.KernelSource(str(deb), deb, "deb")) as members:
        for member, data in members:
            if member.name == f"boot/config-{version}" and data is not None:
                return data.read(kernels.CONFIG_BYTES)
    raise SanlabError(f"{deb}: holds no boot/config-{version}")
