"""The machine a result record describes, read both ways.

A projection says which machine it projects (``facts_of``: the profile's
hosts, NIC and backend as record facts), and a run says which machine it
ran on (read from the hosts by ``targets/host_facts.py``).  Both fill the
same ``MachineFacts`` and ``BackendFacts`` of ``ResultRecord``, so
``sanlab calibrate --runs`` builds a profile's hosts, NIC and backend from
the records themselves (``machine_parts``), whichever made them, and a
base profile lends only what a record cannot say: the costs nobody
measures (interrupt coalescing, PCIe latency, a stack's protocol defaults).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from sanlab.models.core.cores import load_cores
from sanlab.models.core.network import Point
from sanlab.models.core.profile import Nic, Profile
from sanlab.models.core.profile_files import load_profile
from sanlab.scenarios.errors import ScenarioError
from sanlab.scenarios.results.records import BackendFacts, HostFacts, MachineFacts, NicFacts

# PCIe generation by the transfer rate sysfs reports per lane (current_link_speed).
GT_PER_S = {3: "8.0", 4: "16.0", 5: "32.0"}
# The core design of a CPU from the model name lscpu prints ('Model name'); the first match wins.
CORE_OF_CPU = (
    (r"Xeon.*\b(Platinum|Gold|Silver|Bronze)\s*\d[45]\d\d", "golden-cove"),
    (r"Xeon.*\b(Platinum|Gold|Silver|Bronze)\s*\d3\d\d", "sunny-cove"),
    (r"Xeon.*\b(Platinum|Gold|Silver|Bronze)\s*\d[12]\d\d", "skylake"),
    (r"Xeon.*E[357]-\d+\S*\s*v2", "ivy-bridge"),
    (r"Xeon.*E[357]-\d+\S*\s*v3", "haswell"),
    (r"Xeon.*E[357]-\d+\S*\s*v4", "broadwell"),
    (r"EPYC\s*[79]\d\d4", "zen4"),
    (r"EPYC\s*7\d\d3", "zen3"),
    (r"EPYC\s*7\d\d2", "zen2"),
)
BACKEND_KEY = {"null": "null", "ramdisk": "ramdisk", "nvme": "nvme", "file": "ramdisk", "block": "nvme"}


def core_of(cpu_model: str) -> str | None:
    """The core design (models/cores.yaml) of the CPU lscpu names, if the table knows it."""
    for pattern, core in CORE_OF_CPU:
        if re.search(pattern, cpu_model) and core in load_cores():
            return core
    return None


def _pcie_text(nic: Nic) -> str:
    return f"x{nic.pcie.lanes} {GT_PER_S[nic.pcie.gen]} GT/s PCIe" if nic.pcie else ""


def pcie_slot(text: str) -> dict[str, int] | None:
    """'x16 8.0 GT/s PCIe' (preflight's reading of sysfs) as a profile's slot, where it is one."""
    found = re.match(r"x(\d+)\s+([\d.]+)\s*GT/s", text.strip())
    if not found:
        return None
    gen = {float(v): g for g, v in GT_PER_S.items()}.get(float(found.group(2)))
    lanes = int(found.group(1))
    return {"gen": gen, "lanes": lanes} if gen and lanes in (1, 2, 4, 8, 16) else None


def _sockets(cpu: str) -> int | None:
    found = re.match(r"\s*(\d+)\s*x\s", cpu)
    return int(found.group(1)) if found else None


def facts_of(
    profile: Profile, nic: Nic, link_gbps: float, mtu: int, backend: str, cores: int | None, core: str | None
) -> tuple[MachineFacts, BackendFacts]:
    """What a projection of ``profile`` says of the machine it projects, as a run would record it."""
    nic_facts = NicFacts(model=nic.name[:200], speed_gbps=link_gbps, mtu=mtu, pcie=_pcie_text(nic))

    def host(side: str) -> HostFacts:
        h = getattr(profile, side)
        return HostFacts(
            cpu_model=h.cpu.splitlines()[0][:200] if h.cpu else "",
            sockets=_sockets(h.cpu),
            cores=cores or h.cores,
            ghz=h.ghz,
            core=core or h.core,
            nic=nic_facts,
        )

    device = profile.backends[backend]
    return MachineFacts(initiator=host("initiator"), target=host("target")), BackendFacts(
        kind=device.kind, model=device.name.splitlines()[0][:200] if device.name else ""
    )


@dataclass(frozen=True)
class Described:
    """What one record says of its machine, and where it is (for messages)."""

    where: str
    fabric: str
    link_gbps: float | None
    mtu: int | None
    transport: str
    stack: str | None
    machine: MachineFacts | None
    backend: BackendFacts | None


def _common(values: Sequence[Any]) -> Any:
    found = [v for v in values if v is not None]
    return Counter(found).most_common(1)[0][0] if found else None


def slug(text: str) -> str:
    """A NIC model as a name a parameter path can hold ('nics.NAME.one_way_us')."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "nic"


def _host(side: str, records: Sequence[Described], base: Profile, warn: list[str]) -> dict[str, Any]:
    facts = [getattr(r.machine, side) for r in records if r.machine and getattr(r.machine, side)]
    fallback = getattr(base, side)
    if not facts:
        warn.append(f"{records[0].where}: machine.{side} missing: its CPU is taken from {base.name}")
        return fallback.model_dump(exclude={"wakeup_us", "app_kcycles_per_io"})
    seen = {h.model_dump_json(): h for h in facts}
    f: HostFacts = seen[_common([h.model_dump_json() for h in facts])]
    if len(seen) > 1:
        warn.append(f"the records describe {len(seen)} different {side}s: the most common is fitted")
    cores = f.cores or (f.threads // 2 if f.threads else None)
    core = f.core or core_of(f.cpu_model)
    for name, value in (("cores", cores), ("ghz", f.ghz), ("core", core)):
        if value is None:
            warn.append(f"{records[0].where}: machine.{side}.{name} missing: {base.name}'s is used")
    return {
        "cpu": f.cpu_model or fallback.cpu,
        "cores": cores or fallback.cores,
        "ghz": f.ghz or fallback.ghz,
        "core": core or fallback.core,
    }


def _nic(records: Sequence[Described], base: Profile, warn: list[str]) -> dict[str, Any]:
    hosts = [h for r in records if r.machine for h in (r.machine.initiator, r.machine.target) if h]
    nics = [h.nic for h in hosts if h.nic]
    fabrics = sorted({r.fabric for r in records})
    speeds = sorted(
        {r.link_gbps for r in records if r.link_gbps} | {n.speed_gbps for n in nics if n.speed_gbps}
    )
    model = _common([n.model for n in nics if n.model])
    if model is None:
        warn.append(f"{records[0].where}: machine.*.nic.model missing: {base.name}'s NIC is used")
    try:
        lender = base.nic_for(fabrics[0], max(speeds, default=0.0))
    except ScenarioError:
        lender = next((n for n in base.nics if fabrics[0] in n.fabrics), base.nics[0])
    nic = lender.model_dump(exclude={"pcie", "pcie_gbps"}) | {
        "name": slug(model) if model else lender.name,
        "fabrics": fabrics,
        "link_gbps": sorted(speeds) or lender.link_gbps,
        "mtu": _common([r.mtu for r in records]) or lender.mtu,
    }
    slot = pcie_slot(_common([n.pcie for n in nics if n.pcie]) or "")
    if slot:
        nic["pcie"] = slot
    else:
        nic["pcie_gbps"] = lender.pcie_gbps
    return nic


def machine_parts(records: Sequence[Described], base: Profile) -> tuple[dict[str, Any], list[str]]:
    """The profile parts the records describe - hosts, NIC, MTU, stacks, backend - and a
    one-line warning for each fact a record left out (its part is then the base's)."""
    warn: list[str] = []
    backends: dict[str, Any] = {}
    for r in records:
        if r.backend is None:
            continue
        key = BACKEND_KEY[r.backend.kind]
        lent = base.backends.get(key) or base.backends[base.default_backend]
        backends.setdefault(key, lent.model_dump() | {"kind": key, "name": r.backend.model or lent.name})
    if any(r.backend is None for r in records):
        warn.append(f"{records[0].where}: backend missing: {base.name}'s {base.default_backend} is used")
    if not backends:
        backends[base.default_backend] = base.backends[base.default_backend].model_dump()
    stacks: dict[str, str] = {}
    for transport in sorted({r.transport for r in records}):
        stack = _common([r.stack for r in records if r.transport == transport])
        if stack:
            stacks[transport] = stack
    parts = {
        "initiator": _host("initiator", records, base, warn),
        "target": _host("target", records, base, warn),
        "nics": [_nic(records, base, warn)],
        "backends": backends,
        "default_backend": _common([BACKEND_KEY[r.backend.kind] for r in records if r.backend])
        or base.default_backend,
        "target_stacks": stacks,
    }
    return parts, warn


def point_facts(point: Point, mtu: int) -> tuple[MachineFacts | None, BackendFacts | None]:
    """The machine a projection of ``point`` stands for (None where its profile is not a named one)."""
    try:
        profile = load_profile(point.profile)
        nic = profile.nic_for(point.fabric, point.link_gbps)
    except ScenarioError:
        return None, None
    backend = point.backend or profile.default_backend
    if backend not in profile.backends:
        return None, None
    try:
        return facts_of(profile, nic, point.link_gbps, mtu, backend, point.cores, point.core)
    except ValidationError:  # a what-if past what any machine records (a 100,000-core host)
        return None, None
