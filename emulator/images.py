"""Guest images: built once from Debian packages, cached by their recipe's hash.

The recipe (vm-images/recipe.yaml plus the customize hook, init and agent)
is hashed; the image lives in ``<cache>/images/<hash>/`` as a kernel and an
uncompressed initramfs.  A build happens in a hidden sibling directory and
is renamed into place only when complete, so a failed or interrupted build
leaves nothing behind and a half image is never used.
"""

from __future__ import annotations

import datetime
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import BinaryIO, cast

from pydantic import BaseModel, ConfigDict, Field

from sanlab.emulator.cpio import tar_to_cpio
from sanlab.emulator.processes import pid_alive
from sanlab.scenarios.errors import SanlabError, ToolMissing
from sanlab.scenarios.hosts import Say
from sanlab.scenarios.reading import load_json, typed
from sanlab.scenarios.registry import DEFAULT_GUEST, GUESTS
from sanlab.scenarios.schema import KernelGuest
from sanlab.scenarios.writing import open_lock, open_stream, remove_listed, rename_into_place, write_file
from sanlab.scenarios.yamlfile import load_yaml

# What every guest's image is made of besides its own recipe (and the recipe it extends).
SHARED_FILES = ("customize.sh", "init", "agent.py", "siw-abortive-close.patch")
FORMAT = "1"  # bump when the packing below changes
# Never packed into the guest: the kernel image travels beside the cpio.
# Neither are what no guest process reads: perl (only tgt-admin, which sanlab
# does not use), udev's hardware database (no udev runs), package metadata.
_DROP_PREFIXES = (
    "boot/",
    "usr/src/",
    "usr/include/",
    "var/cache/",
    "var/log/",
    "var/lib/apt/",
    "var/lib/dpkg/",
    "usr/lib/apt/",
    "usr/share/doc/",
    "usr/share/man/",
    "usr/share/perl",
    "usr/lib/x86_64-linux-gnu/perl",
    "usr/lib/udev/hwdb",
    "etc/udev/hwdb",
    "usr/share/i18n/",
    "usr/share/common-licenses/",
)


@dataclass(frozen=True)
class Image:
    key: str
    path: Path

    @property
    def kernel(self) -> Path:
        return self.path / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.path / "rootfs.cpio"

    @property
    def manifest(self) -> dict[str, object]:
        """The image's manifest.json, read through the one reader and typed (a planted
        ``initrd_bytes: "abc"`` or a list is one line naming the file and field)."""
        path = self.path / "manifest.json"
        document = typed(_ImageManifest, load_json(path, "image manifest", 1 << 16), f"image manifest {path}")
        return dict(document.model_dump())


class _ImageManifest(BaseModel):
    """What build_image writes in an image's manifest.json."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    key: str = Field(pattern=r"^[0-9a-f]{4,64}$")
    guest: str = DEFAULT_GUEST
    kernel: str = ""
    release: str = ""
    built: str = ""
    build_seconds: float = Field(0.0, ge=0, le=1e6)
    initrd_bytes: int = Field(0, ge=0, le=1 << 40)


def recipe_dir() -> Path:
    return Path(str(resources.files("sanlab.vm_images")))


# Boots this guest whatever a scenario says: how a test suite is run on another guest
# (benchmarks/debian13_vm_tests.py).
GUEST_OVERRIDE = "SANLAB_GUEST"


def guest_of(scenario_guest: str | KernelGuest) -> str:
    """The guest a lab boots: the scenario's (the user space of one that brings its own
    kernel), unless $SANLAB_GUEST names another."""
    named = scenario_guest.base if isinstance(scenario_guest, KernelGuest) else scenario_guest
    chosen = os.environ.get(GUEST_OVERRIDE) or named
    if chosen not in GUESTS:
        raise SanlabError(f"${GUEST_OVERRIDE}={chosen!r} is not a guest (guests: {', '.join(GUESTS)})")
    return chosen


def _recipe_files(guest: str) -> list[str]:
    """The guest's recipe, then the recipe it extends (if any)."""
    own = GUESTS[guest].recipe
    base = _load(own).get("extends")
    return [own, str(base)] if base else [own]


def _load(name: str) -> dict[str, object]:
    data = load_yaml(recipe_dir() / name)
    if not isinstance(data, dict):
        raise SanlabError(f"{recipe_dir() / name}: not a mapping")
    return data


def recipe(guest: str = DEFAULT_GUEST) -> dict[str, object]:
    """The guest's recipe, merged onto the one it ``extends``: its own keys replace the
    base's, and ``packages_add``/``modules_add`` extend the base's lists."""
    own = _load(GUESTS[guest].recipe)
    base = own.pop("extends", None)
    if base is None:
        return own
    merged = _load(str(base))
    for key in ("packages", "modules"):
        added = own.pop(f"{key}_add", [])
        merged[key] = list(merged[key]) + list(added)  # type: ignore[call-overload]
    return merged | own


def image_key(guest: str = DEFAULT_GUEST) -> str:
    digest = hashlib.sha256(FORMAT.encode())
    for name in (*_recipe_files(guest), *SHARED_FILES):
        digest.update(name.encode() + b"\0" + (recipe_dir() / name).read_bytes())
    return digest.hexdigest()[:16]


def cache_root() -> Path:
    """$SANLAB_CACHE, else $XDG_CACHE_HOME/sanlab, else ~/.cache/sanlab."""
    if os.environ.get("SANLAB_CACHE"):
        return Path(os.environ["SANLAB_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sanlab"


def images_dir() -> Path:
    return cache_root() / "images"


def current_image(guest: str = DEFAULT_GUEST) -> Image | None:
    """The image for the guest's current recipe, if it has been built."""
    image = Image(image_key(guest), images_dir() / image_key(guest))
    return image if (image.path / "manifest.json").is_file() else None


def require_image(guest: str = DEFAULT_GUEST) -> Image:
    image = current_image(guest)
    if image is None:
        build = "sanlab images build" + ("" if guest == DEFAULT_GUEST else f" --guest {guest}")
        raise SanlabError(
            f"no {guest} guest image for the current recipe (key {image_key(guest)}): run '{build}'"
        )
    return image


BUILD_LOCK = ".build.lock"  # held while one sanlab builds; never removed by clean


def current_keys() -> set[str]:
    """The image key of every guest's current recipe."""
    return {image_key(guest) for guest in GUESTS}


def list_images() -> list[tuple[Image, bool]]:
    """Every cached image and whether it matches a guest's current recipe."""
    if not images_dir().is_dir():
        return []
    current = current_keys()
    found = []
    for path in sorted(images_dir().iterdir()):
        if path.name.startswith(".") or not (path / "manifest.json").is_file():
            continue
        found.append((Image(path.name, path), path.name in current))
    return found


# What a build writes in an image's folder: all that 'images clean' ever removes there.
IMAGE_FILES = ("manifest.json", "vmlinuz", "rootfs.cpio", "rootfs.tar", "modules.list", "mmdebstrap.log")
BUILD_MARK = ".sanlab-build"  # written first into a build's folder: the building PID


def clean_images(everything: bool = False, note: Say = lambda line: None) -> list[Path]:
    """Remove stale images (all of them with ``everything``) and dead builds: only folders an
    image manifest (or a build's mark) says are sanlab's, and in them only the files a build
    writes.  Anything else under ``images/`` -- a user's folder, a link -- stays, with a note."""
    removed: list[Path] = []
    if not images_dir().is_dir():
        return removed
    current = current_keys()
    for path in sorted(images_dir().iterdir()):
        if path.name == BUILD_LOCK or path.is_symlink() or not path.is_dir():
            continue
        whose = _whose(path)
        if whose == "":
            continue  # a build under way
        if whose is None:
            note(f"kept {path}: no sanlab image manifest in it, so it is not sanlab's")
            continue
        if whose == "build" or everything or path.name not in current:
            left = _remove_ours(path)
            if left:
                note(f"kept {path}: it holds files sanlab did not write ({', '.join(left[:3])})")
            else:
                removed.append(path)
    return removed


def _whose(path: Path) -> str | None:
    """'image' for a folder whose manifest names it as sanlab's image, 'build' for a dead build's
    folder (its mark names a PID that is gone), '' for a live build, None for anything else."""
    mark = path / BUILD_MARK
    if path.name.startswith(".build-") and mark.is_file() and not mark.is_symlink():
        return "" if _pid_alive(path.name) else "build"
    return "image" if own_manifest(path, "image manifest", 1 << 16) is not None else None


def own_manifest(folder: Path, what: str, limit: int) -> dict[str, object] | None:
    """The manifest.json sanlab wrote in ``folder``: a regular file (never a link) whose ``key``
    is the folder's name; None for anything else, which is then not sanlab's."""
    manifest = folder / "manifest.json"
    if manifest.is_symlink() or not manifest.is_file():
        return None
    try:
        document = load_json(manifest, what, limit)
    except SanlabError:
        return None
    return document if isinstance(document, dict) and document.get("key") == folder.name else None


def _remove_ours(path: Path) -> list[str]:
    """Unlink the files a build writes in ``path`` (a link is never followed), then the folder
    if nothing else is left; returns the names of what is left."""
    return remove_listed(path, (*IMAGE_FILES, BUILD_MARK))


def _pid_alive(build_dir_name: str) -> bool:
    """Whether the build named ``...-PID`` may still be writing: its PID runs and is no zombie
    (``kill(pid, 0)`` answers for a zombie too, which kept a dead build's folder forever)."""
    try:
        pid = int(build_dir_name.rsplit("-", 1)[1])
    except (ValueError, IndexError):
        return False
    return pid > 0 and pid_alive(pid)


# What booting VMs needs on this machine, by command, and the Debian package that has it.
VM_TOOLS = {"qemu-system-x86_64": "qemu-system-x86"}
BUILD_TOOLS = {"mmdebstrap": "mmdebstrap"}
# A cold build on a 2-core machine: mmdebstrap's downloads, the kernel modules, the initramfs.
BUILD_MINUTES = "2-5"


def missing_packages(building: bool) -> list[str]:
    """The Debian packages whose commands booting VMs (and building the image) needs and lacks."""
    tools = VM_TOOLS | (BUILD_TOOLS if building else {})
    return sorted({package for command, package in tools.items() if shutil.which(command) is None})


def ready_image(progress: Say, guest: str = DEFAULT_GUEST) -> Image:
    """The guest image, built first if this machine has none: what 'lab up' and 'run' boot.

    Every missing system package is named at once, in the one apt-get line
    that installs them, before anything is downloaded or booted.
    """
    existing = current_image(guest)
    missing = missing_packages(building=existing is None)
    if missing:
        sudo = "" if os.geteuid() == 0 else "sudo "
        raise SanlabError(
            f"booting VMs needs {', '.join(missing)}: run '{sudo}apt-get update && "
            f"{sudo}apt-get install -y {' '.join(missing)}' (or 'bash tests/bootstrap test', which does)"
        )
    if existing:
        return existing
    progress(
        f"no {guest} guest image on this machine yet: building it now (about {BUILD_MINUTES} minutes "
        "the first time; every later run reuses it)"
    )
    return build_image(progress, guest=guest)


@contextmanager
def _one_builder(progress: Say) -> Iterator[None]:
    """One build at a time on this machine: a second sanlab (another lab up, a parallel test)
    waits for the first and then finds its image, instead of building it again and replacing
    the image under the first one's booting guests."""
    fd = open_lock(images_dir() / BUILD_LOCK, "image build lock")  # O_NOFOLLOW, never truncated
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress("another sanlab is building the guest image; waiting for it to finish")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def build_image(progress: Say = lambda line: None, force: bool = False, guest: str = DEFAULT_GUEST) -> Image:
    """Build the guest's image for its current recipe (or return the cached one)."""
    with _one_builder(progress):
        existing = current_image(guest)
        if existing and not force:
            progress(f"image {existing.key} is up to date at {existing.path}")
            return existing
        return _build(progress, guest)


@contextmanager
def building(key: str) -> Iterator[Path]:
    """A hidden build folder for image ``key``, marked with this PID; renamed into place as
    ``images/<key>`` when the body ends well, removed whole when it does not (so a failed or
    interrupted build leaves nothing, and a half image is never used)."""
    images_dir().mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".build-{key}-{os.getpid()}-", dir=images_dir()))
    write_file(work / BUILD_MARK, f"{os.getpid()}\n", exists="refuse")
    work = rename_into_place(work, images_dir() / f".build-{key}-{os.getpid()}", "an image build")
    try:
        yield work
        (work / BUILD_MARK).unlink()
        final = images_dir() / key
        if (final.exists() or final.is_symlink()) and (_whose(final) != "image" or _remove_ours(final)):
            raise SanlabError(f"{final}: is in the way of the new image and not only sanlab's; move it away")
        rename_into_place(work, final, "the new image")
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


# mmdebstrap's smallest chroot without documentation: the guest image's and siw's build alike.
SLIM_CHROOT = (
    "mmdebstrap",
    "--variant=minbase",
    "--dpkgopt=path-exclude=/usr/share/doc/*",
    "--dpkgopt=path-exclude=/usr/share/man/*",
    "--dpkgopt=path-exclude=/usr/share/locale/*",
)


def _build(progress: Say, guest: str) -> Image:
    if shutil.which("mmdebstrap") is None:
        raise ToolMissing("mmdebstrap", "install it with: apt-get install mmdebstrap")
    key = image_key(guest)
    started = time.monotonic()
    with building(key) as work:
        tar_path = work / "rootfs.tar"
        spec = recipe(guest)
        _mmdebstrap(spec, tar_path, work, progress)
        progress("packing the root file system into an initramfs")
        kernel_version = _pack(tar_path, work)
        tar_path.unlink()
        manifest = {
            "key": key,
            "guest": guest,
            "kernel": kernel_version,
            "release": spec["release"],
            "built": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "build_seconds": round(time.monotonic() - started, 1),
            "initrd_bytes": (work / "rootfs.cpio").stat().st_size,
        }
        write_file(work / "manifest.json", json.dumps(manifest, indent=2) + "\n", exists="refuse")
    final = images_dir() / key
    progress(f"built image {key} in {manifest['build_seconds']} s at {final}")
    return Image(key, final)


def _mmdebstrap(spec: dict[str, object], tar_path: Path, work: Path, progress: Say) -> None:
    packages = list(spec["packages"])  # type: ignore[call-overload]
    build_packages = " ".join(spec["build_packages"])  # type: ignore[arg-type]
    modules = work / "modules.list"
    write_file(modules, "\n".join(spec["modules"]) + "\n", exists="refuse")  # type: ignore[arg-type]
    hook = recipe_dir() / "customize.sh"
    command = [
        *SLIM_CHROOT,
        "--include=" + ",".join(packages),
        f'--customize-hook=sh "{hook}" "$1" "{modules}" "{build_packages}" "{spec["kernel_source"]}"',
        str(spec["release"]),
        str(tar_path),
        str(spec["mirror"]),
    ]
    progress("running mmdebstrap (downloads and unpacks Debian packages; a few minutes)")
    log = work / "mmdebstrap.log"
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        try:
            with open_stream(log, "new") as handle:
                for line in proc.stdout:
                    handle.write(line)
                    if line.startswith(("I: ", "sanlab:", "E: ", "W: ")):
                        progress(line.rstrip())
        except BaseException:  # interrupted: mmdebstrap is ours, and it cleans up on SIGTERM
            proc.terminate()
            proc.wait()
            raise
        if proc.wait() != 0:
            tail = "".join(log.read_text().splitlines(keepends=True)[-25:])
            raise SanlabError(f"mmdebstrap failed (exit {proc.returncode}); last lines:\n{tail}")


def _pack(tar_path: Path, work: Path) -> str:
    """Write rootfs.cpio from the tar, set the kernel image aside; return its version."""
    kernel: dict[str, bytes] = {}

    def keep(path: str) -> bool:
        return path.startswith("boot/vmlinuz-") or path == "boot" or not path.startswith(_DROP_PREFIXES)

    def take(path: str, data: bytes) -> bool:
        if path.startswith("boot/vmlinuz-"):
            kernel[path.removeprefix("boot/vmlinuz-")] = data
            return True
        return False

    with tarfile.open(tar_path) as tar, open_stream(work / "rootfs.cpio", "new", binary=True) as out:
        tar_to_cpio(tar, cast(BinaryIO, out), keep, take)
    if len(kernel) != 1:
        raise SanlabError(f"expected one kernel in the guest, found {sorted(kernel) or 'none'}")
    ((version, data),) = kernel.items()
    write_file(work / "vmlinuz", data, exists="refuse")
    return version
