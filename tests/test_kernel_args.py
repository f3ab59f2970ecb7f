"""$SANLAB_GUEST_KERNEL_ARGS: module parameters for an experiment reach the guest's kernel
command line as separate words, and nothing else does."""

from __future__ import annotations

from pathlib import Path

import pytest

from sanlab.emulator.images import Image
from sanlab.emulator.qemu import KERNEL_ARGS, Vm, VmSpec
from sanlab.scenarios.errors import SanlabError


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
