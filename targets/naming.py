"""Names a target and its initiator agree on: IQNs, NQNs, ports."""

from __future__ import annotations

from sanlab.scenarios.ports import ISCSI_PORT, NVME_PORT, SRP_PORT, TGT_TCP_PORT

IQN_PREFIX = "iqn.2026-11.org.sanlab"
NQN_PREFIX = "nqn.2026-11.org.sanlab"

__all__ = ["ISCSI_PORT", "NVME_PORT", "SRP_PORT", "TGT_TCP_PORT", "iqn", "nqn"]


def iqn(name: str) -> str:
    return f"{IQN_PREFIX}:{name}"


def nqn(name: str) -> str:
    return f"{NQN_PREFIX}:{name}"
