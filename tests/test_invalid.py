"""One formatter for pydantic's errors (scenarios/invalid.py), and no code beside it.

Each of four modules once turned a ``ValidationError`` into a line its own way, so the
same mistake read ``results[0].iops = True`` in one file and ``iops: True: …`` in
another.  These tests pin the format and fail on product code that reads pydantic's
errors (``.errors()``) anywhere but the formatter."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from sanlab.scenarios.invalid import field_path, first_problem, in_one_line, problems_from

REPO = Path(__file__).resolve().parent.parent
PRODUCT = ("cli", "dissectors", "emulator", "models", "scenarios", "targets", "vm-images")


class _Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ghz: float
    kind: str = "ramdisk"


class _Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    inner: _Inner
    jobs: list[int]


def _error(data: object) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        _Outer.model_validate(data)
    return caught.value


def test_a_mistake_names_the_file_the_field_the_value_and_what_is_allowed():
    (problem,) = problems_from(
        _error({"inner": {"ghz": 1.0, "colour": "red"}, "jobs": [1]}), "a.yaml", _Outer
    )
    assert str(problem) == "a.yaml: inner.colour: unknown field (allowed: ghz, kind)"
    (problem,) = problems_from(_error({"inner": {"ghz": 1.0}, "jobs": [1, "x"]}), "a.yaml", _Outer)
    assert (
        str(problem)
        == "a.yaml: jobs[1]: 'x': Input should be a valid integer, unable to parse string as an integer"
    )


def test_where_the_part_sits_in_its_file_leads_the_field():
    error = _error({"inner": {}, "jobs": []})
    assert (
        str(first_problem(error, "r.json", _Outer, at=("results", 3)))
        == "r.json: results[3].inner.ghz: is required"
    )
    assert in_one_line(error, _Outer) == "inner.ghz: is required"


def test_one_line_counts_the_mistakes_it_leaves_out():
    error = _error({"inner": {"ghz": "fast", "x": 1}, "jobs": None})
    assert str(first_problem(error, "r.json")).endswith("(and 2 more)")
    assert "\n" not in str(first_problem(error, "r.json"))


def test_a_mapping_key_is_marked_as_one():
    assert field_path(("stacks", "[key]")) == "stacks (a key)"


def _reads_errors(source: str) -> list[int]:
    """Lines of ``source`` that call ``.errors()`` or ``.error_count()`` on anything."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("errors", "error_count")
    ]


def test_the_scan_finds_a_formatter_of_its_own():
    assert _reads_errors("try:\n    f()\nexcept ValidationError as exc:\n    m = exc.errors()[0]['msg']\n")


def test_no_product_code_formats_pydantics_errors_but_the_formatter():
    found = [
        f"{path.relative_to(REPO)}:{line}"
        for folder in PRODUCT
        for path in sorted((REPO / folder).rglob("*.py"))
        if path.relative_to(REPO).as_posix() != "scenarios/invalid.py"
        for line in _reads_errors(path.read_text())
    ]
    assert not found, "format ValidationError through sanlab.scenarios.invalid: " + ", ".join(found)
