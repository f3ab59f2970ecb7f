"""Which limit binds a point, and whether any fitted row was bound the same way.

A projection's range is only as good as the rows that pinned the physics it
leans on.  A point bound by the wire leans on wire arithmetic, which every
link-bound row checks; a point bound by NVMe/RDMA's initiator CPU leans on
that stack's cycles per I/O, which only a row bound there pins.  So each
record names its *regime* - the kind of limit that binds it - and says
whether a fitted row shares that regime; where none does, the range widens
by the physics the data leave open (models/core/uncertainty.py).

The kind is read from the binding desk's name (the one home of that
mapping is ``kind_of``), so a desk the model adds later falls into a kind
by its name, or into its own.  The regime's key adds what decides the
kind's physics: for CPU, NIC-message and latency-bound points the
transport (its stacks' costs, its messages), for the rest nothing (wire
arithmetic, a slot's accounting and a drive's service carry across
transports).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sanlab.models.core.profile_files import STACKS_FILE, fit_path, read_fit

LINK, PCIE, NIC, CPU, DEVICE, LATENCY = "link", "pcie", "nic-message", "cpu", "device", "latency"
KINDS = (LINK, PCIE, NIC, CPU, DEVICE, LATENCY)
# Kinds whose physics is the transport's own: its stacks' cycles, its messages, its round trips.
PER_TRANSPORT = (CPU, NIC, LATENCY)


def kind_of(bottleneck: str | None) -> str:
    """The kind of limit a desk is: 'initiator-cpu' and 'target-net' burn a host's cycles,
    'link-in' and 'target-port-tx' are the wire, a NIC's message or doorbell desk is the
    NIC's, 'pcie' the slot's, 'device' the drive's; 'latency' when nothing is half busy."""
    name = (bottleneck or LATENCY).lower()
    if name == LATENCY:
        return LATENCY
    if name.startswith(("link-", "target-port-", "initiator-ports-", "wire")):
        return LINK
    if "pcie" in name:
        return PCIE
    if "nic" in name or "message" in name or "doorbell" in name:
        return NIC
    if name.endswith(("-cpu", "-net", "-cores", "-irq", "-softirq")) or "cpu" in name or "core" in name:
        return CPU
    if name.startswith("device") or name.startswith("backend"):
        return DEVICE
    return name


def regime_key(kind: str, transport: str, rw: str) -> str:
    """'cpu nvme-rdma write', 'link': a kind, with the transport and the data's direction where
    the kind's physics is the transport's own (a write's data cross the other way, may wait for
    an R2T, and meet the drive's write path)."""
    if kind not in PER_TRANSPORT:
        return kind
    return f"{kind} {transport} {'read' if 'read' in rw else 'write'}"


def key_of(bottleneck: str | None, transport: str, rw: str) -> str:
    return regime_key(kind_of(bottleneck), transport, rw)


def count(keys: Iterable[str]) -> dict[str, int]:
    """How many rows each regime holds, in a stable order (what stacks.fit.yaml records)."""
    out: dict[str, int] = {}
    for key in keys:
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


_FITTED: dict[str, dict[str, int] | None] = {}


def fitted_regimes() -> dict[str, int] | None:
    """The regimes of the committed joint fit's network rows, with their counts (None: a fit
    written before regimes were recorded, which then pins nothing it cannot name)."""
    if "" not in _FITTED:
        stacks: Any = read_fit(fit_path(STACKS_FILE)) or {}
        regimes = stacks.get("regimes") if isinstance(stacks, dict) else None
        _FITTED[""] = {str(k): int(v) for k, v in regimes.items()} if isinstance(regimes, dict) else None
    return _FITTED[""]


def clear() -> None:
    """Forget the loaded regimes (after ``sanlab calibrate --write`` rewrote stacks.fit.yaml)."""
    _FITTED.clear()


def pinned(key: str, fitted: dict[str, int] | None = None) -> bool | None:
    """Whether any fitted row shares regime ``key`` (None: the fit does not say)."""
    known = fitted if fitted is not None else fitted_regimes()
    return None if known is None else key in known
