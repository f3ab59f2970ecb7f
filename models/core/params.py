"""Dotted paths into a profile's data: 'nics.connectx-3.pcie_gbps'.

Lists (NICs) are addressed by their ``name``; mappings by key.  The
calibrator reads and writes fitted parameters through these two functions.
"""

from __future__ import annotations

from typing import Any

from sanlab.scenarios.errors import SanlabError


def _locate(data: dict[str, Any], path: str) -> tuple[dict[str, Any], str]:
    parts = path.split(".")
    node: Any = data
    for part in parts[:-1]:
        if isinstance(node, list):
            node = next((n for n in node if isinstance(n, dict) and n.get("name") == part), None)
        elif isinstance(node, dict):
            node = node.get(part)
        else:
            node = None
        if node is None:
            raise SanlabError(f"parameter {path!r}: the profile has no {part!r}")
    if not isinstance(node, dict):
        raise SanlabError(f"parameter {path!r}: {parts[-2]!r} is not a mapping")
    return node, parts[-1]


def get_param(data: dict[str, Any], path: str) -> float:
    parent, key = _locate(data, path)
    if key not in parent:
        raise SanlabError(f"parameter {path!r}: the profile sets no {key!r}")
    return float(parent[key])


def set_param(data: dict[str, Any], path: str, value: float) -> None:
    parent, key = _locate(data, path)
    parent[key] = round(float(value), 4)
