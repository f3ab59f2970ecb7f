"""What a real host is, as a record states it: CPU, kernel, the link's NIC, the backend device.

Preflight (emulator/machines.py) reads what a run needs to start; this
reads what a model needs to stand in for the machine afterwards, with the
tools a user has: ``lscpu`` (model, sockets, cores, threads, clock),
``uname -r``, ``ethtool -i`` and /sys (the NIC's driver, firmware, speed,
MTU, PCIe link), ``lspci`` (its model), and ``nvme list`` or ``lsblk``
(the backend drive's model).  Every command is an argument vector: an
interface or device name reaches no shell.  A fact a host does not give
(no ethtool, a virtio NIC without speed) is left empty, never guessed;
``sanlab calibrate --runs`` names it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.hosts import Host
from sanlab.scenarios.reading import parse_json
from sanlab.scenarios.results.records import BackendFacts, HostFacts, NicFacts
from sanlab.scenarios.schema import Target

# A Linux interface name (IFNAMSIZ 16, no '/', no leading '-' an option parser would take).
IFNAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,14}")
# What each sanlab-made backstore is, as a record names it.
MADE = {
    "ramdisk": BackendFacts(kind="ramdisk", model="RAM disk (a file in /dev/shm)"),
    "null": BackendFacts(kind="null", model="null_blk"),
    "file": BackendFacts(kind="file", model="sparse file in /var/tmp"),
}


def _out(host: Host, argv: list[str], timeout: float = 30.0) -> str:
    result = host.run(argv, timeout=timeout)
    return result.stdout.strip() if result.ok else ""


def _line(text: str) -> str:
    """A fact in words as a record holds one: its first line, at most 200 characters."""
    return (text.splitlines() or [""])[0].strip()[:200]


def _int(text: str | None) -> int | None:
    try:
        return int(float(text)) if text else None
    except ValueError:
        return None


def lscpu_fields(text: str) -> dict[str, str]:
    """``lscpu -J``'s fields (or plain ``lscpu``'s 'Key: value' lines) by key, without the colon."""
    try:
        entries = parse_json(text, "lscpu -J").get("lscpu", [])
        return {str(e.get("field", "")).rstrip(":"): str(e.get("data") or "") for e in entries}
    except (SanlabError, AttributeError, TypeError):
        pairs = (line.split(":", 1) for line in text.splitlines() if ":" in line)
        return {k.strip(): v.strip() for k, v in pairs}


def cpu_facts(fields: Mapping[str, str], kernel: str) -> HostFacts:
    """The CPU lscpu describes: physical cores over all sockets, and the clock they sustain."""
    sockets = _int(fields.get("Socket(s)"))
    per_socket = _int(fields.get("Core(s) per socket"))
    threads = _int(fields.get("CPU(s)"))
    mhz = fields.get("CPU max MHz") or fields.get("CPU MHz")
    return HostFacts(
        cpu_model=_line(fields.get("Model name", "")),
        sockets=sockets,
        cores=sockets * per_socket if sockets and per_socket else None,
        threads=threads,
        ghz=round(float(mhz) / 1000, 3) if mhz and _int(mhz) else None,
        kernel=_line(kernel),
    )


def nic_facts(host: Host, interface: str) -> NicFacts:
    """The NIC behind ``interface``: model, driver, firmware, speed, MTU, PCIe link."""
    if not IFNAME.fullmatch(interface):
        return NicFacts()
    sysfs = f"/sys/class/net/{interface}"
    info = dict(
        (k.strip(), v.strip())
        for k, v in (
            line.split(":", 1)
            for line in _out(host, ["ethtool", "-i", interface]).splitlines()
            if ":" in line
        )
    )
    speed = _int(_out(host, ["cat", f"{sysfs}/speed"]))
    width = _out(host, ["cat", f"{sysfs}/device/current_link_width"])
    rate = _out(host, ["cat", f"{sysfs}/device/current_link_speed"])
    bus = info.get("bus-info", "")
    model = _out(host, ["lspci", "-s", bus, "-mm"]) if re.fullmatch(r"[0-9a-fA-F:.]+", bus) else ""
    fields = re.findall(r'"([^"]*)"', model)
    ids = " ".join(_out(host, ["cat", f"{sysfs}/device/{f}"]) for f in ("vendor", "device")).strip()
    # Without ethtool, the driver is the one sysfs binds the device to.
    bound = info.get("driver") or _out(host, ["readlink", "-f", f"{sysfs}/device/driver"]).rsplit("/", 1)[-1]
    return NicFacts(
        model=_line(" ".join(fields[1:3]) if len(fields) >= 3 else ids),
        driver=_line(bound),
        firmware=_line(info.get("firmware-version", "")),
        speed_gbps=speed / 1000 if speed and speed > 0 else None,
        mtu=_int(_out(host, ["cat", f"{sysfs}/mtu"])),
        pcie=_line(f"x{width} {rate}") if width and rate else "",
    )


def read_host(host: Host, interfaces: list[str]) -> tuple[HostFacts, dict[str, NicFacts]]:
    """One host's CPU and kernel, and each of ``interfaces``' NIC; nothing is changed."""
    fields = lscpu_fields(_out(host, ["lscpu", "-J"]) or _out(host, ["lscpu"]))
    if not (fields.get("CPU max MHz") or fields.get("CPU MHz")):  # newer lscpu leaves it to cpuinfo
        found = re.search(r"^cpu MHz\s*:\s*([\d.]+)", _out(host, ["cat", "/proc/cpuinfo"]), re.MULTILINE)
        fields = dict(fields, **({"CPU MHz": found.group(1)} if found else {}))
    cpu = cpu_facts(fields, _out(host, ["uname", "-r"]))
    return cpu, {name: nic_facts(host, name) for name in interfaces}


# A Linux NVMe namespace's block device: nvme0n1, and nvme1c2n1 behind native multipath.
NVME_NAMESPACE = re.compile(r"nvme\d+(c\d+)?n\d+")


def device_model(host: Host, device: str) -> BackendFacts:
    """The drive at ``device``: 'nvme' with ``nvme list``'s model, else a block device by lsblk."""
    name = device.rsplit("/", 1)[-1]
    if NVME_NAMESPACE.fullmatch(name):
        try:
            listed = parse_json(_out(host, ["nvme", "list", "-o", "json"]) or "{}", "nvme list")
            listed = listed.get("Devices", [])
        except (SanlabError, AttributeError):
            listed = []
        for entry in listed if isinstance(listed, list) else []:
            if isinstance(entry, dict) and str(entry.get("DevicePath", "")).endswith(f"/{name}"):
                return BackendFacts(kind="nvme", model=_line(str(entry.get("ModelNumber", ""))))
    model = _out(host, ["lsblk", "-dno", "MODEL", device]) if device.startswith("/dev/") else ""
    return BackendFacts(kind="nvme" if NVME_NAMESPACE.fullmatch(name) else "block", model=_line(model))


def backend_of(target: Target, devices: Mapping[tuple[str, str], BackendFacts]) -> BackendFacts | None:
    """What backs ``target``: a backstore sanlab makes, or the host's device as it was read."""
    if target.backstore == "device":
        return devices.get((target.host, target.device or ""))
    return MADE.get(target.backstore)


def read_devices(targets: list[Target], hosts: Mapping[str, Host]) -> dict[tuple[str, str], BackendFacts]:
    """The model of every device a run's targets serve, read once per (host, device)."""
    wanted = {(t.host, t.device) for t in targets if t.backstore == "device" and t.device and t.host in hosts}
    return {(h, d): device_model(hosts[h], d) for h, d in sorted(wanted)}
