"""What siw is compiled from for a brought kernel .deb, read from real (small) Debian packages.

Each package here is made by ``dpkg-deb --build`` from a few files: a kernel whose control
says which linux source built it, headers that Depend on their -common and kbuild packages
(and on the kernel and a compiler), and a linux-source whose tarball holds siw's folder --
or, for the hostile cases, a link or a nested path in it.  Nothing is compiled and nothing
boots: the chroot build runs in tests/test_own_kernel_vm.py (long).
"""

from __future__ import annotations

import io
import lzma
import os
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from sanlab.emulator import kernels, siw_compile, siw_debs
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.kernel_needs import kernel_needs
from sanlab.scenarios.loader import load_scenario, parse_scenario
from support import SCENARIOS, require_tool

pytestmark = pytest.mark.subprocess  # dpkg-deb builds and reads the packages
RELEASE = "6.99.0-1-amd64"
VERSION = "6.99.0-1~test1"
SMOKE = SCENARIOS / "smoke.yaml"


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SANLAB_CACHE", str(tmp_path / "cache"))


def deb(
    folder: Path, package: str, arch: str, files: dict[str, bytes], nocheck: bool = False, **control: str
) -> Path:
    """A .deb named as apt-get download names it, holding ``files`` (``nocheck``: with a control
    dpkg-deb would refuse, as a hostile package's maker would skip that check)."""
    require_tool("dpkg-deb")
    root = folder / f"{package}-root"
    (root / "DEBIAN").mkdir(parents=True)
    fields = {"Package": package, "Version": VERSION, "Architecture": arch, **control}
    text = "".join(f"{k.replace('_', '-')}: {v}\n" for k, v in fields.items())
    (root / "DEBIAN" / "control").write_text(text + "Maintainer: t <t@example.org>\nDescription: test\n")
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    out = folder / siw_debs.deb_file_name(package, VERSION, arch)
    checks = ["--nocheck"] if nocheck else []
    command = ["dpkg-deb", "--build", *checks, "-Zgzip", str(root), str(out)]
    subprocess.run(command, check=True, capture_output=True)
    return out


def kernel_deb(folder: Path) -> Path:
    needed = {n.option for n in kernel_needs(load_scenario(SMOKE))} - {siw_debs.OPTION}
    config = "".join(f"{o}=m\n" for o in sorted(needed)) + "# CONFIG_RDMA_SIW is not set\n"
    files = {f"boot/config-{RELEASE}": config.encode(), f"boot/vmlinuz-{RELEASE}": b"MZ"}
    return deb(folder, f"linux-image-{RELEASE}", "amd64", files, Built_Using=f"linux (= {VERSION})")


def source_deb(folder: Path, entries: list[tarfile.TarInfo | tuple[str, bytes]]) -> Path:
    """linux-source-6.99 whose usr/src/linux-source-6.99.tar.xz holds ``entries``."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for entry in entries:
            if isinstance(entry, tarfile.TarInfo):
                tar.addfile(entry)
            else:
                info = tarfile.TarInfo(entry[0])
                info.size = len(entry[1])
                tar.addfile(info, io.BytesIO(entry[1]))
    tarball = {"usr/src/linux-source-6.99.tar.xz": lzma.compress(raw.getvalue())}
    return deb(folder, "linux-source-6.99", "all", tarball)


SIW = "linux-source-6.99/drivers/infiniband/sw/siw/"
GOOD = [
    ("linux-source-6.99/Makefile", b"top"),
    (SIW + "Makefile", b"obj-$(CONFIG_RDMA_SIW) += siw.o\n"),
    (SIW + "siw_cm.c", b"/* cm */\n"),
    (SIW + "siw.h", b"/* h */\n"),
    ("linux-source-6.99/drivers/infiniband/sw/rxe/rxe.c", b"not siw"),
]


def test_a_kernel_with_its_headers_and_source_beside_it_passes_the_check_to_compile_siw(tmp_path):
    kernel = kernel_deb(tmp_path)
    deb(tmp_path, f"linux-headers-{RELEASE}", "amd64", {})
    source_deb(tmp_path, GOOD)
    data = {**yaml.safe_load(SMOKE.read_text()), "guest": {"kernel": str(kernel)}}
    config = kernels.check_kernel(parse_scenario(data, "smoke.yaml"), kernels.kernel_source(str(kernel)))
    assert config.siw is not None and config.siw.version == VERSION
    assert dict(config.siw.found)["linux-source-6.99"] == str(
        tmp_path / f"linux-source-6.99_{VERSION}_all.deb"
    )


def test_without_them_the_refusal_names_the_option_and_what_to_provide(tmp_path):
    kernel = kernel_deb(tmp_path)
    data = {**yaml.safe_load(SMOKE.read_text()), "guest": {"kernel": str(kernel)}}
    with pytest.raises(SanlabError) as refused:
        kernels.check_kernel(parse_scenario(data, "smoke.yaml"), kernels.kernel_source(str(kernel)))
    said = str(refused.value)
    assert said.startswith(f"kernel {kernel} ({RELEASE}): CONFIG_RDMA_SIW is not set, and links[1] 'iwarp'")
    assert f"apt-get download linux-headers-{RELEASE}={VERSION} linux-source-6.99={VERSION}" in said
    assert said.count("is not set") == 1 and "\n" not in said


def test_siws_folder_alone_is_read_out_of_the_source(tmp_path):
    source = source_deb(tmp_path, GOOD)
    into = tmp_path / "src"
    assert siw_compile.extract_siw(source, "linux-source-6.99", into) == 3
    assert sorted(p.name for p in into.iterdir()) == ["Makefile", "siw.h", "siw_cm.c"]
    assert (into / "siw_cm.c").read_bytes() == b"/* cm */\n"


def _link(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    return info


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        (_link(SIW + "siw_qp.c", "/etc/shadow"), "is not a plain file"),
        ((SIW + "sub/../../x.c", b"x"), "is not a plain file"),
        ((SIW + "big.c", bytes((1 << 20) + 1)), "is over 1 MiB"),
    ],
    ids=["link", "nested", "too-big"],
)
def test_a_hostile_entry_in_siws_folder_is_one_line_and_nothing_is_written_out(tmp_path, entry, said):
    source = source_deb(tmp_path, [GOOD[1], entry])
    with pytest.raises(SanlabError, match=said):
        siw_compile.extract_siw(source, "linux-source-6.99", tmp_path / "src")
    assert not (tmp_path / "x.c").exists() and not (tmp_path / "src" / "siw_qp.c").exists()


def test_a_source_without_siw_is_one_line(tmp_path):
    source = source_deb(tmp_path, [GOOD[0]])
    with pytest.raises(SanlabError, match=r"no linux-source-6.99/drivers/infiniband/sw/siw/ in its"):
        siw_compile.extract_siw(source, "linux-source-6.99", tmp_path / "src")


def test_the_headers_pull_in_their_linux_packages_and_name_what_the_chroot_installs(tmp_path):
    kernel = kernel_deb(tmp_path)
    common, kbuild = "linux-headers-6.99.0-1-common", "linux-kbuild-6.99.0"
    depends = (
        f"linux-base (>= 4.12~), {common} (= {VERSION}), linux-image-{RELEASE} (= {VERSION}) | "
        f"linux-image-{RELEASE}-unsigned (= {VERSION}), {kbuild}, gcc-12"
    )
    deb(tmp_path, f"linux-headers-{RELEASE}", "amd64", {}, Depends=depends)
    deb(tmp_path, common, "all", {})
    deb(tmp_path, kbuild, "amd64", {}, Depends="libc6 (>= 2.34), libelf1 (>= 0.144), pahole")
    source_deb(tmp_path, GOOD)
    plan = siw_debs.plan_siw("deb", kernel, RELEASE)
    debs, includes = siw_compile._packages(plan, print)
    assert [d.name.split("_")[0] for d in debs] == [f"linux-headers-{RELEASE}", common, kbuild]
    assert includes == ["gcc-12", "libc6", "libelf1", "pahole"]


def test_a_hostile_dependency_name_is_refused(tmp_path):
    kernel = kernel_deb(tmp_path)
    deb(tmp_path, f"linux-headers-{RELEASE}", "amd64", {}, nocheck=True, Depends="gcc-12, Evil;Name")
    source_deb(tmp_path, GOOD)
    with pytest.raises(SanlabError, match=r"depends on 'Evil;Name', which is not a package name"):
        siw_compile._packages(siw_debs.plan_siw("deb", kernel, RELEASE), print)


def test_the_hook_runs_through_mmdebstraps_shell_with_every_value_one_word(tmp_path):
    """As mmdebstrap runs a customize hook (sh -c HOOK exec CHROOT): a hostile scratch folder
    (TMPDIR is the user's) reaches our script as one argument, and nothing in it runs."""
    scratch = tmp_path / "x'$(touch PWNED)\"`touch PWNED2`; touch PWNED3 #"
    scratch.mkdir()
    (scratch / "hook.sh").write_text('for a in "$@"; do printf "%s\\n" "$a"; done\n')
    command = siw_compile.hook_command(scratch, RELEASE)
    done = subprocess.run(
        ["sh", "-c", command, "exec", "/chroot dir"], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    assert done.stdout.splitlines() == ["/chroot dir", RELEASE, str(scratch)]
    assert not list(tmp_path.glob("PWNED*")) and not list(Path.cwd().glob("PWNED*"))


def test_a_failed_build_leaves_only_its_log_and_says_where_in_one_line(tmp_path, monkeypatch):
    """The chroot's build failing (here an mmdebstrap that only says so) removes the build's
    folder, keeps its log as failed-KEY.log, and is one line naming both."""
    kernel = kernel_deb(tmp_path)
    deb(tmp_path, f"linux-headers-{RELEASE}", "amd64", {}, Depends="gcc-12")
    source_deb(tmp_path, GOOD)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mmdebstrap").write_text("#!/bin/sh\necho 'E: the chroot failed'\nexit 25\n")
    (bin_dir / "mmdebstrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    plan = siw_debs.plan_siw("deb", kernel, RELEASE)
    with pytest.raises(SanlabError) as failed:
        siw_compile.compiled_siw(plan, "d" * 64, "debian-12", print)
    key = siw_compile.build_key("d" * 64, "debian-12")
    said = str(failed.value)
    assert "\n" not in said and "mmdebstrap exit 25" in said and "E: the chroot failed" in said
    assert said.endswith(f"(log: {siw_compile.failed_log(key)})")
    assert sorted(p.name for p in siw_compile.siw_dir().iterdir()) == [f"failed-{key}.log"]


def test_apt_get_never_downloads_through_a_link_planted_in_the_cache(tmp_path):
    kernel = kernel_deb(tmp_path / "dl")
    headers = f"linux-headers-{RELEASE}"
    siw_debs.debs_dir().mkdir(parents=True)
    planted = siw_debs.debs_dir() / siw_debs.deb_file_name(headers, VERSION, "amd64")
    planted.symlink_to(tmp_path / "elsewhere")
    plan = siw_debs.SiwPlan(kernel, RELEASE, VERSION, "amd64", "linux-source-6.99", ())
    with pytest.raises(SanlabError, match=r"is in the way of apt-get download and not a \.deb"):
        siw_compile._fetched(headers, VERSION, "amd64", plan, print)
    assert not (tmp_path / "elsewhere").exists()
