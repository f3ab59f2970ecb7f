"""Byte sizes, durations, rates and percentages as people write them, with their ranges.

fio, the kernel and the published tables all use binary multiples, so "4k" is
4096 bytes everywhere in sanlab.  This is the only place these are parsed,
and the only place their practical ranges live: a block size of 3 bytes or a
link of 999999999 Gbit/s is a mistake, not a wish, and is refused here with
the range that is allowed.

Only ASCII digits count: Python's ``\\d`` would read a full-width ``４k`` as 4k.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"^\s*([0-9]{1,20})\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE | re.ASCII)
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
    raise ValueError(f"{_short(value)} is not a size ({SIZE_HINT})")


def format_size(nbytes: int) -> str:
    """The shortest exact spelling of ``nbytes``: 4096 -> '4k', 1536 -> '1536'."""
    for suffix, factor in (("t", 1 << 40), ("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)):
        if nbytes >= factor and nbytes % factor == 0:
            return f"{nbytes // factor}{suffix}"
    return str(nbytes)


def _in_range(
    value: object, number: float, what: str, low: float, high: float, show: Callable[[Any], str]
) -> None:
    if not low <= number <= high:
        raise ValueError(f"{_short(value)} is out of range for a {what} ({show(low)} to {show(high)})")


@dataclass(frozen=True)
class SizeRange:
    """What a size field may hold: bounds, and a multiple it must be of."""

    what: str
    low: int
    high: int
    multiple: int = 1

    def check(self, value: object) -> int:
        nbytes = parse_size(value)
        _in_range(value, nbytes, self.what, self.low, self.high, format_size)
        if nbytes % self.multiple:
            raise ValueError(
                f"{_short(value)} is not a multiple of {format_size(self.multiple)} "
                f"(a {self.what} is whole {format_size(self.multiple)} units)"
            )
        return nbytes


# fio and the block layer move whole 512-byte sectors; 16 MiB is far beyond
# any published table (they stop at 1-4 MiB) and keeps one I/O's frames bounded.
BLOCK_SIZE = SizeRange("block size", 512, 16 << 20, 512)
# A guest below 256 MiB does not boot the image; 16 GiB is most of this
# class of machine.  QEMU takes whole MiB.
HOST_MEMORY = SizeRange("host memory", 256 << 20, 16 << 30, 1 << 20)
# A LUN: at least 1 MiB of whole sectors, at most 1 TiB (null_blk's sizes are in MiB).
LUN_SIZE = SizeRange("target size", 1 << 20, 1 << 40, 1 << 20)


_DURATION = re.compile(r"^\s*([0-9]{1,9}(?:\.[0-9]{1,9})?)\s*(us|ms|s|m)?\s*$", re.ASCII)
_SECONDS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, None: 1.0}
DURATION_HINT = "use 10, 500us, 2ms, 30s, 1m"


def parse_duration(value: object) -> float:
    """Seconds in ``value`` (a number of seconds or a string like '2ms', '30s')."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if math.isfinite(value) and value >= 0:
            return float(value)
    elif isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            return float(match.group(1)) * _SECONDS[match.group(2)]
    raise ValueError(f"{_short(value)} is not a duration ({DURATION_HINT})")


@dataclass(frozen=True)
class DurationRange:
    what: str
    low: float
    high: float

    def check(self, value: object) -> float:
        seconds = parse_duration(value)
        _in_range(value, seconds, self.what, self.low, self.high, format_duration)
        return seconds


def format_duration(seconds: float) -> str:
    if seconds and seconds < 1e-3:
        return f"{seconds * 1e6:g}us"
    if seconds and seconds < 1:
        return f"{seconds * 1e3:g}ms"
    return f"{seconds:g}s"


# fio needs a second to say anything; an hour is longer than any lab period.
RUNTIME = DurationRange("runtime", 1.0, 3600.0)
# One-way delay of an emulated cable: 0 to 10 s (a geostationary hop is 0.25 s).
LINK_DELAY = DurationRange("link delay", 0.0, 10.0)
# A fault's start (from a point's first completed I/O) and how long it lasts.
FAULT_AT = DurationRange("fault time", 0.0, 600.0)
FAULT_LENGTH = DurationRange("fault length", 0.1, 120.0)
# How long one command in a lab's guest may run (sanlab lab exec --timeout).
EXEC_TIMEOUT = DurationRange("timeout", 0.1, 86400.0)


_RATE = re.compile(r"^\s*([0-9]{1,12}(?:\.[0-9]{1,9})?)\s*([kmg])?bit\s*$", re.IGNORECASE | re.ASCII)
_BITS = {"k": 1e3, "m": 1e6, "g": 1e9, None: 1.0}
RATE_HINT = "use 100mbit, 1gbit, 10gbit"
# tc's token bucket shapes from about 100 kbit/s; 400 Gbit/s is the fastest NIC class.
RATE_LOW, RATE_HIGH = 100e3, 400e9


def parse_rate(value: object) -> float:
    """Bits per second in ``value``, written as tc writes rates: '100mbit', '1gbit'."""
    if isinstance(value, str):
        match = _RATE.match(value)
        if match:
            unit = match.group(2).lower() if match.group(2) else None
            bits = float(match.group(1)) * _BITS[unit]
            if RATE_LOW <= bits <= RATE_HIGH:
                return bits
            raise ValueError(f"{_short(value)} is out of range for a link rate (100kbit to 400gbit)")
    raise ValueError(f"{_short(value)} is not a rate ({RATE_HINT})")


_PERCENT = re.compile(r"^\s*([0-9]{1,3}(?:\.[0-9]{1,9})?)\s*%\s*$", re.ASCII)


def parse_percent(value: object) -> float:
    """A percentage 0..100 written as '0.5%' or a bare number."""
    match = _PERCENT.match(value) if isinstance(value, str) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif match:
        number = float(match.group(1))
    else:
        raise ValueError(f"{_short(value)} is not a percentage (use 0%, 0.1%, 2%)")
    if not 0.0 <= number <= 100.0:  # also refuses NaN
        raise ValueError(f"{_short(value)} is not a percentage between 0% and 100%")
    return number


def _short(value: object, limit: int = 40) -> str:
    """A value for an error line: repr'd, and cut so a huge input cannot flood the terminal."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
