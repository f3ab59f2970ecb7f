"""A kernel sanlab did not ship: the smoke scenario on Debian's newest backports kernel .deb.

The .deb is given as a file (``guest: {kernel: FILE}``), as a user who downloaded
it by hand would: $SANLAB_TEST_KERNEL_DEB, else the newest
``linux-image-*+deb12-amd64_*bpo*.deb`` in ~/.cache/sanlab/kernels/; under CI=true it
is fetched there with ``apt-get download`` (bookworm-backports, about 106 MB), and
outside CI a missing one skips.  Debian builds no siw (``# CONFIG_RDMA_SIW is not
set``), so the full smoke is refused naming the option (checked here with the real
package, no VM); the VM test runs every smoke target that needs no siw, verified.
Long (about 5 minutes under TCG): benchmarks/long_vm_tests.py runs it, not CI.
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

from sanlab.scenarios.registry import TRANSPORTS
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


def without_siw(smoke: dict) -> dict:
    """The smoke scenario with no siw link: its TCP targets move to the RoCE link, its RDMA ones go."""
    siw = {lk["name"] for lk in smoke["links"] if lk.get("rdma_driver") == "siw"}
    other = next(lk["name"] for lk in smoke["links"] if lk["name"] not in siw)
    targets = []
    for target in smoke["targets"]:
        if target["link"] in siw:
            if TRANSPORTS[target["transport"]].rdma:
                continue
            target = {**target, "link": other}
        targets.append(target)
    return {**smoke, "links": [lk for lk in smoke["links"] if lk["name"] not in siw], "targets": targets}


def test_the_whole_smoke_is_refused_on_a_kernel_without_siw_naming_the_option(tmp_path):
    deb = backports_deb()
    smoke = yaml.safe_load((SCENARIOS / "smoke.yaml").read_text())
    spec = tmp_path / "smoke.yaml"
    spec.write_text(yaml.safe_dump({**smoke, "guest": {"kernel": str(deb)}}))
    result = subprocess.run(
        [sys.executable, "-m", "sanlab", "validate", str(spec)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1
    assert "CONFIG_RDMA_SIW is not set, and links[1] 'iwarp' (rdma_driver siw) needs it" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


@pytest.mark.vm
@pytest.mark.long
def test_the_smoke_passes_verified_on_debians_backports_kernel(guest_image, tmp_path):
    deb = backports_deb()
    data = without_siw(yaml.safe_load((SCENARIOS / "smoke.yaml").read_text()))
    data["guest"] = {"kernel": str(deb)}
    result, out = run_scenario(data, tmp_path, timeout=1800)
    (tmp_path / "run.stderr").write_text(result.stderr)  # what it said: the image build, boots, points
    assert result.returncode == 0, result.stderr[-4000:]
    every_target_verified(data, json.loads(result.stdout)["results"], VERIFIED)
    release = deb.name.split("_")[0].removeprefix("linux-image-")
    assert release in (out / "logs" / "initiator.dmesg").read_text().splitlines()[0]


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
