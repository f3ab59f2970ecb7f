"""`sanlab images clean` and the siw modules sanlab compiled (<cache>/siw): a build no kept image
names goes, with the packages only it was made from; nothing sanlab did not write goes, no
link is followed, and a package is removed by a name, never a path."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sanlab.emulator import images, siw_clean
from sanlab.main import cli

USED, STALE = "1111111111111111", "2222222222222222"
SHARED_DEB = "linux-kbuild-6.12.95+deb12_6.12.95-1~bpo12+1_amd64.deb"
STALE_DEB = "linux-source-6.12_6.12.95-1~bpo12+1_all.deb"
USED_DEB = "linux-source-6.13_6.13.1-1_all.deb"


def _image(base: Path, key: str, siw: str | None) -> Path:
    path = base / key
    path.mkdir(parents=True)
    manifest = {"key": key, **({"siw_compiled": siw} if siw else {})}
    (path / "manifest.json").write_text(json.dumps(manifest))
    return path


def _build(root: Path, key: str, packages: list[str], extra: str | None = None) -> Path:
    path = root / key
    path.mkdir(parents=True)
    manifest = {"key": key, "packages": dict.fromkeys(packages, "0" * 64)}
    (path / "manifest.json").write_text(json.dumps(manifest))
    (path / "siw.ko").write_bytes(b"\x7fELF module")
    (path / "build.log").write_text("built\n")
    if extra:
        (path / extra).write_text("the user's own file\n")
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("SANLAB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def outside(tmp_path) -> Path:
    """A folder of the user's outside the cache, which nothing may touch."""
    folder = tmp_path / "outside"
    folder.mkdir()
    for name in ("manifest.json", "siw.ko", "build.log", STALE_DEB, f"failed-{STALE}.log"):
        (folder / name).write_text("the user's\n")
    return folder


def _digest(folder: Path) -> str:
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return hashlib.sha256(b"".join(p.name.encode() + p.read_bytes() for p in files)).hexdigest()


def test_a_build_no_kept_image_names_goes_with_the_packages_only_it_used(cache):
    _image(images.images_dir(), "abcdef0123456789", USED)
    root = cache / "siw"
    used = _build(root, USED, [SHARED_DEB, USED_DEB])
    stale = _build(root, STALE, [SHARED_DEB, STALE_DEB])
    debs = root / "debs"
    debs.mkdir()
    for name in (SHARED_DEB, STALE_DEB, USED_DEB, "apt-partial.deb"):
        (debs / name).write_bytes(b"deb")
    (root / f"failed-{STALE}.log").write_text("failed\n")
    (root / f"failed-{USED}.log").write_text("failed before it built\n")
    removed = siw_clean.clean_siw([images.Image(k, images.images_dir() / k) for k in ("abcdef0123456789",)])
    assert not stale.exists() and used.is_dir() and (used / "siw.ko").is_file()
    assert sorted(p.name for p in debs.iterdir()) == sorted([SHARED_DEB, USED_DEB, "apt-partial.deb"])
    assert not (root / f"failed-{STALE}.log").exists() and (root / f"failed-{USED}.log").exists()
    assert set(removed) == {stale, debs / STALE_DEB, root / f"failed-{STALE}.log"}


def test_a_users_files_a_forged_manifest_and_links_stay(cache, outside):
    root = cache / "siw"
    with_notes = _build(root, STALE, [STALE_DEB], extra="notes.txt")
    forged = root / "3333333333333333"
    forged.mkdir(parents=True)
    (forged / "manifest.json").write_text(json.dumps({"key": "another", "packages": {STALE_DEB: ""}}))
    (forged / "siw.ko").write_bytes(b"mine")
    (root / "4444444444444444").symlink_to(outside)
    linked = root / "5555555555555555"
    linked.mkdir()
    (linked / "manifest.json").symlink_to(outside / "manifest.json")
    (root / "debs").symlink_to(outside)
    (root / "failed-6666666666666666.log").symlink_to(outside / f"failed-{STALE}.log")
    before = _digest(outside)
    notes: list[str] = []
    siw_clean.clean_siw([], note=notes.append)
    assert _digest(outside) == before
    assert (with_notes / "notes.txt").is_file() and not (with_notes / "siw.ko").exists()
    assert (forged / "siw.ko").read_bytes() == b"mine" and (linked / "manifest.json").is_symlink()
    assert not (root / "failed-6666666666666666.log").is_symlink()  # the link went, not its target
    assert any("notes.txt" in n for n in notes) and sum("not sanlab's" in n for n in notes) == 2


@pytest.mark.parametrize(
    "name", ["../../outside/x.deb", "/etc/passwd", "sub/dir.deb", ".hidden.deb", "$(id).deb"]
)
def test_a_package_is_removed_by_name_never_by_path(cache, tmp_path, name):
    root = cache / "siw"
    _build(root, STALE, [name])
    victim = tmp_path / "outside" / "x.deb"
    victim.parent.mkdir()
    victim.write_bytes(b"keep")
    (root / "debs").mkdir()
    (root / "debs" / "keep.deb").write_bytes(b"keep")
    removed = siw_clean.clean_siw([])
    assert victim.read_bytes() == b"keep" and (root / "debs" / "keep.deb").is_file()
    assert removed == [root / STALE]


def test_packages_stay_while_a_build_is_under_way(cache):
    root = cache / "siw"
    _build(root, STALE, [STALE_DEB])
    (root / ".build-7777777777777777-abcd").mkdir()
    (root / "debs").mkdir()
    (root / "debs" / STALE_DEB).write_bytes(b"deb")
    notes: list[str] = []
    siw_clean.clean_siw([], note=notes.append)
    assert (root / "debs" / STALE_DEB).is_file() and any("under way" in n for n in notes)


def test_an_unreadable_image_manifest_keeps_every_build(cache):
    bad = images.images_dir() / "abcdef0123456789"
    bad.mkdir(parents=True)
    (bad / "manifest.json").write_text("{not json")
    build = _build(cache / "siw", STALE, [STALE_DEB])
    notes: list[str] = []
    assert siw_clean.clean_siw([images.Image(bad.name, bad)], note=notes.append) == []
    assert build.is_dir() and notes and "kept every compiled siw" in notes[0]


@pytest.mark.subprocess  # `images clean` asks QEMU for its version (what snapshots are keyed on)
def test_images_clean_removes_the_siw_of_the_images_it_removed(cache):
    stale_image = _image(images.images_dir(), "0123456789abcdef", STALE)
    (stale_image / "vmlinuz").write_bytes(b"kernel")
    build = _build(cache / "siw", STALE, [STALE_DEB])
    (cache / "siw" / "debs").mkdir()
    (cache / "siw" / "debs" / STALE_DEB).write_bytes(b"deb")
    result = CliRunner().invoke(cli, ["images", "clean"], env={"SANLAB_CACHE": str(cache)})
    assert result.exit_code == 0, result.output
    assert not stale_image.exists() and not build.exists() and not (cache / "siw" / "debs").exists()
    assert f"removed {build}" in result.output
