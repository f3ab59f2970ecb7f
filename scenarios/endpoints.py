"""Where a host sits on a link: the one shape the emulator and real machines hand the runner.

A VM's end of a link is named after the link (the interface is renamed to
it, and its soft-RDMA device is ``<driver>_<link>``); a real machine's end
is the interface the scenario names, with the address and RDMA device
found on it.  Either way the targets code sees an ``Endpoint`` per
(link, host) and never rebuilds a name itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sanlab.scenarios.schema import Scenario


@dataclass(frozen=True)
class Endpoint:
    """One host's end of one link."""

    host: str
    link: str
    address: str  # IPv4, as the transports connect to it
    interface: str  # the network interface carrying it
    rdma_device: str | None  # the RDMA device on that interface, if any


# Keyed by (link name, host name).
Endpoints = Mapping[tuple[str, str], Endpoint]


def soft_rdma_device(driver: str, link: str) -> str:
    """The name sanlab gives the soft-RDMA device (rxe or siw) it adds on a VM's link."""
    return f"{driver}_{link}"


def emulated(scenario: Scenario, addresses: Mapping[tuple[str, str], str]) -> dict[tuple[str, str], Endpoint]:
    """The endpoints of a scenario's VMs, given the address of each (link, host)."""
    ends: dict[tuple[str, str], Endpoint] = {}
    for link in scenario.plan.links:
        name, driver = link.name, link.rdma_driver
        device = soft_rdma_device(driver, name) if driver else None
        for host in link.endpoints:
            if (name, host) in addresses:
                ends[(name, host)] = Endpoint(host, name, addresses[(name, host)], name, device)
    return ends
