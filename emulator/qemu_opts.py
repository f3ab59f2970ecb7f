"""Values inside QEMU's option strings (``-chardev socket,id=con,path=…``): escaped, never pasted.

QEMU splits an option string at every comma.  A run folder the user named
``lab,logfile=/etc/motd`` pasted into ``path=`` would add an option of the user's
choosing (there: a file QEMU writes); a plain ``a,b`` folder makes QEMU refuse the
line.  QEMU reads a doubled comma as a literal one, both in QemuOpts (``-chardev``,
``-qmp unix:``) and in keyval (``-netdev``, ``-object``), so every value that comes
from a path or a name goes through :func:`opt_value`.  ``tests/test_qemu_opts.py``
finds option strings that paste a value without it.
"""

from __future__ import annotations

from pathlib import Path

from sanlab.scenarios.errors import SanlabError


def opt_value(value: str | Path) -> str:
    """``value`` as QEMU reads it back inside an option string: commas doubled.

    A newline or NUL cannot be a file name QEMU is given on its command line, so either is
    refused rather than passed on."""
    text = str(value)
    if "\n" in text or "\0" in text:
        raise SanlabError(f"{text!r} cannot go into a QEMU option: it holds a newline or NUL")
    return text.replace(",", ",,")
