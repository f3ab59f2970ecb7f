"""The fabric VM: a scenario's switches, built by Mininet between the host VMs' cables.

A scenario with switches gets one more VM, ``fabric``, from the same guest
image.  Every host-to-switch link is a cable from the host VM into one of
the fabric VM's NICs; inside, ``mininet_fabric.py`` (copied in and run by
the guest's python3) makes each switch a Linux bridge with those NICs as
ports and joins switches by shaped Mininet links.  Why a VM and not Mininet
on the host: Mininet needs root, network namespaces and netem, and this
host's kernel has no netem; the guest kernel has all of them, and QEMU's
datagram cables reach it without any host privilege.

Both ends of a host's cable are shaped: the host's egress by the host
(``links.configure``), the switch port's egress by Mininet's ``TCIntf``.
QEMU captures each port at the fabric VM's NIC, so every switch port can
be captured like a cable.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from sanlab.emulator.agent import Completed
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.ports import IPERF_PORT
from sanlab.scenarios.reading import parse_json
from sanlab.scenarios.schema import Link, Scenario
from sanlab.scenarios.topology import FABRIC_HOST

FABRIC_CPUS = 1
# The guest's root file system lives in RAM (a 220 MiB initramfs): 512 MiB
# does not boot it with Mininet's python on top.
FABRIC_MEMORY_MIB = 1024
GUEST_DIR = "/run/sanlab-fabric"
PROGRAM = Path(__file__).with_name("mininet_fabric.py")
START_TIMEOUT_S = 120.0
# Host ports on switched segment k are addressed 169.254.(SEGMENT_BASE + k).n/24;
# cables keep 169.254.(10 + link index).n, below it.
SEGMENT_BASE = 100
FLOW_HOST_BASE = 200  # background flow i's Mininet host is .(200+i) on its segment


class Guest(Protocol):
    name: str

    def run(self, command: str | list[str], timeout: float = 60.0, stdin: str = "") -> Completed: ...

    def spawn(self, command: str, log: str = "/dev/null") -> int: ...

    def put(self, path: str, data: bytes, mode: int = 0o644) -> None: ...


def _shaping(link: Link) -> dict[str, Any]:
    return {
        "bw_mbit": link.rate / 1e6 if link.rate else None,
        "delay_us": round(link.delay * 1e6) if link.delay else None,
        "loss_pct": link.loss or None,
        "queue": link.queue,
        "mtu": link.mtu,
    }


def flows(scenario: Scenario, addresses: Mapping[tuple[str, str], str]) -> list[dict[str, Any]]:
    """Background flows: a Mininet host per flow on its switch, iperf3 to the host it names.

    Flow i's host is ``bg<i>`` at 169.254.(100+k).(FLOW_HOST_BASE+i) on its
    switch's segment k; its server listens on IPERF_PORT + i.
    """
    plan = scenario.plan
    found = []
    for i, flow in enumerate(scenario.background):
        k = plan.segments[flow.switch]
        port = next(p for p in plan.ports if p.host == flow.to and p.segment == k)
        found.append(
            {
                "name": f"bg{i}",
                "switch": flow.switch,
                "ip": f"169.254.{SEGMENT_BASE + k}.{FLOW_HOST_BASE + i}/24",
                "mtu": scenario.links[port.index].mtu,  # one MTU per segment
                "server": addresses[(port.link, flow.to)],
                "to": flow.to,
                "port": IPERF_PORT + i,
                "rate_bps": flow.rate,
                "udp": flow.protocol == "udp",
            }
        )
    return found


def document(
    scenario: Scenario, port_macs: dict[str, str], addresses: Mapping[tuple[str, str], str]
) -> dict[str, Any]:
    """What the fabric VM builds: switches, ports (by the MAC of the fabric's NIC), trunks, flows."""
    plan = scenario.plan
    return {
        "switches": [{"name": s.name, "stp": s.stp} for s in scenario.switches],
        "ports": [
            {"name": p.link, "switch": p.switch, "mac": port_macs[p.link]} | _shaping(plan.link(p.link).link)
            for p in plan.ports
        ],
        "trunks": [
            {"a": lk.endpoints[0], "b": lk.endpoints[1], "name": lk.name} | _shaping(lk.link)
            for lk in plan.links
            if lk.kind == "trunk"
        ],
        "flows": flows(scenario, addresses),
        "ready": f"{GUEST_DIR}/ready.json",
    }


def start(vm: Guest, spec: dict[str, Any], timeout: float = START_TIMEOUT_S) -> dict[str, list[str]]:
    """Copy the program in, start it, and wait until Mininet has the switches up.

    Returns each bridge's ports as the fabric VM's kernel lists them.
    """
    vm.run(f"mkdir -p {GUEST_DIR}; rm -f {GUEST_DIR}/ready.json", timeout=30)
    vm.put(f"{GUEST_DIR}/fabric.py", PROGRAM.read_bytes())
    vm.put(f"{GUEST_DIR}/spec.json", json.dumps(spec).encode())
    vm.spawn(f"exec python3 {GUEST_DIR}/fabric.py {GUEST_DIR}/spec.json", log=f"{GUEST_DIR}/mininet.log")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        read = vm.run(f"cat {GUEST_DIR}/ready.json 2>/dev/null", timeout=30)
        if read.ok and read.stdout.strip():
            return _report(vm, parse_json(read.stdout, f"{FABRIC_HOST}: {GUEST_DIR}/ready.json"))
        time.sleep(0.5)
    raise SanlabError(f"{FABRIC_HOST}: Mininet did not bring the switches up in {timeout:.0f} s{_log(vm)}")


def serve_flows(vm: Guest, spec: dict[str, Any]) -> None:
    """An iperf3 server on ``vm`` for each background flow that ends there (each its own port)."""
    for flow in spec["flows"]:
        if flow["to"] == vm.name:
            port = int(flow["port"])
            vm.spawn(f"exec iperf3 --server --port {port}", log=f"/tmp/iperf3-{port}.log")


def _report(vm: Guest, report: dict[str, Any]) -> dict[str, list[str]]:
    if not report.get("ok"):
        raise SanlabError(f"{FABRIC_HOST}: Mininet failed: {report.get('error', '').strip()}{_log(vm)}")
    return dict(report["bridges"])


def _log(vm: Guest) -> str:
    tail = vm.run(f"tail -n 6 {GUEST_DIR}/mininet.log 2>/dev/null", timeout=30).stdout.strip()
    return "\n  mininet: " + "\n  mininet: ".join(tail.splitlines()) if tail else ""
