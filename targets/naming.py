"""Names a target and its initiator agree on: IQNs, NQNs, ports."""

from __future__ import annotations

from dataclasses import dataclass

from sanlab.scenarios.ports import ISCSI_PORT, NVME_PORT, SRP_PORT, TGT_TCP_PORT

IQN_PREFIX = "iqn.2026-11.org.sanlab"
NQN_PREFIX = "nqn.2026-11.org.sanlab"

__all__ = [
    "ISCSI_PORT",
    "NVME_PORT",
    "SRP_PORT",
    "TGT_TCP_PORT",
    "Chap",
    "host_nqn",
    "initiator_iqn",
    "iqn",
    "nqn",
]


@dataclass(frozen=True)
class Chap:
    """One-way CHAP credentials, as the target stores them and the initiator presents them."""

    username: str
    password: str


def iqn(name: str) -> str:
    return f"{IQN_PREFIX}:{name}"


def initiator_iqn(host: str) -> str:
    """The IQN a host logs in with: its own (a host name is unique in a scenario), so that a
    target's ACLs, sessions and captures tell its initiators apart."""
    return iqn(f"initiator.{host}")


def host_nqn(target: str, host: str) -> str:
    """The host NQN ``host`` presents to ``target`` when it authenticates (DH-HMAC-CHAP): an
    NQN of its own per target, so that two exports never share nvmet's host object."""
    return nqn(f"{target}.host.{host}")


def nqn(name: str) -> str:
    return f"{NQN_PREFIX}:{name}"
