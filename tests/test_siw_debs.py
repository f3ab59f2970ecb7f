"""When sanlab compiles siw for a brought kernel, from which packages, and what a refusal says.

Fast: no process starts.  The kernel .deb's control fields and apt's answer are given to
``plan_siw`` by the test (what dpkg-deb and apt-cache would say); the .debs it looks for
beside the kernel are empty files of the names apt-get download gives.  The real build,
in a chroot, runs in tests/test_own_kernel_vm.py (long).
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from sanlab.emulator import kernels, siw_compile, siw_debs
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.kernel_needs import kernel_needs
from sanlab.scenarios.loader import load_scenario
from support import SCENARIOS

RELEASE = "6.12.95+deb12-amd64"
VERSION = "6.12.95-1~bpo12+1"
SIGNED = {  # what dpkg-deb --field says of Debian's signed backports kernel .deb
    "Version": VERSION,
    "Architecture": "amd64",
    "Built-Using": f"linux (= {VERSION})",
}
HEADERS = f"linux-headers-{RELEASE}_{VERSION}_amd64.deb"
SOURCE = f"linux-source-6.12_{VERSION}_all.deb"


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SANLAB_CACHE", str(tmp_path / "cache"))


def _kernel(folder: Path, *beside: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in beside:
        (folder / name).write_bytes(b"")
    return folder / f"linux-image-{RELEASE}_{VERSION}_amd64.deb"


def _plan(kernel: Path, fields=SIGNED, apt=frozenset()):
    def knows(packages, version):
        return {p for p in packages if (p, version) in apt}

    return siw_debs.plan_siw("deb", kernel, RELEASE, lambda _deb: dict(fields), knows)


def test_the_smoke_needs_siw_and_a_pair_over_rxe_does_not():
    assert siw_debs.OPTION in {n.option for n in kernel_needs(load_scenario(SCENARIOS / "smoke.yaml"))}
    assert siw_debs.OPTION not in {n.option for n in kernel_needs(load_scenario(SCENARIOS / "pair-rxe.yaml"))}


def test_headers_and_source_beside_the_kernel_make_a_plan_from_them(tmp_path):
    kernel = _kernel(tmp_path / "dl", HEADERS, SOURCE)
    plan = _plan(kernel)
    assert (plan.headers, plan.source, plan.version, plan.arch) == (
        f"linux-headers-{RELEASE}",
        "linux-source-6.12",
        VERSION,
        "amd64",
    )
    assert dict(plan.found) == {
        f"linux-headers-{RELEASE}": str(kernel.parent / HEADERS),
        "linux-source-6.12": str(kernel.parent / SOURCE),
    }


def test_the_cache_and_then_apt_are_asked_when_nothing_is_beside_the_kernel(tmp_path):
    siw_debs.debs_dir().mkdir(parents=True)
    (siw_debs.debs_dir() / HEADERS).write_bytes(b"")
    plan = _plan(_kernel(tmp_path / "dl"), apt={("linux-source-6.12", VERSION)})
    assert dict(plan.found) == {
        f"linux-headers-{RELEASE}": str(siw_debs.debs_dir() / HEADERS),
        "linux-source-6.12": siw_debs.AVAILABLE,
    }


def test_built_using_names_the_source_version_when_the_package_version_differs(tmp_path):
    fields = {**SIGNED, "Version": "6.12.95+1~bpo12+1"}  # a signed package of its own version
    plan = _plan(_kernel(tmp_path, HEADERS, SOURCE), fields)
    assert plan.version == VERSION


def test_nothing_found_is_refused_naming_the_packages_where_to_put_them_and_the_other_way(tmp_path):
    with pytest.raises(SanlabError) as refused:
        _plan(_kernel(tmp_path / "dl", HEADERS))  # the headers beside it, no source anywhere
    said = str(refused.value)
    assert "\n" not in said and "is not set" not in said
    assert f"found no .deb of linux-source-6.12 beside the kernel or in {siw_debs.debs_dir()}" in said
    assert f"apt-get download linux-source-6.12={VERSION}" in said
    assert "or give a kernel built with CONFIG_RDMA_SIW=m" in said


@pytest.mark.parametrize(
    "fields",
    [
        {"Version": "1", "Architecture": "amd64"},  # make bindeb-pkg's: no X.Y series
        {"Version": "6.12.1-1 $(touch PWNED)", "Architecture": "amd64"},
        {"Version": "6.12.1-1", "Architecture": "amd64;reboot"},
        {},
    ],
    ids=["no-series", "hostile-version", "hostile-arch", "no-fields"],
)
def test_a_version_that_names_no_source_is_refused_before_apt_is_asked(tmp_path, fields):
    asked = []
    with pytest.raises(
        SanlabError, match=r"cannot tell which one its version .* needs; or give a kernel built"
    ):
        siw_debs.plan_siw("deb", tmp_path / "k.deb", RELEASE, lambda _d: fields, lambda *a: asked.append(a))
    assert not asked and not (tmp_path / "PWNED").exists()


def test_a_built_tree_without_siw_is_refused_saying_to_build_it_with_siw(tmp_path):
    tree = tmp_path / "linux"
    (tree / "lib" / "modules" / RELEASE).mkdir(parents=True)
    (tree / "bzImage").write_bytes(b"MZ")
    needed = {n.option for n in kernel_needs(load_scenario(SCENARIOS / "smoke.yaml"))} - {siw_debs.OPTION}
    (tree / ".config").write_text("".join(f"{o}=m\n" for o in sorted(needed)))
    source = kernels.kernel_source(str(tree))
    with pytest.raises(SanlabError) as refused:
        kernels.check_kernel(load_scenario(SCENARIOS / "smoke.yaml"), source)
    assert str(refused.value) == (
        f"kernel {tree} ({RELEASE}): CONFIG_RDMA_SIW is not set, and links[1] 'iwarp' (rdma_driver siw) "
        "needs it (a built tree brings its own siw: rebuild it with CONFIG_RDMA_SIW=m)"
    )
    pair = kernels.check_kernel(load_scenario(SCENARIOS / "pair-rxe.yaml"), source)
    assert pair.siw is None  # no siw needed: nothing to compile, nothing refused


def test_depends_takes_each_first_alternative_and_its_pinned_version():
    field = (
        "linux-base (>= 4.12~), linux-headers-6.12.95+deb12-common (= 6.12.95-1~bpo12+1), "
        "linux-image-6.12.95+deb12-amd64 (= 6.12.95-1~bpo12+1) | linux-image-x-unsigned, "
        "linux-kbuild-6.12.95+deb12, gcc-12, python3:any"
    )
    assert siw_debs.depends(field) == [
        ("linux-base", ""),
        ("linux-headers-6.12.95+deb12-common", "6.12.95-1~bpo12+1"),
        ("linux-image-6.12.95+deb12-amd64", "6.12.95-1~bpo12+1"),
        ("linux-kbuild-6.12.95+deb12", ""),
        ("gcc-12", ""),
        ("python3", ""),
    ]


def test_an_epoch_is_written_as_apt_get_download_names_it():
    assert (
        siw_debs.deb_file_name("linux-source-6.1", "1:6.1.0-1", "all")
        == "linux-source-6.1_1%3a6.1.0-1_all.deb"
    )


def test_a_link_beside_the_kernel_is_not_taken_for_a_deb(tmp_path):
    kernel = _kernel(tmp_path / "dl", SOURCE)
    (kernel.parent / HEADERS).symlink_to("/etc/passwd")
    assert siw_debs.find_deb(f"linux-headers-{RELEASE}", VERSION, "amd64", [kernel.parent]) is None


@pytest.mark.parametrize("folder", ["/tmp/a b", "/tmp/x'$(touch PWNED)\"`id`;", "/tmp/-rf --"])
def test_the_hook_gets_every_value_as_one_quoted_word(folder):
    command = siw_compile.hook_command(Path(folder), RELEASE)
    assert shlex.split(command) == ["sh", f"{folder}/hook.sh", "$1", RELEASE, folder]


def test_the_build_key_follows_the_kernel_the_patch_and_the_guest(monkeypatch, tmp_path):
    keys = {siw_compile.build_key(d, g) for d in ("a" * 64, "b" * 64) for g in ("debian-12", "debian-13")}
    assert len(keys) == 4
    before = siw_compile.build_key("a" * 64, "debian-12")
    (tmp_path / siw_compile.PATCH).write_bytes(b"another patch")
    monkeypatch.setattr(siw_compile, "recipe_dir", lambda: tmp_path)  # the same recipe, another patch
    assert siw_compile.build_key("a" * 64, "debian-12") != before


def test_the_compiled_module_must_be_siw_for_this_kernel_with_the_patch():
    good = b"\0name=siw\0parm=abortive_close:Reset\0vermagic=" + RELEASE.encode() + b" SMP mod_unload\0"
    siw_compile.check_module(good, RELEASE)
    with pytest.raises(SanlabError, match=r"is for kernel '6\.1\.0-47-amd64 SMP mod_unload', not 6\.12"):
        siw_compile.check_module(good.replace(RELEASE.encode(), b"6.1.0-47-amd64"), RELEASE)
    with pytest.raises(SanlabError, match="abortive_close"):
        siw_compile.check_module(good.replace(b"parm=abortive_close", b"parm=other"), RELEASE)
