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


def pareto_chart(
    rows: Sequence[dict[str, Any]],
    front: Sequence[dict[str, Any]],
    objectives: Mapping[str, str],
    goals: Sequence[Goal] = (),
    names: Mapping[str, str] | None = None,
) -> bytes:
    """The first objective against each of the others, one panel each, so every objective is
    seen (IOPS against link rate, and against cores): every point of the grid a pale grey dot
    (one a position: hundreds of points on a few discrete values must not add up to a dark
    one), the front in colour by transport, and each goal on the first objective as a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sanlab.scenarios.writing import figure_bytes

    shown = [m for m in objectives if any(isinstance(r.get(m), (int, float)) for r in rows)]
    y, others = (shown[0], shown[1:]) if shown else ("", [])
    fig, axes = plt.subplots(1, max(1, len(others)), figsize=(4.6 * max(1, len(others)), 4.6), dpi=110)
    panels = list(axes.flat) if hasattr(axes, "flat") else [axes]
    colours = plt.get_cmap("tab10")
    transports = sorted({r.get("transport", "") for r in rows})
    for ax, x in zip(panels, others, strict=False):
        grid = {
            (r[x], r[y])
            for r in rows
            if isinstance(r.get(x), (int, float)) and isinstance(r.get(y), (int, float))
        }
        ax.scatter(
            [p[0] for p in grid], [p[1] for p in grid], s=12, color="0.82", linewidths=0, label="other points"
        )
        for i, transport in enumerate(transports):
            best = [r for r in front if r.get("transport") == transport]
            if best:
                label = f"{transport}: {len(best)} on the front"
                ax.scatter(
                    [r[x] for r in best], [r[y] for r in best], s=40, color=colours(i), zorder=3, label=label
                )
        for goal in goals:
            if goal.metric == y:
                words = f"goal: {goal.metric} {goal.op} {_short_numbers()(goal.value, None)}"
                ax.axhline(goal.value, color="tab:red", linestyle="--", linewidth=1, label=words)
        ax.set_xlabel(_axis(x, objectives[x], names), fontsize=9)
        ax.set_ylabel(_axis(y, objectives[y], names), fontsize=9)
        ax.yaxis.set_major_formatter(_short_numbers())
        ax.grid(alpha=0.3)
    if others:
        panels[0].legend(fontsize=8, loc="upper left", bbox_to_anchor=(0, -0.16), ncol=2, frameon=False)
    fig.suptitle(
        f"sweep: {len(rows):,} projected points (model, not measured); the Pareto front over "
        f"{', '.join(shown)}: {len(front)} points in colour\n(points differing only in other axes "
        "fall on one spot: pareto.csv lists every one)",
        fontsize=10,
    )
    fig.tight_layout()
    data = figure_bytes(fig, format="png")
    plt.close(fig)
    return data


def _axis(metric: str, direction: str, names: Mapping[str, str] | None) -> str:
    better = "higher is better" if direction == "max" else "lower is better"
    return f"{(names or {}).get(metric, metric.replace('_', ' '))}, {better}"


def _short_numbers() -> Any:
    from matplotlib.ticker import FuncFormatter

    def short(value: float, _: object) -> str:
        if abs(value) >= 1e6:
            return f"{value / 1e6:g}M"
        return f"{value / 1e3:g}k" if abs(value) >= 1e3 else f"{value:g}"

    return FuncFormatter(short)
