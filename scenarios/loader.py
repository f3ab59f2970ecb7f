"""Read a scenario file and say, in the user's words, everything wrong with it.

Validation happens in two passes, both before anything runs: the schema pass
(types, allowed values, unknown fields) and the consistency pass (a link to an
unknown host, a transport on a fabric that cannot carry it).  Each problem is
one line: ``file: field.path: 'value' is ... (what is allowed)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sanlab.scenarios.errors import Problem, ScenarioError
from sanlab.scenarios.invalid import problems_from
from sanlab.scenarios.inventory import apply as apply_inventory
from sanlab.scenarios.schema import Scenario
from sanlab.scenarios.semantics import check_scenario
from sanlab.scenarios.yamlfile import load_yaml


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
