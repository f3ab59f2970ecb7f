"""The NVMe-oF host side: nvme-cli connect, find the namespaces, disconnect.

The block devices are found through sysfs - the controller whose
``subsysnqn`` is ours and the namespaces under it - never by guessing that
the new device is nvme0n1.
"""

from __future__ import annotations

from sanlab.targets.host import Host, sh, wait_for_devices
from sanlab.targets.naming import NVME_PORT


def connect(
    host: Host, nqn: str, transport: str, address: str, header_digest: bool, data_digest: bool
) -> list[str]:
    trtype = "tcp" if transport == "nvme-tcp" else "rdma"
    options = (" --hdr-digest" if header_digest else "") + (" --data-digest" if data_digest else "")
    sh(
        host,
        f"modprobe nvme-{trtype}\n"
        "[ -s /etc/nvme/hostnqn ] || { mkdir -p /etc/nvme; nvme gen-hostnqn > /etc/nvme/hostnqn; }\n"
        f"nvme connect -t {trtype} -a {address} -s {NVME_PORT} -n {nqn}{options}",
        f"nvme connect to {nqn} over {trtype}",
        timeout=120,
    )
    return namespaces(host, nqn)


def namespaces(host: Host, nqn: str, timeout: float = 30.0) -> list[str]:
    # With native multipath the block device belongs to the subsystem
    # (nvme-subsys0/nvme0n1) and the controller shows a hidden path (nvme0c0n1);
    # without it, the controller holds nvme0n1 itself.
    script = (
        "for c in /sys/class/nvme-subsystem/* /sys/class/nvme/*; do "
        f'[ "$(cat $c/subsysnqn 2>/dev/null)" = {nqn} ] || continue; '
        "for n in $c/nvme*n*; do b=$(basename $n); "
        "case $b in *c*) continue;; esac; [ -b /dev/$b ] && echo /dev/$b; done; "
        "done"
    )
    return wait_for_devices(host, script, f"connected to {nqn}", timeout)


def disconnect(host: Host, nqn: str) -> None:
    host.run(f"nvme disconnect -n {nqn}", timeout=60)
