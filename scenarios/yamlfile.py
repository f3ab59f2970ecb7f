"""Reading a YAML file that may be hostile, in bounded time and memory.

A scenario or profile is a small hand-written file.  Anything else is
refused before it is parsed in full: a FIFO or device (it would block), a
file over 1 MiB, bytes that are not UTF-8, nesting deeper than a person
writes, more nodes than a person writes, alias "bombs" whose expansion
would be huge, and duplicate keys (PyYAML lets the last one win silently).

The checks run on PyYAML's event stream and node graph, before Python
objects are built, so no limit is ever crossed to find out that it is.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from sanlab.scenarios.errors import Problem, ScenarioError

MAX_BYTES = 1 << 20
MAX_DEPTH = 24
MAX_EVENTS = 200_000
MAX_EXPANDED_NODES = 200_000
# An integer longer than this is no figure a person means (and Python refuses to parse 4,300 digits).
MAX_NUMBER_CHARS = 40
INT_TAG = "tag:yaml.org,2002:int"


def _refuse(source: str, message: str, where: str = "") -> ScenarioError:
    return ScenarioError([Problem(source, where, message)])


def read_text(path: Path) -> str:
    """The file's text, if it is a regular file of at most 1 MiB of UTF-8."""
    source = str(path)
    try:
        info = os.stat(path)
    except OSError as exc:
        raise _refuse(source, f"cannot read: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise _refuse(source, f"cannot read: {kind} (give a .yaml file)")
    if info.st_size > MAX_BYTES:
        raise _refuse(source, f"is {info.st_size:,} bytes; a scenario or profile is at most {MAX_BYTES:,}")
    try:
        # O_NONBLOCK: should the file be swapped for a FIFO after the check, opening it does not wait
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise _refuse(source, "cannot read: not a regular file (give a .yaml file)")
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise _refuse(source, f"cannot read: {exc.strerror}") from None
    if len(data) > MAX_BYTES:
        raise _refuse(source, f"is over {MAX_BYTES:,} bytes; a scenario or profile is at most that")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad = f"byte 0x{data[exc.start]:02x} at offset {exc.start}"
        raise _refuse(source, f"is not UTF-8 text ({bad}); save it as UTF-8") from None
    if "\x00" in text:
        raise _refuse(source, f"is not text (a NUL byte at offset {text.index(chr(0))})")
    return text


# libyaml's parser where PyYAML was built with it (the wheels are): the pure-Python one
# takes half a second over the dozen YAML files one projection reads.
_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_Base):
    """A safe loader; kept separate so nothing here changes PyYAML's global loader."""


def _line(node_or_event: Any) -> str:
    mark = getattr(node_or_event, "start_mark", None)
    return f"line {mark.line + 1}" if mark else ""


def _check_events(text: str, source: str) -> None:
    """Depth and size from the event stream: the parser itself is not recursive."""
    depth = 0
    try:
        for count, event in enumerate(yaml.parse(text, Loader=_Loader), start=1):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise _refuse(source, f"nests deeper than {MAX_DEPTH} levels", _line(event))
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
            if count > MAX_EVENTS:
                raise _refuse(source, f"has more than {MAX_EVENTS:,} YAML elements", _line(event))
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, source) from None


def _syntax_error(exc: yaml.YAMLError, source: str) -> ScenarioError:
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return _refuse(source, f"not valid YAML: {problem}", where)


def _check_nodes(root: yaml.Node, source: str) -> None:
    """Walk the node graph as construction would, aliases expanded, with a budget.

    Counting visits (not distinct nodes) is what makes an alias bomb visible:
    nine aliases of nine aliases are a billion visits, and the walk stops at
    the budget instead of building them.
    """
    budget = MAX_EXPANDED_NODES
    stack: list[yaml.Node] = [root]
    while stack:
        node = stack.pop()
        budget -= 1
        if budget < 0:
            raise _refuse(
                source, f"expands to more than {MAX_EXPANDED_NODES:,} elements (through aliases)", _line(root)
            )
        if isinstance(node, yaml.MappingNode):
            _check_duplicate_keys(node, source)
            for key, value in node.value:
                stack += (key, value)
        elif isinstance(node, yaml.SequenceNode):
            stack += node.value
        elif node.tag == INT_TAG and len(node.value) > MAX_NUMBER_CHARS:
            raise _refuse(
                source,
                f"a number of {len(node.value):,} characters; at most {MAX_NUMBER_CHARS} here",
                _line(node),
            )


def _check_duplicate_keys(node: yaml.MappingNode, source: str) -> None:
    seen: dict[str, int] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.value == "<<":
            continue
        line = key.start_mark.line + 1
        if key.value in seen:
            raise _refuse(
                source,
                f"key {key.value!r} appears twice (lines {seen[key.value]} and {line}); keep one",
                f"line {line}",
            )
        seen[key.value] = line


def load_yaml(path: Path) -> Any:
    """Parse one bounded YAML document from ``path``; raise ScenarioError naming what is wrong."""
    source = str(path)
    text = read_text(path)
    _check_events(text, source)
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        _check_nodes(root, source)
        return loader.construct_document(root)
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, source) from None
    finally:
        loader.dispose()
