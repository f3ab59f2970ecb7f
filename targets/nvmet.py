"""Linux's kernel NVMe-oF target (nvmet) over TCP or RDMA, through configfs.

The layout follows the kernel's own tests (blktests tests/nvme/rc): a
subsystem with one namespace per LUN, a port with its transport and
address, and a symlink that exports the subsystem on the port.
"""

from __future__ import annotations

from sanlab.targets.backstores import Backing
from sanlab.targets.host import Host, sh
from sanlab.targets.naming import NVME_PORT

CFS = "/sys/kernel/config/nvmet"


def start(
    host: Host, nqn: str, transport: str, address: str, backings: list[Backing], port_id: int = 1
) -> None:
    trtype = "tcp" if transport == "nvme-tcp" else "rdma"
    lines = [
        f"modprobe nvmet-{trtype}",
        f"mkdir {CFS}/subsystems/{nqn}",
        f"echo 1 > {CFS}/subsystems/{nqn}/attr_allow_any_host",
    ]
    for nsid, backing in enumerate(backings, start=1):
        ns = f"{CFS}/subsystems/{nqn}/namespaces/{nsid}"
        lines += [f"mkdir {ns}", f"printf %s {backing.path} > {ns}/device_path"]
        if backing.kind == "file":  # tmpfs and friends refuse O_DIRECT
            lines.append(f"echo 1 > {ns}/buffered_io")
        lines.append(f"echo 1 > {ns}/enable")
    port = f"{CFS}/ports/{port_id}"
    lines += [
        f"mkdir {port}",
        f"echo ipv4 > {port}/addr_adrfam",
        f"echo {trtype} > {port}/addr_trtype",
        f"echo {address} > {port}/addr_traddr",
        f"echo {NVME_PORT} > {port}/addr_trsvcid",
        f"ln -s {CFS}/subsystems/{nqn} {port}/subsystems/{nqn}",
    ]
    sh(host, "\n".join(lines), f"nvmet: exporting {nqn} over {trtype} on {address}")


def stop(host: Host, nqn: str, port_id: int = 1) -> None:
    port = f"{CFS}/ports/{port_id}"
    host.run(
        f"rm -f {port}/subsystems/{nqn}; rmdir {port} 2>/dev/null;"
        f"for ns in {CFS}/subsystems/{nqn}/namespaces/*; do echo 0 > $ns/enable; rmdir $ns; done;"
        f"rmdir {CFS}/subsystems/{nqn}",
        timeout=60,
    )
