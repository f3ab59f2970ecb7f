"""A kernel sanlab did not ship: the smoke scenario on Debian's newest backports kernel .deb.

The .deb is given as a file (``guest: {kernel: FILE}``), as a user who downloaded
it by hand would: $SANLAB_TEST_KERNEL_DEB, else the newest
``linux-image-*+deb12-amd64_*bpo*.deb`` in ~/.cache/sanlab/kernels/; under CI=true it
is fetched there with ``apt-get download`` (bookworm-backports, about 106 MB), and
outside CI a missing one skips.  Debian builds no siw (``# CONFIG_RDMA_SIW is not
set``), so sanlab compiles it for the kernel from the kernel's own linux-headers and
linux-source (found through apt here, no VM), with the abortive-close patch, in a chroot
(emulator/siw_compile.py); the VM test runs the whole smoke, siw included, verified.
Long (minutes under TCG, and the first time a chroot): benchmarks/long_vm_tests.py runs
it, not CI.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sanlab.emulator import kernel_image, kernels, siw_compile
from sanlab.emulator.cpio import read_cpio
from sanlab.emulator.images import images_dir, require_image
from sanlab.scenarios.loader import parse_scenario
from support import SCENARIOS, every_target_verified, require_tool, run_scenario

pytestmark = pytest.mark.subprocess
CACHE = Path.home() / ".cache" / "sanlab" / "kernels"
VERIFIED = {"randwrite": 8 << 20, "randread": 4 << 20}


def backports_deb() -> Path:
    """The backports kernel package, from $SANLAB_TEST_KERNEL_DEB or the cache (fetched under CI)."""
    if os.environ.get("SANLAB_TEST_KERNEL_DEB"):
        return Path(os.environ["SANLAB_TEST_KERNEL_DEB"])
    found = sorted(CACHE.glob("linux-image-*bpo*_amd64.deb"), key=_natural)
    if found:
        return found[-1]
    if os.environ.get("CI") != "true":
        pytest.skip(
            f"no backports kernel .deb in {CACHE} (apt-get download it, or set SANLAB_TEST_KERNEL_DEB)"
        )
    require_tool("apt-get")
    shown = subprocess.run(
        ["apt-cache", "show", "linux-image-amd64/bookworm-backports"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    package = re.search(r"^Depends: (linux-image-\S+)", shown, re.M)
    assert package, f"no kernel package named by linux-image-amd64 in bookworm-backports:\n{shown[:500]}"
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", f"{package.group(1)}/bookworm-backports"], cwd=CACHE, check=True)
    return sorted(CACHE.glob("linux-image-*bpo*_amd64.deb"), key=_natural)[-1]


def _natural(path: Path) -> list[object]:
    """6.12.100 after 6.12.95: the numbers in a name compared as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]


def test_the_whole_smoke_passes_the_check_with_siw_to_compile_from_the_kernels_packages(tmp_path):
    deb = backports_deb()
    smoke = yaml.safe_load((SCENARIOS / "smoke.yaml").read_text())
    spec = tmp_path / "smoke.yaml"
    spec.write_text(yaml.safe_dump({**smoke, "guest": {"kernel": str(deb)}}))
    result = subprocess.run(
        [sys.executable, "-m", "sanlab", "validate", str(spec)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    loaded = parse_scenario({**smoke, "guest": {"kernel": str(deb)}}, "smoke.yaml")
    plan = kernels.check_kernel(loaded, kernels.kernel_source(str(deb))).siw
    release = deb.name.split("_")[0].removeprefix("linux-image-")
    assert plan is not None and plan.headers == f"linux-headers-{release}"
    assert plan.version == deb.name.split("_")[1].replace("%3a", ":")
    assert plan.source == "linux-source-" + ".".join(release.split(".")[:2])


@pytest.mark.vm
@pytest.mark.long
def test_the_whole_smoke_passes_verified_on_debians_backports_kernel_siw_compiled(guest_image, tmp_path):
    deb = backports_deb()
    data = yaml.safe_load((SCENARIOS / "smoke.yaml").read_text())
    data["guest"] = {"kernel": str(deb)}
    result, out = run_scenario(data, tmp_path, timeout=2400)
    (tmp_path / "run.stderr").write_text(result.stderr)  # what it said: siw, the image, boots, points
    assert result.returncode == 0, result.stderr[-4000:]
    every_target_verified(data, json.loads(result.stdout)["results"], VERIFIED)
    release = deb.name.split("_")[0].removeprefix("linux-image-")
    assert release in (out / "logs" / "initiator.dmesg").read_text().splitlines()[0]
    # The siw the siw targets ran over is the one compiled for this kernel, with the patch.
    digest = kernels.kernel_digest(kernels.kernel_source(str(deb)))
    key = siw_compile.build_key(digest, "debian-12")
    compiled = (siw_compile.siw_dir() / key / "siw.ko").read_bytes()
    siw_compile.check_module(compiled, release)
    image = images_dir() / kernel_image.derived_key(require_image().key, digest, key)
    with (image / "rootfs.cpio").open("rb") as handle:
        shipped = {name: body for name, *_rest, body in read_cpio(handle) if name.endswith("/siw.ko")}
    assert shipped == {f"usr/lib/modules/{release}/updates/siw.ko": compiled}


@pytest.mark.vm
@pytest.mark.long
def test_a_built_tree_unpacked_from_the_deb_boots_and_passes_verified(guest_image, tmp_path):
    """The same kernel as a built tree: ``bzImage``, ``.config`` and ``lib/modules/V``."""
    deb = backports_deb()
    tree = tmp_path / "linux"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tree)], check=True)
    (vmlinuz,) = (tree / "boot").glob("vmlinuz-*")
    (tree / "arch" / "x86" / "boot").mkdir(parents=True)
    vmlinuz.rename(tree / "arch" / "x86" / "boot" / "bzImage")
    (config,) = (tree / "boot").glob("config-*")
    config.rename(tree / ".config")
    data = yaml.safe_load((SCENARIOS / "pair-rxe.yaml").read_text())
    data["guest"] = {"kernel": str(tree)}
    verified = {"rw": "randwrite", "bs": "4k", "iodepth": 4, "verify": "crc32c", "verify_size": "8m"}
    data["workloads"] = [verified]
    result, out = run_scenario(data, tmp_path, timeout=900)
    (tmp_path / "run.stderr").write_text(result.stderr)
    assert result.returncode == 0, result.stderr[-4000:]
    (record,) = json.loads(result.stdout)["results"]
    assert record["error"] is None and record["verify"] == "pass" and record["verified_bytes"] == 8 << 20
    release = vmlinuz.name.removeprefix("vmlinuz-")
    assert release in (out / "logs" / "initiator.dmesg").read_text().splitlines()[0]
