"""``sanlab run SCENARIO --kernel A --kernel B``: the arguments, refused in one line before any boot,
and the page of two kernels' runs (a VM test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from sanlab.main import cli
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.kernel_runs import kernel_runs
from sanlab.scenarios.loader import load_scenario

SMALL = """\
description: NVMe/TCP through a 2 s cable pull, the smallest run two kernels can be compared on
hosts:
  - {name: initiator, role: initiator}
  - {name: target, role: target}
links:
  - {name: roce, endpoints: [initiator, target], fabric: roce, rdma_driver: rxe}
targets:
  - {name: nvme-tcp, host: target, stack: nvmet, transport: nvme-tcp, size: 32m}
workloads:
  - {name: pull, rw: randwrite, bs: 4k, iodepth: 4, verify: crc32c, verify_size: 8m}
faults:
  - {at: 1s, link: roce, action: down, for: 2s}
projections:
  - {profile: modern-100g}
"""


@pytest.fixture
def small(tmp_path: Path) -> Path:
    path = tmp_path / "small.yaml"
    path.write_text(SMALL)
    return path


def _run(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["run", *args])
    return result.exit_code, result.output


def test_two_guests_are_the_scenario_twice_with_its_guest_replaced(small):
    a, b = kernel_runs(small, ["debian-12", "debian-13"])
    assert (a.folder, b.folder) == ("a-debian-12", "b-debian-13")
    assert (a.scenario.guest, b.scenario.guest) == ("debian-12", "debian-13")
    assert a.scenario.name == "small"
    kept = yaml.safe_load(b.text)
    assert kept["guest"] == "debian-13" and kept["targets"] == yaml.safe_load(SMALL)["targets"]


def test_a_kernel_file_is_brought_on_the_scenarios_own_guest_by_its_absolute_path(
    small, tmp_path, monkeypatch
):
    (tmp_path / "k").mkdir()
    deb = tmp_path / "k" / "linux-image-6.13.deb"
    deb.write_bytes(b"!<arch>\n")
    small.write_text(SMALL.replace("hosts:", "guest: debian-13\nhosts:", 1))
    monkeypatch.chdir(tmp_path)
    _, b = kernel_runs(small, ["debian-12", "k/linux-image-6.13.deb"])
    assert b.folder == "b-linux-image-6.13.deb"
    assert (b.scenario.kernel, b.scenario.guest_name) == (str(deb), "debian-13")
    assert yaml.safe_load(b.text)["guest"] == {"kernel": str(deb), "base": "debian-13"}


def test_the_kept_copy_loads_as_the_same_scenario(small, tmp_path):
    for r in kernel_runs(small, ["debian-13", "debian-12"]):
        copy = tmp_path / f"{r.folder}.yaml"
        copy.write_text(r.text)
        assert load_scenario(copy).model_dump(exclude={"name"}) == r.scenario.model_dump(exclude={"name"})


@pytest.mark.parametrize(
    ("kernels", "said"),
    [
        (["debian-12"], "Error: --kernel: give it 2 times, once per kernel to compare (given 1)"),
        (["debian-12", "debian-13", "debian-12"], "(given 3)"),
        (
            ["debian-12", "./no-such-kernel"],
            "Error: --kernel ./no-such-kernel: no such file or directory, "
            "and not a guest (give a linux-image .deb, a built kernel tree, or one of debian-12, debian-13)",
        ),
        (["debian-14", "debian-12"], "Error: --kernel debian-14: no such file or directory, and not a guest"),
        (["debian-12", "$(touch planted)"], "Error: --kernel $(touch planted): no such file or directory"),
        (["debian-12", " "], "Error: --kernel ' ': is no kernel"),
    ],
)
def test_a_bad_kernel_argument_is_one_line_before_anything_boots(small, tmp_path, monkeypatch, kernels, said):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    args = [str(small), "--out", str(out)] + [x for k in kernels for x in ("--kernel", k)]
    code, output = _run(args)
    assert code == 1 and said in output and len(output.strip().splitlines()) == 1, output
    assert not out.exists() and not (tmp_path / "planted").exists()


def test_a_file_that_is_no_kernel_package_is_refused_by_the_kernel_check(small, tmp_path):
    fake = tmp_path / "linux-image.deb"
    fake.write_text("not a package")
    code, output = _run(
        [str(small), "--out", str(tmp_path / "out"), "--kernel", "debian-12", "--kernel", str(fake)]
    )
    assert (
        code == 1
        and f"(--kernel {fake}): guest.kernel: kernel" in output
        and "is not a Debian package" in output
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("more", "said"),
    [
        (["--json"], "not with --json"),
        (["--dry-run"], "not with --dry-run"),
        (["--inventory", "hosts.yaml"], "not with --inventory"),
    ],
)
def test_options_that_do_not_go_with_two_kernels_are_refused(small, more, said):
    code, output = _run([str(small), "--kernel", "debian-12", "--kernel", "debian-13", *more])
    assert code == 1 and f"Error: --kernel: runs the scenario on two kernels' VMs; {said}" in output


def test_a_guest_override_would_boot_one_guest_twice_and_is_refused(small, monkeypatch):
    monkeypatch.setenv("SANLAB_GUEST", "debian-13")
    code, output = _run([str(small), "--kernel", "debian-12", "--kernel", "debian-13"])
    assert code == 1 and "$SANLAB_GUEST is set and would boot both runs on one guest" in output


def test_a_scenario_the_kernel_cannot_run_is_refused_for_that_kernel(tmp_path):
    """NVMe in-band authentication needs Debian 13's kernel: the Debian 12 side is refused."""
    auth = Path(__file__).resolve().parents[1] / "scenarios" / "nvme-auth.yaml"
    with pytest.raises(SanlabError) as caught:
        kernel_runs(auth, ["debian-13", "debian-12"])
    assert "(--kernel debian-12)" in str(caught.value)


@pytest.mark.vm
@pytest.mark.long  # needs the Debian 13 image (an 82-96 s build and save in CI): benchmarks/long_vm_tests.py
def test_one_scenario_on_two_kernels_prints_their_compare_page(small, tmp_path):
    """Debian 12's 6.1 and Debian 13's 6.12, one small run each, and the page of the two."""
    out = tmp_path / "pair"
    result = CliRunner().invoke(
        cli, ["run", str(small), "--out", str(out), "--kernel", "debian-12", "--kernel", "debian-13"]
    )
    assert result.exit_code == 0, result.output
    page = result.stdout
    assert page.startswith("# small vs small\n")
    assert "| run folder | a-debian-12 | b-debian-13 |" in page
    kernel = next(line for line in page.splitlines() if line.startswith("| kernel |"))
    assert "| 6.1." in kernel and "| 6.12." in kernel
    assert "| nvme-tcp nvmet eth randwrite 4k qd4 j1 | pass | pass |" in page  # NVMe/TCP: an eth point
    assert "(modern-100g) |" in page
    for side, guest in (("a-debian-12", "debian-12"), ("b-debian-13", "debian-13")):
        assert yaml.safe_load((out / side / "scenario.yaml").read_text())["guest"] == guest
        run = json.loads((out / side / "results.json").read_text())
        assert run["run"]["status"] == "complete" and run["results"][0]["verify"] == "pass"
