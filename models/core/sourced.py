"""Tables of sourced figures kept as YAML data (priors.yaml, cores.yaml): one loader for all.

Each file maps a name to an entry whose fields a pydantic model checks; a
typo, a missing source or a figure outside its range is an error naming
the file and the entry, before any projection runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.invalid import problems_from
from sanlab.scenarios.loader import read_yaml

Entry = TypeVar("Entry", bound=BaseModel)


def check_in_range(what: str, value: float, bounds: tuple[float, float], width: bool = True) -> None:
    """``value`` lies in ``bounds``, a range of positive figures (of some width unless ``width`` is False)."""
    low, high = bounds
    if not (0 < low < high if width else 0 < low <= high):
        raise ValueError(
            f"range {list(bounds)} is not [low, high] with 0 < low {'<' if width else '<='} high"
        )
    if not low <= value <= high:
        raise ValueError(f"{what} {value} lies outside its range {list(bounds)}")


def load_entries(path: Path, model: type[Entry], what: str) -> dict[str, Entry]:
    """Every entry of ``path`` validated as ``model``; the first bad one is a one-line error."""
    data = read_yaml(path) or {}
    if not isinstance(data, dict):
        raise SanlabError(f"{path}: {what} must be a mapping of name to entry")
    entries = {}
    for name, entry in data.items():
        try:
            entries[str(name)] = model.model_validate(entry)
        except ValidationError as exc:
            raise SanlabError(str(problems_from(exc, f"{path}: {name}", model)[0])) from None
    return entries
