"""Reading a student's answer as people write numbers: 0x25, 410,825, 2.86M, 12 µs, 9.6 GB/s.

A lab's checker compares an answer with what the tools say.  YAML reads
``0x25`` as the integer 37 and ``410,825`` as text; a person writes ``2.86M``
for what the model prints as 2,860,112.  Each spelling means one number, and
a unit, when one is given, is converted to the exercise's own before the
comparison.  A wrong answer gets a reason that says what was read and what
kind of value was wanted, never the value itself.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

# Units an answer may carry, by kind, as a factor to the kind's base (seconds, bytes/s, ratio).
UNITS: dict[str, tuple[str, float]] = {
    "ns": ("time", 1e-9),
    "us": ("time", 1e-6),
    "µs": ("time", 1e-6),
    "μs": ("time", 1e-6),
    "ms": ("time", 1e-3),
    "s": ("time", 1.0),
    "b/s": ("rate", 1 / 8),
    "kb/s": ("rate", 1e3 / 8),
    "mb/s": ("rate", 1e6 / 8),
    "gb/s": ("rate", 1e9 / 8),
    "kib/s": ("rate", 1024.0),
    "mib/s": ("rate", 1024.0**2),
    "gib/s": ("rate", 1024.0**3),
    "%": ("ratio", 0.01),
    "x": ("ratio", 1.0),
    "×": ("ratio", 1.0),
}
# Byte rates are written with a capital B (GB/s); bit rates with a small one (Gb/s).
BYTE_RATES = {"KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "B/s": 1.0}
SUFFIXES = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}
COUNTS = ("iops", "io/s", "ios", "segments", "frames", "bytes", "b")  # words that name what is counted
_NUMBER = re.compile(
    r"^\s*(?P<sign>[-+]?)"
    r"(?:(?P<hex>0[xX][0-9a-fA-F]+)|(?P<dec>(?:\d[\d,_' \u2009\u202f]*)?\.?\d+(?:[eE][-+]?\d+)?))"
    r"\s*(?P<suffix>[kKMG](?![a-zA-Z]))?\s*(?P<unit>\S+)?\s*$"
)


@dataclass(frozen=True)
class Reading:
    """What an answer says: a number in the exercise's unit, or why it says none."""

    value: float | None
    problem: str = ""


def _unit_factor(unit: str) -> tuple[str, float] | None:
    """A unit's kind and factor: MB/s is bytes, Mb/s bits; otherwise case does not matter."""
    if unit in BYTE_RATES:
        return "rate", BYTE_RATES[unit]
    return UNITS.get(unit) or UNITS.get(unit.lower())


def read_number(given: object, unit: str | None = None) -> Reading:
    """``given`` as a number in ``unit`` (the exercise's), or the reason it is not one."""
    if isinstance(given, bool):
        return Reading(None, "is a yes/no, not a number")
    if isinstance(given, (int, float)):
        return Reading(float(given)) if math.isfinite(given) else Reading(None, "is not a finite number")
    if not isinstance(given, str) or len(given) > 64:
        return Reading(None, "is not a number (write e.g. 1234, 1,234, 1.2k or 0x4d2)")
    match = _NUMBER.match(given)
    if not match:
        return Reading(None, "is not a number (write e.g. 1234, 1,234, 1.2k or 0x4d2)")
    if match["hex"]:
        value = float(int(match["hex"], 16))
    else:
        digits = re.sub(r"[,_' \u2009\u202f]", "", match["dec"])
        value = float(digits)
    value *= -1 if match["sign"] == "-" else 1
    value *= SUFFIXES[match["suffix"]] if match["suffix"] else 1
    return _in_unit(value, match["unit"], unit)


def _in_unit(value: float, written: str | None, wanted: str | None) -> Reading:
    if written is None or written.lower() in COUNTS:
        return Reading(value)
    have = _unit_factor(written)
    if have is None:
        return Reading(None, f"has a unit sanlab does not know ({written!r})")
    want = _unit_factor(wanted) if wanted else None
    if want is None:
        return Reading(None, f"carries a unit ({written}) where a plain number is asked for")
    if have[0] != want[0]:
        return Reading(None, f"is a {have[0]} ({written}), but a {want[0]} in {wanted} is asked for")
    return Reading(value * have[1] / want[1])


def judge(
    given: object, expected: object, tolerance: float, unit: str | None = None, words: Sequence[str] = ()
) -> tuple[bool, str]:
    """(right, reason): a number within ``tolerance`` of the expected one, or the same word.

    An expected number may be written as hex text (``"0x25"``): the answer
    is then read as a number too, so that 0x25, "0x25" and 37 all agree.
    Words are compared loosely (``initiator CPU``, ``initiator_cpu`` and
    ``initiator-cpu`` are one word); ``words`` are the names the handout
    lists, so an answer that is none of them is told so.  A reason echoes
    the answer as it was written, never as it was read.
    """
    written = str(given).strip()[:40]
    wanted = _expected_number(expected)
    if wanted is None:
        if loose_word(given) == loose_word(expected):
            return True, ""
        if words and loose_word(given) not in {loose_word(w) for w in words}:
            return False, f"{written!r} is none of the names the handout lists ({', '.join(words)})"
        return False, f"{written!r} is not it (a word is asked for)"
    reading = read_number(given, unit)
    if reading.value is None:
        return False, f"{written!r} {reading.problem}"
    if math.isclose(reading.value, wanted, rel_tol=tolerance, abs_tol=1e-9):
        return True, ""
    within = f"within {tolerance:.0%}" if tolerance else "exact"
    return False, f"{written!r} is not it (a number is asked for, {within})"


def loose_word(text: object) -> str:
    """A word as the checker compares it: no case, no spaces, underscores or hyphens."""
    return re.sub(r"[\s_-]+", "", str(text)).lower()


def _expected_number(expected: object) -> float | None:
    if isinstance(expected, bool):
        return None
    if isinstance(expected, (int, float)):
        return float(expected)
    if isinstance(expected, str) and re.fullmatch(r"0[xX][0-9a-fA-F]+", expected.strip()):
        return float(int(expected.strip(), 16))
    return None
