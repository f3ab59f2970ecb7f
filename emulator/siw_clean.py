"""What `sanlab images clean` removes of the siw modules sanlab compiled, and what it leaves.

A guest kernel without siw gets a siw.ko compiled for it (``siw_compile``), cached under
``<cache>/siw/KEY/`` with the Debian packages it was built from in ``<cache>/siw/debs/``.  An
image names the build it carries (its manifest's ``siw_compiled``); once no image left in the
cache names a build, the build and the packages only it was made from are stale.  As for
images: a folder is sanlab's only when its own manifest says so (its ``key`` is its name), only
the files a build writes are removed from it, a link is never followed, and a package is removed
only by a name a removed build's manifest gives, never a path.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from sanlab.emulator.images import Image, own_manifest
from sanlab.emulator.siw_compile import siw_dir
from sanlab.emulator.siw_debs import debs_dir
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.hosts import Say
from sanlab.scenarios.writing import remove_listed

# What a build writes in its folder (siw_compile.compiled_siw): all that is ever removed there.
BUILD_FILES = ("manifest.json", "siw.ko", "build.log")
# A package's file name as apt-get download gives it: a name, never a path.
DEB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+~%_-]*\.deb$")
FAILED_LOG = re.compile(r"^failed-([0-9a-f]{16})\.log$")
MANIFEST_BYTES = 1 << 16


def clean_siw(kept: Iterable[Image], note: Say = lambda line: None) -> list[Path]:
    """Remove every compiled siw no ``kept`` image names, its failed build's log, and the
    packages no kept build was made from; returns what went.  An image whose manifest cannot
    be read might name any build, so then nothing is removed."""
    root = siw_dir()
    if root.is_symlink() or not root.is_dir():
        return []
    used = set()
    for image in kept:
        try:
            compiled = image.manifest.get("siw_compiled")
        except SanlabError as exc:
            note(f"kept every compiled siw in {root}: {exc}")
            return []
        if compiled:
            used.add(str(compiled))
    removed: list[Path] = []
    kept_debs: set[str] = set()
    stale_debs: set[str] = set()
    for path in sorted(root.iterdir()):
        if path.name == "debs" or path.name.startswith(".") or path.is_symlink() or not path.is_dir():
            continue
        packages = _build_packages(path)
        if packages is None:
            note(f"kept {path}: no sanlab siw manifest in it, so it is not sanlab's")
        elif path.name in used:
            kept_debs |= packages
        else:
            stale_debs |= packages
            left = remove_listed(path, BUILD_FILES)
            if left:
                note(f"kept {path}: it holds files sanlab did not write ({', '.join(left[:3])})")
            else:
                removed.append(path)
    removed += _failed_logs(root, used)
    if any(entry.name.startswith(".build-") for entry in root.iterdir()):
        note(f"kept the packages in {debs_dir()}: a siw build is under way")
        return removed
    return removed + _debs(stale_debs - kept_debs)


def _build_packages(path: Path) -> set[str] | None:
    """The package files a build's manifest says it was made from; None where the folder is not
    a sanlab siw build (no manifest, or one naming another key)."""
    document = own_manifest(path, "siw build manifest", MANIFEST_BYTES)
    if document is None:
        return None
    packages = document.get("packages")
    if not isinstance(packages, dict):
        return set()
    return {str(name) for name in packages if DEB_NAME.match(str(name))}


def _failed_logs(root: Path, used: set[str]) -> list[Path]:
    """The logs of failed builds whose key no kept image names (a link is unlinked, never followed)."""
    out = []
    for entry in sorted(root.iterdir()):
        found = FAILED_LOG.match(entry.name)
        if found and found.group(1) not in used and (entry.is_symlink() or entry.is_file()):
            entry.unlink()
            out.append(entry)
    return out


def _debs(names: set[str]) -> list[Path]:
    """Unlink the named packages from the packages' folder, and the folder once empty."""
    folder = debs_dir()
    if folder.is_symlink() or not folder.is_dir():
        return []
    present = sorted(n for n in names if (folder / n).is_symlink() or (folder / n).is_file())
    if not present:
        return []
    left = remove_listed(folder, tuple(present))
    gone = [folder / name for name in present]
    return gone if left else [*gone, folder]
