"""Each verb imports what it needs and nothing else (issue #46: one ``sanlab model`` point
under a second).

A projection's start-up is the interpreter and its imports; what a verb never
uses (SciPy's fitting, Matplotlib, Dask, pyarrow, the emulator, the targets,
the dissectors) costs it a compile or a load each time it starts. This is a
mechanism, not a timing: a fresh interpreter imports the verb's module, or
runs the verb, and reports the modules it then holds. A new top-level import
of something heavy, anywhere on the verb's path, fails here with its name.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest
from pydantic import BaseModel

# Never on the path of `sanlab model` (a point or a scenario file without VM hosts): the fitting,
# the pictures (only `--report`'s chart.png, imported where it is drawn), sweeps on Dask, the
# packet tools, and every layer below the model that runs or reads VMs.
NOT_FOR_MODEL = (
    "scipy",
    "matplotlib",
    "dask",
    "distributed",
    "pyarrow",
    "pandas",
    "dpkt",
    "cryptography",
    "qemu",
    "sanlab.emulator",
    "sanlab.targets",
    "sanlab.dissectors",
    "sanlab.models.calibration",
    "sanlab.models.sweeps",
    "sanlab.scenarios.labs",
)
# `sanlab --version` and `--help` name the verbs without importing any of them.
NOT_FOR_VERSION = ("pydantic", "numpy", "simpy", "yaml", "sanlab.models", "sanlab.scenarios.schema")
POINT = ["--transport", "nvme-rdma", "--fabric", "roce", "--link-gbps", "100", "--rw", "randread"]
POINT += ["--bs", "4k", "--iodepth", "32", "--numjobs", "8"]

# Run in a fresh interpreter: argv[1] says what to do, the modules it then holds go to stderr's
# last line as JSON (stdout is the verb's own).
CHILD = """
import importlib, json, sys
from sanlab.main import COMMANDS, cli
what, argv = sys.argv[1], sys.argv[2:]
if what == "import":
    module, _ = COMMANDS[argv[0]]
    importlib.import_module(module)
else:
    try:
        cli(argv, standalone_mode=False)
    except SystemExit as exc:
        assert not exc.code, exc.code
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def _modules_after(what: str, *argv: str) -> set[str]:
    run = subprocess.run(
        [sys.executable, "-c", CHILD, what, *argv], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    return set(json.loads(run.stderr.strip().splitlines()[-1]))


def _heavy(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """The names (packages: with any of their submodules) that ``modules`` holds."""
    return sorted(n for n in names if any(m == n or m.startswith(n + ".") for m in modules))


@pytest.mark.subprocess  # a fresh interpreter: this one has imported everything the tests use
def test_the_model_verbs_module_imports_nothing_it_does_not_use():
    assert _heavy(_modules_after("import", "model"), NOT_FOR_MODEL) == []


@pytest.mark.subprocess  # projects one point in a fresh interpreter (about a second)
def test_projecting_one_point_imports_nothing_it_does_not_use():
    modules = _modules_after("run", "model", *POINT, "--json")
    assert _heavy(modules, NOT_FOR_MODEL) == []
    assert {"simpy", "numpy"} <= modules  # the point was simulated, not refused before it


@pytest.mark.subprocess  # a fresh interpreter
def test_the_version_imports_no_verb():
    assert _heavy(_modules_after("run", "--version"), NOT_FOR_VERSION) == []


@pytest.mark.subprocess  # a fresh interpreter
def test_the_check_sees_a_heavy_import_where_there_is_one():
    """The same check on a verb that does need the emulator and the dissectors finds them, so an
    empty list above is what the model verb holds, not a check that cannot see."""
    found = _heavy(_modules_after("import", "run"), NOT_FOR_MODEL)
    assert {"sanlab.emulator", "sanlab.dissectors", "sanlab.targets"} <= set(found)


# A bounded repeat of a Unicode class escape (\w{0,80}, \S{1,200}): pydantic's regex engine
# expands the class once per repeat when the model is built, 33 ms for profile.Calibration's
# file name at every start of `sanlab model`. The pattern says which characters, max_length how many.
UNICODE_REPEAT = re.compile(r"(\\[wWdDsS]|\[(?:\\.|[^\]\\])*\\[wWdDsS](?:\\.|[^\]\\])*\])\{\d*,?(\d+)\}")
LONGEST_REPEAT = 15


def _patterns(schema: object) -> Iterator[str]:
    if isinstance(schema, dict):
        if isinstance(schema.get("pattern"), str):
            yield schema["pattern"]
        for value in schema.values():
            yield from _patterns(value)
    elif isinstance(schema, list | tuple):
        for value in schema:
            yield from _patterns(value)


def _slow_repeats(pattern: str) -> list[str]:
    return [m.group(0) for m in UNICODE_REPEAT.finditer(pattern) if int(m.group(2)) > LONGEST_REPEAT]


def test_no_model_on_the_model_verbs_path_repeats_a_unicode_class_with_a_bound():
    import sanlab.commands_model  # noqa: F401  (every model the verb builds)

    def subclasses(cls: type) -> Iterator[type]:
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    found = {}
    for model in set(subclasses(BaseModel)):
        if model.__module__.startswith("sanlab.") and model.__pydantic_complete__:
            slow = [r for p in _patterns(model.__pydantic_core_schema__) for r in _slow_repeats(p)]
            if slow:
                found[f"{model.__module__}.{model.__qualname__}"] = slow
    assert found == {}, f"bound the length with max_length and repeat with * or +: {found}"


def test_the_pattern_check_finds_the_repeat_that_cost_33_ms():
    assert _slow_repeats(r"^[A-Za-z0-9][\w.-]{0,80}\.csv$") == [r"[\w.-]{0,80}"]
    assert _slow_repeats(r"^\S{1,200}$") == [r"\S{1,200}"]
    assert _slow_repeats(r"^\d{1,3}(\.\d{1,3}){3}$") == []  # a short repeat costs nothing
    assert _slow_repeats(r"^[A-Za-z0-9][\w.-]*\.csv$") == []
