"""pydantic's validation errors, in the user's words: the one formatter.

Every file sanlab validates (scenarios, profiles, sweeps, lab exercises, calibration
runs, the JSON it reads back) reports a mistake the same way: ``source: field.path:
what is wrong (what is allowed)``, the value shown as the user wrote it and cut to a
line.  Four modules once each formatted pydantic's errors their own way, so one file's
mistake read differently from another's; ``tests/test_invalid.py`` fails when product
code catches a ``ValidationError`` and formats it without this module.
"""

from __future__ import annotations

import reprlib
from typing import Any

from pydantic import BaseModel, ValidationError

from sanlab.scenarios.errors import Problem, SanlabError
from sanlab.scenarios.fields import PATTERN_HINTS

_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 40
_REPR.maxlist = _REPR.maxdict = 4
_REPR.maxlevel = 2


def field_path(loc: tuple[int | str, ...]) -> str:
    """('workloads', 0, 'bs', 1) -> 'workloads[0].bs[1]'; a mapping's key is marked as one."""
    text = ""
    for part in loc:
        if part == "[key]":  # pydantic's mark for a mapping's key: the value shown is the key
            text += " (a key)"
        elif isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def shown(value: Any) -> str:
    """A value as the user wrote it in YAML (null, not Python's None), cut to a line."""
    return "null" if value is None else _REPR.repr(value)


def _model_at(model: Any, loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The pydantic model class that owns the last element of ``loc``."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = current.model_fields.get(part)
        if field is None:
            return current
        current = _inner_model(field.annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _inner_model(annotation: Any) -> Any:
    """Dig a BaseModel out of list[X] / X | None annotations."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def describe(error: Any, root: Any = None) -> str:
    """One pydantic error as what is wrong and what is allowed; ``root`` (the model validated,
    if it is one) names the fields allowed beside an unknown one."""
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        owner = _model_at(root, tuple(error["loc"][:-1]))
        allowed = ", ".join(owner.model_fields) if owner else "see scenarios/schema.json"
        return f"unknown field (allowed: {allowed})"
    if kind == "missing":
        return "is required"
    if kind == "literal_error":
        return f"{shown(value)} is not allowed (use {error['ctx']['expected']})"
    if kind == "value_error":
        return str(error["msg"]).removeprefix("Value error, ")
    if kind == "string_pattern_mismatch":
        hint = PATTERN_HINTS.get(error["ctx"]["pattern"], "see scenarios/schema.json")
        return f"{shown(value)} is not allowed here ({hint})"
    return f"{shown(value)}: {error['msg']}"


def problems_from(
    error: ValidationError, source: str, root: Any = None, at: tuple[int | str, ...] = ()
) -> list[Problem]:
    """One Problem per mistake pydantic found in ``source``; ``at`` is where in the file the
    validated part sits (``("results", 3)`` for one record of a results file)."""
    return [Problem(source, field_path((*at, *e["loc"])), describe(e, root)) for e in error.errors()]


def what_is_wrong(error: ValidationError, root: Any = None) -> str:
    """The first mistake without its place: for a single value checked on its own, whose
    place the caller names."""
    return describe(error.errors()[0], root)


def in_one_line(error: ValidationError, root: Any = None, at: tuple[int | str, ...] = ()) -> str:
    """The first mistake as ``field.path: what is wrong``, without a source: for a validator
    that hands a nested part's mistake to the model around it, and for a single value."""
    first = error.errors()[0]
    where = field_path((*at, *first["loc"]))
    return f"{where}: {describe(first, root)}" if where else describe(first, root)


def first_problem(
    error: ValidationError, source: str, root: Any = None, at: tuple[int | str, ...] = ()
) -> SanlabError:
    """The first mistake as one line, saying how many more there are: for documents sanlab
    reads back (its own state, an agent's reply, a run's records), where one line is the answer."""
    line = str(problems_from(error, source, root, at)[0])
    more = error.error_count() - 1
    return SanlabError(line + (f" (and {more} more)" if more else ""))
