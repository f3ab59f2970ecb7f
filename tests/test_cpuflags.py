"""Flags no x86-64 CPU can hold (emulator/cpuflags.py): read from an oops's saved EFLAGS and
from a real QEMU's registers, and told apart from flags a CPU can hold."""

from __future__ import annotations

import subprocess
import time

import pytest

from sanlab.emulator.cpuflags import impossible, live_flags, saved_flags
from sanlab.emulator.monitor import paused_registers
from support import require_tool


@pytest.mark.parametrize(
    "flags",
    [
        0x7E023702,  # saved by Debian 13's rxe double fault under QEMU 7.2 (tests/data/panics)
        0xBDC80246,  # a user frame of the same run: bits 22-31 set on every frame after it
        0x81768282,  # bit 15
        0x0000020A,  # bit 3
        0x00000222,  # bit 5
        1 << 40,
    ],
)
def test_reserved_bits_make_flags_impossible(flags):
    assert impossible(flags)


@pytest.mark.parametrize("flags", [0x2, 0x246, 0x10246, 0x200A97, 0x3F7FD7])
def test_flags_a_cpu_can_hold_are_not(flags):
    """Every defined bit (CF to ID, IOPL 3, VM and RF included) with bit 1 set is a CPU's."""
    assert not impossible(flags)


def test_an_oops_and_qemus_registers_are_read():
    assert saved_flags("[ 1.0] RSP: 0018:ff3497ce8006bbd0 EFLAGS: 7e023702\n[ 1.0] RAX: 0") == 0x7E023702
    assert saved_flags("no registers here") is None
    assert live_flags("RIP=ffffffffb110fa3f RFL=00000216 [----AP-] CPL=0 II=0") == 0x216
    assert live_flags("EIP=0000fff0 EFL=00000002 [-------] CPL=0") == 0x2


@pytest.mark.subprocess  # starts a real qemu, paused
def test_a_real_qemus_paused_registers_hold_sound_flags(tmp_path):
    """A CPU just out of reset holds RFLAGS 2; read through QMP as a run's end reads a guest's."""
    qemu = require_tool("qemu-system-x86_64")
    socket = tmp_path / "qmp.sock"
    process = subprocess.Popen(
        [qemu, "-S", "-accel", "tcg", "-machine", "q35", "-nodefaults", "-display", "none"]
        + ["-qmp", f"unix:{socket},server=on,wait=off"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while not socket.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        flags = live_flags(paused_registers(socket, "show the registers"))
        assert flags == 0x2 and not impossible(flags)
    finally:
        process.kill()
        process.wait()
