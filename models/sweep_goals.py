"""Goals (``iops >= 2e6``) and the Pareto front of a sweep's rows.

A goal is one comparison of a result field with a number.  The front keeps
the rows no other row beats on every objective at once (at least as good on
all, better on one): the designs worth a look when, say, IOPS, link rate and
cores all matter.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

_GOAL = re.compile(r"^\s*([a-z_][a-z0-9_]*)\s*(>=|<=|==|>|<)\s*([-+]?[0-9.]+(?:e[-+]?[0-9]+)?)\s*$", re.I)
_OPS = {
    ">=": np.greater_equal,
    "<=": np.less_equal,
    ">": np.greater,
    "<": np.less,
    "==": np.equal,
}


@dataclass(frozen=True)
class Goal:
    metric: str
    op: str
    value: float

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.value:g}"

    def met(self, row: dict[str, Any]) -> bool:
        got = row.get(self.metric)
        return isinstance(got, (int, float)) and bool(_OPS[self.op](got, self.value))


def parse_goal(text: str) -> Goal:
    match = _GOAL.match(text)
    if not match:
        raise ValueError(
            f"{text!r} is not a goal (write METRIC OP NUMBER, e.g. 'iops >= 2e6', 'lat_p99_us <= 100')"
        )
    metric, op, number = match.groups()
    return Goal(metric, op, float(number))


def meeting(rows: Sequence[dict[str, Any]], goals: Sequence[Goal]) -> list[dict[str, Any]]:
    return [row for row in rows if all(goal.met(row) for goal in goals)]


def pareto_front(rows: Sequence[dict[str, Any]], objectives: Mapping[str, str]) -> list[dict[str, Any]]:
    """Rows not dominated on ``objectives`` ({metric: 'max' or 'min'}); rows missing one are left out."""
    names = [m for m in objectives if any(isinstance(r.get(m), (int, float)) for r in rows)]
    if not names:
        return []
    usable = [r for r in rows if all(isinstance(r.get(m), (int, float)) for m in names)]
    if not usable:
        return []
    # Maximise everything: negate what is to be minimised.
    signs = np.array([1.0 if objectives[m] == "max" else -1.0 for m in names])
    values = np.array([[float(r[m]) for m in names] for r in usable]) * signs
    keep = np.ones(len(usable), dtype=bool)
    for i in range(len(usable)):
        if not keep[i]:
            continue
        better_or_equal = np.all(values >= values[i], axis=1)
        strictly = np.any(values > values[i], axis=1)
        if np.any(better_or_equal & strictly):
            keep[i] = False
    return [row for row, kept in zip(usable, keep, strict=True) if kept]
