"""Read a scenario file and say, in the user's words, everything wrong with it.

Validation happens in two passes, both before anything runs: the schema pass
(types, allowed values, unknown fields) and the consistency pass (a link to an
unknown host, a transport on a fabric that cannot carry it).  Each problem is
one line: ``file: field.path: 'value' is ... (what is allowed)``.
"""

from __future__ import annotations

import reprlib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from sanlab.scenarios.errors import Problem, ScenarioError
from sanlab.scenarios.inventory import apply as apply_inventory
from sanlab.scenarios.schema import PATTERN_HINTS, Scenario
from sanlab.scenarios.semantics import check_scenario
from sanlab.scenarios.yamlfile import load_yaml


def field_path(loc: tuple[int | str, ...]) -> str:
    """('workloads', 0, 'bs', 1) -> 'workloads[0].bs[1]'."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
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


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 40
_REPR.maxlist = _REPR.maxdict = 4
_REPR.maxlevel = 2


def _shown(value: Any) -> str:
    """A value as the user wrote it in YAML (null, not Python's None), cut to a line."""
    return "null" if value is None else _REPR.repr(value)


def _describe(error: Any, root: type[BaseModel]) -> str:
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        owner = _model_at(root, tuple(error["loc"][:-1]))
        allowed = ", ".join(owner.model_fields) if owner else "see scenarios/schema.json"
        return f"unknown field (allowed: {allowed})"
    if kind == "missing":
        return "is required"
    if kind == "literal_error":
        return f"{_shown(value)} is not allowed (use {error['ctx']['expected']})"
    if kind == "value_error":
        return str(error["msg"]).removeprefix("Value error, ")
    if kind == "string_pattern_mismatch":
        hint = PATTERN_HINTS.get(error["ctx"]["pattern"], "see scenarios/schema.json")
        return f"{_shown(value)} is not allowed here ({hint})"
    return f"{_shown(value)}: {error['msg']}"


def problems_from(error: ValidationError, source: str, root: type[BaseModel]) -> list[Problem]:
    """Turn pydantic's errors into one Problem per mistake."""
    return [Problem(source, field_path(tuple(e["loc"])), _describe(e, root)) for e in error.errors()]


def read_yaml(path: Path) -> Any:
    """Parse a YAML file in bounded time and memory; any problem is a ScenarioError."""
    return load_yaml(path)


def parse_scenario(data: Any, source: str) -> Scenario:
    """Validate already-parsed data; raise ScenarioError listing every problem."""
    if not isinstance(data, dict):
        raise ScenarioError([Problem(source, "", "a scenario must be a YAML mapping")])
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(problems_from(exc, source, Scenario)) from None
    problems = [Problem(source, path, msg) for path, msg in check_scenario(scenario)]
    if problems:
        raise ScenarioError(problems)
    return scenario


def load_scenario(path: str | Path, inventory: Path | None = None) -> Scenario:
    """Read and validate a scenario file; its name defaults to the file's stem.

    With ``inventory``, its hosts are reached as that Ansible-style inventory says.
    """
    path = Path(path)
    data = read_yaml(path)
    if inventory is not None and isinstance(data, dict):
        data = apply_inventory(data, inventory)
    source = f"{path} (hosts from {inventory})" if inventory else str(path)
    scenario = parse_scenario(data, source)
    if scenario.name is None:
        scenario = scenario.model_copy(update={"name": path.stem})
    return scenario
