"""A kernel the user brings (``guest: {kernel: FILE}``): checked, refused, keyed, derived.

Every kernel here is a real Debian package, made with ``dpkg-deb --build`` from a
few files: a config that lacks what the test wants missing, a vmlinuz of a few
bytes and modules whose ``.modinfo`` strings name their dependencies.  Nothing
boots (tests/test_own_kernel_vm.py boots Debian's backports kernel).
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sanlab.emulator import kernel_image, kernels
from sanlab.emulator.cpio import CpioWriter, read_cpio
from sanlab.emulator.images import Image
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.kernel_needs import kernel_needs
from sanlab.scenarios.loader import load_scenario, parse_scenario
from support import REPO, SCENARIOS, require_tool

pytestmark = pytest.mark.subprocess  # dpkg-deb builds and reads the packages
RELEASE = "6.99.0-fake"
SMOKE = SCENARIOS / "smoke.yaml"
# A few modules: nvme_tcp needs nvme_fabrics (which needs nvme_core); rdma_rxe needs ib_core
# and ib_uverbs; libcrc32c asks for crc32c first (a softdep).
MODULES = {
    "kernel/drivers/nvme/host/nvme-tcp.ko": "nvme-fabrics,nvme-core",
    "kernel/drivers/nvme/host/nvme-fabrics.ko": "nvme-core",
    "kernel/drivers/nvme/host/nvme-core.ko": "",
    "kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko": "ib_core,ib_uverbs",
    "kernel/drivers/infiniband/core/ib_core.ko": "",
    "kernel/drivers/infiniband/core/ib_uverbs.ko": "ib_core",
    "kernel/drivers/gpu/drm/unwanted.ko": "",
}


def _config(missing: set[str]) -> str:
    """A config with every option the smoke scenario (and TLS) needs, except ``missing``."""
    wanted = {n.option for n in kernel_needs(load_scenario(SMOKE))} | {
        "CONFIG_TLS",
        "CONFIG_NVME_TCP_TLS",
        "CONFIG_NVME_TARGET_TCP_TLS",
    }
    lines = ["# Linux/x86 6.99.0 Kernel Configuration", *(f"{o}=m" for o in sorted(wanted - missing))]
    return "\n".join([*lines, *(f"# {o} is not set" for o in sorted(missing))]) + "\n"


def make_deb(folder: Path, missing: set[str] = frozenset(), config: bool = True, stamp: bytes = b"") -> Path:
    """A linux-image .deb built by dpkg-deb from a few files."""
    require_tool("dpkg-deb")
    root = folder / "pkg"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: linux-image-{RELEASE}\nVersion: 1\nArchitecture: amd64\n"
        "Maintainer: sanlab tests <tests@example.org>\nDescription: a fake kernel\n"
    )
    (root / "boot").mkdir()
    (root / "boot" / f"vmlinuz-{RELEASE}").write_bytes(b"MZ fake bzImage " + stamp)
    if config:
        (root / "boot" / f"config-{RELEASE}").write_text(_config(set(missing)))
    base = root / "lib" / "modules" / RELEASE
    for path, depends in MODULES.items():
        (base / path).parent.mkdir(parents=True, exist_ok=True)
        softdep = b"softdep=pre: crc32c\0" if "nvme-core" in path else b""
        (base / path).write_bytes(b"\x7fELF fake\0" + softdep + f"depends={depends}\0".encode())
    (base / "modules.builtin").write_text("kernel/drivers/virtio/virtio_pci.ko\n")
    deb = folder / f"linux-image-{RELEASE}_1_amd64.deb"
    subprocess.run(["dpkg-deb", "--build", "-Zgzip", str(root), str(deb)], check=True, capture_output=True)
    return deb


def scenario_with(kernel: str, **changes: object):
    data = yaml.safe_load(SMOKE.read_text())
    data["guest"] = {"kernel": kernel}
    data.update(changes)
    return parse_scenario(data, "smoke.yaml")


def validate(tmp_path: Path, kernel: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """``sanlab validate`` of the smoke scenario with ``kernel``, as a user runs it."""
    data = yaml.safe_load(SMOKE.read_text())
    data["guest"] = {"kernel": kernel}
    spec = tmp_path / "scenario.yaml"
    spec.write_text(yaml.safe_dump(data))
    command = [sys.executable, "-m", "sanlab", "validate", str(spec)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=cwd)


def test_a_kernel_without_siw_is_refused_before_boot_naming_the_option_and_the_link(tmp_path):
    deb = make_deb(tmp_path, {"CONFIG_RDMA_SIW"})
    with pytest.raises(SanlabError) as refused:
        kernels.check_kernel(scenario_with(str(deb)), kernels.kernel_source(str(deb)))
    said = str(refused.value)
    assert said.startswith(f"kernel {deb} ({RELEASE}): ")
    assert "CONFIG_RDMA_SIW is not set, and links[1] 'iwarp' (rdma_driver siw) needs it" in said
    assert said.count("is not set") == 1 and "\n" not in said


def test_validate_names_every_missing_option_in_one_line_and_exits_1(tmp_path):
    deb = make_deb(tmp_path, {"CONFIG_NVME_TARGET_TCP", "CONFIG_INFINIBAND_SRPT"})
    result = validate(tmp_path, str(deb))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "guest.kernel" in line and str(deb) in line
    assert "CONFIG_NVME_TARGET_TCP is not set, and targets[5] (nvme-tcp served by nvmet) needs it" in line
    assert "CONFIG_INFINIBAND_SRPT is not set, and targets[4] (srp served by lio) needs it" in line


def test_a_kernel_with_every_option_passes_the_check(tmp_path):
    deb = make_deb(tmp_path)
    config = kernels.check_kernel(scenario_with(str(deb)), kernels.kernel_source(str(deb)))
    assert config.version == RELEASE and config.has("CONFIG_RDMA_SIW")
    assert validate(tmp_path, str(deb)).returncode == 0


def test_tls_needs_the_kernels_nvme_tcp_tls_options(tmp_path):
    deb = make_deb(tmp_path, {"CONFIG_NVME_TARGET_TCP_TLS"})
    data = yaml.safe_load((SCENARIOS / "nvme-tls.yaml").read_text())
    data["guest"] = {"kernel": str(deb), "base": "debian-13"}
    with pytest.raises(SanlabError, match=r"CONFIG_NVME_TARGET_TCP_TLS is not set, and targets\[0\] \(tls\)"):
        kernels.check_kernel(parse_scenario(data, "tls.yaml"), kernels.kernel_source(str(deb)))


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda d: d / "absent.deb", "no such file or directory"),
        (
            lambda d: (d / "notes.deb").write_text("not a package") and d / "notes.deb",
            "is not a Debian package",
        ),
        (lambda d: make_deb(d, config=False), r"no /boot/config-\* in it"),
        (lambda d: (d / "tree").mkdir() or d / "tree", "no config in the tree"),
    ],
    ids=["missing", "not-a-deb", "no-config", "empty-tree"],
)
def test_bad_kernel_input_is_one_line_before_anything_boots(tmp_path, make, said):
    kernel = make(tmp_path)
    with pytest.raises(SanlabError, match=said):
        kernels.check_kernel(scenario_with(str(kernel)), kernels.kernel_source(str(kernel)))
    result = validate(tmp_path, str(kernel))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize(
    "name", ["$(touch PWNED).deb", "`touch PWNED`;x.deb", "-x --version.deb", "a b'c\".deb"]
)
def test_a_kernel_path_reaches_no_shell_and_is_never_an_option(tmp_path, name):
    deb = make_deb(tmp_path, {"CONFIG_RDMA_SIW"})
    hostile = tmp_path / name
    deb.rename(hostile)
    given = name if name.startswith("-") else str(hostile)  # relative: still read as a path
    result = validate(tmp_path, given, cwd=tmp_path)
    assert "CONFIG_RDMA_SIW is not set" in result.stderr, result.stderr
    assert not list(tmp_path.glob("PWNED")) and not (REPO / "PWNED").exists()


def test_the_image_key_follows_the_kernels_bytes_and_the_base_image(tmp_path):
    first, other = make_deb(tmp_path / "one"), make_deb(tmp_path / "two", stamp=b"rebuilt")
    same = tmp_path / "copy.deb"  # the same bytes under another name and time: the same key
    same.write_bytes(first.read_bytes())
    digest = kernels.kernel_digest
    source = kernels.kernel_source
    assert digest(source(str(first))) == digest(source(str(same)))  # the same bytes: the same key
    assert digest(source(str(first))) == hashlib.sha256(b"deb" + first.read_bytes()).hexdigest()
    assert digest(source(str(first))) != digest(source(str(other)))
    keys = {
        kernel_image.derived_key(base, digest(source(str(d))))
        for base in ("aa", "bb")
        for d in (first, other)
    }
    assert len(keys) == 4


def test_a_trees_key_follows_its_modules(tmp_path):
    tree = unpacked_tree(tmp_path)
    before = kernels.kernel_digest(kernels.kernel_source(str(tree)))
    module = tree / "lib" / "modules" / RELEASE / next(iter(MODULES))
    module.write_bytes(module.read_bytes() + b"patched")
    assert kernels.kernel_digest(kernels.kernel_source(str(tree))) != before


def unpacked_tree(folder: Path) -> Path:
    """A built tree as ``make modules_install INSTALL_MOD_PATH=tree`` leaves it, from the .deb."""
    deb = make_deb(folder)
    tree = folder / "tree"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tree)], check=True)
    (tree / "boot" / f"vmlinuz-{RELEASE}").rename(tree / "bzImage")
    (tree / "boot" / f"config-{RELEASE}").rename(tree / ".config")
    return tree


def fake_base(cache: Path) -> Image:
    """A base image whose initramfs holds a Debian kernel's modules, the kernel's release, a file."""
    key = "0123456789abcdef"
    folder = cache / "images" / key
    folder.mkdir(parents=True)
    out = io.BytesIO()
    writer = CpioWriter(out)
    for name, data in (
        ("etc/hostname", b"guest\n"),
        ("usr/lib/modules/6.1.0-50-amd64/kernel/old.ko", b"old"),
        ("usr/lib/sanlab/kernel-version", b"6.1.0-50-amd64\n"),
    ):
        writer.add(name, 0o100644, 0, 0, 0, data)
    writer.close()
    (folder / "rootfs.cpio").write_bytes(out.getvalue())
    (folder / "vmlinuz").write_bytes(b"debian kernel")
    (folder / "manifest.json").write_text(
        json.dumps({"key": key, "guest": "debian-12", "release": "bookworm"})
    )
    return Image(key, folder)


@pytest.mark.parametrize("kind", ["deb", "tree"])
def test_the_derived_image_has_the_base_user_space_and_the_kernels_needed_modules(
    tmp_path, monkeypatch, kind
):
    require_tool("depmod")  # kmod: skipped outside CI without it, a failure under CI=true
    monkeypatch.setenv("SANLAB_CACHE", str(tmp_path / "cache"))
    given = make_deb(tmp_path) if kind == "deb" else unpacked_tree(tmp_path)
    untouched = sorted((p.relative_to(tmp_path), p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))
    assert not any("cache" in e[0].parts for e in untouched)
    source = kernels.kernel_source(str(given))
    image = kernel_image.derive(fake_base(tmp_path / "cache"), "debian-12", source, print)
    after = sorted((p.relative_to(tmp_path), p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))
    assert [e for e in after if "cache" not in e[0].parts] == untouched  # the user's file or tree: only read
    assert image.kernel.read_bytes().startswith(b"MZ fake bzImage")
    with image.initrd.open("rb") as handle:
        entries = {name: data for name, _mode, _uid, _gid, _mtime, data in read_cpio(handle)}
    modules = f"usr/lib/modules/{RELEASE}/"
    assert entries["etc/hostname"] == b"guest\n"
    assert entries["usr/lib/sanlab/kernel-version"] == f"{RELEASE}\n".encode()
    assert not any(name.startswith("usr/lib/modules/6.1.0") for name in entries)
    kept = sorted(Path(n).name for n in entries if n.startswith(modules) and n.endswith(".ko"))
    assert kept == sorted(
        Path(p).name for p in MODULES if "unwanted" not in p
    )  # the recipe's, and their deps
    assert modules + "modules.dep" in entries  # depmod ran on the pruned copy
    manifest = image.manifest
    assert manifest["kernel"] == RELEASE and manifest["base_image"] == "0123456789abcdef"
    assert "siw" in manifest["modules_absent"] and "virtio_pci" not in manifest["modules_absent"]  # built in
    base = Image("0123456789abcdef", tmp_path / "cache" / "images" / "0123456789abcdef")
    assert kernel_image.derive(base, "debian-12", source, print) == image  # cached: the same image


def test_every_transport_stack_and_driver_says_what_it_needs_of_a_kernel():
    """A new transport, in-kernel stack or soft-RDMA driver cannot be added without its options."""
    from sanlab.scenarios.registry import SOFT_RDMA_MODULES, SOFT_RDMA_OPTIONS, STACKS, TRANSPORTS

    for transport in TRANSPORTS.values():
        assert transport.kernel_options and transport.target_options, transport.name
        assert all(o.startswith("CONFIG_") for o in (*transport.kernel_options, *transport.target_options))
    assert {s.name for s in STACKS.values() if s.in_kernel} == {s.name for s in STACKS.values() if s.configfs}
    assert set(SOFT_RDMA_OPTIONS) == set(SOFT_RDMA_MODULES)
