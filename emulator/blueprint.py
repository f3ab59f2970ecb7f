"""A lab's blueprint: the VMs, NICs and addresses a scenario needs, before anything starts.

Topology is data: ``blueprint()`` turns a scenario into VM specs (one NIC per link end,
addresses, shaping, RDMA device) without starting anything, so a bad scenario fails before
a single VM boots.  It is drawn from the scenario's plan (``scenario.plan``, the one
``Plan``: names, link kinds, where targets go) and adds what follows from emulating it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from sanlab.emulator import fabric, guest_ssh
from sanlab.emulator.fabric import FABRIC_CPUS, FABRIC_MEMORY_MIB, SEGMENT_BASE
from sanlab.emulator.links import Interface
from sanlab.emulator.qemu import NicSpec, VmSpec, socket_paths
from sanlab.scenarios.endpoints import Endpoint, emulated
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.plan import PlannedLink
from sanlab.scenarios.schema import Scenario
from sanlab.scenarios.topology import FABRIC_HOST, Port

UNIX_PATH_MAX = 107


def _mac(lab: str, link: str, host: str) -> str:
    digest = hashlib.sha256(f"{lab}/{link}/{host}".encode()).digest()
    return "52:54:00:" + ":".join(f"{b:02x}" for b in digest[:3])


@dataclass(frozen=True)
class Blueprint:
    """What a lab will be, computed from the scenario alone: its VMs, their NICs and addresses.

    Not the scenario's plan (``scenario.plan``, scenarios/plan.py: names, link kinds, target
    places), which it is drawn from; this adds what follows from emulating it."""

    specs: dict[str, VmSpec]
    interfaces: dict[str, list[Interface]]
    addresses: dict[tuple[str, str], str]
    endpoints: dict[tuple[str, str], Endpoint]
    fabric: dict[str, Any] | None = None  # what the fabric VM builds, when there are switches


def blueprint(
    scenario: Scenario,
    lab: str,
    run_dir: Path,
    capture_dir: Path | None,
    snaplen: int | None = None,
    ssh: bool = False,
) -> Blueprint:
    """VM specs and interfaces for every host; addresses are IPv4 link-local.

    Cable i is 169.254.(10+i).0/24 and its n-th endpoint is .n+1: a
    point-to-point cable needs no routing, and these addresses never leave
    the QEMU processes.  Host ports on switched segment k share
    169.254.(100+k).0/24, numbered in the order their links are declared.
    A cable is captured at its first end, a switch's cable at the switch port.
    """
    specs = {
        h.name: VmSpec(
            h.name, h.cpus, max(256, h.memory >> 20), ssh_port=guest_ssh.free_port() if ssh else None
        )
        for h in scenario.hosts
    }
    interfaces: dict[str, list[Interface]] = {h.name: [] for h in scenario.hosts}
    addresses: dict[tuple[str, str], str] = {}
    switched = {port.link: port for port in scenario.plan.ports}
    on_segment: dict[int, int] = {}
    nic = partial(NicSpec, snaplen=snaplen)
    for link in scenario.plan.links:
        name = link.name
        for end in _ends(link, switched, on_segment, capture_dir):
            spec = specs.setdefault(end.host, VmSpec(end.host, FABRIC_CPUS, FABRIC_MEMORY_MIB))
            mac = _mac(lab, name, end.host)
            sockets = (run_dir / f"{name}.{end.host}.sock", run_dir / f"{name}.{end.peer}.sock")
            spec.nics.append(
                nic(link=name, mac=mac, local_socket=sockets[0], peer_socket=sockets[1], capture=end.capture)
            )
            if end.address is not None:
                addresses[(name, end.host)] = end.address
                interfaces[end.host].append(_interface(link, name, mac, end.address))
    _check_socket_paths(specs, run_dir)
    port_macs = {name: _mac(lab, name, FABRIC_HOST) for name in switched}
    spec_doc = fabric.document(scenario, port_macs, addresses) if scenario.switches else None
    return Blueprint(specs, interfaces, addresses, emulated(scenario, addresses), spec_doc)


@dataclass(frozen=True)
class _End:
    """One NIC of a link: whose it is, whose is at the other end, its address, its capture."""

    host: str
    peer: str
    address: str | None  # None for a switch port: it has no address
    capture: Path | None


def _ends(
    link: PlannedLink, switched: dict[str, Port], on_segment: dict[int, int], capture_dir: Path | None
) -> list[_End]:
    """The NICs a link needs: two for a cable, host and switch port for a port, none for a trunk."""
    capture = capture_dir / f"{link.name}.pcap" if capture_dir else None
    port = switched.get(link.name)
    if port is not None:
        n = on_segment[port.segment] = on_segment.get(port.segment, 0) + 1
        address = f"169.254.{SEGMENT_BASE + port.segment}.{n}"
        return [_End(port.host, FABRIC_HOST, address, None), _End(FABRIC_HOST, port.host, None, capture)]
    if link.kind == "trunk":
        return []  # between two switches: a Mininet link inside the fabric VM
    a, b = link.endpoints
    net = 10 + link.index
    return [_End(a, b, f"169.254.{net}.1", capture), _End(b, a, f"169.254.{net}.2", None)]


def _interface(planned: PlannedLink, name: str, mac: str, address: str) -> Interface:
    link = planned.link
    return Interface(
        link=name,
        mac=mac,
        address=address,
        prefix=24,
        mtu=link.mtu,
        rate_bps=link.rate,
        delay_s=link.delay,
        loss_pct=link.loss,
        rdma_driver=planned.rdma_driver,
        queue=link.queue,
    )


def _check_socket_paths(specs: dict[str, VmSpec], run_dir: Path) -> None:
    """QEMU's unix sockets fail on paths over 107 bytes: say so before anything boots, for
    every socket a VM listens on (its links' and its own agent, console and monitor)."""
    for spec in specs.values():
        for path in socket_paths(spec, run_dir):
            if len(str(path)) > UNIX_PATH_MAX:
                raise SanlabError(
                    f"socket path {path} is over {UNIX_PATH_MAX} bytes: "
                    "use shorter lab, link or host names (or a shorter XDG_RUNTIME_DIR)"
                )
