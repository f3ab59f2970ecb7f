"""The one reader: every JSON document, CSV table and typed value sanlab reads.

A file sanlab reads may be hostile or merely broken: a FIFO (reading it
blocks for ever), a device, a folder, a symlink loop, gigabytes, a NUL byte,
JSON nested 100,000 deep (``json.loads`` recurses), ``NaN`` or ``1e999``
where a figure belongs, or a list where a mapping belongs.  Each is refused
here, in one line naming the file, the field, the value and what is allowed,
before any of it is acted on:

- bytes come only from ``files.read_bounded`` (regular files, a size limit,
  never blocking); YAML only from ``yamlfile.load_yaml`` (the same, on
  PyYAML's event stream);
- JSON's nesting is measured by a scan of its brackets *before* it is parsed,
  and ``NaN``, ``Infinity`` and numbers that overflow to infinity are refused;
- ``typed`` holds the parsed value to a pydantic schema, so a wrong type at
  any level is a line, not an ``AttributeError`` three modules later;
- ``read_csv`` refuses NUL bytes and missing columns, and ``csv_number``
  names the row, column and value of a figure that is not one.

tests/test_hostile_reading.py holds the corpus, and a test there fails when
product code parses a file without this module.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.files import read_bounded
from sanlab.scenarios.invalid import first_problem

# Deeper than any document sanlab writes (results: 4 levels; lab state: 4), far below
# the interpreter's recursion limit.
MAX_DEPTH = 32
MAX_JSON_BYTES = 64 << 20
MAX_CSV_BYTES = 16 << 20
MAX_CSV_ROWS = 100_000
T = TypeVar("T")

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def json_depth(text: str) -> int:
    """The deepest nesting of ``text``'s arrays and objects, found without recursion."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    depth = deepest = 0
    for char in brackets:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number here (give a finite figure)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is not a finite number")
    return value


def parse_json(text: str | bytes, source: str, depth: int = MAX_DEPTH) -> Any:
    """``text`` as JSON, refused in one line when torn, nested deeper than ``depth``,
    or holding NaN, Infinity or a number that overflows."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SanlabError(f"{source}: not UTF-8 text (byte at offset {exc.start})") from None
    if "\x00" in text:
        raise SanlabError(f"{source}: not text (a NUL byte at offset {text.index(chr(0))})")
    found = json_depth(text)
    if found > depth:
        raise SanlabError(f"{source}: nests {found:,} levels deep; at most {depth} are read")
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except (ValueError, RecursionError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SanlabError(f"{source}: not valid JSON ({message[:120]})") from None


def load_json(path: Path, what: str, limit: int = MAX_JSON_BYTES, depth: int = MAX_DEPTH) -> Any:
    """A bounded JSON file (``files.read_bounded``: a regular file of at most ``limit`` bytes)."""
    return parse_json(read_bounded(path, limit, what), f"{what} {path}", depth)


def typed(schema: Any, data: Any, source: str, strict: bool = True) -> Any:
    """``data`` validated against ``schema`` (a pydantic model or type); the first mistake
    is one line naming ``source``, the field, the value and what is allowed."""
    try:
        return TypeAdapter(schema).validate_python(data, strict=strict)
    except ValidationError as exc:
        raise first_problem(exc, source, schema) from None


def read_csv(
    path: Path, what: str, required: Iterable[str] = (), limit: int = MAX_CSV_BYTES
) -> list[dict[str, str]]:
    """A bounded CSV table's rows by its header; NUL bytes, ragged rows and missing
    ``required`` columns are refused in one line naming the file and row."""
    data = read_bounded(path, limit, what)
    source = f"{what} {path}"
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SanlabError(f"{source}: not UTF-8 text (byte at offset {exc.start})") from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise SanlabError(f"{source}: line {line}: a NUL byte; a table is text")
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = reader.fieldnames or []
    missing = [c for c in required if c not in header]
    if missing:
        raise SanlabError(
            f"{source}: no column {', '.join(repr(c) for c in missing)} (header: {', '.join(header)[:120]})"
        )
    rows = []
    try:
        for row in reader:
            if None in row or any(v is None for v in row.values()):
                raise SanlabError(
                    f"{source}: row {reader.line_num}: {len(header)} columns in the header, not in this row"
                )
            rows.append(row)
            if len(rows) > MAX_CSV_ROWS:
                raise SanlabError(f"{source}: more than {MAX_CSV_ROWS:,} rows")
    except csv.Error as exc:
        raise SanlabError(f"{source}: row {reader.line_num}: not CSV ({exc})") from None
    return rows


def csv_number(
    source: str, row: int, column: str, text: str, low: float = 0.0, high: float = 1e12, whole: bool = False
) -> float:
    """A figure of a table's cell, finite and in ``[low, high]``; else one line naming the
    file, row, column and value."""
    kind = "a whole number" if whole else "a number"
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or not low <= value <= high or (whole and value != int(value)):
        where = f"{source}: row {row}: " if row else ""  # row 0: the caller names file and line
        raise SanlabError(f"{where}column '{column}' is {_short(text)}; give {kind} from {low:g} to {high:g}")
    return value
