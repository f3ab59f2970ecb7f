"""Names a target and its initiator agree on: IQNs, NQNs, ports."""

from __future__ import annotations

from dataclasses import dataclass

from sanlab.scenarios.ports import ISCSI_PORT, NVME_PORT, SRP_PORT, TGT_TCP_PORT

IQN_PREFIX = "iqn.2026-11.org.sanlab"
NQN_PREFIX = "nqn.2026-11.org.sanlab"

__all__ = ["ISCSI_PORT", "NVME_PORT", "SRP_PORT", "TGT_TCP_PORT", "Chap", "iqn", "nqn"]


@dataclass(frozen=True)
class Chap:
    """One-way CHAP credentials, as the target stores them and the initiator presents them."""

    username: str
    password: str


def iqn(name: str) -> str:
    return f"{IQN_PREFIX}:{name}"


def nqn(name: str) -> str:
    return f"{NQN_PREFIX}:{name}"
