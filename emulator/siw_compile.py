"""siw.ko for a brought Debian kernel, compiled the way sanlab's own guests' is.

vm-images/customize.sh compiles siw for sanlab's own images from ``linux-source`` against
the matching ``linux-headers``, with vm-images/siw-abortive-close.patch.  This does the same
for a kernel .deb the user brings (emulator/siw_debs.py decides when, and from which packages).

Where it builds: in a throwaway chroot that mmdebstrap makes of the base guest's release
(its recipe's release and mirror; written to /dev/null), not on the host.  Debian's
``linux-headers-R`` only work installed at their place -- their Makefile includes the
``-common`` package's by absolute path, ``scripts`` links into ``/usr/lib/linux-kbuild-*``
-- and they name the compiler the kernel was built with (gcc-12 for bookworm's backports);
installing them into the user's system is not sanlab's to do, and the host's compiler may
not be the kernel's.  In the chroot the headers, ``-common`` and ``linux-kbuild`` .debs are
unpacked, not installed (the headers Depend on the kernel image, which a compile does not
need), by tar with ``--keep-directory-symlink`` (``dpkg-deb --extract`` replaced merged
/usr's ``/lib`` link with the headers' ``lib/modules`` folder, and no program ran after);
everything else they Depend on -- the compiler, libelf, libssl -- comes from the mirror.
siw's folder alone is read out of the kernel's own ``linux-source`` here (regular files
with plain names, bounded), patched and built there with ``make M=...``, then stripped.

The module is checked (its vermagic names the kernel's release; its parameters include the
patch's ``abortive_close``) and cached in ``<cache>/siw/<key>/`` (``siw.ko``,
``manifest.json``, ``build.log``), the key being the kernel's SHA-256, the patch, this
build's script and the chroot's release and mirror; the .debs fetched stay in
``<cache>/siw/debs/``.  Every value reaches the hook as one shlex-quoted word.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

from sanlab.emulator import siw_debs
from sanlab.emulator.images import SLIM_CHROOT, cache_root, recipe, recipe_dir
from sanlab.emulator.kernels import KernelSource, deb_members
from sanlab.emulator.panics import read_tail
from sanlab.emulator.siw_debs import SiwPlan
from sanlab.scenarios.errors import SanlabError, ToolMissing
from sanlab.scenarios.files import open_regular, read_bounded
from sanlab.scenarios.hosts import Say
from sanlab.scenarios.writing import copy_file, open_stream, rename_into_place, write_file

FORMAT = "1"  # bump when what the build does changes
PATCH = "siw-abortive-close.patch"
SIW_DIR = "drivers/infiniband/sw/siw"
BUILD_PACKAGES = ("make", "libc6-dev", "patch", "binutils")
BUILD_TIMEOUT_S = 3600.0  # a chroot and one module: minutes on two busy cores
FETCH_TIMEOUT_S = 1800.0  # linux-source is about 150 MB
SOURCE_FILE_BYTES = 1 << 20  # siw's largest file (siw_qp_tx.c) is about 35 KB
SOURCE_FILES = 64
MODULE_BYTES = 64 << 20
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")

# Runs on the host as mmdebstrap's customize hook: $1 the chroot, $2 the kernel's release,
# $3 the folder holding src/, debs/ and siw.patch (and receiving siw.ko).
HOOK = r"""set -eu
root=$1 release=$2 work=$3
mkdir "$root/tmp/sanlab-siw"
cp -R "$work/src" "$work/debs" "$work/siw.patch" "$root/tmp/sanlab-siw/"
chroot "$root" sh -euc '
  cd /tmp/sanlab-siw
  for deb in debs/*.deb; do
    dpkg-deb --fsys-tarfile "$deb" | tar -x --keep-directory-symlink --no-same-owner -C /
  done
  patch -s -d src -p1 < siw.patch
  make -s -C "/usr/src/linux-headers-$1" M=/tmp/sanlab-siw/src/drivers/infiniband/sw/siw \
       CONFIG_RDMA_SIW=m modules
  strip --strip-debug src/drivers/infiniband/sw/siw/siw.ko
' sh "$release"
cp "$root/tmp/sanlab-siw/src/drivers/infiniband/sw/siw/siw.ko" "$work/siw.ko"
echo "sanlab: compiled siw.ko for $release"
"""


def siw_dir() -> Path:
    return cache_root() / "siw"


def failed_log(key: str) -> Path:
    """Where the log of a failed build is kept (the build's own folder is removed)."""
    return siw_dir() / f"failed-{key}.log"


def _patch() -> bytes:
    """The abortive-close patch sanlab's own siw.ko carries (vm-images/), read bounded."""
    return read_bounded(recipe_dir() / PATCH, 1 << 20, "siw patch")


def build_key(kernel_digest: str, guest: str) -> str:
    """What a compiled siw.ko is cached by: the kernel, the patch, this build, the chroot."""
    spec = recipe(guest)
    digest = hashlib.sha256(f"siw/{FORMAT}\0{kernel_digest}\0{spec['release']}\0{spec['mirror']}\0".encode())
    digest.update(HOOK.encode() + b"\0" + _patch())
    return digest.hexdigest()[:16]


def compiled_siw(plan: SiwPlan, kernel_digest: str, guest: str, progress: Say) -> tuple[Path, str]:
    """The kernel's siw.ko and its build key, compiled first when the cache has none (the
    caller holds the image build lock, so one sanlab compiles it at a time)."""
    key = build_key(kernel_digest, guest)
    final = siw_dir() / key
    if not final.is_symlink() and (final / "manifest.json").is_file() and (final / "siw.ko").is_file():
        return final / "siw.ko", key
    if final.is_symlink() or final.exists():  # a finished build is renamed in whole: not ours
        raise SanlabError(f"{final}: is in the way of a compiled siw.ko and not sanlab's; move it away")
    started = time.monotonic()
    progress(f"compiling siw.ko for kernel {plan.release} from {plan.source} (= {plan.version})")
    siw_dir().mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".build-{key}-", dir=siw_dir()))
    try:
        with tempfile.TemporaryDirectory(prefix="sanlab-siw-") as scratch:
            manifest = _build(plan, guest, Path(scratch), work, progress)
        manifest |= {"key": key, "kernel_sha256": kernel_digest}
        manifest["build_seconds"] = round(time.monotonic() - started, 1)
        write_file(work / "manifest.json", json.dumps(manifest, indent=2) + "\n", exists="refuse")
        rename_into_place(work, final, "the compiled siw.ko")
    except BaseException as exc:
        kept = (work / "build.log").is_file()
        if kept:  # for the reader of the error; replaced by the next failure
            copy_file(work / "build.log", failed_log(key), what="siw build log")
        shutil.rmtree(work, ignore_errors=True)
        if kept and isinstance(exc, SanlabError):
            raise SanlabError(f"{exc} (log: {failed_log(key)})") from None
        raise
    progress(f"compiled siw.ko for {plan.release} in {manifest['build_seconds']} s ({final})")
    return final / "siw.ko", key


def _build(plan: SiwPlan, guest: str, scratch: Path, out: Path, progress: Say) -> dict[str, object]:
    debs, includes = _packages(plan, progress)
    for deb in debs:
        copy_deb(deb, scratch / "debs" / deb.name)
    source = _fetched(plan.source, plan.version, plan.arch, plan, progress)
    count = extract_siw(source, plan.source, scratch / "src" / SIW_DIR)
    write_file(scratch / "siw.patch", _patch(), exists="refuse")
    write_file(scratch / "hook.sh", HOOK, exists="refuse")
    spec = recipe(guest)
    log = out / "build.log"
    _mmdebstrap(spec, [*BUILD_PACKAGES, *includes], scratch, plan.release, log, progress)
    module = read_bounded(scratch / "siw.ko", MODULE_BYTES, "compiled siw.ko")
    check_module(module, plan.release)
    write_file(out / "siw.ko", module, exists="refuse")
    return {
        "release": plan.release,
        "version": plan.version,
        "kernel_from": str(plan.kernel),
        "packages": {deb.name: _sha256(deb) for deb in [*debs, source]},
        "source_files": count,
        "patch": PATCH,
        "patch_sha256": hashlib.sha256(_patch()).hexdigest(),
        "chroot": f"{spec['release']} {spec['mirror']}",
        "chroot_packages": sorted({*BUILD_PACKAGES, *includes}),
        "built": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "siw_bytes": len(module),
    }


def _packages(plan: SiwPlan, progress: Say) -> tuple[list[Path], list[str]]:
    """The headers .deb and the linux-* .debs it Depends on (found or fetched), and every other
    package they Depend on (installed in the chroot from the mirror)."""
    debs: dict[str, Path] = {}
    includes: list[str] = []
    todo = [(plan.headers, plan.version)]
    while todo:
        package, version = todo.pop(0)
        if package in debs:
            continue
        deb = debs[package] = _fetched(package, version, plan.arch, plan, progress)
        for name, pinned in siw_debs.depends(siw_debs.deb_fields(deb, "Depends").get("Depends", "")):
            if name.startswith("linux-image-") or name == "linux-base":
                continue  # the kernel itself, and its install scripts: nothing a compiler reads
            if not re.match(r"^[a-z0-9][a-z0-9.+-]{1,127}$", name):
                raise SanlabError(f"{deb}: depends on {name[:60]!r}, which is not a package name")
            if name.startswith(("linux-headers-", "linux-kbuild-")):
                todo.append((name, pinned or plan.version))
            elif name not in includes:
                includes.append(name)
    return list(debs.values()), includes


def _fetched(package: str, version: str, arch: str, plan: SiwPlan, progress: Say) -> Path:
    """The package's .deb: beside the kernel, in the cache, or downloaded there by apt-get."""
    places = [plan.kernel.parent, siw_debs.debs_dir()]
    found = siw_debs.find_deb(package, version, arch, places)
    if found is not None:
        return found
    into = siw_debs.debs_dir()
    into.mkdir(parents=True, exist_ok=True)
    if into.is_symlink() or into.parent.is_symlink():
        raise SanlabError(f"{into}: is a link; sanlab downloads only into its own folder")
    if shutil.which("apt-get") is None:
        raise SanlabError(f"no .deb of {package} (= {version}) beside {plan.kernel} or in {into}")
    for each in (arch, "all"):  # apt-get would write through a link planted in its place
        planted = into / siw_debs.deb_file_name(package, version, each)
        if planted.is_symlink() or (planted.exists() and not planted.is_file()):
            raise SanlabError(f"{planted}: is in the way of apt-get download and not a .deb; move it away")
    progress(f"apt-get download {package}={version} (into {into})")
    done = subprocess.run(
        ["apt-get", "download", f"{package}={version}"],
        cwd=into,
        capture_output=True,
        text=True,
        timeout=FETCH_TIMEOUT_S,
        check=False,
    )
    found = siw_debs.find_deb(package, version, arch, [into])
    if done.returncode != 0 or found is None:
        said = (done.stderr.strip().splitlines() or ["no .deb written"])[-1]
        raise SanlabError(
            f"apt-get download {package}={version} failed ({said[:200]}): put its .deb beside "
            f"{plan.kernel} or in {into}"
        )
    return found


def copy_deb(deb: Path, to: Path) -> None:
    """A .deb copied in chunks (a link or a folder at ``to`` is refused, never followed)."""
    with open_regular(deb, "package") as source, open_stream(to, "new", binary=True) as sink:
        while chunk := source.read(1 << 20):
            sink.write(chunk)


def extract_siw(source_deb: Path, source: str, into: Path) -> int:
    """siw's files from the linux-source .deb's tarball: regular files with plain names
    directly in its folder, each bounded; nothing else is written."""
    prefix = f"{source}/{SIW_DIR}/"
    count = 0
    with deb_members(KernelSource(str(source_deb), source_deb, "deb")) as members:
        for member, data in members:
            if not (member.name.startswith(f"usr/src/{source}.tar") and data is not None):
                continue
            try:
                with tarfile.open(fileobj=data, mode="r|*") as tar:
                    for inner in tar:
                        name = inner.name.removeprefix("./")
                        if not name.startswith(prefix):
                            if count:
                                break  # a tarball keeps a folder's files together
                            continue
                        count += _one_source_file(tar, inner, name.removeprefix(prefix), into, source_deb)
            except (tarfile.TarError, EOFError, OSError) as exc:
                raise SanlabError(f"{source_deb}: cannot read its source tarball ({exc})") from None
            break
    if not count:
        raise SanlabError(f"{source_deb}: no {prefix} in its usr/src/{source}.tar.*")
    return count


def _one_source_file(tar: tarfile.TarFile, inner: tarfile.TarInfo, name: str, into: Path, deb: Path) -> int:
    if inner.isdir() and name == "":
        return 0
    if not (inner.isfile() and _NAME.match(name)):
        raise SanlabError(f"{deb}: {inner.name[:100]!r} in siw's folder is not a plain file")
    if inner.size > SOURCE_FILE_BYTES:
        raise SanlabError(f"{deb}: {inner.name[:100]} is over {SOURCE_FILE_BYTES >> 20} MiB")
    if len(list(into.iterdir()) if into.is_dir() else []) >= SOURCE_FILES:
        raise SanlabError(f"{deb}: over {SOURCE_FILES} files in siw's folder")
    data = tar.extractfile(inner)
    write_file(into / name, data.read(SOURCE_FILE_BYTES) if data else b"", exists="refuse")
    return 1


def check_module(module: bytes, release: str) -> None:
    """The compiled module is siw for this kernel, with the patch's parameter."""
    vermagic = re.search(rb"(?:^|\0)vermagic=([^\0]*)\0", module)
    said = vermagic.group(1).decode(errors="replace") if vermagic else "none"
    if not said.startswith(f"{release} "):
        raise SanlabError(f"the compiled siw.ko is for kernel {said[:80]!r}, not {release}")
    if b"\0name=siw\0" not in module or b"parm=abortive_close:" not in module:
        raise SanlabError("the compiled siw.ko lacks siw's name or the patch's abortive_close parameter")


def _mmdebstrap(
    spec: dict[str, object], packages: list[str], scratch: Path, release: str, log: Path, progress: Say
) -> None:
    if shutil.which("mmdebstrap") is None:
        raise ToolMissing("mmdebstrap", "install it with: apt-get install mmdebstrap")
    hook = hook_command(scratch, release)
    command = [
        *SLIM_CHROOT,
        "--include=" + ",".join(packages),
        f"--customize-hook={hook}",
        "--format=null",
        str(spec["release"]),
        "/dev/null",
        str(spec["mirror"]),
    ]
    progress(f"mmdebstrap: a {spec['release']} chroot with {', '.join(packages)} (a few minutes)")
    with open_stream(log, "new") as handle:
        try:
            done = subprocess.run(
                command, stdout=handle, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            raise SanlabError(f"compiling siw.ko took over {BUILD_TIMEOUT_S:.0f} s") from None
    if done.returncode != 0:
        tail = read_tail(log).splitlines()[-12:]
        raise SanlabError(f"compiling siw.ko failed (mmdebstrap exit {done.returncode}): " + " | ".join(tail))


def hook_command(scratch: Path, release: str) -> str:
    """The customize hook as mmdebstrap's shell reads it: our script with the chroot ("$1"),
    the release and the scratch folder, each one quoted word."""
    return shlex.join(["sh", str(scratch / "hook.sh")]) + ' "$1" ' + shlex.join([release, str(scratch)])


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open_regular(path, "package") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
