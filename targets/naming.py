"""Names a target and its initiator agree on: IQNs, NQNs, ports."""

from __future__ import annotations

IQN_PREFIX = "iqn.2026-11.org.sanlab"
NQN_PREFIX = "nqn.2026-11.org.sanlab"
ISCSI_PORT = 3260
NVME_PORT = 4420
SRP_PORT = 5555
TGT_TCP_PORT = 3261  # tgtd's TCP portal, moved off 3260 so its iSER listener can have it


def iqn(name: str) -> str:
    return f"{IQN_PREFIX}:{name}"


def nqn(name: str) -> str:
    return f"{NQN_PREFIX}:{name}"
