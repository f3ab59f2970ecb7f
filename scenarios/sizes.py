"""Byte sizes as people write them: 512, 4k, 64k, 1m, 2g.

fio, the kernel and the published tables all use binary multiples, so "4k" is
4096 bytes everywhere in sanlab.  This is the only place sizes are parsed.
"""

from __future__ import annotations

import re

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)
SIZE_HINT = "use 512, 4k, 64k, 1m"


def parse_size(value: object) -> int:
    """Return the number of bytes in ``value`` (an int or a string like '64k').

    Raises ValueError with a message fit for the user when it is not a size.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size ({SIZE_HINT})")
    if isinstance(value, int):
        if value <= 0:
            raise ValueError(f"{value!r} is not a size ({SIZE_HINT})")
        return value
    if isinstance(value, str):
        match = _SIZE.match(value)
        if match:
            number = int(match.group(1)) * _UNITS[match.group(2).lower()]
            if number > 0:
                return number
    raise ValueError(f"{value!r} is not a size ({SIZE_HINT})")


def format_size(nbytes: int) -> str:
    """The shortest exact spelling of ``nbytes``: 4096 -> '4k', 1536 -> '1536'."""
    for suffix, factor in (("t", 1 << 40), ("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)):
        if nbytes >= factor and nbytes % factor == 0:
            return f"{nbytes // factor}{suffix}"
    return str(nbytes)


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|ms|s|m)?\s*$")
_SECONDS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, None: 1.0}
DURATION_HINT = "use 10, 500us, 2ms, 30s, 1m"


def parse_duration(value: object) -> float:
    """Seconds in ``value`` (a number of seconds or a string like '2ms', '30s')."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            return float(match.group(1)) * _SECONDS[match.group(2)]
    raise ValueError(f"{value!r} is not a duration ({DURATION_HINT})")


_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg])?bit\s*$", re.IGNORECASE)
_BITS = {"k": 1e3, "m": 1e6, "g": 1e9, None: 1.0}
RATE_HINT = "use 100mbit, 1gbit, 10gbit"


def parse_rate(value: object) -> float:
    """Bits per second in ``value``, written as tc writes rates: '100mbit', '1gbit'."""
    if isinstance(value, str):
        match = _RATE.match(value)
        if match:
            unit = match.group(2).lower() if match.group(2) else None
            bits = float(match.group(1)) * _BITS[unit]
            if bits > 0:
                return bits
    raise ValueError(f"{value!r} is not a rate ({RATE_HINT})")


_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


def parse_percent(value: object) -> float:
    """A percentage 0..100 written as '0.5%' or a bare number."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str) and _PERCENT.match(value):
        number = float(_PERCENT.match(value).group(1))  # type: ignore[union-attr]
    else:
        raise ValueError(f"{value!r} is not a percentage (use 0%, 0.1%, 2%)")
    if not 0.0 <= number <= 100.0:
        raise ValueError(f"{value!r} is not a percentage between 0% and 100%")
    return number
