"""Real machines: reached over SSH, looked at before anything changes, wired to the runner.

``connect`` makes an ``SshHost`` per scenario host.  ``preflight`` reads
each machine once (one SSH call, nothing written): kernel, CPU, the tools
and kernel modules the targets code uses, configfs, and for every link end
the interface's address, MTU, speed, driver, firmware, PCIe width and speed
and its RDMA device.  From that it gives the runner an ``Endpoint`` per
link end and the list of reasons not to start: a missing tool or
interface, an RDMA transport without an RDMA device.  Whether a block
device may be served is the targets layer's question
(``runner.devices_refused``).  The facts also go into every record, so a
result says which hardware produced it.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sanlab.emulator.ssh import SshHost, check_identity
from sanlab.scenarios.endpoints import Endpoint
from sanlab.scenarios.hosts import Host
from sanlab.scenarios.registry import STACKS, TRANSPORTS
from sanlab.scenarios.schema import Scenario

TOOLS = ("fio", "nvme", "iscsiadm", "tgtadm", "rdma", "ethtool", "lsblk", "blkid")
MODULES = tuple(m for t in TRANSPORTS.values() for m in t.modules)

_HOST_FACTS = r"""
echo "kernel=$(uname -r)"
echo "cpu_model=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "cores=$(nproc)"
echo "cpu_mhz=$(awk '/^cpu MHz/ {{print int($4); exit}}' /proc/cpuinfo)"
echo "configfs=$(grep -qs ' /sys/kernel/config configfs ' /proc/mounts && echo yes || echo no)"
for t in {tools}; do command -v "$t" >/dev/null && echo "tool.$t=yes" || echo "tool.$t=no"; done
for m in {modules}; do
  found=no
  if [ -d "/sys/module/$m" ] || modinfo -n "$m" >/dev/null 2>&1; then found=yes; fi
  echo "module.$m=$found"
done
"""
_NIC_FACTS = r"""
n={nic}; s=/sys/class/net/$n
if [ -d "$s" ]; then
  echo "nic.$n.address=$(ip -4 -o addr show dev "$n" | awk '{{print $4; exit}}')"
  echo "nic.$n.mtu=$(cat $s/mtu)"
  echo "nic.$n.speed_mbps=$(cat $s/speed 2>/dev/null)"
  echo "nic.$n.driver=$(basename "$(readlink $s/device/driver 2>/dev/null)")"
  echo "nic.$n.pci_id=$(cat $s/device/vendor $s/device/device 2>/dev/null | tr '\n' ' ')"
  echo "nic.$n.firmware=$(ethtool -i "$n" 2>/dev/null | sed -n 's/^firmware-version: //p')"
  width=$(cat $s/device/current_link_width 2>/dev/null); speed=$(cat $s/device/current_link_speed 2>/dev/null)
  echo "nic.$n.pcie=${{width:+x$width }}$speed"
  rdma=$(rdma link show 2>/dev/null | awk -v n="$n" '$NF == n {{split($2, d, "/"); print d[1]; exit}}')
  echo "nic.$n.rdma=$rdma"
fi
"""


@dataclass(frozen=True)
class NicFacts:
    name: str
    address: str = ""  # address/prefix
    mtu: int | None = None
    speed_mbps: int | None = None
    driver: str = ""
    pci_id: str = ""
    firmware: str = ""
    pcie: str = ""
    rdma: str = ""


@dataclass
class HostFacts:
    """What one machine is: read once, printed, and kept in every record it took part in."""

    name: str
    kernel: str = ""
    cpu_model: str = ""
    cores: int | None = None
    cpu_mhz: int | None = None
    configfs: bool = False
    tools: dict[str, bool] = field(default_factory=dict)
    modules: dict[str, bool] = field(default_factory=dict)
    nics: dict[str, NicFacts] = field(default_factory=dict)

    def record(self) -> dict[str, object]:
        """The JSON form kept in records."""
        return asdict(self)


def connect(scenario: Scenario, control_dir: Path) -> dict[str, SshHost]:
    """An ``SshHost`` per scenario host (all of them have ``ssh``), sharing one control folder.

    Each identity file is checked first: a missing key, or a folder, is named before any ssh runs.
    """
    for h in scenario.hosts:
        if h.ssh and h.identity:
            check_identity(h.name, h.identity)
    return {
        h.name: SshHost(h.name, h.ssh or "", h.port, h.identity, control_dir, tuple(h.ssh_options))
        for h in scenario.hosts
        if h.ssh
    }


def interfaces_of(scenario: Scenario, host: str) -> list[str]:
    return sorted({(lk.interfaces or {})[host] for lk in scenario.links if host in (lk.interfaces or {})})


def read_facts(host: Host, nics: list[str]) -> HostFacts:
    script = _HOST_FACTS.format(tools=" ".join(TOOLS), modules=" ".join(MODULES))
    script += "".join(_NIC_FACTS.format(nic=shlex.quote(n)) for n in nics)
    values = dict(
        line.split("=", 1) for line in host.run(script, timeout=120).stdout.splitlines() if "=" in line
    )
    return parse_facts(host.name, values, nics)


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def parse_facts(name: str, values: Mapping[str, str], nics: list[str]) -> HostFacts:
    facts = HostFacts(
        name,
        values.get("kernel", ""),
        values.get("cpu_model", ""),
        _int(values.get("cores")),
        _int(values.get("cpu_mhz")),
        values.get("configfs") == "yes",
        {t: values.get(f"tool.{t}") == "yes" for t in TOOLS},
        {m: values.get(f"module.{m}") == "yes" for m in MODULES},
    )
    for nic in nics:
        if f"nic.{nic}.mtu" not in values:
            continue
        field_of = {k.split(".", 2)[2]: v for k, v in values.items() if k.startswith(f"nic.{nic}.")}
        speed = _int(field_of.get("speed_mbps"))
        facts.nics[nic] = NicFacts(
            nic,
            field_of.get("address", ""),
            _int(field_of.get("mtu")),
            speed if speed and speed > 0 else None,
            field_of.get("driver", ""),
            field_of.get("pci_id", "").strip(),
            field_of.get("firmware", ""),
            field_of.get("pcie", "").strip(),
            field_of.get("rdma", ""),
        )
    return facts


@dataclass
class Preflight:
    facts: dict[str, HostFacts]
    endpoints: dict[tuple[str, str], Endpoint]
    problems: list[str]


def preflight(scenario: Scenario, hosts: Mapping[str, Host]) -> Preflight:
    """Read every machine and check the scenario can run there; changes nothing."""
    facts = {name: read_facts(host, interfaces_of(scenario, name)) for name, host in hosts.items()}
    endpoints, problems = _endpoints(scenario, facts)
    problems += list(_tool_problems(scenario, facts))
    return Preflight(facts, endpoints, problems)


def _endpoints(
    scenario: Scenario, facts: Mapping[str, HostFacts]
) -> tuple[dict[tuple[str, str], Endpoint], list[str]]:
    ends: dict[tuple[str, str], Endpoint] = {}
    problems = []
    for planned in scenario.plan.links:
        name, link = planned.name, planned.link
        for host in link.endpoints:
            nic_name = (link.interfaces or {}).get(host, "")
            nic = facts[host].nics.get(nic_name)
            if nic is None:
                problems.append(f"{host}: link {name}: no interface {nic_name!r}")
                continue
            if not nic.address:
                problems.append(f"{host}: link {name}: interface {nic_name} has no IPv4 address")
                continue
            device = (link.rdma_devices or {}).get(host) or nic.rdma or None
            ends[(name, host)] = Endpoint(host, name, nic.address.split("/")[0], nic_name, device)
    for placed in scenario.plan.targets:
        target = placed.target
        if placed.link is None or not TRANSPORTS[target.transport].rdma:
            continue
        lname = placed.link.name
        for host in placed.link.endpoints:
            end = ends.get((lname, host))
            if end is not None and end.rdma_device is None:
                problems.append(
                    f"{host}: {target.transport} needs an RDMA device on {end.interface} (link {lname}); "
                    "none is bound to it ('rdma link show'); name one in the link's rdma_devices"
                )
    return ends, problems


def _tool_problems(scenario: Scenario, facts: Mapping[str, HostFacts]) -> list[str]:
    problems = []
    for placed in scenario.plan.targets:
        target = placed.target
        if placed.link is None:
            continue
        initiators = [host for host, _ in placed.initiators]
        tools = ("fio", *TRANSPORTS[target.transport].initiator_tools)
        needs = [(initiator, tool) for initiator in initiators for tool in tools]
        needs += [(target.host, t) for t in STACKS[target.stack].tools]
        for host, tool in needs:
            if not facts[host].tools.get(tool):
                problems.append(
                    f"{host}: {tool} is not installed ({target.stack} {target.transport} needs it)"
                )
        if STACKS[target.stack].configfs and not facts[target.host].configfs:
            problems.append(f"{target.host}: configfs is not mounted at /sys/kernel/config ({target.stack})")
    return sorted(set(problems))


def describe(facts: HostFacts) -> list[str]:
    """Lines a person reads before a run starts on their machines."""
    ghz = f" @ {facts.cpu_mhz / 1000:.2f} GHz" if facts.cpu_mhz else ""
    lines = [f"{facts.name}: Linux {facts.kernel}, {facts.cpu_model or 'CPU ?'} x{facts.cores}{ghz}"]
    for nic in facts.nics.values():
        speed = f"{nic.speed_mbps / 1000:g} Gb/s" if nic.speed_mbps else "speed ?"
        pcie = f", PCIe {nic.pcie}" if nic.pcie else ""
        firmware = f" fw {nic.firmware}" if nic.firmware else ""
        rdma = f", RDMA {nic.rdma}" if nic.rdma else ""
        lines.append(
            f"  {nic.name}: {nic.address or 'no IPv4'}, MTU {nic.mtu}, {speed}, "
            f"{nic.driver or 'driver ?'}{firmware} [{nic.pci_id}]{pcie}{rdma}"
        )
    missing = [t for t, ok in facts.tools.items() if not ok]
    lines.append(f"  tools: {', '.join(t for t, ok in facts.tools.items() if ok) or 'none'}")
    if missing:
        lines.append(f"  missing tools: {', '.join(missing)}")
    lines.append(f"  modules: {', '.join(m for m, ok in facts.modules.items() if ok) or 'none'}")
    return lines
