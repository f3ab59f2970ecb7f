"""What the rules share: the registry's named sets their messages list, how a list is worded,
and the questions several rules and layers ask of a scenario (real machines?).  Which faults
hit a link or a target is the plan's (plan.py: ``faults_on``, ``faults_of``), worked out once.
"""

from __future__ import annotations

from collections.abc import Iterable

from sanlab.scenarios.registry import FABRICS, STACKS, TRANSPORTS, names
from sanlab.scenarios.schema import Scenario

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


def real_machines(scenario: Scenario) -> bool:
    """Is the scenario for real machines (reached over SSH) rather than VMs?

    It is when a host says how to reach it or a link names a real
    interface; hosts that do not say it yet get it from ``--inventory``.
    """
    return any(h.ssh for h in scenario.hosts) or any(lk.interfaces for lk in scenario.links)


def unreached(scenario: Scenario) -> list[str]:
    """Real-machine hosts that no ``ssh`` reaches (yet): what ``--inventory`` must supply."""
    return [h.name for h in scenario.hosts if not h.ssh] if real_machines(scenario) else []


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
