"""Flags no x86-64 CPU can hold: the sign that the emulator, not the guest, went wrong.

RFLAGS bits 3, 5, 15 and 22-63 are reserved: a CPU keeps them 0 whatever
the code it runs does (POPF and IRET cannot set them; Intel SDM vol. 1,
3.4.3).  Under QEMU 7.2's TCG, which Debian 12 ships, every one of the
Debian 13 guest's six kernel panics saved such flags (emulator/README.md);
TCG keeps a guest's arithmetic flags lazily, and a value built from stale
lazy state and then kept looks like these.  The same garbage can set the
live bits too (TF, DF, IOPL), and a kernel running with its direction
flag set copies memory backwards.  So a value with a
reserved bit set names the emulator as the culprit, in an oops's saved
``EFLAGS`` and in a running guest's registers alike.
"""

from __future__ import annotations

import re

RESERVED = ~((1 << 22) - 1) & ((1 << 64) - 1) | (1 << 15) | (1 << 5) | (1 << 3)

_SAVED = re.compile(r"\bEFLAGS: ([0-9a-f]{1,16})\b")
_LIVE = re.compile(r"\b[RE]FL=([0-9a-f]{1,16})\b")


def impossible(flags: int) -> bool:
    """Whether ``flags`` has a bit set that no x86-64 CPU sets."""
    return bool(flags & RESERVED)


def saved_flags(text: str) -> int | None:
    """The first ``EFLAGS:`` an oops report shows (its registers at the fault)."""
    m = _SAVED.search(text)
    return int(m.group(1), 16) if m else None


def live_flags(registers: str) -> int | None:
    """The flags in QEMU's ``info registers`` (``RFL=`` in 64-bit mode, ``EFL=`` before)."""
    m = _LIVE.search(registers)
    return int(m.group(1), 16) if m else None


def verdict(flags: int) -> str:
    """One clause saying why such flags put the blame on the emulator."""
    return (
        f"flags {flags:08x} hold bits no x86-64 CPU can set: the emulator corrupted the guest's "
        "state (QEMU 7.2's TCG does; emulator/README.md)"
    )
