"""What the rules share: the registry's named sets their messages list, how a list is worded,
and how a fabric problem is said.  The questions several rules and layers ask of a scenario
(real machines? which hosts are not reached yet? which faults hit a link or a target?) are the
plan's (plan.py), answered once when a scenario is resolved.
"""

from __future__ import annotations

from collections.abc import Iterable

from sanlab.scenarios.registry import FABRICS, STACKS, TRANSPORTS, names

# Named sets the messages list (each read from the registry, in its order).
NVME_TRANSPORTS = names(TRANSPORTS, family="nvme")


RDMA_FABRICS = names(FABRICS, rdma=True)


EMULATED_STACKS = names(STACKS, emulated=True)


DIGEST_TRANSPORTS = names(TRANSPORTS, digests=True)


CHAP_TRANSPORTS = names(TRANSPORTS, chap=True)


def listed(items: list[str]) -> str:
    return ", ".join(items) if items else "none declared"


def either(items: Iterable[str]) -> str:
    """'roce, iwarp or ib'."""
    listed = list(items)
    return ", ".join(listed[:-1]) + " or " + listed[-1] if len(listed) > 1 else "".join(listed)


def fabric_problem(transport: str, fabric: str) -> str | None:
    """Why ``transport`` is not modelled over ``fabric``, or None when it is."""
    t, f = TRANSPORTS[transport], FABRICS[fabric]
    if t.runs_over(fabric):
        return None
    if not t.rdma:
        return f"{transport!r} runs over TCP; {fabric!r} is not modelled for it (use {either(t.fabrics)})"
    if not f.rdma:
        return f"{transport!r} needs an RDMA fabric (use {either(t.fabrics)})"
    over = " and ".join(FABRICS[n].title for n in t.fabrics)
    return f"{t.title} runs over {over}, not {f.title} (use {either(t.fabrics)})"


def tls_owners() -> str:
    """Whose TLS it is, for an error message: "NVMe/TCP's (nvme-tcp)"."""
    owners = [t for t in TRANSPORTS.values() if t.tls]
    return " and ".join(f"{t.title}'s ({t.name})" for t in owners)
