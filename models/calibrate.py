"""Fit a profile's physical parameters to a published table by least squares.

The parameters to fit are named in the profile (``calibration.fit``): CPU
cycles per I/O and per byte of each stack, per-frame host cost and PCIe rate
of each NIC, fixed latencies, device rates.  Each is shared by every cell it
touches - all block sizes, reads and writes - so there are far fewer knobs
than cells.  The fit minimises log errors of IOPS (and of mean latency where
published) using the analytic MVA solution of the same network the simulator
runs; the final errors are reported from the simulator.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from scipy.optimize import least_squares

from sanlab.models import mva
from sanlab.models.network import build
from sanlab.models.profile import Profile, profile_path
from sanlab.models.published import Measured, calibration_dir, load_table
from sanlab.scenarios.errors import SanlabError

LATENCY_WEIGHT = 0.5


def get_param(data: dict[str, Any], path: str) -> float:
    parent, key = _locate(data, path)
    return float(parent[key])


def set_param(data: dict[str, Any], path: str, value: float) -> None:
    parent, key = _locate(data, path)
    parent[key] = round(float(value), 4)


def _locate(data: dict[str, Any], path: str) -> tuple[dict[str, Any], str]:
    """'nics.connectx-3.pcie_gbps' -> (the NIC's dict, 'pcie_gbps')."""
    parts = path.split(".")
    node: Any = data
    for part in parts[:-1]:
        if isinstance(node, list):
            node = next((n for n in node if n.get("name") == part), None)
        else:
            node = node.setdefault(part, {}) if part not in node else node[part]
        if node is None:
            raise SanlabError(f"calibration.fit: {path!r}: no {part!r} in the profile")
    return node, parts[-1]


@dataclass(frozen=True)
class Fit:
    profile: Profile
    data: dict[str, Any]
    params: dict[str, float]
    rows: list[Measured]
    used: list[Measured]
    cost: float


def _predict(profile: Profile, rows: Sequence[Measured]) -> list[mva.Solution]:
    return [mva.solve(build(r.point, profile)) for r in rows]


def residuals(profile: Profile, rows: Sequence[Measured]) -> np.ndarray:
    out = []
    for row, sol in zip(rows, _predict(profile, rows), strict=True):
        out.append(math.log(sol.iops / row.iops))
        if row.lat_mean_us:
            out.append(LATENCY_WEIGHT * math.log(sol.latency_us / row.lat_mean_us))
    return np.array(out)


def fit(
    raw: dict[str, Any],
    rows: list[Measured],
    use: Callable[[Measured], bool] = lambda r: True,
) -> Fit:
    """Fit ``raw['calibration']['fit']`` on the rows ``use`` accepts."""
    names: list[str] = list(raw.get("calibration", {}).get("fit", []))
    if not names:
        raise SanlabError(f"profile {raw.get('name')}: calibration.fit lists no parameters")
    used = [r for r in rows if use(r)]
    x0 = np.log([max(get_param(raw, n), 1e-3) for n in names])

    def model(x: np.ndarray) -> Profile:
        data = copy.deepcopy(raw)
        for name, value in zip(names, np.exp(x), strict=True):
            set_param(data, name, value)
        return Profile.model_validate(data)

    result = least_squares(
        lambda x: residuals(model(x), used), x0, bounds=(x0 - 6, x0 + 6), x_scale=1.0, diff_step=1e-3
    )
    data = copy.deepcopy(raw)
    fitted = dict(zip(names, np.exp(result.x), strict=True))
    for name, value in fitted.items():
        set_param(data, name, value)
    return Fit(Profile.model_validate(data), data, fitted, rows, used, float(result.cost))


def load_raw(name: str) -> dict[str, Any]:
    path = Path(name) if Path(name).suffix else profile_path(name)
    raw = yaml.safe_load(path.read_text())
    if not isinstance(raw, dict):
        raise SanlabError(f"{path}: a profile must be a YAML mapping")
    return raw


def table_for(raw: dict[str, Any], data_dir: str | Path | None) -> list[Measured]:
    table = raw.get("calibration", {}).get("data")
    if not table:
        raise SanlabError(f"profile {raw.get('name')}: calibration.data names no table")
    return load_table(calibration_dir(data_dir) / table, raw["name"])


def write_profile(data: dict[str, Any], path: Path, summary: dict[str, Any]) -> None:
    data = copy.deepcopy(data)
    data.setdefault("calibration", {})["result"] = summary
    path.write_text(yaml.safe_dump(data, sort_keys=False, width=100))
