"""The guest image of a kernel the user brings: the base guest's user space, their kernel.

The base guest's image (vm-images/, built as usual) is the starting point: its initramfs
is copied entry by entry, without its Debian kernel's modules, and the brought kernel's
modules are added -- only those the recipe lists and what they depend on (read from each
module's own ``depends=`` and ``softdep=``), with ``depmod`` run on that pruned copy.  So
the user space is byte for byte the base guest's, init and agent included, and a build
takes seconds, not an mmdebstrap.  rxe comes with the kernel's modules when it is built
(CONFIG_RDMA_RXE); so does siw (CONFIG_RDMA_SIW), without the abortive-close patch of
sanlab's own siw.ko (vm-images/README.md).  Debian never builds siw: for a Debian kernel .deb
without it, when the scenario needs siw, siw.ko is compiled from the kernel's own headers and
source with the patch, as for sanlab's own guests (emulator/siw_compile.py), and added as
``updates/siw.ko``; a kernel for which that cannot be done is refused before boot.

The image's key is the base image's key with the kernel's digest (kernels.kernel_digest),
and the compiled siw's build key when it has one.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import lzma
import os
import re
import shutil
import subprocess
import tempfile
import time
import zlib
from pathlib import Path
from typing import IO, BinaryIO, cast

from sanlab.emulator import kernels, siw_compile
from sanlab.emulator.cpio import CpioWriter, read_cpio
from sanlab.emulator.images import (
    Image,
    _one_builder,
    building,
    guest_of,
    images_dir,
    ready_image,
    recipe,
    require_image,
)
from sanlab.emulator.kernels import KernelSource
from sanlab.emulator.siw_debs import SiwPlan
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.files import open_regular, read_bounded
from sanlab.scenarios.hosts import Say
from sanlab.scenarios.schema import Scenario
from sanlab.scenarios.writing import open_stream, write_file

FORMAT = "1"  # bump when what a derived image holds changes
MODULES_PREFIX = "usr/lib/modules/"  # where the base guests (merged /usr) keep modules
VERSION_FILE = "usr/lib/sanlab/kernel-version"  # what customize.sh writes: the guest's kernel
MODULE_INDEXES = ("modules.order", "modules.builtin", "modules.builtin.modinfo")
DEPMOD_TIMEOUT_S = 120.0
KERNEL_IMAGE_BYTES = 256 << 20  # a bzImage is about 10 MB
MODULE_BYTES = 64 << 20  # the largest module (amdgpu) is about 30 MB, uncompressed
INDEX_BYTES = 16 << 20  # modules.order and its kin are kilobytes
UNPACKED_BYTES = 4 << 30  # a kernel's image and modules as a .deb holds them: about 500 MB


def ready_scenario_image(scenario: Scenario, progress: Say) -> Image:
    """The image the scenario's VMs boot, built first if needed: the guest's own, or the base
    guest's with the kernel the scenario brings (checked before anything is built)."""
    base = guest_of(scenario.guest)
    if scenario.kernel is None:
        return ready_image(progress, base)
    source = kernels.kernel_source(scenario.kernel)
    config = kernels.check_kernel(scenario, source)
    return derive(ready_image(progress, base), base, source, progress, config.siw)


def require_scenario_image(scenario: Scenario, progress: Say = lambda line: None) -> Image:
    """The scenario's image: its guest's, which must have been built (``sanlab images build``),
    or that one with the kernel the scenario brings, derived from it now if it is not yet (in
    seconds, after the kernel's check; minutes the first time siw is compiled for the kernel)."""
    base_guest = guest_of(scenario.guest)
    base = require_image(base_guest)
    if scenario.kernel is None:
        return base
    source = kernels.kernel_source(scenario.kernel)
    config = kernels.check_kernel(scenario, source)
    return derive(base, base_guest, source, progress, config.siw)


def derived_key(base_key: str, digest: str, siw_key: str = "") -> str:
    """The derived image's key; a compiled siw adds its build key (an image without one keeps
    the key it had before siw could be compiled)."""
    siw = f"\0siw/{siw_key}" if siw_key else ""
    return hashlib.sha256(f"kernel-image/{FORMAT}\0{base_key}\0{digest}{siw}".encode()).hexdigest()[:16]


def _image(base: Image, digest: str, siw_key: str = "") -> Image:
    key = derived_key(base.key, digest, siw_key)
    return Image(key, images_dir() / key)


def derive(base: Image, guest: str, source: KernelSource, progress: Say, siw: SiwPlan | None = None) -> Image:
    """The base image (of ``guest``) with ``source``'s kernel in place of its own, keeping the
    modules ``guest``'s recipe lists, and siw compiled for it when ``siw`` says; cached by all."""
    digest = kernels.kernel_digest(source)
    siw_key = siw_compile.build_key(digest, guest) if siw else ""
    image = _image(base, digest, siw_key)
    if (image.path / "manifest.json").is_file():
        return image
    with _one_builder(progress):
        if (image.path / "manifest.json").is_file():
            return image
        compiled = siw_compile.compiled_siw(siw, digest, guest, progress)[0] if siw else None
        started = time.monotonic()
        progress(f"building a guest image with the kernel {source.path} on image {base.key}")
        with building(image.key) as work, tempfile.TemporaryDirectory(prefix="sanlab-kernel-") as scratch:
            version, vmlinuz, modules = _unpacked(source, Path(scratch) / "unpacked")
            if compiled is not None:  # the .deb's modules, unpacked into our scratch: never a tree's
                if source.kind != "deb":
                    raise SanlabError(f"kernel {source.path}: siw is compiled only for a kernel .deb")
                siw_bytes = read_bounded(compiled, MODULE_BYTES, "compiled siw.ko")
                write_file(modules / "updates" / "siw.ko", siw_bytes, exists="refuse")
            wanted = [str(m) for m in recipe(guest)["modules"]]  # type: ignore[attr-defined]
            kept, absent = keep_modules(modules, wanted)
            pruned = Path(scratch) / "pruned"
            _prune(modules, kept, pruned / "lib" / "modules" / version)
            _depmod(pruned, version)
            kernel_bytes = read_bounded(vmlinuz, KERNEL_IMAGE_BYTES, "kernel image")
            write_file(work / "vmlinuz", kernel_bytes, exists="refuse")
            _repack(base.initrd, pruned / "lib" / "modules" / version, version, work / "rootfs.cpio")
            manifest = {
                "guest": guest,
                "release": base.manifest.get("release", ""),
                "key": image.key,
                "kernel": version,
                "kernel_from": str(source.path),
                "kernel_sha256": digest if source.kind == "deb" else "",
                "base_image": base.key,
                "modules_kept": len(kept),
                "modules_absent": absent,
                "siw_compiled": siw_key,
                "built": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "build_seconds": round(time.monotonic() - started, 1),
                "initrd_bytes": (work / "rootfs.cpio").stat().st_size,
            }
            write_file(work / "manifest.json", json.dumps(manifest, indent=2) + "\n", exists="refuse")
    progress(
        f"built image {image.key} (kernel {version}, {len(kept)} modules; not in it: "
        f"{', '.join(absent) or 'none'}) in {manifest['build_seconds']} s"
    )
    return image


def _unpacked(source: KernelSource, into: Path) -> tuple[str, Path, Path]:
    """The kernel's release, image and modules folder: a tree's own (read in place), or a
    .deb's, unpacked into ``into`` (regular files only, under boot/ and lib/modules/)."""
    if source.kind == "tree":
        modules = kernels.tree_modules(source)
        return modules.name, kernels.tree_file(source, kernels.TREE_KERNELS, "kernel image"), modules
    images: dict[str, Path] = {}
    unpacked = 0
    with kernels.deb_members(source) as members:
        for member, data in members:
            name = member.name.removeprefix("usr/")
            parts = name.split("/")
            if data is None or ".." in parts or "" in parts or "." in parts:
                continue
            unpacked += member.size
            if unpacked > UNPACKED_BYTES:
                raise SanlabError(
                    f"{source.path}: unpacks to over {UNPACKED_BYTES >> 30} GiB; not a kernel package"
                )
            if name.startswith("boot/vmlinuz-"):
                images[name.removeprefix("boot/vmlinuz-")] = _copy_out(data, into / "vmlinuz")
            elif name.startswith("lib/modules/") and len(parts) > 3:
                _copy_out(data, into / "modules" / "/".join(parts[2:]))
    folders = sorted(p.name for p in (into / "modules").iterdir()) if (into / "modules").is_dir() else []
    if len(images) != 1 or folders != list(images):
        raise SanlabError(
            f"{source.path}: expected one /boot/vmlinuz-V and its /lib/modules/V, found kernels "
            f"{sorted(images) or 'none'} and modules {folders or 'none'}"
        )
    ((version, vmlinuz),) = images.items()
    return kernels.checked_release(version, source.path), vmlinuz, into / "modules" / version


def _copy_out(data: IO[bytes], path: Path) -> Path:
    with open_stream(path, "new", binary=True) as out:
        while chunk := data.read(1 << 20):
            out.write(chunk)
    return path


def module_name(path: Path) -> str:
    name = path.name
    for suffix in kernels.MODULE_SUFFIXES[::-1]:
        name = name.removesuffix(suffix)
    return name.replace("-", "_")


def _modinfo(path: Path) -> tuple[list[str], list[str]]:
    """A module's hard dependencies and soft ones, from its .modinfo strings."""
    raw = _module_bytes(path)
    depends = re.search(rb"(?:^|\0)depends=([^\0]*)\0", raw)
    hard = [d for d in (depends.group(1).decode(errors="replace").split(",") if depends else []) if d]
    soft = [
        w
        for m in re.finditer(rb"(?:^|\0)softdep=([^\0]*)\0", raw)
        for w in m.group(1).decode(errors="replace").split()
    ]
    return hard, [w for w in soft if not w.endswith(":")]


def _module_bytes(path: Path) -> bytes:
    """A module file's bytes, decompressed to at most MODULE_BYTES (a bomb is one line)."""
    raw = read_bounded(path, MODULE_BYTES, "kernel module")
    if not path.name.endswith((".xz", ".gz")):
        return raw
    unpack = lzma.LZMADecompressor() if path.name.endswith(".xz") else zlib.decompressobj(wbits=31)
    try:
        data = unpack.decompress(raw, MODULE_BYTES + 1)
    except (lzma.LZMAError, zlib.error) as exc:
        raise SanlabError(f"kernel module {path}: cannot decompress it ({exc})") from None
    if len(data) > MODULE_BYTES:
        raise SanlabError(f"kernel module {path}: decompresses to over {MODULE_BYTES >> 20} MiB")
    return data


def keep_modules(root: Path, wanted: list[str]) -> tuple[list[Path], list[str]]:
    """The module files the wanted modules need (themselves and their dependencies), and the
    wanted names the kernel has neither as a module nor built in."""
    index = {module_name(p): p for p in kernels.module_files(root)}
    builtin = root / "modules.builtin"
    text = read_bounded(builtin, INDEX_BYTES, "kernel module index") if builtin.is_file() else b""
    built_in = {module_name(Path(line)) for line in text.decode(errors="replace").split()}
    kept: dict[str, Path] = {}
    absent = []
    todo = [w.replace("-", "_") for w in wanted]
    while todo:
        name = todo.pop()
        if name in kept or name in built_in:
            continue
        if name not in index:
            if name in wanted:
                absent.append(name)
            continue
        kept[name] = index[name]
        hard, soft = _modinfo(index[name])
        todo.extend(d.replace("-", "_") for d in hard + [s for s in soft if s.replace("-", "_") in index])
    return sorted(kept.values()), sorted(absent)


def _prune(root: Path, kept: list[Path], into: Path) -> None:
    for path in kept:
        write_file(
            into / path.relative_to(root), read_bounded(path, MODULE_BYTES, "kernel module"), exists="refuse"
        )
    for name in MODULE_INDEXES:
        if (root / name).is_file():
            index = read_bounded(root / name, INDEX_BYTES, "kernel module index")
            write_file(into / name, index, exists="refuse")


def _depmod(base: Path, version: str) -> None:
    """depmod's indexes for the pruned modules (our copy, never the user's tree)."""
    if shutil.which("depmod") is None:
        raise SanlabError("a guest image with your kernel needs depmod: apt-get install kmod")
    done = subprocess.run(
        ["depmod", "-b", str(base), "--", version],
        capture_output=True,
        text=True,
        timeout=DEPMOD_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise SanlabError(f"depmod failed for kernel {version}: {done.stderr.strip()[-500:]}")


def _repack(initrd: Path, modules: Path, version: str, out: Path) -> None:
    """The base initramfs without its kernel's modules, with these and the new kernel-version."""
    with open_regular(initrd, "base image") as source, open_stream(out, "new", binary=True) as sink:
        writer = CpioWriter(cast(BinaryIO, sink))
        for name, mode, uid, gid, mtime, data in read_cpio(source):
            if not (name.startswith(MODULES_PREFIX) or name == VERSION_FILE):
                writer.add(name, mode, uid, gid, mtime, data)
        now = int(time.time())
        writer.add(MODULES_PREFIX.rstrip("/"), 0o40755, 0, 0, now)
        for folder, dirs, files in os.walk(modules):
            here = Path(folder)
            name = MODULES_PREFIX + version + "/" + str(here.relative_to(modules))
            writer.add(name.removesuffix("/."), 0o40755, 0, 0, now)
            for file in sorted(files):
                data = read_bounded(here / file, MODULE_BYTES, "pruned module")
                writer.add(f"{name.removesuffix('/.')}/{file}", 0o100644, 0, 0, now, data)
            dirs.sort()
        writer.add(VERSION_FILE, 0o100644, 0, 0, now, f"{version}\n".encode())
        writer.close()
