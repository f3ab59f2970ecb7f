"""A VM's command line and its end: $SANLAB_GUEST_KERNEL_ARGS's module parameters reach the
guest's kernel command line as separate words, and nothing else does; $SANLAB_TCG_CPU's CPU
model replaces TCG's "max", and nothing else reaches -cpu; a VM whose QEMU exited
is down for good (``HostDown``), which the link doctor does not try to mend."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from sanlab.emulator.agent import AgentError
from sanlab.emulator.images import Image
from sanlab.emulator.qemu import KERNEL_ARGS, TCG_CPU, Vm, VmSpec, qemu_version, tcg_warning
from sanlab.scenarios.errors import HostDown, SanlabError
from support import REPO, require_tool


def _append(tmp_path: Path) -> str:
    argv = Vm(VmSpec("initiator"), Image("k", tmp_path), "tcg", tmp_path, "qemu").command()
    return argv[argv.index("-append") + 1]


def test_without_it_the_command_line_is_sanlabs_own(monkeypatch, tmp_path):
    monkeypatch.delenv(KERNEL_ARGS, raising=False)
    assert _append(tmp_path) == "console=ttyS0 quiet loglevel=4 panic=-1 sanlab.host=initiator"


def test_module_parameters_are_appended_before_the_host_name(monkeypatch, tmp_path):
    monkeypatch.setenv(KERNEL_ARGS, " siw.abortive_close=0  rdma_rxe.debug ")
    words = _append(tmp_path).split()
    assert words[-3:] == ["siw.abortive_close=0", "rdma_rxe.debug", "sanlab.host=initiator"]


@pytest.mark.parametrize("word", ["init=/bin/sh;reboot", "a=$(id)", "x='y'", "sanlab.host=`id`", "é=1"])
def test_anything_but_a_parameter_is_refused_in_one_line(monkeypatch, tmp_path, word):
    monkeypatch.setenv(KERNEL_ARGS, f"siw.abortive_close=0 {word}")
    with pytest.raises(SanlabError) as err:
        _append(tmp_path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"${KERNEL_ARGS}: {word!r} is not a kernel parameter")


def _cpu(tmp_path: Path, accel: str = "tcg") -> str:
    argv = Vm(VmSpec("initiator"), Image("k", tmp_path), accel, tmp_path, "qemu").command()
    return argv[argv.index("-cpu") + 1]


def test_under_tcg_the_guests_run_max_and_under_kvm_the_hosts_cpu(monkeypatch, tmp_path):
    monkeypatch.delenv(TCG_CPU, raising=False)
    assert _cpu(tmp_path) == "max"
    assert _cpu(tmp_path, accel="kvm") == "host"


def test_sanlab_tcg_cpu_names_another_model_for_an_experiment(monkeypatch, tmp_path):
    monkeypatch.setenv(TCG_CPU, " Westmere,+avx ")
    assert _cpu(tmp_path) == "Westmere,+avx"
    assert _cpu(tmp_path, accel="kvm") == "host"


@pytest.mark.parametrize("model", ["max -S", "max;reboot", "$(id)", "max,,x", ",max", "max -accel kvm"])
def test_anything_but_a_cpu_model_is_refused_in_one_line(monkeypatch, tmp_path, model):
    monkeypatch.setenv(TCG_CPU, model)
    with pytest.raises(SanlabError) as err:
        _cpu(tmp_path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"${TCG_CPU}: {model!r} is not a QEMU CPU model")


def test_a_qemu_older_than_10_is_named_under_tcg_with_the_way_to_a_sound_one():
    said = tcg_warning((7, 2))
    assert said is not None and "\n" not in said
    assert said.startswith("warning: QEMU 7.2 under TCG:") and "bookworm-backports" in said
    assert tcg_warning((10, 0)) is None and tcg_warning((10, 1)) is None and tcg_warning(None) is None


@pytest.mark.subprocess  # asks the real qemu its version
def test_the_version_is_read_from_the_real_qemu():
    version = qemu_version(require_tool("qemu-system-x86_64"))
    assert version is not None and version >= (7, 2)


@pytest.mark.subprocess  # starts a real qemu
def test_a_vm_whose_qemu_exited_is_down_for_good(tmp_path):
    vm = Vm(VmSpec("target"), Image("k", tmp_path), "tcg", tmp_path, "qemu")
    vm.console_log.write_text("[  104.4] Kernel panic - not syncing: Fatal exception in interrupt\n")
    vm.process = subprocess.Popen(["true"])
    vm.process.wait()
    with pytest.raises(HostDown) as err:
        vm.run("true")
    assert isinstance(err.value, AgentError)  # what callers of the agent already catch
    assert str(err.value) == (
        "target: the VM is down (qemu exited with 0); its kernel panicked: Fatal exception in interrupt; "
        "the whole oops is in target.console.log"
    )


@pytest.mark.subprocess  # starts a real qemu
def test_a_vm_that_dies_while_it_is_asked_is_down_with_its_oops(tmp_path):
    """Its QEMU removes the agent's socket as it exits: the request is told the VM is down and
    why, at once, not that a socket went missing after the request's whole timeout."""
    vm = Vm(VmSpec("initiator"), Image("k", tmp_path), "tcg", tmp_path, "qemu")
    vm.console_log.write_bytes(
        (REPO / "tests/data/panics/rxe-ack-double-fault-6.12.console.log").read_bytes()
    )
    vm.process = subprocess.Popen(["sleep", "0.5"])  # up when asked, gone a moment later
    started = time.monotonic()
    with pytest.raises(HostDown) as err:
        vm.run("true", timeout=60)
    assert time.monotonic() - started < 5
    said = str(err.value)
    assert said.startswith(
        "initiator: the VM is down (qemu exited with 0); its kernel panicked: double fault"
    )
    assert "called from rxe_init_packet [rdma_rxe]" in said
